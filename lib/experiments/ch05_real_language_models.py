"""Chapter 5, the staircase in real language models: a one-layer decoder trained on real
text from small and from standard initialization, and a pretrained model's embedding.

The plumbing of the chapter: the corpora and their signatures, one batched training run
per (corpus, tokenization, optimizer), the bookkeeping that turns its logs into alignment
curves, onsets and peaks, and the figures' layouts.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from .. import corpora, engine, lm
from .. import metrics as M
from .. import signatures as sig
from ..models import build
from ..style import COLORS, band
from ..sweep import Sweep
from . import ChapterConfig

CHAPTER = "05_real_language_models"

Run = tuple[str, str, str]  # (corpus, tokenization, optimizer)


@dataclass(frozen=True)
class Config(ChapterConfig):
    """Chapter 5 at book scale.

    The model is the one of the small-initialization theory: a decoder without LayerNorm or
    biases, next-token readout at every position. Each run is one batched model whose
    instances are the seeds x {small, standard} initialization.

    d_model, context_len, n_layers, d_mlp: the decoder (d_mlp=0: attention only). The
        context length equals d_model so that token and position embeddings start at the
        same scale.
    batch_size: windows per step and instance.
    seeds: the seeds; a seed fixes both the initial weights and the stream of windows, so
        the small and the standard instance of one seed see the same batches.
    gamma: the small-initialization rate gamma (weights drawn with std fan_in^-gamma).
    gamma_large: the comparator, the standard (LeCun) scale gamma = 0.5.
    adamw_lr, adamw_steps, weight_decay: the AdamW runs.
    sgd_lr, sgd_steps, clip: the plain-SGD runs (gradient-norm clipping at ``clip``).
    n_logs: the number of (log-spaced) logging steps of every run.
    runs: the (corpus, tokenization, optimizer) runs; corpus "shakespeare" or "kjv",
        tokenization "char" or "bpe", optimizer "adamw" or "sgd". The first is the main run.
    bpe_vocab: the byte-pair tokenizer's vocabulary size.
    top_char, top_bpe: how many of the most frequent tokens are tracked per tokenization.
    skip_offsets: the offsets k of the skip-k signatures.
    n_perm: permutations of the token labels in each permutation null.
    onset_frac: an onset is the first logged step at which a curve reaches this fraction of
        its own maximum (and is above its null).
    perm_seed: the seed of the one permutation of the window signature in the stair check's
        negative control.
    pretrained_top: how many of the pretrained model's most frequent tokens in each corpus
        are compared.
    pretrained_chars: how much of each corpus is tokenized for the pretrained model (None:
        all of it).
    pretrained_corpora: the corpora the pretrained embedding is compared with.
    pretrained_quantiles: the band of the pretrained comparison's permutation null.
    """

    d_model: int = 32
    context_len: int = 32
    n_layers: int = 1
    d_mlp: int = 0
    batch_size: int = 16
    seeds: tuple[int, ...] = (0, 1, 2)
    gamma: float = 1.0
    gamma_large: float = 0.5
    adamw_lr: float = 1e-3
    adamw_steps: int = 600
    weight_decay: float = 0.01
    sgd_lr: float = 2.0
    sgd_steps: int = 800
    clip: float = 1.0
    n_logs: int = 36
    runs: tuple[tuple[str, str, str], ...] = (
        ("shakespeare", "char", "adamw"),
        ("shakespeare", "char", "sgd"),
        ("shakespeare", "bpe", "adamw"),
        ("shakespeare", "bpe", "sgd"),
        ("kjv", "char", "adamw"),
        ("kjv", "bpe", "adamw"),
    )
    bpe_vocab: int = 512
    top_char: int = 60
    top_bpe: int = 100
    skip_offsets: tuple[int, ...] = (2, 3, 4)
    n_perm: int = 200
    onset_frac: float = 0.5
    perm_seed: int = 0
    pretrained_top: int = 300
    pretrained_chars: int | None = 2_000_000
    pretrained_corpora: tuple[str, ...] = ("shakespeare", "kjv")
    pretrained_quantiles: tuple[float, float] = (0.01, 0.99)


OVERRIDES = {
    # ci runs only Shakespeare characters (both optimizers); book adds BPE and the KJV.
    "ci": dict(
        adamw_steps=300,
        sgd_steps=300,
        n_logs=28,
        runs=(("shakespeare", "char", "adamw"), ("shakespeare", "char", "sgd")),
        pretrained_top=200,
        pretrained_chars=1_500_000,
    ),
    "paper": dict(
        d_model=256,
        context_len=128,
        n_layers=4,
        d_mlp=1024,
        batch_size=64,
        seeds=(0, 1, 2, 3, 4),
        adamw_lr=3e-4,
        adamw_steps=30_000,
        sgd_lr=1.0,
        sgd_steps=60_000,
        n_logs=60,
        runs=(
            ("shakespeare", "char", "adamw"),
            ("shakespeare", "char", "sgd"),
            ("shakespeare", "bpe", "adamw"),
            ("shakespeare", "bpe", "sgd"),
            ("kjv", "char", "adamw"),
            ("kjv", "char", "sgd"),
            ("kjv", "bpe", "adamw"),
            ("kjv", "bpe", "sgd"),
        ),
        bpe_vocab=4096,
        top_bpe=500,
        n_perm=1000,
        pretrained_top=1000,
        pretrained_chars=None,
    ),
}

LOADERS = {"shakespeare": corpora.load_shakespeare, "kjv": corpora.load_kjv}
SIGS = ["next", "skip2", "skip3", "skip4", "window"]
LABEL = {
    "next": r"$\phi^{\rm next}$",
    "skip2": r"$\phi^{(2)}$",
    "skip3": r"$\phi^{(3)}$",
    "skip4": r"$\phi^{(4)}$",
    "window": r"$\bar\phi^{W}$",
    "previous": r"$\varphi^{\rm pre}$",
}
# The structured token sets of the heat maps: vowels, frequent consonants, capitals and
# punctuation; pronouns and function words.
STRUCT = {
    "char": list("aeiou") + list("tnshr") + list("TAIS") + list(",.;"),
    "bpe": [" I", " you", " he", " she", " we", " they", " me", " him", " her", " my", " thy"]
    + [" thou", " thee", " the", " a", " and", " of", " to"],
}


# --- the corpora and their signatures -------------------------------------------------


def training_texts(cfg: Config) -> dict[str, str]:
    """The training split (by whole documents) of every corpus the runs use."""
    return {c: corpora.split_by_document(LOADERS[c]())[0] for c in {c for c, _, _ in cfg.runs}}


def corpus_data(cfg: Config, texts: dict[str, str], device) -> dict[tuple[str, str], dict]:
    """Per (corpus, tokenization) of the runs, sorted: the tokenizer, the training stream,
    the tracked (most frequent) tokens, and their centred signatures ``phi`` (targets of the
    embedding) and ``pre`` (of the unembedding), from :func:`lib.lm.lm_signatures`."""
    data = {}
    for corpus, kind in sorted({(c, t) for c, t, _ in cfg.runs}):
        text = texts[corpus]
        tok = (
            corpora.CharTokenizer(text)
            if kind == "char"
            else corpora.train_bpe(text, cfg.bpe_vocab)
        )
        stream = tok.encode(text).to(device)
        counts = torch.bincount(stream, minlength=tok.vocab_size)
        top = cfg.top_char if kind == "char" else cfg.top_bpe
        tracked = torch.argsort(counts, descending=True)[:top].tolist()
        phi, pre = lm.lm_signatures(
            stream, tok.vocab_size, tracked, cfg.context_len, skip_offsets=cfg.skip_offsets
        )
        data[corpus, kind] = dict(tok=tok, stream=stream, tracked=tracked, phi=phi, pre=pre)
    return data


# --- the instances and one training run -----------------------------------------------


def instances(cfg: Config) -> Sweep:
    """The instances of every run: {small, standard} initialization x seeds (seeds fastest)."""
    return Sweep(init=["small", "standard"], seed=list(cfg.seeds))


def train_run(
    cfg: Config, model_fn: Callable, D: dict, run: Run, sweep: Sweep, device, gammas
) -> dict:
    """Train every instance of ``sweep`` in one batched run of ``model_fn(V)`` on the
    corpus data ``D``; return the history, the alignment curves (``plain``: R of the
    embedding with each signature; ``partial``: controlling for the next token; ``unemb``:
    the unembedding with the previous-token signature) and the initial weights' std."""
    corpus, kind, optimizer = run
    model = model_fn(D["tok"].vocab_size)
    params = build(model, sweep["seed"], gamma=gammas, device=device)
    init_std = float(params["E"][0].detach().std())
    callbacks = lm.similarity_callbacks(params, D["tracked"], D["tracked"])
    stream = lm.window_sampler(
        D["stream"], cfg.context_len, cfg.batch_size, sweep["seed"], device=device
    )
    if optimizer == "adamw":
        kw = dict(lr=cfg.adamw_lr, weight_decay=cfg.weight_decay)
        steps = cfg.adamw_steps
    else:
        kw = dict(lr=cfg.sgd_lr, clip=cfg.clip)
        steps = cfg.sgd_steps
    hist = engine.train(
        model,
        params,
        stream,
        steps,
        optimizer=optimizer,
        log_at=cfg.n_logs,
        callbacks=callbacks,
        desc=f"{corpus}/{kind}/{optimizer}",
        **kw,
    )
    ctl = lm.alignment_curves(hist["S_E"], D["phi"], control="next", n_perm=cfg.n_perm)
    plain = lm.alignment_curves(hist["S_E"], D["phi"], n_perm=cfg.n_perm)
    unemb = lm.alignment_curves(hist["S_U"], D["pre"], n_perm=cfg.n_perm)
    return dict(hist=hist, partial=ctl, plain=plain, unemb=unemb, init_std=init_std)


# --- bookkeeping: curves, onsets, peaks -----------------------------------------------


def curves(run: dict) -> dict:
    """name -> (curve (n_logs, K), null (lo, hi)): next and previous plain, the rest partial."""
    out = {"next": run["plain"]["next"], "previous": run["unemb"]["previous"]}
    out.update({n: run["partial"][n] for n in SIGS[1:]})
    return out


def onset(steps, c: dict, frac: float) -> np.ndarray:
    """Onset step per instance of one curve: ``frac`` of its own maximum, above its null's
    largest 95th percentile (NaN: never)."""
    return M.relative_onset(steps, c["R"], frac=frac, floor=float(np.nanmax(c["null_hi"])))[0]


def onsets(run: dict, frac: float) -> dict:
    """Onset step per signature and instance."""
    return {n: onset(run["hist"].steps, c, frac) for n, c in curves(run).items()}


def peaks(run: dict) -> dict:
    """Each curve's maximum over the run, per instance, and its null's largest 95th percentile."""
    return {
        n: (np.nanmax(c["R"], 0), float(np.nanmax(c["null_hi"]))) for n, c in curves(run).items()
    }


def onset_range(x) -> str:
    """Onsets over seeds as ``min–max``, with how many never set in."""
    if np.all(np.isnan(x)):
        return "never"
    never = f" ({np.isnan(x).sum()} never)" if np.isnan(x).any() else ""
    return f"{np.nanmin(x):.0f}–{np.nanmax(x):.0f}" + never


def later(a, b) -> bool:
    """Every onset in ``a`` (never: after the run) comes after every onset in ``b``, all of
    which exist."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    return bool(np.all(np.isfinite(b)) and np.nan_to_num(a, nan=np.inf).min() > b.max())


def run_title(run: Run) -> str:
    c, k, o = run
    corpus = "Shakespeare" if c == "shakespeare" else "KJV"
    return (
        f"{corpus}, {'characters' if k == 'char' else 'BPE'}, {'AdamW' if o == 'adamw' else 'SGD'}"
    )


def names_of(runs) -> str:
    return "; ".join(run_title(r) for r in runs) if runs else "none"


# --- figures ----------------------------------------------------------------------------


def plot_run(axes, run: dict, title: str, small, standard) -> None:
    """Rows: small / standard init. Columns: W^E plain R; W^E partial R | next; W^U vs pre."""
    steps = run["hist"].steps[1:]  # the increment is zero at step 0: R starts at step 1
    C = curves(run)
    for row, (rows, init) in enumerate([(small, "small"), (standard, "standard")]):
        a0, a1, a2 = axes[row]
        for n in SIGS:
            band(a0, steps, run["plain"][n]["R"][1:, rows], COLORS[n], label=LABEL[n])
        for n in SIGS[1:]:
            band(a1, steps, C[n]["R"][1:, rows], COLORS[n], label=LABEL[n])
        band(a2, steps, C["previous"]["R"][1:, rows], COLORS["previous"], label=LABEL["previous"])
        for ax, null in [(a0, C["next"]), (a1, C["window"]), (a2, C["previous"])]:
            lo, hi = null["null_lo"][1:], null["null_hi"][1:]
            ax.fill_between(steps, lo, hi, color=COLORS["null"], alpha=0.25, lw=0)
            for edge in (lo, hi):
                ax.plot(steps, edge, color=COLORS["reference"], lw=0.6, ls=":")
            ax.axhline(0, color=COLORS["reference"], lw=0.5)
        a0.set_ylabel(f"{init} init\n" + r"$R_{\cos}$")
        a1.set_ylabel(r"partial $R_{\cos}\cdot$ next")
        a2.set_ylabel(r"$R_{\cos}(W^U,\varphi^{\rm pre})$")
    for ax in axes[-1]:
        ax.set_xlabel("step")
    axes[0, 0].set_title(r"$W^E$ vs each signature" + f"\n{title}")
    axes[0, 1].set_title(r"$W^E$, beyond the next token")
    axes[0, 2].set_title(r"$W^U$ vs previous token")
    axes[0, 0].legend(fontsize=7, ncol=2)
    axes[0, 1].legend(fontsize=7, ncol=2)


def sig_similarity(phi: torch.Tensor) -> np.ndarray:
    """Cosine similarity of signature rows after removing their mean row over the tracked
    tokens, the same treatment as the embedding increments."""
    return M.cosine_similarity_matrix(phi - phi.mean(0)).cpu().numpy()


def block(S, a, b) -> tuple[float, float]:
    """Mean similarity within group a (off-diagonal) and between groups a and b."""
    Sa = S[np.ix_(a, a)]
    return Sa[~np.eye(len(Sa), dtype=bool)].mean(), S[np.ix_(a, b)].mean()


def struct_rows(D: dict, kind: str) -> tuple[list[int], list[str]]:
    """Positions in the tracked set of the structured tokens that are tracked, and labels."""
    tok = D["tok"]
    names = {tok.id_to_token(i): j for j, i in enumerate(D["tracked"])}
    keep = [s for s in STRUCT[kind] if s in names]
    return [names[s] for s in keep], [s.replace(" ", "␣") for s in keep]


# --- the pretrained model ---------------------------------------------------------------


def pretrained_stream(tokenizer, text: str, device) -> torch.Tensor:
    """``text`` tokenized by a pretrained (Hugging Face) tokenizer: the lines are encoded in
    parallel and rejoined with the newline token ("Ċ" in the byte-level alphabet)."""
    newline = tokenizer.token_to_id("Ċ")
    ids = [i for e in tokenizer.encode_batch(text.split("\n")) for i in e.ids + [newline]]
    return torch.tensor(ids, dtype=torch.long, device=device)


def compact_signatures(stream: torch.Tensor, top: int, context_len: int):
    """The most frequent ``top`` token ids of ``stream`` and their centred next, skip-2,
    window and previous-token signatures, over the token ids that occur in the stream
    (compact ids: the full-vocabulary version differs only by the uniform centring of
    unused columns). Returns ``(top ids, signatures)``."""
    used, compact = torch.unique(stream, return_inverse=True)
    counts = torch.bincount(compact)
    top_c = torch.argsort(counts, descending=True)[:top]
    Vc = len(used)
    phi = {
        "next": sig.next_token_signature(compact, Vc, rows=top_c),
        "skip2": sig.skip_signature(compact, Vc, 2, rows=top_c),
        "window": sig.window_signature(compact, Vc, context_len, rows=top_c),
        "previous": sig.previous_token_signature(compact, Vc, rows=top_c),
    }
    return used[top_c].tolist(), {n: sig.centre(p) for n, p in phi.items()}

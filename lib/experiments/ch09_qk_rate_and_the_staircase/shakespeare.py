"""Chapter 9's small language model: skip-k onsets of a character-level Shakespeare LM
against the QK learning-rate multiplier, and their readings."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ...book.page import listing, number
from ...data import signatures as sig
from ...data import windows
from ...measure import attention, lm, onsets
from ...training import engine, models
from ...training.sweep import Sweep


def shakespeare_stream(cfg, device):
    """Training characters of Shakespeare (whole plays held out), the tokenizer, the tracked
    characters (the most frequent) and their centred next-token and skip-k signatures."""
    from ...data import corpora, tokenizers

    split = tokenizers.char_split(corpora.load_shakespeare())
    tok, stream = split.tokenizer, split.train
    counts = torch.bincount(stream, minlength=tok.vocab_size)
    tracked = torch.argsort(counts, descending=True)[: cfg.shk.top].tolist()
    V = tok.vocab_size
    phi = {"next": sig.next_token_signature(stream, V, rows=tracked)}
    for k in cfg.shk.skips:
        phi[f"skip{k}"] = sig.skip_signature(stream, V, k, rows=tracked)
    phi = {n: sig.centre(p) for n, p in phi.items()}
    return tok, stream.to(device), tracked, phi


def shakespeare_run(cfg, tok, stream, tracked, device):
    """One batched Adam run of the small-init LM over (QK multiplier, seed).

    A seed fixes the initial weights and the windows, so the multipliers are paired. The
    QK group trains at ``multiplier * shk.lr``. Logs the increment similarities of the
    tracked characters' embeddings and, on a fixed probe batch of ``shk.probe`` windows, the
    attention's distance from uniform causal averaging (``attn_dist``, Chapter 4's D).
    Returns ``(history, sweep)``.
    """
    sw = Sweep(mult=list(cfg.shk.mults), seed=list(cfg.shk.seeds))
    model = models.Transformer(
        tok.vocab_size,
        cfg.shk.d_model,
        cfg.shk.context,
        n_layers=1,
        readout="all",
        d_mlp=cfg.shk.mlp,
        emb_fan_in=cfg.shk.d_model,
    )
    params = models.build(model, sw["seed"], gamma=cfg.gamma, device=device)
    # A fixed probe batch of training windows (its own seed) on which attention is read.
    probe = windows.window_sampler(stream, cfg.shk.context, cfg.shk.probe, [10_000], device=device)
    X_probe = probe(0)[0][0]
    # the embedding's similarities only: the chapter reads no unembedding geometry
    callbacks = {"S_E": lm.similarity_callbacks(params, tracked, tracked)["S_E"]}
    callbacks["attn_dist"] = lambda step, p: attention.attention_distance(
        model.forward(p, X_probe, return_attention=True)[1][0]
    )
    h = engine.train(
        model,
        params,
        windows.window_sampler(stream, cfg.shk.context, cfg.shk.batch, sw["seed"], device=device),
        cfg.shk.steps,
        optimizer="adam",
        lr=cfg.shk.lr,
        group_lr={"qk": cfg.shk.lr * sw.tensor("mult", device=device)},
        log_at=engine.log_grid(cfg.shk.steps, cfg.shk.n_logs),
        callbacks=callbacks,
        desc="shakespeare",
    )
    return h, sw


def skip_onsets(h, sw: Sweep, phi: dict, n_perm: int):
    """Onset per signature and instance (partial R controlling for next-token, above the
    null's largest 95th percentile; ``inf``: never), as an ``xarray.Dataset``, with the
    curves ``{name: (n_logs, K)}`` and null levels ``{name: float}``."""
    import xarray as xr

    curves = lm.alignment_curves(h["S_E"], phi, control="next", n_perm=n_perm)
    out, R, null = {}, {}, {}
    for name, c in curves.items():
        null[name] = float(np.nanmax(c["null_hi"]))
        on = onsets.relative_onset(h.steps, c["R"], frac=0.5, floor=null[name])[0]
        out[name] = np.where(np.isnan(on), np.inf, on)
        R[name] = c["R"]
    return xr.Dataset({n: sw.dataarray(v, n) for n, v in out.items()}), R, null


@dataclass
class ShakespeareReading:
    """The LM's onsets ``on`` (an ``xarray.Dataset``), their medians over seeds ``med`` (per
    multiplier), the skip signatures' names ``skips``, the final distances of attention from
    uniform ``D`` (median over seeds, per multiplier), the factor by which each median onset
    moves from the smallest to the largest multiplier ``moves``, whether the onsets keep the
    order of k at every multiplier (``ordered``) and stay within ``cfg.shk.fold_tol``
    (``still``), and the numbers the page glues."""

    on: object
    med: dict
    skips: list
    D: list
    moves: dict
    ordered: bool
    still: bool
    numbers: dict


def read_shakespeare(h, sw: Sweep, on, cfg) -> ShakespeareReading:
    """The readings of the LM's run ``h`` over ``sw`` with onsets ``on`` (:func:`skip_onsets`)."""
    med = {n: on[n].median("seed").values for n in on}  # per multiplier
    D = [float(np.median(h["attn_dist"][-1, sw.index(mult=m)])) for m in cfg.shk.mults]
    skips = [f"skip{k}" for k in cfg.shk.skips]
    n_found = {n: int(np.isfinite(on[n].values).sum()) for n in skips}
    moves = {n: float(med[n][-1] / med[n][0]) for n in skips}
    stack = np.stack([med[n] for n in skips])  # (skip k, multiplier)
    ordered = bool(np.isfinite(stack).all() and np.all(np.diff(stack, axis=0) >= 0))
    tol = cfg.shk.fold_tol
    still = all(1 / tol <= v <= tol for v in moves.values())
    numbers = dict(
        D=listing([f"{x:.3f}" for x in D], noun=""),
        d=cfg.shk.d_model,
        context=cfg.shk.context,
        lr=cfg.shk.lr,
        mults=listing(cfg.shk.mults, noun=""),
    )
    numbers |= {f"move_{n}": v for n, v in moves.items()} | dict(
        found_min=min(n_found.values()),
        K=sw.K,
        fold_tol=tol,
        still="yes" if still else "no",
        ordered="yes" if ordered else "no",
        moves=listing([number(round(v, 2)) for v in moves.values()], noun=""),
    )
    numbers = {f"shk_{n}": v for n, v in numbers.items()}
    return ShakespeareReading(on, med, skips, D, moves, ordered, still, numbers)

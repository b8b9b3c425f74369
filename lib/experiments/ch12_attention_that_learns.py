"""Chapter 12, when attention has to learn where to look: config and plumbing.

The task is :func:`lib.data.tasks.selective_parity_bits`: both gates in every sequence, the one
just before the anchor counts, so the bag of tokens is the same for both values of the bit
and uniform attention cannot read it. One-layer attention models (no value or output
weights, learned positions, the readout row attending to the context only) are trained
with their query-key weights learned, frozen at init, and zeroed (exactly uniform
attention), each seed as an ensemble of perturbed copies (:mod:`lib.measure.rates`), and read
against label-permutation floors (:mod:`lib.measure.nulls`). A sweep of the query-key rate ratio,
factorized and collapsed, asks Chapter 9's question on this task.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ..data import tasks
from ..measure import onsets, staircase_callbacks
from ..measure import staircase as st
from ..training import engine, models
from ..training.sweep import Sweep
from ..training.transformer import qk_product
from . import ChapterConfig

CHAPTER = "12_attention_that_learns"

# Positions of a selective sequence [z, g, g', a]; the readout is the anchor's row.
KEY, OTHER, GATE = 0, 1, 2


@dataclass(frozen=True)
class Config(ChapterConfig):
    """Chapter 12 at book scale.

    The task (:func:`lib.data.tasks.selective_parity_bits`):
    n_keys: distractor keys, 1: a key is in no label, so one is enough to give attention
        a position that carries nothing.
    n_anchors: 24, as Chapter 2's attention task: with 12 the permutation floor of R1 is
        near 0.34 and an embedding's order-1 stair barely clears it.
    width: the enumerated label offset u = 0..width-1, 24: the anchors' label boxes then
        overlap across the whole anchor range, as the keys make them overlap in Chapter 2.
        With width 4 a perfect parity code in the embeddings reads only R1 = 0.4 against the
        order-1 signature (the boxes of far-apart anchors do not overlap, so their order-1
        similarity is 0 whatever the embedding does), and the trained R1 stays within 0.05
        of its floor; at width 24 the same code reads 0.95 (checked in a pilot run).

    The model (``Transformer(ov="identity", readout_sees_self=False)``): one layer, one head,
    a ReLU MLP, learned positions, no value or output weights, the anchor's row attending to
    the three context positions only. d_model, d_mlp: its widths.
    gamma: the init rate, 1.0 (Chapter 2's small init). At 1.25 the plateau is longer and
        the share of climbing copies no higher in a pilot run (3 seeds x 2 copies).
    lr: full-batch Adam's learning rate of every weight (r = 1 in the main runs).
    seeds, copies, copy_rel: the seeds, each an ensemble of ``copies`` instances whose
        initial weights differ by a relative ``copy_rel`` (copy 0: the seed itself).
    steps, n_logs: Adam steps of every run; n_logs log-spaced and n_logs evenly spaced
        logging steps (:func:`lib.training.engine.log_grid`).
    n_perm, null_q: the label permutations of the floors and their quantile
        (:mod:`lib.measure.nulls`).
    delta: the distance at which attention counts as having moved, Chapter 4's delta: the
        readout row leaves uniform when its total-variation distance from uniform over the
        context reaches delta, and finds the gate when its mean |A_2 - A_1| does.
    climb_min: the threshold fixed before the runs: the learned model climbs in order in a
        share of at least climb_min of its seeds (a seed climbs when most of its copies do).
    frozen_max: the frozen-QK control fails in every seed: at most this share of its
        copies climbs in any seed.
    first_min: the order is a finding only if it holds in most instances: attention finds
        the gates before the order-1 onset in at least this share of the climbing ones.
    ratio_grid, ratio_seeds, ratio_steps: the QK/OV rate-ratio sweep (eta_QK = r * lr),
        factorized and collapsed QK, one batched run each, one instance per (r, seed).
    conv_frac: Chapter 9's convergence rule on this task: an instance has converged when
        its final loss exceeds the task's own floor, the entropy ln(width) of the label
        offset that no token names, by less than conv_frac * ln 2; a rate counts when more
        than half of its seeds converged.
    """

    n_keys: int = 1
    n_anchors: int = 24
    width: int = 24
    d_model: int = 32
    d_mlp: int = 32
    gamma: float = 1.0
    lr: float = 1e-2
    seeds: tuple[int, ...] = (0, 1, 2, 3, 4, 5, 6, 7, 8, 9)
    copies: int = 8
    copy_rel: float = 1e-6
    steps: int = 800
    n_logs: int = 24
    n_perm: int = 100
    null_q: float = 0.95
    delta: float = 0.1
    climb_min: float = 0.3
    frozen_max: float = 0.0
    first_min: float = 0.9
    ratio_grid: tuple[float, ...] = (0.1, 0.3, 1.0, 3.0)
    ratio_seeds: tuple[int, ...] = (0, 1, 2, 3, 4, 5, 6, 7, 8, 9)
    ratio_steps: int = 800
    conv_frac: float = 0.1


OVERRIDES = {
    "ci": dict(
        seeds=(0, 1, 2),
        steps=600,
        n_logs=20,
        n_perm=50,
        ratio_seeds=(0, 1, 2),
        ratio_steps=600,
    ),
    "paper": dict(d_model=64, d_mlp=64, steps=2000, ratio_steps=2000, n_logs=40),
}


def task(cfg: Config):
    """The selective task, its layout and its order-0/1 targets on the anchors."""
    data, layout = tasks.selective_parity_bits(cfg.n_keys, cfg.n_anchors, cfg.width)
    return data, layout, st.selective_targets(data, layout)


def model(cfg: Config, data, qk: str = "factorized") -> models.Transformer:
    """The chapter's attention model on ``data``."""
    return models.Transformer(
        data.vocab_size,
        cfg.d_model,
        context_len=data.X.shape[1],
        n_out=data.n_labels,
        d_mlp=cfg.d_mlp,
        ov="identity",
        qk=qk,
        readout_sees_self=False,
    )


def qk_names(mdl: models.Transformer) -> tuple[str, ...]:
    """The query-key weights of layer 0."""
    return ("QK0",) if mdl.qk == "collapsed" else ("Q0", "K0")


def readout_row(mdl, params, X) -> torch.Tensor:
    """The readout (anchor) row's attention on the three context positions, (K, N, 3)."""
    with torch.no_grad():
        _, A = mdl.forward(params, X, return_attention=True)
    return A[-1][..., -1, :-1].double()


def attention_callbacks(mdl, X) -> dict:
    """Per instance, on the readout row (mean over sequences): the mass on the counting gate
    ``A_gate``, on the other gate ``A_other`` and on the key ``A_key``; the gate contrast
    ``contrast`` = mean |A_2 - A_1| (the bit reaches the readout only through it); the
    distance from uniform over the context ``D`` (total variation) and the same distance
    with the QK weights held at their initial values ``D_qs`` (Chapter 4's quasi-static
    prediction); and ``dQK`` = |W_QK - W_QK(0)| / |W_QK(0)|.

    The initial QK weights are those of the first logged step, which must be step 0.
    """
    names = qk_names(mdl)
    start: dict = {}

    def tv(row):
        return 0.5 * (row - 1.0 / row.shape[-1]).abs().sum(-1).mean(1)

    def measure(step, p):
        if not start:
            if step != 0:
                raise ValueError(f"attention_callbacks needs step 0 logged first, got {step}")
            start.update({n: p[n].detach().clone() for n in names})
        QK0 = qk_product(mdl, start)
        row = readout_row(mdl, p, X)
        row_qs = readout_row(mdl, dict(p, **start), X)
        W = qk_product(mdl, p).detach()
        return dict(
            A_key=row[..., KEY].mean(1),
            A_other=row[..., OTHER].mean(1),
            A_gate=row[..., GATE].mean(1),
            contrast=(row[..., GATE] - row[..., OTHER]).abs().mean(1),
            D=tv(row),
            D_qs=tv(row_qs),
            dQK=((W - QK0).flatten(1).norm(dim=1) / QK0.flatten(1).norm(dim=1)).double(),
        )

    names_out = ("A_key", "A_other", "A_gate", "contrast", "D", "D_qs", "dQK")
    return engine.cached_callbacks(measure, names_out)


def bit_accuracy(mdl, params, data, layout) -> np.ndarray:
    """Per instance, the share of sequences whose label beats the same label with the bit
    flipped (a tie counts one half): 1/2 exactly when the logits of the two gate orders
    agree, since the two sequences of a pair then have the same logits and opposite bits."""
    X, y = data.X.to(params["E"].device), data.y.to(params["E"].device)
    flip = torch.where(y // layout.block % 2 == 0, y + layout.block, y - layout.block)
    with torch.no_grad():
        z = mdl.forward(params, X)
    zy = z.gather(-1, y.expand(z.shape[:-1])[..., None])[..., 0]
    zf = z.gather(-1, flip.expand(z.shape[:-1])[..., None])[..., 0]
    return ((zy > zf).double() + 0.5 * (zy == zf).double()).mean(-1).cpu().numpy()


def first_step(steps, curves, level: float) -> np.ndarray:
    """Per instance, the first logged step at which a curve reaches ``level`` (inf: never)."""
    on = onsets.onset_step(steps, curves, level)
    on = on.numpy() if torch.is_tensor(on) else np.asarray(on, dtype=float)
    return np.where(np.isnan(on), np.inf, on)


def settled_step(steps, curves, level: float) -> np.ndarray:
    """Per instance, the first logged step from which a curve stays at or above ``level``
    to the end of the run (inf: it ends below). A transient crossing (Adam's first steps
    can push a contrast up and back) does not count."""
    v = np.asarray(curves, dtype=float)
    below = ~(v >= level)  # NaN counts as below
    last_below = np.where(below.any(0), len(v) - 1 - np.argmax(below[::-1], 0), -1)
    steps = np.asarray(steps, dtype=float)
    return np.where(last_below < len(v) - 1, steps[np.minimum(last_below + 1, len(v) - 1)], np.inf)


def climbs(stairs) -> np.ndarray:
    """Per instance, the staircase of this task in order: the order-0 stair, then the
    order-1 stair above its floor, and the bit's escape from its plateau (all finite)."""
    on0, on1, esc = stairs.onsets[0], stairs.onsets[1], stairs.escapes[1]
    return np.isfinite(on0) & np.isfinite(on1) & (on0 < on1) & np.isfinite(esc)


def excess_loss(loss, width: int) -> np.ndarray:
    """The loss above the task's own floor, ln(width): the label offset no token names."""
    return np.asarray(loss, dtype=float) - np.log(width)


def ratio_sweep(cfg: Config) -> Sweep:
    """The (r, seed) grid of one ratio run."""
    return Sweep(r=list(cfg.ratio_grid), seed=list(cfg.ratio_seeds))


def train_ratios(cfg: Config, mdl, data, layout, targets, null, device, fit, desc: str):
    """One batched full-batch Adam run over the (r, seed) grid: the QK group at r * lr,
    trained on ``fit`` (:func:`lib.data.tasks.label_distributions` of ``data``).

    Returns ``(history, sweep, floor)`` with the run's own permutation floor.
    """
    from ..measure.nulls import floor_of

    sw = ratio_sweep(cfg)
    params = models.build(mdl, sw["seed"], gamma=cfg.gamma, device=device)
    callbacks = staircase_callbacks.bit_callbacks(
        mdl, data, layout, targets, params["E"], null=null
    )
    callbacks.update(attention_callbacks(mdl, data.X.to(device)))
    h = engine.train(
        mdl,
        params,
        tuple(t.to(device) for t in fit),
        cfg.ratio_steps,
        optimizer="adam",
        lr=cfg.lr,
        group_lr={"qk": cfg.lr * sw.tensor("r", device=device)},
        log_at=engine.log_grid(cfg.ratio_steps, cfg.n_logs),
        callbacks=callbacks,
        loss_fn=engine.soft_cross_entropy,
        desc=desc,
    )
    floor = {o: floor_of(h[f"null{o}"], cfg.null_q) for o in targets.orders}
    return h, sw, floor


def ratio_summary(h, sw: Sweep, floor: dict, cfg: Config) -> dict:
    """Per instance of a ratio run, as (r, seed) arrays: ``converged`` and ``counted``
    (Chapter 9's rule on the excess loss), ``climbed`` (:func:`climbs`), the order-1
    onset, the bit's escape and the step at which attention finds the gate."""
    steps = h.steps
    on = {o: onsets.stair_onsets(steps, h[f"R{o}"], floor[o]) for o in (0, 1)}
    esc = onsets.escape_steps(steps, h["bit1"])
    stairs = st.Stairs(on, {1: esc}, {}, {})
    conv = excess_loss(h["loss_all"][-1], cfg.width) < cfg.conv_frac * np.log(2)
    conv_rs = conv.reshape(sw.shape)
    counts = conv_rs.mean(1) > 0.5
    shape = lambda v: np.asarray(v, dtype=float).reshape(sw.shape)
    return dict(
        converged=conv_rs,
        counted=conv_rs & counts[:, None],
        climbed=climbs(stairs).reshape(sw.shape),
        onset1=shape(on[1]),
        escape=shape(esc),
        find=shape(settled_step(steps, h["contrast"], cfg.delta)),
    )

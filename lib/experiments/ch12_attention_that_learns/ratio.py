"""The QK/OV rate-ratio sweep on the selective task (Chapter 9's question where attention
must move): one batched run per query-key parameterization over the (r, seed) grid, its
per-instance summary, and the race of attention against the gate embeddings."""

from __future__ import annotations

import numpy as np

from ...book.page import listing, share
from ...data import tasks
from ...measure import onsets
from ...measure.nulls import floor_of
from ...training import engine, models
from ...training.sweep import Sweep
from .. import ChapterConfig
from .model import arm_callbacks, excess_loss, first_step, model, trapped_flag
from .readings import rate


def ratio_sweep(cfg: ChapterConfig) -> Sweep:
    """The (r, seed) grid of one ratio run."""
    return Sweep(r=list(cfg.ratio.grid), seed=list(cfg.ratio.seeds))


def train_ratios(cfg: ChapterConfig, mdl, data, layout, targets, null, device, desc: str):
    """One batched full-batch Adam run over the (r, seed) grid, the QK group at r * lr, on
    the distinct sequences against their label distributions, logging :func:`arm_callbacks`.

    Returns ``(history, sweep, floor)`` with the run's own permutation floor.
    """
    sw = ratio_sweep(cfg)
    X, P = (t.to(device) for t in tasks.label_distributions(data))
    params = models.build(mdl, sw["seed"], gamma=cfg.gamma, device=device)
    h = engine.train(
        mdl, params, (X, P), cfg.ratio.steps, optimizer="adam", lr=cfg.lr,
        group_lr={"qk": cfg.lr * sw.tensor("r", device=device)},
        log_at=engine.log_grid(cfg.ratio.steps, cfg.n_logs),
        callbacks=arm_callbacks(mdl, X, P, layout, targets, params["E"], null=null),
        loss_fn=engine.soft_cross_entropy, desc=desc,
    )  # fmt: skip
    floor = {o: floor_of(h[f"null{o}"], cfg.readings.null_q) for o in targets.orders}
    return h, sw, floor


def ratio_summary(h, sw: Sweep, floor: dict, cfg: ChapterConfig) -> dict:
    """Per instance of a ratio run, as (r, seed) arrays: ``converged`` and ``counted``
    (Chapter 9's rule on the excess loss), ``trapped`` (the bit not learned at the
    horizon), the order-1 onset (from step 1), the bit's escape, and ``leave``, the first
    step at which the gate contrast reaches ``cfg.readings.delta``."""
    later = h.steps >= 1
    steps = h.steps[later]
    on1 = onsets.stair_onsets(steps, h["R1"][later], floor[1])
    conv = excess_loss(h["loss_all"][-1], cfg.task.width) < cfg.ratio.conv_frac * np.log(2)
    conv_rs = conv.reshape(sw.shape)
    shape = lambda v: np.asarray(v, dtype=float).reshape(sw.shape)
    return dict(
        converged=conv_rs,
        counted=conv_rs & (conv_rs.mean(1) > 0.5)[:, None],
        trapped=trapped_flag(h.steps, h["bit1"], cfg.readings.trap_frac).reshape(sw.shape),
        onset1=shape(on1),
        escape=shape(onsets.escape_steps(h.steps, h["bit1"], cfg.readings.escape_frac)),
        leave=shape(first_step(steps, h["contrast"][later], cfg.readings.delta)),
    )


def attention_before_gates(h, sw: Sweep, i: int, factor: float = 2.0):
    """Per seed of rate ``i`` of a ratio run: the first logged step at which the gate
    difference ``|E_g+ - E_g-|`` reaches ``factor`` times its initial norm (inf: never), and
    how far the mean key mass strays from uniform (1/3) up to that step."""
    shape = (len(h.steps), *sw.shape)
    key, gd = h["A_key"].reshape(shape)[:, i], h["gate_diff"].reshape(shape)[:, i]
    grown = first_step(h.steps, gd / gd[0], factor)
    stray = np.array([np.abs(key[h.steps <= t, s] - 1 / 3).max() for s, t in enumerate(grown)])
    return grown, stray


def run_ratios(cfg: ChapterConfig, data, layout, targets, null, device) -> dict:
    """One ratio run per query-key parameterization (factorized, then collapsed):
    ``{qk: summary}``, each :func:`ratio_summary` with the run's ``history``."""
    ratio = {}
    for qk in ("factorized", "collapsed"):
        h_r, sw, floor = train_ratios(
            cfg, model(cfg, data, qk=qk), data, layout, targets, null, device, qk
        )
        ratio[qk] = dict(ratio_summary(h_r, sw, floor, cfg), history=h_r)
    return ratio


def ratio_settings(cfg: ChapterConfig) -> dict:
    """The ratio sweep's rates, convergence level and horizon, and the trap sweep's most keys."""
    return dict(
        ratio_words=listing(cfg.ratio.grid, noun=""),
        conv_frac=cfg.ratio.conv_frac,
        ratio_steps=cfg.ratio.steps,
        max_keys=max(cfg.trap.keys),
    )


def ratio_rows(cfg: ChapterConfig, ratio: dict) -> list[dict]:
    """Per parameterization and rate: seeds converged, share trapped, and the median escape
    and order-1 onset of the counted seeds."""
    med = lambda v, ok: float(np.median(v[ok])) if ok.any() else np.nan
    rows = []
    for qk, s in ratio.items():
        for i, r_ in enumerate(cfg.ratio.grid):
            c = s["counted"][i]
            rows.append(
                {
                    "QK": qk,
                    "r": r_,
                    "converged": share(s["converged"][i].sum(), c.size),
                    "trapped": rate(s["trapped"][i]),
                    "escape": med(s["escape"][i], c),
                    "order-1 onset": med(s["onset1"][i], c & np.isfinite(s["onset1"][i])),
                }
            )
    return rows


def ratio_indices(cfg: ChapterConfig) -> tuple[int, int]:
    """The slowest rate's index and that of r = 1 (the rate nearest it)."""
    return int(np.argmin(cfg.ratio.grid)), int(np.argmin(np.abs(np.log(cfg.ratio.grid))))


def ratio_numbers(cfg: ChapterConfig, ratio: dict) -> dict:
    """At the slowest rate and at r = 1 (factorized): the share trapped, and the race of
    attention against the gates (:func:`attention_before_gates`, medians over seeds); the
    collapsed model's largest share trapped."""
    fac = ratio["factorized"]
    slow_i, base_i = ratio_indices(cfg)
    sw = ratio_sweep(cfg)
    race = {i: attention_before_gates(fac["history"], sw, i) for i in (slow_i, base_i)}
    return dict(
        r_slow=cfg.ratio.grid[slow_i],
        r_base=cfg.ratio.grid[base_i],
        trapped_slow=share(fac["trapped"][slow_i].sum(), len(cfg.ratio.seeds)),
        trapped_base=share(fac["trapped"][base_i].sum(), len(cfg.ratio.seeds)),
        grow_slow=float(np.median(race[slow_i][0])),
        grow_base=float(np.median(race[base_i][0])),
        keymax_slow=float(np.median(race[slow_i][1])),
        keymax_base=float(np.median(race[base_i][1])),
        collapsed_trap_max=float(ratio["collapsed"]["trapped"].mean(1).max()),
    )

"""Numbers read from the chapter's runs: order 0 in time, the competing orders' diagram and
boundaries, the lead at equal strength and the lazy arm (dicts for glue, tables)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pandas as pd

from ...book.page import count, listing, share
from ...theory import order
from ..ch02_context_staircase import CONTROL, MLP2
from .runs import grid


def time_resolved(slow: dict, raw_floor: dict, name: str, gamma: float):
    """Per seed: when the rows' R0 and R1 first pass their floors, and how many logged
    steps R0 is up while R1 is not yet (counted only where R1 does leave its floor)."""
    steps_s, m = slow[name].arm(gamma)
    first = lambda up: np.array([steps_s[u].min() if u.any() else np.inf for u in up.T])
    floor = raw_floor[name]
    t0, t1 = first(m["rawR0"] > floor[0]), first(m["rawR1"] > floor[1])
    ahead = np.array([np.sum((steps_s >= a) & (steps_s < b)) for a, b in zip(t0, t1, strict=True)])
    return steps_s, m, t0, t1, ahead


def order0_in_time(slow: dict, raw_floor: dict, seeds, gamma: float, stair, cfg):
    """The slow arm, read per seed: the rows' R0 and R1 onsets and the logged steps between
    (``t0_s``, ``t1_s``, ``ahead_s``; the control's ``t1_ctrl``, ``ahead_ctrl``), bit 1's
    escape (``esc_s``), the step at which the leading-order term stops being the gradient
    (``t_lead``) and its smallest cosine in between; ``glue`` and ``table`` for the page."""
    steps_s, m_s, t0_s, t1_s, ahead_s = time_resolved(slow, raw_floor, MLP2, gamma)
    *_, t1_ctrl, ahead_ctrl = time_resolved(slow, raw_floor, CONTROL, gamma)
    tol = stair.readings.lead_tol
    fails = m_s["lead"] < 1 - tol  # the expansion fails; inf where it never does
    t_lead = np.array([steps_s[f].min() if f.any() else np.inf for f in fails.T])
    window = (steps_s[:, None] >= t0_s) & (steps_s[:, None] < t1_s)
    lead_min = np.nanmin(np.where(window, m_s["lead"], np.nan), 0)
    steps_of = lambda v: listing(v, noun="step")  # "steps 8, 6 and 2", seed by seed
    up = np.isfinite(t1_s)  # the seeds whose rows' R1 leaves its floor
    esc_s = slow[MLP2].stairs(gamma).escapes[1]  # bit 1's escape from its plateau; inf: never
    peak = lambda key: np.nanmax(m_s[key][1:], 0)  # per seed, over the run
    glue = dict(
        slow_t0=steps_of(t0_s),
        slow_t1=steps_of(t1_s[up]),
        slow_ahead=listing(ahead_s[up], noun=""),
        slow_up=share(up.sum(), len(seeds)),
        slow_r1_peaks=listing(peak("rawR1").round(2), noun=""),
        slow_inc_peaks=listing(peak("R1").round(2), noun=""),
        slow_floor1=raw_floor[MLP2][1],
        slow_inc_floor1=slow[MLP2].floor[1],
        slow_bit1_end=float(m_s["bit1"][-1].max()),
        slow_esc=steps_of(esc_s),
        slow_learned=share(np.isfinite(esc_s).sum(), len(seeds)),
        slow_t_lead=steps_of(t_lead),
        slow_lead_min=float(lead_min.min()),
        slow_ctrl_held=share(np.sum(~np.isfinite(t1_ctrl)), len(seeds)),
        slow_lr=cfg.slow.lr,
        slow_every=cfg.slow.every,
        min_ahead=cfg.slow.min_ahead,
    )
    table = pd.DataFrame(
        {
            "seed": seeds,
            "rows' R0 up": t0_s,
            "rows' R1 up": t1_s,
            "logged steps between": ahead_s,
            "expansion fails (cos < 1 - tol)": t_lead,
            "smallest cos in between": lead_min,
        }
    )
    return SimpleNamespace(
        m_s=m_s,
        t1_s=t1_s,
        ahead_s=ahead_s,
        t1_ctrl=t1_ctrl,
        ahead_ctrl=ahead_ctrl,
        esc_s=esc_s,
        t_lead=t_lead,
        tol=tol,
        glue=glue,
        table=table,
    )


def boundary_reading(first, bound, rho_pred, ratios, gammas_c, cfg):
    """The diagram read: its corners at the strong ratio (``corner``: panel -> (smallest
    init, largest init)), the control's winner against strength (``ctrl_f``,
    ``ctrl_strength``), the prediction's miss and agreement at the small inits, the
    boundary's slope per panel with its bootstrap interval; ``glue`` and ``table``."""
    top, bottom = gammas_c.index(max(gammas_c)), gammas_c.index(min(gammas_c))
    at_strong = list(ratios).index(cfg.readings.strong_ratio)
    corner = {k: (f[top, at_strong], f[bottom, at_strong]) for k, f in first.items()}
    # where the control's winner is strength's: the stronger family first wherever rho != 1
    off_one = ratios != 1
    ctrl_f = first["gradient descent, control"][:, off_one]
    ctrl_strength = ctrl_f == np.sign(np.log(ratios[off_one]))[None, :, None]
    # the measured boundary against the prediction, at the small inits
    small_c = np.array(gammas_c) >= cfg.readings.small_from
    miss = np.abs(bound["gradient descent"] - np.log(rho_pred))  # |ln rho*_meas - ln rho*_pred|
    agree = miss[small_c] <= np.log(cfg.readings.agree_factor)
    slopes = {k: order.slope_interval(gammas_c, bound[k], seed=0) for k in bound}
    fold = lambda v: float(np.exp(np.median(v)))
    gd, ctrl = slopes["gradient descent"], slopes["gradient descent, control"]
    glue = dict(
        strong_ratio=cfg.readings.strong_ratio,
        agree_factor=cfg.readings.agree_factor,
        small_from=cfg.readings.small_from,
        agree_small=share(agree.sum(), agree.size),
        miss_small_max=float(np.exp(miss[small_c].max())),
        miss_large_max=float(np.exp(miss[~small_c].max())),
        large_boundary_gd=fold(bound["gradient descent"][bottom]),
        small_boundary_gd=fold(bound["gradient descent"][top]),
        small_boundary_adam=fold(bound["Adam"][top]),
        large_boundary_adam=fold(bound["Adam"][bottom]),
        pred_small=float(np.median(rho_pred[top])),
        pred_large=float(np.median(rho_pred[bottom])),
        slope_gd=gd[0],
        slope_gd_lo=gd[1],
        slope_gd_hi=gd[2],
        slope_ctrl=ctrl[0],
        slope_ctrl_lo=ctrl[1],
        slope_ctrl_hi=ctrl[2],
        slope_adam=slopes["Adam"][0],
        gamma_top=gammas_c[top],
        gamma_bottom=gammas_c[bottom],
        ctrl_boundary=fold(bound["gradient descent, control"]),
        gd_lr=cfg.gd.lr,
        gd_lr_large=cfg.gd.lr_large,
        large_below=cfg.gd.large_below,
        ratio_step=float(2.0 ** np.diff(cfg.log2_ratios)[0]),
        n_seeds_c=count(len(cfg.seeds), "seed"),
    )
    # the boundary rho* per panel, median over seeds
    table = pd.DataFrame(
        {"γ": gammas_c}
        | {k: np.exp(np.median(v, 1)) for k, v in bound.items()}
        | {"predicted": np.median(rho_pred, 1)}
    )
    return SimpleNamespace(
        top=top,
        bottom=bottom,
        corner=corner,
        ctrl_f=ctrl_f,
        ctrl_strength=ctrl_strength,
        miss=miss,
        agree=agree,
        small_c=small_c,
        slopes=slopes,
        glue=glue,
        table=table,
    )


def diagram_rows(first, ratios, gammas_c) -> list[dict]:
    """The diagram's cells as rows: per panel and gamma, the mean over seeds of +1 (the high
    family escaped first) and -1 (the low family did), per ratio."""
    return [
        {"panel": k, "γ": x} | {f"ρ = {r:g}": v for r, v in zip(ratios, row, strict=True)}
        for k, f in first.items()
        for x, row in zip(gammas_c, np.nanmean(f, -1), strict=True)
    ]


def equal_strength_lead(panels, ratios, gammas_c, top, bottom):
    """``(lead, glue, table)``: per optimizer, (gamma, seed) -> t_high / t_low at equal
    strength, its medians at the smallest and largest init, and its median per gamma."""
    at_one = list(ratios).index(1.0)
    lead = {}  # (optimizer) -> (gamma, seed): t_high / t_low at equal strength
    for name in ("gradient descent", "Adam"):
        sw, e, arm_name = panels[name]
        lead[name] = (grid(sw, e["high"], arm_name) / grid(sw, e["low"], arm_name))[:, at_one]
    glue = dict(
        lead_small_gd=float(np.median(lead["gradient descent"][top])),
        lead_large_gd=float(np.median(lead["gradient descent"][bottom])),
        lead_small_adam=float(np.median(lead["Adam"][top])),
        lead_large_adam=float(np.median(lead["Adam"][bottom])),
    )
    table = pd.DataFrame({"γ": gammas_c} | {k: np.median(v, 1) for k, v in lead.items()})
    return lead, glue, table


def lazy_reading(lazy: dict, lazy_arms: dict, seeds):
    """Per arm of the lazy runs: how far the weights moved by the end (max over E, W1, W2;
    ``moved_end``), whether the embedding climbs (``climbed``) and the log-time gap of its
    stairs (``gap``), per seed; ``table``: per arm, the largest move, the median gap and the
    number of seeds that climb."""
    rows, moved_end, climbed, gap = [], {}, {}, {}
    for name, run in lazy.items():
        rate = lazy_arms[name][2]
        _, m = run.arm(rate)
        s = run.stairs(rate)
        moved_end[name] = np.max([m[f"rel_{w}"][-1] for w in ("E", "W1", "W2")], 0)
        climbed[name] = np.array(s.climbs_per_seed())
        gap[name] = np.log(s.onsets[1]) - np.log(s.onsets[0])  # e-folds of log time; inf if never
        for k, seed in enumerate(seeds):
            rows.append(
                {
                    "arm": name,
                    "seed": seed,
                    "weights moved (max over E, W1, W2)": moved_end[name][k],
                    "onset 0": s.onsets[0][k],
                    "onset 1": s.onsets[1][k],
                    "escape 1": s.escapes[1][k],
                    "gap (e-folds)": gap[name][k],
                    "climbs": climbed[name][k],
                }
            )
    lazy_table = pd.DataFrame(rows)
    agg = {"weights moved (max over E, W1, W2)": "max", "gap (e-folds)": "median", "climbs": "sum"}
    table = lazy_table.groupby("arm", sort=False).agg(agg).reset_index()
    return SimpleNamespace(moved_end=moved_end, climbed=climbed, gap=gap, table=table)


LAZY, SMALL, ADAM_LARGE = "GD, large init", "Adam, small init", "Adam, large init"


def lazy_numbers(lz, seeds, cfg) -> dict:
    """The lazy arm against Adam from small and large init, in numbers and words."""
    climbs = lambda arm: f"{count(lz.climbed[arm].sum(), 'seed')} of {len(seeds)}"  # "1 seed of 3"
    return dict(
        lazy_gamma=cfg.lazy.gamma,
        lazy_moved=float(lz.moved_end[LAZY].max()),
        small_moved=float(lz.moved_end[SMALL].min()),
        adam_large_moved=float(lz.moved_end[ADAM_LARGE].min()),
        lazy_climbed=climbs(LAZY),
        adam_large_climbed=climbs(ADAM_LARGE),
        gd_mid_climbed=climbs("GD, gamma 0.5"),
        lazy_gap=float(np.median(lz.gap[LAZY])),
        small_gap=float(np.median(lz.gap[SMALL])),
        adam_large_gap=float(np.median(lz.gap[ADAM_LARGE])),
    )

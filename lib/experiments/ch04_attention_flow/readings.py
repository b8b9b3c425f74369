"""The numbers the page reads from the runs on T3 (dicts for glue) and its tables."""

from __future__ import annotations

import numpy as np

from ...book.page import count, listing, table


def shown_gammas(cfg, init) -> tuple:
    """The init rates the text reads: the large-init comparator, the small init, γ = 1."""
    return (cfg.gamma_large, cfg.gamma, float(init.gammas[-1]))


def init_numbers(cfg, init) -> dict:
    """Per shown init rate: the worst seed's cosines and the seed-mean relative sizes
    (glue with prefix a_)."""
    att_cos, att_size, idx = init.att_cos, init.att_size, init.idx
    per_gamma = {  # per init rate: the worst seed's cosine, the seed-mean relative size
        "cos_res": att_cos["residual"][0].min(1),
        "cos_all": att_cos["all three"][0].min(1),
        "cos_res_smallP": att_cos["residual"][1].min(1),
        "size_self": att_size["self"][0].mean(1),
        "size_qk": att_size["QK path"][0].mean(1),
    }
    return {
        f"{k}_g{round(10 * gamma_):02d}": v[idx[gamma_]]
        for k, v in per_gamma.items()
        for gamma_ in shown_gammas(cfg, init)
    }


def tolerances(cfg) -> dict:
    """The tolerances of the checks at the end of the chapter, and the GD run's size."""
    return dict(
        cos_target=cfg.cos_target,
        slope_tol=cfg.slope_tol,
        first_order_tol=cfg.first_order_tol,
        depart_factor=cfg.gd.depart_factor,
        gd_seeds=count(cfg.gd.n_seeds, "instance"),
    )


def scaling_numbers(scaling) -> dict:
    """The fitted powers of the scaling test (glue with prefix a_slope_)."""
    return {k.replace(" ", "_"): v for k, v in scaling.slopes.items()}


def uniform_numbers(cfg, init, uni) -> dict:
    """The distance from uniform at init per shown γ, the first-order formula's error, D's
    fitted power and the seed-by-seed reversals."""
    gammas, idx, D_meas_g, rel_first = init.gammas, init.idx, uni.D_meas_g, uni.rel_first
    out = {
        f"D_init_g{round(10 * gamma_):02d}": D_meas_g[idx[gamma_]].mean()
        for gamma_ in shown_gammas(cfg, init)
    }
    return out | dict(
        D_first_err_03=float(rel_first[0].mean()),
        gamma_min=float(gammas[0]),
        D_slope=uni.D_slope,
        D_first_err_08=float(rel_first[idx[cfg.gamma] :].max()),
        D_reversed=count(int(uni.reversed_steps.sum()), "step"),
        D_steps=int(uni.reversed_steps.size * (len(gammas) - 1)),
    )


def uniform_table(init, uni):
    """Seed means per init rate: the measured distance and the first-order formula."""
    return table(
        [
            (f"{gamma_:.1f}", uni.D_meas_g[i].mean(), uni.D_first_g[i].mean())
            for i, gamma_ in enumerate(init.gammas)
        ],
        ["γ", "measured D", "first-order D"],
        align=["r"] * 3,
    )


def time_numbers(cfg, t3, gd) -> dict:
    """The GD run's readings at small init (``_small``) and large init (``_large``)."""
    small, steps = gd.small, gd.steps
    early = int(np.searchsorted(steps, cfg.gd.early_steps))
    return dict(
        t_dep_small=float(np.nanmean(gd.t_dep[small])),
        dQK_at_dep_small=float(np.nanmean(gd.dQK_at_dep[small])),
        delta=cfg.gd.delta,
        t_qk_small=float(np.nanmean(gd.t_qk[small])),
        t_leave_small=float(np.nanmean(gd.t_leave[small])),
        D_before_small=float(gd.D_before[small].max()),
        Dqs_max_small=float(gd.Dqs_max[small].max()),
        D_end_small=float(gd.Dt[-1, small].mean()),
        H_end_small=float(gd.Ht[-1, small].mean()),
        logL=float(np.log(t3.L)),
        R0_early_small=float(gd.R0[1][small].mean()),
        R1_max_small=float(np.nanmax(gd.R1[:, small])),
        D0_large=float(gd.Dt[0, ~small].mean()),
        cos_all_early_small=float(gd.cos_all[:early, small].min()),
    )


def control_numbers(gd) -> dict:
    """Where the control fails: attention leaves the ball before QK has moved by its
    initial size, in how many large-init instances, and at which steps."""
    small, t_leave = gd.small, gd.t_leave
    never = lambda t: np.nan_to_num(t, nan=np.inf)
    left_early = never(t_leave) < never(gd.t_qk)
    k_early, n_large = int(left_early[~small].sum()), int((~small).sum())
    some = f"{k_early} of {n_large} instances" if k_early else "no instance"
    return dict(
        left_early_large="every instance" if k_early == n_large else some,
        t_leave_large=listing(t_leave[~small], noun="step"),
    )

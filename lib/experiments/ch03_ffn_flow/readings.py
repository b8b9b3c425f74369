"""The numbers the page reads from the runs (dicts for glue) and its tables."""

from __future__ import annotations

import numpy as np
import pandas as pd
import torch

from ...book.page import table
from ...theory import flow
from ...training.layers import ACTIVATION_TAYLOR
from .callbacks import escape_slopes


def task_numbers(cfg, t3) -> dict:
    """SiLU's Taylor coefficients c1, c2, the size of T3's training set, and the tolerances
    the checks at the end of the chapter use."""
    c1, c2 = ACTIVATION_TAYLOR[cfg.model.activation]
    return dict(
        c1=c1,
        c2=c2,
        n_train=len(t3.D),
        cos_target=cfg.cos_target,
        slope_tol=cfg.slope_tol,
        balance_tol=cfg.lin.balance_tol,
    )


def init_numbers(cfg, init) -> dict:
    """Per shown init rate: the worst seed's cosine (order 0, all three terms) and the
    seed-mean relative size of the order-1 and contextual terms (glue with prefix init_)."""
    init_cos, init_size, idx = init.init_cos, init.init_size, init.idx
    per_gamma = {  # per init rate: the worst seed's cosine, the seed-mean relative size
        "cos0": init_cos["order 0"].min(1),
        "cosall": init_cos["order 0+1+ctx"].min(1),
        "size1": init_size["order 1"].mean(1),
        "sizectx": init_size["contextual"].mean(1),
    }
    shown = (cfg.gamma_large, cfg.gamma_mid, cfg.gamma, float(init.gammas[-1]))
    return {
        f"{k}_g{round(10 * gamma_):02d}": v[idx[gamma_]]
        for k, v in per_gamma.items()
        for gamma_ in shown
    }


def init_table(init):
    """Seed means per init rate: cosine with the true gradient, and each term's size."""
    init_cos, init_size = init.init_cos, init.init_size
    return table(
        [
            [f"{gamma_:.1f}"]
            + [f"{init_cos[k][i].mean():.4f}" for k in init_cos]
            + [f"{init_size[k][i].mean():.4f}" for k in init_size]
            for i, gamma_ in enumerate(init.gammas)
        ],
        ["γ", *(f"cosine, {k}" for k in init_cos), "‖order 1‖ / ‖order 0‖", "‖ctx‖ / ‖order 0‖"],
        align=["r"] * 7,
    )


def slope_key(k: str) -> str:
    """A glue name for a scaling-test key: ``silu: 0+1`` -> ``silu_0p1``."""
    return k.replace(": ", "_").replace(" ", "_").replace("+", "p")


def scaling_numbers(scaling) -> dict:
    """The fitted powers (``slope_...``) and the tanh readings of the scaling test."""
    out = {f"slope_{slope_key(k)}": v for k, v in scaling.slopes.items()}
    return out | dict(
        tanh_order1_max=max(scaling.tanh_order1_max),
        tanh_nonlin=scaling.tanh_nonlin[0],
        silu_nonlin=scaling.silu_nonlin,
    )


def handover_numbers(cfg, t3, ho) -> dict:
    """The hand-over's readings (glue with prefix ho_)."""
    steps, cos_pm = ho.steps, ho.cos_pm
    pm_min_before = float(cos_pm[steps <= ho.pbar_best_step].min())
    pm_late = float(cos_pm[-1].mean())
    return dict(
        gamma=cfg.handover.gamma,
        t_handover=int(ho.t_handover) if ho.handed else "none within the run",
        # never below the target: exact to the run's end
        u_exact_until=int(ho.u_exact) if np.isfinite(ho.u_exact) else int(steps[-1]),
        pbar_best=ho.pbar_best,
        pbar_best_step=ho.pbar_best_step,
        u_at_best=ho.u_at_best,
        pm_min_before=pm_min_before,
        pm_late=pm_late,
        pbar_u_dist=float((t3.S.pbar - 1 / t3.n).norm()),
    )


def escape_settings(cfg) -> dict:
    """The escape run's γ, learning rate, clip and seeded asymmetries."""
    return dict(
        gd_gamma=cfg.esc.gamma,
        gd_lr=cfg.esc.lr,
        gd_clip=cfg.esc.clip,
        esc_deltas=", ".join(f"{d:g}" for d in cfg.esc.deltas),  # a list of numbers
    )


def escape_reading(esc, esc_pred):
    """Predicted against measured escape, per seeded copy: ``(table, ratio_esc, slopes_meas,
    slopes_pred)``, the table a DataFrame and the log-δ slopes one value per seed."""
    rows = []
    for k, (tp, _, a_star) in esc_pred.pred.items():
        rows.append(
            {
                "seed": int(esc.seed_k[k]),
                "delta": esc.delta_k[k],
                "predicted escape": tp,
                "measured escape": esc.t_esc[k],
                "predicted / measured": tp / esc.t_esc[k],
                "A*": a_star,
            }
        )
    escape_table = pd.DataFrame(rows)
    ratio_esc = escape_table["predicted / measured"].to_numpy()
    # The log-delta slope, measured and predicted (per seed, least squares over delta > 0).
    slopes_meas, slopes_pred = escape_slopes(
        esc_pred.pred, esc.seed_k, esc.delta_k, esc.t_esc, esc.esc_seeds
    )
    return escape_table, ratio_esc, slopes_meas, slopes_pred


def escape_numbers(cfg, esc, esc_pred) -> dict:
    """The escape's readings: the predicted/measured range, the log-δ slopes, the growth
    rate on the plateau and at the end, and the exactly symmetric copies."""
    _, ratio_esc, slopes_meas, slopes_pred = escape_reading(esc, esc_pred)
    lam_path = esc_pred.lam_path
    sym_escape = esc.t_esc[esc.sym_k]
    return dict(
        esc_ratio_min=float(ratio_esc.min()),
        esc_ratio_max=float(ratio_esc.max()),
        esc_tol=cfg.esc.tol,
        slope_meas=float(np.mean(slopes_meas)),
        slope_pred=float(np.mean(slopes_pred)),
        lam_min=float(lam_path[1:].min()),  # the slowest growth on the plateau
        lam_end=float(lam_path[-1].mean()),
        sym_escape=", ".join("never" if not np.isfinite(t) else f"{t:.0f}" for t in sym_escape),
        sym_A_end=float(esc.A_norm[-1, esc.sym_k].max()),
    )


def escape_table(esc, esc_pred):
    """The table of predicted and measured escape steps, per seed and δ."""
    return table(
        escape_reading(esc, esc_pred)[0],
        [
            "seed",
            "δ",
            "predicted escape step",
            "measured escape step",
            "predicted / measured",
            "A*",
        ],
    )


def linear_numbers(lin) -> dict:
    """The linear model's singular values and onset ratios (glue with prefix lin_)."""
    lin_ratio = lin.t_pred / lin.t_meas
    return dict(
        s1=float(lin.s_k[0]),
        sk=float(lin.s_k[-1]),
        ratio_min=float(np.nanmin(lin_ratio)),
        ratio_max=float(np.nanmax(lin_ratio)),
        ratio_top2=float(np.nanmean(lin_ratio[:, :2])),
    )


def linear_table(lin):
    """Per mode: its singular value, predicted and measured onset (seed means)."""
    s_k, t_pred, t_meas = lin.s_k, lin.t_pred, lin.t_meas
    return table(
        [
            (j + 1, f"{s_k[j]:.4f}", t_pred.mean(0)[j], np.nanmean(t_meas, 0)[j])
            for j in range(lin.k_modes)
        ],
        ["mode k", "singular value", "predicted onset (steps)", "measured onset (steps)"],
        align=["r"] * 4,
    )


def balance_error(lin) -> float:
    """The largest relative distance, over seeds, of E E^T from (Q Q^T)^(1/2)."""
    G_meas, G_bal = lin.G_meas, lin.G_bal
    return float(((G_meas - G_bal).norm(dim=(1, 2)) / G_meas.norm(dim=(1, 2))).max())


def n_learned(cfg, lin) -> int:
    """How many modes are learned within the run (seed-mean onset within it)."""
    return int((np.nanmean(lin.t_meas, 0) <= cfg.lin.steps).sum())


def gram_numbers(cfg, t3, lin) -> dict:
    """The conservation law's error and the correlation of the final embedding's token
    cosines with those of the top-mode part and of the whole of (M M^T)^(1/2)."""
    Uk, s_k, tokens, G_meas = lin.Uk, lin.s_k, t3.tokens, lin.G_meas
    bal_err = balance_error(lin)
    learned = n_learned(cfg, lin)
    G_sig = (Uk[:, :learned] * torch.as_tensor(s_k[:learned])) @ Uk[:, :learned].T
    G_full = flow.psd_sqrt(lin.M_sig @ lin.M_sig.T)
    corr_pairs = lambda a, b: float(np.corrcoef(a.numpy(), b.numpy())[0, 1])
    cos_meas = flow.gram_cos_pairs(G_meas, tokens)  # token cosines implied by each Gram matrix
    gram_corr_modes = [
        corr_pairs(cos_meas[i], flow.gram_cos_pairs(G_sig, tokens)) for i in range(len(G_meas))
    ]
    gram_corr_full = [
        corr_pairs(cos_meas[i], flow.gram_cos_pairs(G_full, tokens)) for i in range(len(G_meas))
    ]
    return dict(
        bal_err=bal_err,
        n_learned=learned,
        gram_corr_modes=float(np.mean(gram_corr_modes)),
        gram_corr_full=float(np.mean(gram_corr_full)),
    )

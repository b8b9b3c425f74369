"""The chapter's figures; each function draws one and returns it."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from ...book.style import COLORS, band, subplots
from ..flow_figures import GAMMA_LABEL, expansion_axes, scaling_panel
from .where import ABLATED


def fig_attn_init(cfg, init, scaling):
    """The one-layer attention expansion against autograd at init: cosines over γ (default
    and small P), the sizes of the terms, and the scaling test."""
    gammas, att_cos, att_size = init.gammas, init.att_cos, init.att_size
    fig, axes = expansion_axes()
    cols = {
        "residual": COLORS["order0"],
        "residual+value": COLORS["window"],
        "all three": COLORS["contextual"],
    }
    for k, c in cols.items():
        band(axes[0], gammas, 1 - att_cos[k][0], c, label=k, log_x=False)
    band(
        axes[0],
        gammas,
        1 - att_cos["residual"][1],
        COLORS["order0"],
        label="residual, small P",
        log_x=False,
        ls="--",
    )
    axes[0].axhline(1 - cfg.cos_target, ls=":", color=COLORS["null"])
    axes[0].set(xlabel=GAMMA_LABEL, ylabel="1 − cosine", yscale="log", title="terms vs autograd")
    axes[0].legend()
    band(axes[1], gammas, att_size["value"][0], COLORS["window"], label="value / res.", log_x=False)
    band(
        axes[1], gammas, att_size["self"][0], COLORS["contextual"], label="self / res.", log_x=False
    )
    band(axes[1], gammas, att_size["QK path"][0], COLORS["qk"], label="QK / gradient", log_x=False)
    axes[1].set(xlabel=GAMMA_LABEL, ylabel="relative size", yscale="log", title="sizes")
    axes[1].legend()
    errs = scaling.errs
    scaling_panel(
        axes[2],
        scaling.factors,
        errs,
        scaling.slopes,
        scaling.expected,
        [COLORS["order0"], COLORS["contextual"], COLORS["qk"]],
        {k: k for k in errs},
        "relative error / size",
    )
    plt.tight_layout()
    return fig


def fig_attn_time(cfg, t3, gd):
    """The GD run on one time axis, small init solid and large init dashed: the distance
    from uniform against the quasi-static prediction, the change of W_Q W_K^T, the attention
    entropy, and the anchors' alignments with the cosine of the expansion."""
    small, delta = gd.small, cfg.gd.delta
    fig, axes = subplots(2, 2, sharex=True)
    (ax_D, ax_qk), (ax_H, ax_R) = axes
    x = np.maximum(gd.steps, 1)
    for mask_, ls in ((small, "-"), (~small, "--")):
        once = ls == "-"  # label each quantity once; the line style tells the init apart
        band(ax_D, x, gd.Dt[:, mask_], COLORS["theory"], ls=ls, label="$D$" if once else None)
        band(
            ax_D,
            x,
            gd.Dqs[:, mask_],
            COLORS["null"],
            ls=ls,
            label=r"$D_{\rm qs}$" if once else None,
        )
        band(ax_qk, x[1:], gd.dQK[1:, mask_], COLORS["qk"], ls=ls)
        band(ax_H, x, gd.Ht[:, mask_], COLORS["qk"], ls=ls)
        for R, order, name in ((gd.R0, "order0", r"$R_0$"), (gd.R1, "order1", r"$R_1$")):
            band(ax_R, x[1:], R[1:, mask_], COLORS[order], ls=ls, label=name if once else None)
        band(
            ax_R,
            x,
            gd.cos_all[:, mask_],
            COLORS["contextual"],
            ls=ls,
            label="cos(expansion, gradient)" if once else None,
        )
    ax_D.axhline(delta, ls=":", color=COLORS["null"])
    ax_D.set(yscale="log", ylabel="distance from uniform", title="attention")
    ax_D.legend(loc="lower right")
    ax_qk.axhline(1.0, ls=":", color=COLORS["null"])
    ax_qk.set(yscale="log", ylabel="relative change", title=r"query-key weights $W_QW_K^\top$")
    for ls, gamma_, init in (("-", cfg.gamma, "small"), ("--", cfg.gamma_large, "large")):
        ax_qk.plot([], [], ls=ls, color=COLORS["qk"], label=f"{init} init (γ = {gamma_:g})")
    ax_qk.legend(loc="lower right")
    ax_H.axhline(np.log(t3.L), ls=":", color=COLORS["null"])
    ax_H.set(xlabel="GD step", ylabel="entropy (nats)", title="attention entropy")
    ax_R.set(xlabel="GD step", ylabel="alignment / cosine", ylim=(-1, 1.05), title="embeddings")
    ax_R.legend(loc="lower left")
    fig.tight_layout()
    return fig


def fig_attn_where(cfg2, where):
    """Where the parity lives, in the trained runs of the two ablated models: R1 of the
    embedding (and of E W_V W_O) with its floor, and the three held-out probes."""
    fig, axes = subplots(2, 2, sharex=True)
    probe_colors = {
        "probe_E": COLORS["order0"],
        "probe_attn": COLORS["qk"],
        "probe_mlp": COLORS["order2"],
    }
    for col, name in enumerate(ABLATED):
        steps_w, m = where[(name, "trained")].arm(cfg2.gamma)
        top, bottom = axes[0, col], axes[1, col]
        band(top, steps_w[1:], m["R1"][1:], COLORS["order1"], label="$R_1$ of $E$")
        if "R1_ov" in m:
            band(top, steps_w[1:], m["R1_ov"][1:], COLORS["null"], label="$R_1$ of $E W_V W_O$")
        top.axhline(where[(name, "trained")].floor[1], color=COLORS["order1"], ls=":", lw=1)
        top.set(title=name, ylabel="alignment", ylim=(-0.4, 1.05))
        for probe, color in probe_colors.items():
            band(bottom, steps_w[1:], m[probe][1:], color, label=probe.replace("probe_", "probe: "))
        bottom.axhline(0.5, color=COLORS["null"], ls="--", lw=0.8)
        bottom.set(xlabel="Adam step", ylabel="held-out accuracy", ylim=(0, 1.05))
        top.legend(loc="upper left")
        bottom.legend(loc="upper left")
    plt.tight_layout()
    return fig

"""The chapter's figures; each function draws one and returns it."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from ...book.style import COLORS, band, log_axes, ordered_colors, seed_colors, subplots
from ..flow_figures import GAMMA_LABEL, expansion_axes, scaling_panel


def fig_init_expansion(init, scaling):
    """The expansion against autograd at init: cosines and term sizes over γ, and the
    scaling test for SiLU and tanh."""
    gammas, init_cos, init_size = init.gammas, init.init_cos, init.init_size
    errs, slopes = scaling.errs, scaling.slopes
    fig, axes = expansion_axes()
    col = {
        "order 0": COLORS["order0"],
        "order 0+1": COLORS["order1"],
        "order 0+1+ctx": COLORS["contextual"],
    }
    for k, c in col.items():
        band(axes[0], gammas, 1 - init_cos[k], c, label=k, log_x=False)
    axes[0].axhline(0.01, ls="--", color=COLORS["null"])
    axes[0].set(
        xlabel=GAMMA_LABEL, ylabel="1 − cosine", yscale="log", title="expansion vs autograd"
    )
    axes[0].legend()
    band(axes[1], gammas, init_size["order 1"], COLORS["order1"], label="order 1", log_x=False)
    band(
        axes[1],
        gammas,
        init_size["contextual"],
        COLORS["contextual"],
        label="contextual",
        log_x=False,
    )
    axes[1].set(
        xlabel=GAMMA_LABEL, ylabel="size / size of order 0", yscale="log", title="size of the terms"
    )
    axes[1].legend()
    short = dict(zip(errs, ["order 0", "0+1", "0+1+ctx", "tanh"], strict=True))
    colors = [*col.values(), COLORS["theory"]]
    scaling_panel(
        axes[2],
        scaling.factors,
        errs,
        slopes,
        scaling.expected_slopes,
        colors,
        short,
        "relative error",
    )
    plt.tight_layout()
    return fig


def fig_handover(ho):
    """The hand-over of the centring: the order-0 term under three centrings against the
    true gradient, and the distance of the mean prediction from u and from p-bar."""
    fig, axes = subplots(1, 2)
    steps_ho = np.maximum(ho.steps, 1)
    band(axes[0], steps_ho, ho.cos_u, COLORS["order0"], label=r"$\phi^y-u$")
    band(axes[0], steps_ho, ho.cos_pbar, COLORS["traceback"], label=r"$\phi^y-\bar p$")
    band(axes[0], steps_ho, ho.cos_pm, COLORS["theory"], label=r"$\phi^y-\bar p_{\rm model}$")
    axes[0].set(
        xlabel="GD step",
        ylabel="cosine with true gradient",
        ylim=(-1, 1.05),
        title="order-0 term, three centrings",
    )
    axes[0].legend(fontsize=8)
    band(axes[1], steps_ho, ho.dist_u, COLORS["order0"], label=r"$\|\bar p_{\rm model}-u\|$")
    band(
        axes[1],
        steps_ho,
        ho.dist_pbar,
        COLORS["traceback"],
        label=r"$\|\bar p_{\rm model}-\bar p\|$",
    )
    axes[1].set(xlabel="GD step", ylabel="distance", title="what the model predicts on average")
    axes[1].legend(fontsize=8)
    for ax in axes:
        ax.axvline(ho.t_handover, ls=":", color=COLORS["null"])
    plt.tight_layout()
    return fig


def fig_escape(esc, esc_pred):
    """The escape from the symmetric saddle: |A| of the first seed's copies against its
    linearized prediction, the growth rate λ along the symmetric paths, and the escape step
    against δ, measured and predicted."""
    pred, lam_path = esc_pred.pred, esc_pred.lam_path
    seed_k, delta_k, esc_seeds, t_esc = esc.seed_k, esc.delta_k, esc.esc_seeds, esc.t_esc
    fig, axes = subplots(1, 3, row_height=2.8)
    shade = ordered_colors(esc.deltas)
    x = np.maximum(esc.steps, 1)
    for k in np.nonzero(seed_k == esc_seeds[0])[0]:
        axes[0].plot(x, esc.A_norm[:, k], color=shade[delta_k[k]], label=f"δ = {delta_k[k]:g}")
        if k in pred:
            norms = pred[k][1]
            axes[0].plot(np.maximum(np.arange(len(norms)), 1), norms, ":", color=shade[delta_k[k]])
            a_star = pred[k][2]
    axes[0].axhline(a_star, ls="--", color=COLORS["null"])
    axes[0].set(xscale="log", yscale="log", ylim=(1e-17, 1e2), xlabel="GD step", ylabel="$|A|$")
    axes[0].set(title=f"antisymmetric mode, seed {esc_seeds[0]}")
    axes[0].legend(loc="center left")
    band(axes[1], x[1:], lam_path[1:], COLORS["order1"])
    axes[1].axhline(0, color=COLORS["null"], lw=0.8)
    axes[1].set(xlabel="GD step", ylabel=r"growth rate $\lambda$ per step", title="linearized rate")
    seed_color = seed_colors(len(esc_seeds))
    for s_i, s in enumerate(esc_seeds):
        ks = [k for k in pred if seed_k[k] == s]
        dl = [delta_k[k] for k in ks]
        axes[2].plot(dl, [t_esc[k] for k in ks], "o-", color=seed_color[s_i])
        axes[2].plot(dl, [pred[k][0] for k in ks], "x:", color=seed_color[s_i])
    axes[2].plot([], [], "o-", color=COLORS["theory"], label="measured")
    axes[2].plot([], [], "x:", color=COLORS["theory"], label="predicted")
    axes[2].set(
        xscale="log",
        xlabel=r"seeded asymmetry $\delta$",
        ylabel="escape step",
        title="escape against log δ",
    )
    axes[2].legend()
    fig.tight_layout()
    return fig


def fig_linear_modes(lin):
    """The linear model: the strength of the top modes of M against the closed form, and the
    predicted against the measured onset of every mode and seed."""
    k_modes, s_k, mu, early, theta = lin.k_modes, lin.s_k, lin.mu, lin.early, lin.theta
    t_meas, t_pred = lin.t_meas, lin.t_pred
    fig, axes = subplots(1, 2)
    shades = ordered_colors(range(k_modes))
    for j in range(k_modes):
        axes[0].plot(
            np.maximum(lin.steps, 1),
            mu[:, 0, j],
            color=shades[j],
            label=f"$s_{j + 1}$={s_k[j]:.4f}",
        )
        axes[0].plot(np.maximum(lin.steps, 1), early[:, j], ":", color=shades[j])
    axes[0].axhline(theta, ls="--", color=COLORS["null"])
    axes[0].set(
        xscale="log",
        yscale="symlog",
        xlabel="GD step",
        ylabel=r"mode strength $\mu_k$",
        ylim=(-0.1, 30),
        title="modes of the signature matrix",
    )
    axes[0].legend(loc="upper left", ncol=2, columnspacing=0.8, handlelength=1.2)
    for j in range(k_modes):
        axes[1].scatter(t_meas[:, j], t_pred[:, j], color=shades[j], s=18)
    axes[1].set(
        xlabel="measured onset (steps)",
        ylabel="predicted onset (steps)",
        title=r"onset of $\mu_k=\theta$",
    )
    reached = np.isfinite(t_meas) & np.isfinite(t_pred)
    if reached.any():  # the identity line, over the onsets that came within the run
        lim = [0.8 * t_meas[reached].min(), 1.2 * t_meas[reached].max()]
        axes[1].plot(lim, lim, color=COLORS["theory"], lw=1)
    log_axes(axes[1], x=True)
    axes[1].xaxis.set_minor_formatter(plt.NullFormatter())
    axes[1].yaxis.set_minor_formatter(plt.NullFormatter())
    plt.tight_layout()
    return fig

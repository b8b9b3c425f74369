"""The chapter's figures: order 0 in time, and the diagram of which family escapes first
(each function returns its figure)."""

from __future__ import annotations

import numpy as np

from ...book.style import COLORS, SIMILARITY_CMAP, band, subplots
from ..ch02_context_staircase import CONTROL, MLP2, ORDER_COLOR


def fig_stair_time(slow: dict, raw_floor: dict, gamma: float):
    """The slow arm and its shuffled control: the rows' R0 and R1 against their floors
    (dotted) and the cosine of the leading-order term with the gradient, seeds as bands."""
    fig, axes = subplots(1, 2, sharey=True, row_height=3.0)
    for ax, name in zip(axes, (MLP2, CONTROL), strict=True):
        steps_r, m = slow[name].arm(gamma)
        for o in (0, 1):
            band(ax, steps_r[1:], m[f"rawR{o}"][1:], ORDER_COLOR[o], label=f"rows' $R_{o}$")
            ax.axhline(raw_floor[name][o], color=ORDER_COLOR[o], ls=":", lw=1)
        band(ax, steps_r[1:], m["lead"][1:], COLORS["theory"], label="cos(leading term, gradient)")
        ax.set(title=f"{name}, small init (γ = {gamma:g})", xlabel="Adam step", ylim=(-1.05, 1.05))
    axes[0].legend(fontsize=8, loc="lower left")
    axes[0].set(ylabel="alignment / cosine")
    return fig


def fig_order_diagram(first: dict, bound: dict, rho_pred, ratios, gammas_c):
    """Which family escapes first, per panel, over log2 rho and gamma: the share of seeds as
    colour, the measured boundary (median over seeds, a bar spanning the seeds) and, on the
    gradient-descent panel, the predicted one."""
    fig, axes = subplots(1, 3, sharey=True, row_height=3.0)
    lx = np.log2(ratios)
    for ax, (name, f) in zip(axes, first.items(), strict=True):
        frac = np.nanmean(f, axis=-1)  # (gamma, ratio): +1 every seed high first, -1 low first
        im = ax.imshow(
            frac,
            cmap=SIMILARITY_CMAP,
            vmin=-1,
            vmax=1,
            origin="lower",
            aspect="auto",
            extent=(lx[0] - 1, lx[-1] + 1, -0.5, len(gammas_c) - 0.5),
        )
        b = bound[name] / np.log(2)
        med = np.median(b, 1)
        ok = np.isfinite(med)
        y = np.arange(len(gammas_c))
        ax.errorbar(
            med[ok],
            y[ok],
            xerr=[med[ok] - np.nanmin(b, 1)[ok], np.nanmax(b, 1)[ok] - med[ok]],
            fmt="o",
            color=COLORS["reference"],
            ms=4,
            capsize=2,
            label="measured boundary",
        )
        if name == "gradient descent":
            ax.plot(
                np.log2(np.median(rho_pred, 1)),
                y,
                ls="--",
                color=COLORS["theory"],
                label="predicted",
            )
        ax.set(title=name, xlabel=r"$\log_2\rho$", xticks=lx[::2])
    axes[1].set_xlabel(r"$\log_2\rho$ (high family stronger $\rightarrow$)")
    axes[0].set(
        yticks=range(len(gammas_c)),
        yticklabels=[f"{x:g}" for x in gammas_c],
        ylabel="γ (larger: smaller init)",
    )
    fig.colorbar(im, ax=axes, shrink=0.8, label="first: low (-1) to high (+1)")
    axes[0].legend(fontsize=8, loc="upper left", bbox_to_anchor=(0.0, -0.22), ncol=2)
    return fig

"""Chapter 7's figures: the balancedness drift, the reduced model's attention slider, the key
figure (effective ratios and attention at a fixed loss), the reduced dynamics over time, and
the line with the closed form and the four parameterizations. Each returns the figure (the
slider its HTML)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from ...book.interactive import slider_figure
from ...book.style import COLORS, PARAMETERIZATION_COLORS, band, subplots
from .. import qkov_official as official

PCOL = PARAMETERIZATION_COLORS  # the book's colours for FAFO, FACO, CAFO, CACO


def fig_balance(bal: dict):
    """The unbalanced fraction over training, QK and OV, at each rate of
    :func:`~.drift.balancedness_run` (lighter: smaller rate)."""
    bal_lr, h_bal = bal["lr"], bal["history"]
    fig, ax = subplots(1, 1)
    shades = np.linspace(0.4, 1.0, len(bal_lr))
    for k, eta in enumerate(bal_lr):
        for j, (circ, col) in enumerate((("QK", COLORS["qk"]), ("OV", COLORS["ov"]))):
            x = np.where(h_bal.steps > 0, h_bal.steps, np.nan)
            ax.plot(
                x, h_bal["drift"][:, k, j], color=col, alpha=shades[k], label=f"{circ}, η = {eta:g}"
            )
    ax.set(xscale="log", yscale="log", xlabel="step", ylabel="unbalanced fraction")
    ax.set_title("SGD drift from the conservation law")
    ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0))  # beside the axes
    return fig


def alpha_slider(red) -> str:
    """HTML of the reduced model's attention at each loss, for a ratio r chosen on a slider,
    beside the equal-rate curve."""
    slider_rs = np.geomspace(0.01, 100, 25)
    slider_loss = np.geomspace(1e-4, 1.0, 60)
    alpha_grid = np.array([[red.alpha_at_loss(lo, r) for lo in slider_loss] for r in slider_rs])
    alpha_equal = np.array([red.alpha_at_loss(lo, 1.0) for lo in slider_loss])
    return slider_figure(
        slider_loss,
        slider_rs,
        # the equal-rate reference first, so that the chosen r is drawn on top of it
        {"alpha at r = 1": np.tile(alpha_equal, (len(slider_rs), 1)), "alpha at r": alpha_grid},
        param="r = eta_QK / eta_OV",
        xlabel="loss reached (log scale)",
        ylabel="attention on the relevant tokens, alpha",
        colors={"alpha at r": COLORS["qk"], "alpha at r = 1": COLORS["theory"]},
        ylim=(0.0, 1.0),
        title="Reduced model: attention at a given loss, for a chosen r",
    )


def fig_rescale_key(red, runs: dict, r_eff: dict, ode_rs, alpha_table, table_losses):
    """Left: the effective ratio over training per parameterization (seeds as bands); right:
    alpha at each of ``table_losses`` against r, closed form on a fine grid, the ODE's points
    and the official code's printed values."""
    r_fine_ode = np.geomspace(1e-2, 1e2, 60)  # alpha at the table's losses on a fine grid of r
    alpha_fine = [[red.alpha_at_loss(lo, r) for r in r_fine_ode] for lo in table_losses]
    fig, axes = subplots(1, 2)
    for name in ("FAFO", "FACO", "CAFO"):
        band(axes[0], runs[name][1].steps, r_eff[name], PCOL[name], label=name)
    axes[0].axhline(1.0, color=PCOL["CACO"], label="CACO")
    axes[0].set(
        yscale="log", xlabel="step", ylabel=r"$r_{\rm eff}=\eta_{QK}g_{QK}/\eta_{OV}g_{OV}$"
    )
    axes[0].set_title("factorization rescales the rates")
    axes[0].legend(loc="center left")
    for j, lo in enumerate(table_losses):
        col = plt.get_cmap("Greys")(0.35 + 0.65 * j / (len(table_losses) - 1))
        axes[1].plot(r_fine_ode, alpha_fine[j], color=col, label=f"loss {lo:g}")
        axes[1].plot(ode_rs, alpha_table[:, j], "o", ms=3, color=col)
    code_rs = list(official.FIG4_END)
    axes[1].plot(
        code_rs,
        [official.FIG4_END[r]["alpha"] for r in code_rs],
        "x",
        ms=7,
        color=COLORS["qk"],
        mew=1.5,
        label="official code, loss 1e-4",
    )
    axes[1].set(xscale="log", xlabel=r"$r=\eta_{QK}/\eta_{OV}$", ylabel=r"$\alpha$ at a fixed loss")
    axes[1].set_title("reduced model: sharper with faster QK")
    axes[1].legend(loc="upper left")
    fig.tight_layout()
    return fig


def ratio_colors(ode_rs) -> dict:
    """One viridis colour per ratio r."""
    cmap = plt.get_cmap("viridis")
    return {r: cmap(i / (len(ode_rs) - 1)) for i, r in enumerate(ode_rs)}


def fig_ode(red, ode: dict, ode_rs):
    """The reduced dynamics over normalized time, per ratio: mu_OV, mu_QK, the loss and
    alpha."""
    rcol = ratio_colors(ode_rs)
    fig, axes = subplots(2, 2)
    titles = ("OV strength", "QK strength", "loss", "attention on the relevant tokens")
    ylabels = (r"$\mu_{OV}$", r"$\mu_{QK}$", "loss", r"$\alpha$")
    for r in ode_rs:
        mq, mo = ode[r]["sol"].y
        tau = ode[r]["sol"].t * min(r, 1.0)
        for ax, v in zip(axes.flat, (mo, mq, red.loss(mq, mo), red.alpha(mq)), strict=True):
            ax.plot(np.log10(1 + tau), v, color=rcol[r], label=f"r = {r:g}")
    for ax, title, yl in zip(axes.flat, titles, ylabels, strict=True):
        ax.set(title=title, xlabel=r"$\log_{10}(1+\tau)$", ylabel=yl)
    axes[1, 0].set_yscale("log")
    axes[0, 0].legend(loc="upper left")
    fig.tight_layout()
    return fig


def fig_ode_line(red, ode: dict, ode_rs, stop, four: dict, names):
    """Left: every trajectory against its line; middle: alpha at the stopping losses ``stop``,
    ODE and closed form; right: the four parameterizations at equal rates."""
    rcol = ratio_colors(ode_rs)
    fig, axes = subplots(1, 3)
    for r in ode_rs:
        mq, mo = ode[r]["sol"].y
        axes[0].plot(red.k(r) * mo**2, red.G(mq) - red.G(0.0), color=rcol[r], lw=3, alpha=0.6)
        axes[1].plot(stop, ode[r]["a_cf"], color=rcol[r])
        axes[1].plot(stop, ode[r]["a_ode"], "o", ms=2.5, color=rcol[r])
    xx = np.geomspace(1e-6, 1e3, 10)
    axes[0].plot(xx, xx, "--", color=COLORS["theory"], lw=0.8)
    loglog = dict(xscale="log", yscale="log", xlim=(1e-6, 1e3), ylim=(1e-6, 1e3))
    axes[0].set(xlabel=r"$k\,\mu_{OV}^2$", ylabel=r"$G(\mu_{QK})-G(0)$", title="the line", **loglog)
    axes[1].set(xscale="log", xlabel="stopping loss", ylabel=r"$\alpha$ at stop")
    axes[1].set_title("closed form vs ODE")
    axes[1].invert_xaxis()
    for name in names:
        axes[2].plot(stop, four[name], color=PCOL[name], label=name)
    axes[2].set(xscale="log", xlabel="stopping loss", ylabel=r"$\alpha$ at stop, $r=1$")
    axes[2].set_title("four parameterizations")
    axes[2].invert_xaxis()
    axes[2].legend(loc="upper left")
    fig.tight_layout()
    return fig

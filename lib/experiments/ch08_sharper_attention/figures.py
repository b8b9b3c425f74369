"""The chapter's figures: the Fig 2 heatmaps, training at equal rates, fixed attention, the
network projected onto the reduced model, the ratio sweep (the key figure and its slider)
and Shakespeare. Each returns the figure (the slider its HTML)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from ...book.interactive import slider_figure
from ...book.style import COLORS, HISTOGRAM_CMAP, PARAMETERIZATION_COLORS, band, subplots
from .. import qkov_official as official
from .. import qkov_readings as readings
from .settings import shades

PCOL = PARAMETERIZATION_COLORS  # the book's colours for FAFO, FACO, CAFO, CACO


def fig_heatmaps(syn, sim, cfg):
    """Per Fig 2 panel: the percentage of held-out samples per cell of distinct mass
    against the probability of the right token, at the matched loss."""
    stats, runs = syn.stats, syn.runs
    fig, axes = subplots(2, 3, row_height=2.5, sharex=True, sharey=True)
    panels = sim.fig2_panels.items()
    for ax, (title, (name, sel)) in zip(list(axes.flat)[:5], panels, strict=True):
        idx = readings.reading_index(
            stats[name], runs[name][1], sel, "matched loss", sim.loss_star, cfg.runs.lr
        )
        dm, pt = readings.read_samples(stats[name], sel, idx)
        H, _, _ = np.histogram2d(dm, pt, bins=[official.DISTINCT_BIN_EDGES] * 2)
        pct = 100 * H / H.sum()
        im = ax.imshow(
            pct,
            origin="lower",
            extent=(0, 1, 0, 1),
            cmap=HISTOGRAM_CMAP,
            vmin=0,
            vmax=100,
            aspect="auto",
        )
        for (i, j), v in np.ndenumerate(pct):
            if v >= 1:
                ax.text(0.1 + 0.2 * j, 0.1 + 0.2 * i, f"{v:.0f}", ha="center", va="center")
        ax.axhline(sim.uniform_mass, color=COLORS["reference"], ls="--", lw=0.8)
        ax.set_title(sim.panel_titles[title])
    for ax in axes[:, 0]:
        ax.set_ylabel("distinct mass")
    for ax in axes[1, :2]:
        ax.set_xlabel("p(right token)")
    axes[0, 2].xaxis.set_tick_params(labelbottom=True)
    axes[0, 2].set_xlabel("p(right token)")
    fig.tight_layout()
    pos = axes[1, 2].get_position()
    fig.delaxes(axes[1, 2])  # the sixth slot holds the colour bar
    cax = fig.add_axes((pos.x0 + 0.1 * pos.width, pos.y0, 0.1 * pos.width, pos.height))
    fig.colorbar(im, cax=cax, label="% of held-out samples")
    return fig


def fig_training(syn, sim):
    """Held-out loss, distinct mass and entropy over training at equal rates, seeds as
    bands."""
    fig, axes = subplots(1, 3)
    for label, (name, sel) in sim.groups.items():
        h = syn.runs[name][1]
        for ax, key in zip(axes, ("loss", "distinct", "entropy"), strict=True):
            band(ax, h.steps, syn.stats[name][key][:, sel], PCOL[label], label=label)
    axes[0].axhline(sim.loss_star, color=COLORS["theory"], ls=":", lw=1)
    axes[0].set(yscale="log", xlabel="step", ylabel="held-out loss", title="loss")
    axes[1].axhline(sim.uniform_mass, color=COLORS["theory"], ls="--", lw=1)
    axes[1].set(xlabel="step", ylabel="distinct attention mass", title="distinct tokens")
    axes[2].axhline(sim.uniform_entropy, color=COLORS["theory"], ls="--", lw=1)
    axes[2].set(xlabel="step", ylabel="attention entropy", title="entropy")
    axes[1].legend(loc="upper left")
    fig.tight_layout()
    return fig


def fig_fixed(fixed, cfg):
    """Held-out loss and the incentive to sharpen over training at every fixed alpha, for
    factorized and collapsed OV."""
    fig, axes = subplots(2, 2, row_height=2.8, sharex=True)
    ov_titles = {"factorized": "factorized OV ($W_OW_V$)", "collapsed": "collapsed OV ($W_{OV}$)"}
    for j, ov in enumerate(("factorized", "collapsed")):
        h = fixed.histories[ov]
        for i, a in enumerate(cfg.fixed.alphas):
            col = plt.get_cmap("Greys")(0.35 + 0.65 * i / (len(fixed.alphas) - 1))
            band(axes[0, j], h.steps, h["lg"][:, i, 0], col, label=f"α = {a:g}")
            band(axes[1, j], h.steps, h["lg"][:, i, 1], col)
        axes[0, j].set(title=ov_titles[ov], ylabel="loss", yscale="log")
        axes[1, j].set(xlabel="step", ylabel=r"$-\partial\mathcal{L}/\partial\alpha$")
    axes[0, 0].legend(loc="lower left")
    fig.tight_layout()
    return fig


def fig_bridge(br, syn, cfg):
    """The line in the network (one colour per ratio, fitted slopes dashed) and the
    measured distinct mass against the ansatz's."""
    R_inst, ok, dO, dG = syn.R_inst, br.ok, br.dO, br.dG
    r_all = np.unique(R_inst)
    cmap = plt.get_cmap("viridis")
    rc = {r: cmap(i / max(len(r_all) - 1, 1)) for i, r in enumerate(r_all)}
    fig, axes = subplots(1, 2)
    for k, r in enumerate(R_inst):
        fade = 1.0 if ok[k] else 0.25
        lab = f"r = {r:g}" if k % len(cfg.runs.seeds) == 0 else None
        axes[0].plot(dO[:, k], dG[:, k], "o", ms=2.5, color=rc[r], alpha=fade, label=lab)
        if ok[k]:
            axes[0].plot(dO[:, k], br.k_fit[k] * dO[:, k], "--", lw=0.8, color=rc[r])
        axes[1].plot(
            br.alpha_ansatz[:, k], br.alpha_net[:, k], "o-", ms=2.5, lw=0.6, color=rc[r], alpha=fade
        )
    axes[0].set(xlabel=r"$\mu_{OV}^2-\mu_{OV}(0)^2$", ylabel=r"$G(\mu_{QK})-G(\mu_{QK}(0))$")
    axes[0].set_title("the line in the network")
    handles, labels = axes[0].get_legend_handles_labels()
    by_r = sorted(zip(labels, handles, strict=True), key=lambda lh: float(lh[0].split("= ")[1]))
    axes[0].legend([h for _, h in by_r], [lab for lab, _ in by_r], loc="upper right")
    axes[1].plot([0, 1], [0, 1], ":", color=COLORS["theory"])
    axes[1].set(xlabel=r"ansatz $\alpha(\mu_{QK})$", ylabel="measured distinct mass")
    axes[1].set_title("attention: measured vs ansatz")
    fig.tight_layout()
    return fig


def fig_sharp_ratio(rat, syn, sim):
    """The chapter's key figure: distinct and query-copy mass with the reduced model's
    curve, and the entropy, at the matched loss against r (seeds as bands)."""
    R_inst, r_grid = syn.R_inst, syn.r_grid
    fig, axes = subplots(1, 2)
    band(
        axes[0],
        r_grid,
        readings.group_by(rat.a_r, R_inst, r_grid),
        COLORS["qk"],
        label="distinct tokens",
        marker="o",
    )
    band(
        axes[0],
        r_grid,
        readings.group_by(rat.q_r, R_inst, r_grid),
        COLORS["null"],
        label="query copies",
        marker="s",
    )
    axes[0].plot(rat.r_fine, rat.a_theory, color=COLORS["theory"], label="reduced model")
    axes[0].axhline(sim.uniform_mass, color=COLORS["null"], ls="--")
    axes[0].set(xlabel=r"$r=\eta_{QK}/\eta_{OV}$", ylabel="attention mass at matched loss")
    axes[0].set(title="faster QK, sharper attention", ylim=(0, 1.05))
    axes[0].legend(loc="upper left")
    band(axes[1], r_grid, readings.group_by(rat.H_r, R_inst, r_grid), COLORS["qk"], marker="o")
    axes[1].axhline(sim.uniform_entropy, color=COLORS["null"], ls="--")
    axes[1].set(xlabel=r"$r=\eta_{QK}/\eta_{OV}$", ylabel="attention entropy at matched loss")
    axes[1].set_title("attention entropy")
    fig.tight_layout()
    return fig


def ratio_slider(syn, sim) -> str:
    """The ratio sweep over training, seed means per ratio, as a slider (HTML): no kernel
    needed to move it."""
    C, R_inst = syn.stats["CACO"], syn.R_inst
    steps_caco = np.asarray(syn.runs["CACO"][1].steps, dtype=float)
    shown = steps_caco > 0  # a log time axis
    r_all = np.unique(R_inst)
    by_ratio = {
        "distinct mass": np.stack([C["distinct"][shown][:, R_inst == r].mean(1) for r in r_all]),
        "normalized entropy": np.stack(
            [C["entropy"][shown][:, R_inst == r].mean(1) / sim.uniform_entropy for r in r_all]
        ),
    }
    return slider_figure(
        steps_caco[shown],
        r_all,
        by_ratio,
        param="r = η_QK / η_OV",
        xlabel="SGD step",
        ylabel="attention",
        ylim=(0, 1.05),
        colors={"distinct mass": COLORS["qk"], "normalized entropy": COLORS["ov"]},
        value_format="{:g}",
        hlines={
            "distinct mass": [sim.uniform_mass] * len(r_all),
            "normalized entropy": [1.0] * len(r_all),
        },
        title="The ratio sweep over training (CACO, seed means)",
    )


def fig_shakespeare(shk, cfg):
    """Validation loss over training per QK multiplier, and attention entropy against
    validation loss per instance with each at the matched loss."""
    qk_rgb = np.array(plt.matplotlib.colors.to_rgb(COLORS["qk"]))
    # Shades of the QK colour, light to dark with the multiplier.
    tones = shades(qk_rgb, len(cfg.shk.r_grid))
    MCOL = {r: tuple(c) for r, c in zip(cfg.shk.r_grid, tones, strict=True)}
    shk_r, shk_loss, shk_target = shk.shk_r, shk.loss, shk.target
    fig, axes = subplots(1, 2)
    for r in cfg.shk.r_grid:
        sel = shk_r == r
        band(axes[0], shk.steps, shk_loss[:, sel], MCOL[r], label=f"QK × {r:g}")
        for k in np.nonzero(sel)[0]:
            axes[1].plot(shk_loss[:, k], shk.H[:, k], color=MCOL[r], lw=1)
        axes[1].scatter(
            np.full(sel.sum(), shk_target), shk.at["H"][sel], color=MCOL[r], zorder=3, s=18
        )
    axes[0].axhline(shk_target, color=COLORS["theory"], ls="--", lw=1)
    axes[0].set(xlabel="step", ylabel="validation loss (nats/char)", title="validation loss")
    axes[0].legend(loc="upper right")
    axes[1].axvline(shk_target, color=COLORS["theory"], ls="--", lw=1)
    axes[1].axhline(shk.uniform_H, color=COLORS["null"], ls=":")
    axes[1].invert_xaxis()
    axes[1].set(xlabel="validation loss (nats/char)", ylabel="attention entropy (nats)")
    axes[1].set_title("entropy as the loss falls")
    fig.tight_layout()
    return fig

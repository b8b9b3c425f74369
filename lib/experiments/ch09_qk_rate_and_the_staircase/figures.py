"""Chapter 9's figures. Each function draws one figure and returns it; the page shows it (or
glues it, the key figure)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from ...book.style import (
    COLORS,
    PARAMETERIZATION_COLORS,
    band,
    log_axes,
    ordered_colors,
    subplots,
)
from ...measure import statistics
from .readings import Matched, climbed
from .runs import ARM_NAME, ARMS, Runs
from .summary import where_counted

QK_COLOR = {
    "factorized": PARAMETERIZATION_COLORS["FACO"],
    "collapsed": PARAMETERIZATION_COLORS["CACO"],
}
ARM_COLOR = {"ov": COLORS["ov"], "stair": COLORS["theory"]}


def fig_diverge(runs: Runs, cfg):
    """The learned-OV model's runs at its fastest rate: loss and norm of W_QK over training,
    converged seeds as a band, the others dotted."""
    hist, summary, sweep = runs.hist, runs.summary, runs.sweep
    r_top = max(cfg.r_grid)
    fig, axes = subplots(2, 2, sharex=True, sharey="row")
    for j, qk in enumerate(cfg.qk_kinds):
        h, ds = hist["ov", qk], summary["ov", qk].sel(r=r_top)
        k = np.array(sweep["ov"].index(r=r_top))
        ok = ds["converged"].values
        for i, name in enumerate(("loss_all", "qk_norm")):
            ax = axes[i, j]
            if ok.any():
                band(ax, h.steps[1:], h[name][1:, k[ok]], QK_COLOR[qk], label="converged")
            for kk in k[~ok]:
                ax.plot(h.steps[1:], h[name][1:, kk], color=QK_COLOR[qk], ls=":", lw=1)
            ax.set(yscale="log")
        axes[0, j].axhline(cfg.readings.conv_frac * np.log(2), color=COLORS["null"], ls="--")
        axes[0, j].set(title=f"{qk} QK, r = {r_top:g}", ylabel="loss")
        axes[1, j].set(xlabel="Adam step", ylabel="$\\|W_{QK}\\|$")
    plt.tight_layout()
    return fig


def fig_curves(runs: Runs, cfg, run_kw: dict):
    """Bit-1 loss and R1 over training at every rate, for both models and both QK kinds."""
    hist, summary, sweep, floor = runs.hist, runs.summary, runs.sweep, runs.floor
    fig, axes = subplots(4, 2, row_height=2.0, sharex=True, sharey="row")
    colors = ordered_colors(sorted({*cfg.r_grid, *cfg.stair.r_grid}), base=COLORS["qk"])
    for m, arm in enumerate(ARMS):
        top, bottom = axes[2 * m], axes[2 * m + 1]  # bit-1 loss, R1
        for j, qk in enumerate(cfg.qk_kinds):
            h, ds, sw = hist[arm, qk], summary[arm, qk], sweep[arm]
            for r in run_kw[arm]["grid"]:
                k = np.array(sw.index(r=r))
                cnt = ds["counted"].sel(r=r).values
                for ax, name in ((top[j], "bit1"), (bottom[j], "R1")):
                    if cnt.any():
                        band(ax, h.steps[1:], h[name][1:, k[cnt]], colors[r], label=f"r = {r:g}")
                    for kk in k[~cnt]:
                        ax.plot(h.steps[1:], h[name][1:, kk], color=colors[r], ls=":", lw=0.8)
            top[j].axhline(np.log(2), color=COLORS["null"], ls=":")
            bottom[j].axhline(floor[arm, qk][1], color=COLORS["null"], ls=":")
            top[j].set(title=f"{ARM_NAME[arm]}, {qk} QK")
        top[0].set_ylabel("bit-1 loss")
        bottom[0].set_ylabel("$R_1$")
        with_legend = [ax for ax in top if ax.get_legend_handles_labels()[0]]
        if with_legend:  # one legend per model; a model with no counted rate has none
            with_legend[0].legend()
    for ax in axes[-1]:
        ax.set(xlabel="Adam step")
    plt.tight_layout()
    return fig


def fig_suppression(runs: Runs, cfg, run_kw: dict):
    """The chapter's key figure: final R1 and the share that climbs against r, per model and
    QK parameterization."""
    summary, floor = runs.summary, runs.floor
    climbs = climbed(runs)
    fig, axes = subplots(2, 2, sharex=True, sharey="row")
    for j, qk in enumerate(cfg.qk_kinds):
        for arm in ARMS:
            ds, rr = summary[arm, qk], np.array(run_kw[arm]["grid"])
            R1 = where_counted(ds, "R1")
            keep = np.isfinite(R1).any(1)
            band(
                axes[0, j],
                rr[keep],
                R1[keep],
                ARM_COLOR[arm],
                label=ARM_NAME[arm],
                marker="o",
                ms=3,
            )
            out = ~ds["counted"].values
            axes[0, j].scatter(
                np.broadcast_to(rr[:, None], out.shape)[out],
                ds["R1"].values[out],
                marker="x",
                color=ARM_COLOR[arm],
                s=18,
            )
            climb = statistics.share_band(
                climbs[arm, qk], cfg.readings.n_boot, cfg.readings.stat_seed
            )
            ok = np.isfinite(climb[:, 0])
            axes[1, j].plot(rr[ok], climb[ok, 0], color=ARM_COLOR[arm], marker="o", ms=3)
            axes[1, j].fill_between(
                rr[ok], climb[ok, 1], climb[ok, 2], color=ARM_COLOR[arm], alpha=0.2, lw=0
            )
        for arm in ARMS:
            axes[0, j].axhline(floor[arm, qk][1], color=ARM_COLOR[arm], ls=":", lw=1)
        axes[0, j].set(title=f"{qk} QK", xscale="log")
        axes[1, j].set(xlabel="$r=\\eta_{QK}/\\eta_{\\rm rest}$", ylim=(-0.05, 1.05))
    axes[0, 0].set_ylabel("final $R_1$")
    axes[1, 0].set_ylabel("share that climbs")
    axes[0, 0].legend()
    plt.tight_layout()
    return fig


def fig_escape(runs: Runs, cfg):
    """The learned-OV model's escape step, order-1 onset and leave step against r."""
    r_ov = np.array(cfg.r_grid)
    fig, axes = subplots(1, 2, sharex=True, sharey=True)
    for ax, qk in zip(axes, cfg.qk_kinds, strict=True):
        ds = runs.summary["ov", qk]
        for name, m, lab in (
            ("escape1", "o", "escape, bit 1"),
            ("onset1", "^", "onset, order 1"),
            ("leave", "s", "attention leaves uniform"),
        ):
            v = where_counted(ds, name)
            rows = ~np.isnan(v).all(1)  # the counted rates
            mid, lo, hi = (f(v[rows], 1) for f in (np.nanmedian, np.nanmin, np.nanmax))
            ok = np.isfinite(mid)
            up = np.where(np.isfinite(hi[ok]), hi[ok], mid[ok]) - mid[ok]
            ax.errorbar(
                r_ov[rows][ok],
                mid[ok],
                yerr=[mid[ok] - lo[ok], up],
                marker=m,
                color=QK_COLOR[qk],
                alpha=1 if m == "o" else 0.6,
                label=lab,
                capsize=2,
            )
        out = ~ds["counted"].values
        ax.scatter(
            np.broadcast_to(r_ov[:, None], out.shape)[out],
            ds["escape1"].values[out],
            marker="x",
            color=QK_COLOR[qk],
            s=18,
        )
        log_axes(ax, x=True).set(xlabel="$r=\\eta_{QK}/\\eta$", title=f"{qk} QK")
    axes[0].set_ylabel("Adam step")
    axes[0].legend()
    plt.tight_layout()
    return fig


def fig_theory(runs: Runs, cfg):
    """The early distance from uniform against r, with the predicted slopes."""
    r_ov = np.array(cfg.r_grid)
    fig, ax = subplots(1, 1)
    for qk, power in (("factorized", 2), ("collapsed", 1)):
        ds = runs.summary["ov", qk]
        D, cnt = ds["D_early"].values, ds["counted"].values
        rr = np.broadcast_to(r_ov[:, None], D.shape)
        ax.scatter(rr[cnt], D[cnt], color=QK_COLOR[qk], s=14, label=f"{qk} QK")
        ax.scatter(rr[~cnt], D[~cnt], color=QK_COLOR[qk], s=18, marker="x")
        if cnt.any():  # the theory's slope through the counted instances, where there are any
            c = np.exp(np.mean(np.log(D[cnt]) - power * np.log(rr[cnt])))
            ax.plot(r_ov, c * r_ov**power, color=QK_COLOR[qk], ls="--", label=f"slope {power}")
    ax.set(
        xscale="log",
        yscale="log",
        xlabel="$r$",
        ylabel=f"distance from uniform, step {cfg.readings.t_early}",
    )
    ax.legend()
    plt.tight_layout()
    return fig


def fig_tradeoff(matched: Matched, cfg):
    """R1 against the attention on the gate and its distance from uniform, at a matched loss."""
    read, r_all, qk_all = matched.read, matched.r_all, matched.qk_all
    r_color = ordered_colors(cfg.r_grid, base=COLORS["qk"])
    fig, axes = subplots(1, 2, sharey=True)
    for ax, name in zip(axes, ("gate", "attn_dist"), strict=True):
        for qk, m in (("factorized", "o"), ("collapsed", "s")):
            sel = qk_all == qk
            ax.scatter(
                read[name][sel],
                read["R1"][sel],
                c=[r_color[r] for r in r_all[sel]],
                marker=m,
                s=22,
                edgecolor=QK_COLOR[qk],
                label=f"{qk} QK",
            )
    axes[0].axvline(1 / 3, color=COLORS["null"], ls=":")
    axes[0].set(xlabel="attention on the gate", ylabel="$R_1$ at the matched loss")
    log_axes(axes[1], x=True, y=False).set(xlabel="distance from uniform")
    axes[0].legend()
    plt.tight_layout()
    return fig


def fig_shakespeare(shk, cfg):
    """The LM's onsets per signature against the QK multiplier (median, min-max bars)."""
    fig, ax = subplots(1, 1)
    mults = np.array(cfg.shk.mults)
    for n in ["next", *shk.skips]:
        v = shk.on[n].values
        ax.errorbar(
            mults,
            np.median(v, 1),
            yerr=[np.median(v, 1) - v.min(1), v.max(1) - np.median(v, 1)],
            marker="o",
            color=COLORS[n],
            label=n,
            capsize=2,
        )
    ax.set(xscale="log", yscale="log", xlabel="QK multiplier", ylabel="onset step")
    ax.legend()
    plt.tight_layout()
    return fig

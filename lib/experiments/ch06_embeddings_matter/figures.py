"""The chapter's figures; each returns the figure (the page shows or glues it)."""

from __future__ import annotations

import numpy as np

from ...book.style import COLORS, band, similarity_heatmap, subplots
from .design import A4, ARMS, ORDER, inits


def fig_e1_curves(cfg, e1):
    """E1: training accuracy of the matched twins under small and large init, seeds as bands."""
    INITS, sw1, h1 = inits(cfg), e1.sweep, e1.h
    TWIN_COLOR = {
        "plain addition": COLORS["order0"],
        "modular addition": COLORS["order1"],
        "halved sum": COLORS["contextual"],
        "T3 control": COLORS["order0"],
        "T3 gated": COLORS["order1"],
    }
    fig, axes = subplots(1, 2, sharey=True)
    x = np.maximum(e1.steps, 1)
    for ax, init in zip(axes, INITS, strict=True):
        for t in ORDER:
            ks = sw1.index(task=t, init=init)
            ls = "-" if ORDER[t] == 0 else "--"
            lw = 2.2 if t.startswith("T3") else 1.2
            band(ax, x, h1["train_acc"][:, ks], TWIN_COLOR[t], label=t, ls=ls, lw=lw)
        ax.axhline(cfg.fit_acc, color=COLORS["null"], ls=":", lw=1)
        ax.set_title(f"{init} init (γ = {INITS[init]:g})")
        ax.set_xlabel("step")
    axes[0].set_ylabel("training accuracy")
    fig.legend(
        *axes[0].get_legend_handles_labels(),
        loc="upper center",
        ncol=5,
        fontsize=8,
        bbox_to_anchor=(0.5, -0.07),
        handlelength=2.5,
        columnspacing=1.2,
    )
    return fig


def fig_e2_geometry(cfg, e2):
    """E2: cosine similarity of T1's anchor increments (seed 0), small and large init."""
    INITS = inits(cfg)
    fig, axes = subplots(1, 2, row_height=4.2)
    labels = [str(a) for a in range(1, 21)]
    for ax, init, ks in zip(axes, INITS, (e2.t1_small, e2.t1_large), strict=True):
        similarity_heatmap(
            ax,
            e2.geo[ks[0]][0].cpu().numpy(),
            labels=labels,
            title=f"{init} init (γ = {INITS[init]:g})",
            colorbar=ax is axes[1],
        )
        # row 11, column 13 (cell centres)
        ax.plot([12], [10], marker="x", color=COLORS["reference"], ms=8)
        ax.axhline(9.5, color=COLORS["reference"], lw=0.6)
        ax.axvline(9.5, color=COLORS["reference"], lw=0.6)
    return fig


def fig_e3_transplants(e3):
    """E3: training and held-out accuracy of each frozen arm, seeds as bands."""
    sw3, h3 = e3.sweep, e3.h
    ARM_COLOR = {
        "early": COLORS["small"],
        "signature": COLORS["order0"],
        "permuted": COLORS["order1"],
        "random": COLORS["null"],
    }
    ARM_LS = {"early": ":", "signature": "-", "permuted": "-", "random": "--"}
    fig, axes = subplots(1, 2, sharey=True)
    for ax, key in zip(axes, ("train_acc", "test_acc"), strict=True):
        for arm in ARMS:
            ks = sw3.index(arm=arm, frozen=True)
            x = np.maximum(h3.steps, 1)
            band(ax, x, h3[key][:, ks], ARM_COLOR[arm], label=arm, ls=ARM_LS[arm])
        ax.set_xlabel("step")
        ax.set_title(
            {"train_acc": "frozen: training accuracy", "test_acc": "frozen: held-out pairs"}[key]
        )
    axes[0].set_ylabel("accuracy")
    axes[0].legend(fontsize=8)
    return fig


def fig_e4_injection(e4, r4, R_sig_aux: float):
    """E4: the members' target-structure R and the held-out members' accuracy per arm and
    init, seeds as bands; dotted, the auxiliary signatures' own R."""
    ds4 = r4.ds
    ARM4_COLOR = {"none": COLORS["null"], "aux": COLORS["order0"], "shuffled": COLORS["order1"]}
    fig, axes = subplots(1, 2)
    x = np.maximum(e4.h.steps, 1)
    for init, ls in (("small", "-"), ("large", "--")):
        for arm in A4:
            curves = ds4.sel(arm=arm, init=init)
            band(axes[0], x, curves["R"].values, ARM4_COLOR[arm], ls=ls)
            band(
                axes[1],
                x,
                curves["held_acc"].values,
                ARM4_COLOR[arm],
                label=f"{arm}, {init} init",
                ls=ls,
            )
    axes[0].axhline(R_sig_aux, color=COLORS["theory"], lw=0.8, ls=":")
    axes[0].set_ylabel("$R_{\\cos}$ with the target groups")
    axes[1].set_ylabel("accuracy")
    axes[0].set_title("the members' embeddings")
    axes[1].set_title("held-out members")
    for ax in axes:
        ax.set_xlabel("step")
    fig.legend(
        *axes[1].get_legend_handles_labels(),
        loc="upper center",
        ncol=2,
        fontsize=8,
        bbox_to_anchor=(0.5, -0.07),
        handlelength=2.5,
    )
    return fig

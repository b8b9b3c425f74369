"""Chapter 5's figures: the staircase at two init scales beside the chain controls, and the
n-gram picture of the small-init runs."""

from __future__ import annotations

import matplotlib.pyplot as plt

from ...book.style import subplots
from .. import real_lm_stairs as rd


def fig_staircase(cfg, res):
    """The stairs of the real text at small and standard init, and the chain controls:
    each order-k chain's model against its own skip-k residual (solid), the order-(k-1)
    chain's model against the real text's (dashed)."""
    steps, emb, st, names = res.steps, res.emb, res.st, res.names
    fig, axes = subplots(1, 3, sharey=True, row_height=2.6)
    for ax, rows_, gm in (
        (axes[0], res.small, cfg.gamma),
        (axes[1], res.standard, cfg.gamma_large),
    ):
        rd.plot_alignment(ax, steps, emb, rows_, names)
        rd.mark_onsets(ax, st, rows_, names)
        ax.set_title(f"real text, γ = {gm:g}")
    for n, k in zip(names[1:], res.ks[1:], strict=True):
        rd.plot_alignment(axes[2], steps, res.own_curves[f"markov{k}"], slice(None), [n], None)
        rd.plot_alignment(axes[2], steps, emb, res.ctrl[f"markov{k - 1}"], [n], None, "--")
    axes[2].set_title("chain controls")
    axes[0].set_ylabel(r"$R_{\cos}$")
    for ax in axes:
        ax.set_xlabel("step")
    axes[0].legend(fontsize=8, loc="upper left")
    plt.tight_layout()
    return fig


def fig_ngram(res):
    """Top: KL from each k-gram predictor to the small-init models (median over seeds, the
    nearest passes marked); bottom: their first three stairs."""
    small, names = res.small, res.names
    fig, axes = subplots(2, 1, sharex=True, row_height=2.3)
    rd.plot_ngram(axes[0], res.hist, small, res.ngram["near"])
    axes[0].legend(fontsize=8, ncol=4)
    rd.plot_alignment(axes[1], res.steps, res.emb, small, names[:3])
    rd.mark_onsets(axes[1], res.st, small, names[:3])
    axes[1].set_ylabel(r"$R_{\cos}$")
    axes[1].set_xlabel("step")
    axes[1].legend(fontsize=8)
    plt.tight_layout()
    return fig

"""Chapter 1's figures: T1's order-0 signatures, T3 under four signatures (the key figure),
and the Shakespeare characters. Each function returns the figure."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from ...book.style import COLORS, similarity_heatmap, subplots
from ...data import signatures as sig


def fig_t1_signatures(t1: dict):
    """T1's label signatures of three reasoning anchors and one memory anchor, and the cosines
    of all anchors' uniform-centred signatures (:func:`~.readings.t1_order0`)."""
    phi_y = t1["phi_y"]
    fig, (ax0, ax1) = subplots(1, 2, gridspec_kw={"width_ratios": [1.4, 1]})
    labels = np.arange(t1["n_labels"])
    for a, shade in zip([11, 15, 20], [0.45, 0.7, 1.0], strict=True):
        ax0.plot(
            labels, phi_y[a], color=COLORS["order0"], alpha=shade, label=f"reasoning anchor {a}"
        )
    ax0.plot(labels, phi_y[3], color=COLORS["null"], label="memory anchor 3")
    ax0.set(xlabel=r"label $\nu$", ylabel=r"$\phi^y_a(\nu)$", xlim=(15, 165))
    ax0.legend(fontsize=8)
    similarity_heatmap(
        ax1, t1["S0"], labels=t1["anchors"], title=r"$\cos(\phi^y_a-u,\ \phi^y_b-u)$"
    )
    plt.tight_layout()
    return fig


def fig_t3_orders(t3: dict):
    """T3's anchors and gates under order 0, the contextual signature, the full order 1 and
    the anchors' interaction with the gates (:func:`~.readings.t3_orders`)."""
    A = len(t3["anchors"])
    SX_t3 = t3["SX"]
    names = [str(a) for a in t3["anchors"]] + ["g+", "g-"]
    fig, axes = subplots(2, 2, row_height=3.1)
    similarity_heatmap(axes[0, 0], t3["S0"], names, r"order 0: $\phi^y$", colorbar=False)
    similarity_heatmap(
        axes[0, 1], SX_t3 - SX_t3.mean(), names, r"contextual $\phi^X$ (minus mean)", colorbar=False
    )
    similarity_heatmap(axes[1, 0], t3["S1"], names, r"order 1: $\tilde\phi^{X|y}$", colorbar=False)
    similarity_heatmap(axes[1, 1], t3["S1_gate"], names[:A], "order 1, interaction with gates")
    fig.tight_layout()
    return fig


def fig_shakespeare_chars(text: dict, S_next: np.ndarray, context_len: int):
    """The characters' Zipf plot, the window weights of a context of ``context_len``, and the
    next-token cosines ``S_next`` of the most frequent characters
    (:func:`~.readings.shakespeare_chars`)."""
    unigram, order, Vc, chars = text["unigram"], text["order"], text["vocab"], text["chars"]
    omega = sig.window_weights(context_len).cpu().numpy()
    fig, axes = subplots(1, 3, gridspec_kw={"width_ratios": [1, 1, 1.2]})
    freq = (unigram[order] / unigram.sum()).cpu().numpy()
    axes[0].loglog(np.arange(1, Vc + 1), freq, "o", ms=3, color=COLORS["next"])
    axes[0].set(xlabel="rank", ylabel="frequency", title="unigram")
    axes[1].plot(np.arange(1, context_len + 1), omega, color=COLORS["window"])
    axes[1].set(xlabel="offset $k$", ylabel=r"$\omega_k$", yscale="log", title="window weights")
    shown = [chars.id_to_token(i).replace(" ", "␣").replace("\n", "⏎") for i in text["top"]]
    similarity_heatmap(axes[2], S_next, shown, r"$\cos(\phi^{\rm next}_s-u,\ \phi^{\rm next}_t-u)$")
    plt.tight_layout()
    return fig

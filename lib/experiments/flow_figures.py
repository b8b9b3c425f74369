"""The figure layout that the two expansion chapters (the feed-forward and the attention flow) share.

An expansion of the embedding gradient is held against autograd at initialization in one
figure: two panels over the init rate γ on top (how close the truncated expansion is to the
true gradient, and how large each term is), and across the column below the scaling test,
the relative error of the truncated expansion when every weight of a γ = 1 init is
multiplied by t, with its fitted power in the legend and the predicted power in grey.
"""

from __future__ import annotations

import matplotlib.pyplot as plt

from ..book.style import COLORS, figsize

GAMMA_LABEL = "init rate γ\n(larger γ: smaller init)"


def expansion_axes():
    """Two panels over γ on top and the scaling test across the column below (room for its
    legend): returns ``(fig, axes)`` with the three axes in that order."""
    fig = plt.figure(figsize=figsize(2, 2))
    grid = fig.add_gridspec(2, 2)
    axes = [fig.add_subplot(grid[0, 0]), fig.add_subplot(grid[0, 1]), fig.add_subplot(grid[1, :])]
    return fig, axes


def scaling_panel(ax, factors, errs, slopes, expected, colors, names, ylabel: str) -> None:
    """Draw the scaling test on ``ax``: for each key of ``errs`` (errors over ``factors``),
    the measured errors in its colour, named ``names[key]`` with the fitted power
    ``slopes[key]``, and the predicted power ``expected[key]`` as a grey dotted line."""
    for k, c in zip(errs, colors, strict=True):
        ax.loglog(factors, errs[k], "o-", color=c, label=f"{names[k]} ({slopes[k]:.2f})")
        ax.loglog(
            factors,
            errs[k][0] * (factors / factors[0]) ** expected[k],
            ls=":",
            color=COLORS["null"],
        )
    ax.set(xlabel="weight scale factor $t$", ylabel=ylabel, title="scaling test")
    ax.set_xticks(factors, [f"{t:g}" for t in factors])
    ax.xaxis.set_minor_formatter(plt.NullFormatter())
    ax.legend(title="(fitted power)", loc="lower right", ncol=2)

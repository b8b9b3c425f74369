"""The chapter's key figure: the escape of each arm as survival (Kaplan–Meier)."""

from __future__ import annotations

import numpy as np

from ...book.style import COLORS, subplots
from .readings import ARMS

# Each arm's colour and line: QK colour for learned, OV for frozen at a standard scale.
LINES = {
    "learned": (COLORS["qk"], "-"),
    "learned 0.5": (COLORS["qk"], "--"),
    "frozen 0.5": (COLORS["ov"], "--"),
    "frozen 0.75": (COLORS["ov"], ":"),
    "frozen": (COLORS["order0"], "-"),
    "uniform": (COLORS["null"], "-"),
}


def fig_escape(esc: dict):
    """Per arm, the share of seeds still on the plateau against the Adam step, censored
    (marked |) at the arm's horizon. Returns the figure."""
    fig, ax = subplots(1, 1)
    for name, label in ARMS.items():
        color, ls = LINES[name]
        t, horizon = esc["times"][name], esc["horizons"][name]
        done = np.sort(t[np.isfinite(t)])
        alive = 1 - np.arange(1, len(done) + 1) / len(t)  # no censoring before the horizon
        ax.step(
            np.r_[1, done, horizon],
            np.r_[1, alive, alive[-1] if len(done) else 1],
            where="post",
            color=color,
            ls=ls,
            label=label,
        )
        ax.plot([horizon], [alive[-1] if len(done) else 1], "|", color=color, ms=10)
    ax.set(
        xscale="log", xlabel="Adam step", ylabel="share still on the plateau", ylim=(-0.03, 1.05)
    )
    ax.legend(loc="lower left")
    return fig

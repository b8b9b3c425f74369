"""The chapter's figures (each function returns its figure) and the staircase explorer's
sliders."""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import numpy as np

from ...book.interactive import slider_figure
from ...book.style import COLORS, band, figsize, log_axes, subplots
from .names import ATTN, ATTN_LARGE, CONTROL, MLP2, MLP3, ORDER_COLOR, init_words

PANEL_HEIGHT = 2.9  # inches per row of panels: R_j above, the sign-bit losses below


def draw_arm(top, bottom, run, gamma: float, title: str, legend: bool = True) -> None:
    """One arm of a staircase run, seeds as bands: the partial alignments R_j against their
    noise floors (dotted) on ``top``, the sign-bit losses against ln 2 (dashed) on
    ``bottom``. Step 0 is left out (it cannot sit on the log axis)."""
    steps, m = run.arm(gamma)
    for o in run.targets.orders:
        band(top, steps[1:], m[f"R{o}"][1:], ORDER_COLOR[o], label=f"$R_{o}$")
        top.axhline(run.floor[o], color=ORDER_COLOR[o], ls=":", lw=1)
        if o > 0:
            band(bottom, steps[1:], m[f"bit{o}"][1:], ORDER_COLOR[o], label=f"bit {o}")
    bottom.axhline(math.log(2), color=COLORS["null"], ls="--", lw=0.8)
    top.set(ylim=(-0.4, 1.05), title=title, ylabel="$R_j$")
    bottom.set(xlabel="Adam step", ylabel="bit loss", ylim=(0, 1.0))
    if legend:
        top.legend(loc="lower right", ncol=len(run.targets.orders), handlelength=1.2)
        bottom.legend(loc="lower left", ncol=2, handlelength=1.2)


def staircase_figure(rows):
    """A figure of staircase arms for the page's column: one row per run, titled by its
    name, with one panel (R_j above, the bit losses below) per arm that was run.

    ``rows``: a list of ``(row title, [(run, gamma, panel title), ...])``."""
    size = figsize(ncols=2, nrows=len(rows), row_height=PANEL_HEIGHT)  # the column's width
    fig = plt.figure(figsize=size, layout="constrained")
    subs = np.atleast_1d(fig.subfigures(len(rows), 1))
    for sub, (name, arms) in zip(subs, rows, strict=True):
        if name:
            sub.suptitle(name)
        cells = np.atleast_1d(sub.subfigures(1, len(arms)))
        for k, (cell, (run, gamma, title)) in enumerate(zip(cells, arms, strict=True)):
            top, bottom = cell.subplots(2, 1, sharex=True, height_ratios=(2, 1))
            draw_arm(top, bottom, run, gamma, title, legend=k == 0)
    return fig


def fig_key_staircase(runs: dict, large_of: dict, gamma: float, gamma_large: float):
    """The chapter's key figure: the three-stair Emb-MLP at small init, beside the same at
    large init where that arm is run, else the two-stair Emb-MLP at large init."""
    key_large = MLP3 if MLP3 in large_of else MLP2
    key_task = {MLP3: "three stairs", MLP2: "two stairs"}
    small = (runs[MLP3], gamma, f"{init_words(gamma, gamma)}, {key_task[MLP3]}")
    large = (
        runs[key_large],
        gamma_large,
        f"{init_words(gamma_large, gamma)}, {key_task[key_large]}",
    )
    return staircase_figure([("Emb-MLP", [small, large])])


def fig_staircase(runs: dict, large_of: dict, gamma: float, gamma_large: float):
    """Every Emb-MLP run, one row each, one panel per initialization it was run at."""
    arms = lambda name, rates: [(runs[name], x, init_words(x, gamma)) for x in rates if x]
    return staircase_figure(
        [
            (MLP2, arms(MLP2, [gamma, gamma_large])),
            (MLP3, arms(MLP3, [gamma, large_of.get(MLP3, (None, None))[1]])),
            ("Emb-MLP, two stairs, shuffled labels (control)", arms(CONTROL, [gamma])),
        ]
    )


def fig_staircase_attn(runs: dict, gamma: float, gamma_large_attn: float):
    """The attention model at small init (every seed's copies in one band) and at large."""
    init_small = init_words(gamma, gamma)
    small = (runs[ATTN], gamma, f"{init_small}, every copy")
    large = (runs[ATTN_LARGE], gamma_large_attn, init_words(gamma_large_attn, gamma))
    return staircase_figure([(ATTN, [small, large])])


def fig_sweep(sw_on: dict, sw_esc: np.ndarray, sweep_gammas):
    """The gamma sweep: the onsets of orders 0 and 1 (left) and bit 1's escape (right), seeds
    as bands; a stair that never came has no point."""
    fig, axes = subplots(1, 2)
    curves = [(axes[0], sw_on[o], o, f"onset, order {o}") for o in sw_on]
    curves.append((axes[1], sw_esc, 1, "escape, bit 1"))
    for ax, steps, o, label in curves:
        finite = np.where(np.isfinite(steps), steps, np.nan)  # a stair that never came: no point
        band(ax, sweep_gammas, finite, ORDER_COLOR[o], label=label, log_x=False, marker="o")
    for ax in axes:
        log_axes(ax).set(xlabel=r"$\gamma$ (larger: smaller init)", ylabel="Adam step")
        ax.legend()
    return fig


def explorer(run, gammas) -> dict:
    """The staircase explorer's data, from a run's own arms: the steps (step 0 left out, for
    the log axis), ``curves[name]`` of shape ``(len(gammas), n_steps)`` (the seed medians of
    each ``R_j`` and of each bit's sign-bit loss over ln 2) and ``hlines`` (the run's floor
    of each ``R_j``, the same at every gamma)."""
    orders = run.targets.orders
    arms = [run.arm(gamma)[1] for gamma in gammas]
    curves = {f"R{o}": np.stack([np.median(m[f"R{o}"][1:], 1) for m in arms]) for o in orders}
    for o in orders[1:]:
        bits = [np.median(m[f"bit{o}"][1:], 1) / math.log(2) for m in arms]
        curves[f"bit-{o} loss / ln 2"] = np.stack(bits)
    colors = {f"R{o}": ORDER_COLOR[o] for o in orders}
    colors |= {
        f"bit-{o} loss / ln 2": COLORS["theory" if o == 1 else "traceback"] for o in orders[1:]
    }
    hlines = {f"R{o}": [float(run.floor[o])] * len(gammas) for o in orders}
    x = np.asarray(run.history.steps[1:], dtype=float)
    return dict(x=x, values=list(gammas), curves=curves, colors=colors, hlines=hlines)


def explorers(runs: dict, sweep_gammas, three_gammas, gamma: float) -> list[str]:
    """The staircase explorer's sliders (HTML), one per Emb-MLP run that was run at more than
    one gamma (a slider moves), each starting at ``gamma``."""
    out = []
    explored = ((MLP2, sweep_gammas), (MLP3, sorted(three_gammas)))
    for name, gammas_run in [(n, gs) for n, gs in explored if len(gs) > 1]:
        data_x = explorer(runs[name], gammas_run)
        start = data_x["values"].index(gamma) if gamma in data_x["values"] else None
        html = slider_figure(
            data_x["x"],
            data_x["values"],
            data_x["curves"],
            param="γ (larger: smaller init)",
            xlabel="Adam step",
            ylabel="R_j; bit loss / ln 2",
            colors=data_x["colors"],
            hlines=data_x["hlines"],
            ylim=(-0.4, 1.05),
            value_format="{:g}",
            start=start,
            title=name,
        )
        out.append(html)
    return out

"""The report's figures: each chapter's claims by category, and the book's opening figure
(the staircase and sharper attention, from the curves two chapters kept)."""

from __future__ import annotations

import numpy as np

from ...book import claims
from ...book.style import COLORS, STATUS_COLORS, band, log_axes, subplots
from .gather import Gathered, chapter_title

# The chapters whose kept curves draw the book's opening figure (Ledger.keep).
STAIRCASE_CHAPTER = "02_context_staircase"
SHARPENING_CHAPTER = "08_sharper_attention"


def not_drawn_figure(failed: list[str]):
    """In place of the book's opening figure when a chapter it reads failed to run."""
    fig, ax = subplots(row_height=1.2)
    ax.axis("off")
    ax.text(
        0.5,
        0.5,
        "not drawn: " + ", ".join(chapter_title(c) for c in failed) + " failed to run",
        ha="center",
        va="center",
    )
    return fig


def book_figure(stair: dict, sharp: dict):
    """The book's opening figure: left, the context staircase (the Emb-MLP's alignments
    R0, R1, R2 with the three signature orders, seeds as bands, against their floors);
    right, the attention mass on the relevant tokens at a matched loss against the QK/OV
    rate ratio r (seeds as points and their mean), with the reduced ODE's prediction."""
    fig, (a, b) = subplots(1, 2)
    steps = stair["stair_steps"]
    for o in (0, 1, 2):
        color = COLORS[f"order{o}"]
        band(a, steps, stair[f"stair_R{o}"], color, label=f"order {o}")
        a.axhline(float(stair[f"stair_floor{o}"]), color=color, ls=":", lw=1)
    a.set(
        xlabel="Adam step",
        ylabel="alignment $R_j$ with order $j$",
        ylim=(-0.2, 1.05),
        title=f"the staircase (small init, γ = {float(stair['stair_gamma']):g})",
    )
    a.legend(loc="upper left")
    r, mass = np.asarray(sharp["sharp_r"]), np.asarray(sharp["sharp_mass"])
    for k in range(mass.shape[1]):
        b.plot(r, mass[:, k], "o", ms=3, color=COLORS["qk"], alpha=0.45)
    b.plot(r, np.nanmean(mass, 1), "-", color=COLORS["qk"], label="network, seed mean")
    b.plot(
        sharp["sharp_theory_r"],
        sharp["sharp_theory_alpha"],
        "--",
        color=COLORS["theory"],
        label="reduced ODE",
    )
    b.axvline(1.0, color=COLORS["null"], lw=0.8)
    b.set(
        xlabel="QK/OV learning-rate ratio r",
        ylabel="attention on relevant tokens",
        title=f"sharper attention (matched loss {float(sharp['sharp_loss']):.2g})",
    )
    log_axes(b, x=True, y=False)
    b.legend(loc="upper left")
    fig.tight_layout()
    return fig


def status_figure(book: Gathered):
    """Per chapter, its claims as stacked bars by category. Returns the figure."""
    chapters, titles = book.chapters, book.titles
    fig, ax = subplots(row_height=0.3 * len(chapters) + 0.9)
    left = np.zeros(len(chapters))
    for s in claims.CATEGORIES:
        n = book.by_chapter[s].to_numpy()
        ax.barh([titles[c] for c in chapters], n, left=left, color=STATUS_COLORS[s], label=s)
        left += n
    ax.invert_yaxis()
    ax.set(xlabel="claims")
    ax.legend(ncols=3, loc="lower left", bbox_to_anchor=(0, 1))
    return fig


def opening_figure(book: Gathered):
    """The book's opening figure (:func:`book_figure`), or a note of the chapters it reads
    that failed to run (:func:`not_drawn_figure`)."""
    gone = sorted({STAIRCASE_CHAPTER, SHARPENING_CHAPTER} & set(book.failed))
    if gone:
        return not_drawn_figure(gone)
    return book_figure(
        claims.load_curves(STAIRCASE_CHAPTER), claims.load_curves(SHARPENING_CHAPTER)
    )

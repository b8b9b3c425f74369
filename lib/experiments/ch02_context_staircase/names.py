"""The chapter's runs by name, the short names of their glue keys, and the colour of each
order (the same in every staircase figure)."""

from __future__ import annotations

from ...book.style import COLORS

MLP2 = "Emb-MLP, two stairs"
CONTROL = "control: shuffled labels"
ATTN = "attention, two stairs"  # small init, an ensemble of copies per seed
ATTN_LARGE = "attention, two stairs, large init"
MLP3 = "Emb-MLP, three stairs"
SHORT = {MLP2: "mlp2", ATTN: "attn", ATTN_LARGE: "attn_large", MLP3: "mlp3"}
ORDER_COLOR = {0: COLORS["order0"], 1: COLORS["order1"], 2: COLORS["order2"]}
TASK_OF = {MLP2: "two-stair", MLP3: "three-stair"}  # the stability table's words


def with_gammas(grid, *gammas) -> tuple:
    """``grid`` with each of ``gammas`` that it lacks appended, in order: the rates a run
    trains so that every arm the chapter reads is in it. A grid that holds them all comes
    back as it is (the book's runs do not change); a try that sets ``gamma`` off the grid
    gets that rate as one more instance of the same batched run."""
    grid = tuple(grid)
    return grid + tuple(rate for rate in dict.fromkeys(gammas) if rate not in grid)


def init_words(gamma: float, small: float) -> str:
    """A panel's title for an arm: ``small init (γ = 1)`` or ``large init (γ = 0.3)``; in
    this book a larger gamma is a smaller init."""
    return f"{'small' if gamma == small else 'large'} init (γ = {gamma:g})"

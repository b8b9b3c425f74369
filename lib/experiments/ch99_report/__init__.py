"""The verdict: the reproduction report gathers every chapter's claims; it trains nothing.

Its opening table sets the papers' numbers beside ours for the book's headline claims
(:data:`HEADLINES`). Where the official QK/OV code saved an output, the paper's column is
that output (:mod:`lib.experiments.qkov_official`, each value with the notebook and commit
it was read from); the Context Staircase paper's text is not public, so its column says
what its abstract states. The package's modules:

- ``headlines``: the headline claims, the papers' numbers and the opening table's rows;
- ``gather``: the chapters' saved claims, marked against the reference run, and the
  verdict's counts;
- ``figures``: each chapter's claims by category, and the book's opening figure.
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import ChapterConfig, exported, lazy_exports

EXPORTS = {
    "figures": (
        "SHARPENING_CHAPTER",
        "STAIRCASE_CHAPTER",
        "book_figure",
        "not_drawn_figure",
        "opening_figure",
        "status_figure",
    ),
    "gather": (
        "Gathered",
        "changed_table",
        "chapter_folds",
        "chapter_title",
        "failed_chapters",
        "gather",
        "run_line",
        "verdict_glue",
    ),
    "headlines": (
        "ABSTRACT",
        "FIG2_PANELS",
        "HEADLINES",
        "NOT_RUN",
        "OURS",
        "Headline",
        "headline_glue",
        "headline_rows",
        "headlines",
    ),
}
__getattr__, __dir__ = lazy_exports(__name__, EXPORTS)

__all__ = [
    "CHAPTER",
    "Config",
    "OVERRIDES",
    *exported(EXPORTS),
]

CHAPTER = "99_report"


@dataclass(frozen=True)
class Config(ChapterConfig):
    """The report has no experiment constants; it reads the claims the chapters saved."""


OVERRIDES: dict = {}

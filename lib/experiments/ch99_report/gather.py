"""The claims the chapters saved, gathered once for the report: which chapters ran, their
claims marked where the reference run differs, and the verdict's counts."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

import pandas as pd

from ...book import claims, reference, report
from ...book.page import counts_line
from ...env import FAILED_ENV


def failed_chapters() -> dict[str, str]:
    """``{chapter: why}`` of the chapters that failed in this build (``make book`` passes
    them to the report; under ``make test`` none is passed, and a missing chapter fails)."""
    return json.loads(os.environ.get(FAILED_ENV, "") or "{}")


def run_line(chapters, failed: dict[str, str], scale: str) -> str:
    """One sentence for the first page: every chapter ran, or which did not."""
    if not failed:
        return f"All {len(chapters)} chapters ran to the end at BOOK_SCALE={scale}."
    names = ", ".join(f"{chapter_title(c)} ({why.split(':', 1)[0]})" for c, why in failed.items())
    return (
        f"{len(failed)} of {len(chapters)} chapters failed to run at BOOK_SCALE={scale}: "
        f"{names}. Their pages show the cells that ran, under a banner; the findings "
        "below that come from them read as not run."
    )


def chapter_title(stem: str) -> str:
    """``07_rescaling_and_reduced_dynamics`` -> ``7 rescaling and reduced dynamics``."""
    number, _, name = stem.partition("_")
    return f"{number.lstrip('0')} {name.replace('_', ' ')}"


@dataclass
class Gathered:
    """The book's claims at one scale: the chapters in the table of contents, those that
    failed (``{chapter: why}``) and those that ran, their claims, the counts by category
    (all and per chapter), the claims whose status differs from the reference run's, and
    each chapter's title."""

    scale: str
    chapters: list[str]
    failed: dict[str, str]
    ran: list[str]
    records: list
    counts: dict
    changed: list
    by_chapter: pd.DataFrame
    titles: dict[str, str]


def gather(scale: str) -> Gathered:
    """Every chapter's saved claims, marked against the reference run at ``scale``; raises,
    naming every chapter that ran but whose claims are missing."""
    chapters = claims.book_chapters()  # from _toc.yml
    failed = failed_chapters()  # those that failed in this build (make book); none in make test
    ran = [c for c in chapters if c not in failed]
    records = claims.load(ran)
    reference.mark(records, scale)  # where a status differs from the reference run's
    counts = claims.category_counts(records)
    changed = [c for c in records if c.reference]
    by_chapter = report.counts_by_chapter(records, chapters)
    titles = {c: chapter_title(c) for c in chapters}
    return Gathered(scale, chapters, failed, ran, records, counts, changed, by_chapter, titles)


def verdict_glue(book: Gathered) -> dict:
    """The verdict line's numbers: the scale, the chapters, the counts in words, whether
    every chapter ran, and how many claims differ from the reference run."""
    return dict(
        scale=book.scale,
        n_chapters=len(book.chapters),
        book_line=counts_line(book.counts),
        run_line=run_line(book.chapters, book.failed, book.scale),
        n_changed=len(book.changed),
        changed_line=f"{len(book.changed)} of {len(book.records)}",
    )


def chapter_folds(book: Gathered) -> str:
    """Markdown: one fold per chapter with its claims."""
    return report.chapter_folds(book.records, book.chapters, book.titles)


def changed_table(book: Gathered) -> str:
    """Markdown: the claims whose status differs from the reference run's, as a table, or
    one sentence where none does."""
    return (
        "\n".join(
            [
                "| chapter | claim | tier | here | reference |",
                "|---|---|---|---|---|",
                *(
                    f"| {c.chapter.split('_', 1)[0]} | {c.text.replace('|', '/')} ({{ref}}`{c.section}`) "
                    f"| {c.tier} | {c.status} | {c.reference} |"
                    for c in book.changed
                ),
            ]
        )
        if book.changed
        else "Every claim has the reference run's status."
    )

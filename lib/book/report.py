"""The reproduction report's tables: every claim by chapter, folded, and the counts of
each chapter's claims by tier and status (the book's one counting rule,
:func:`lib.book.claims.category`)."""

from __future__ import annotations

from collections.abc import Sequence

from . import claims
from .page import counts_line


def chapter_folds(
    rows: Sequence[claims.Claim], chapters: Sequence[str], titles: dict[str, str]
) -> str:
    """Every claim, one closed fold per chapter (MyST ``dropdown``), each titled with the
    chapter and its counts (:func:`counts_line`), holding its :func:`claims_table`."""
    out = []
    for ch in chapters:
        mine = [c for c in rows if c.chapter == ch]
        if not mine:
            continue
        title = f"{titles.get(ch, ch)}: {counts_line(claims.category_counts(mine))}"
        out += [
            f"::::{{dropdown}} {title}",
            claims.claims_table(mine, chapter_column=False),
            "::::",
            "",
        ]
    return "\n".join(out)


def counts_by_chapter(rows: Sequence[claims.Claim], chapters: Sequence[str]):
    """How many claims each chapter has in each category (the book's one counting rule,
    :func:`category`): a DataFrame indexed by chapter stem (in the order of ``chapters``),
    with the columns ``claims`` (all) and one per category (:data:`CATEGORIES`), which add
    up to ``claims``. Raises :class:`ClaimError` for a claim of a chapter not in
    ``chapters``."""
    import pandas as pd

    unknown = sorted({c.chapter for c in rows} - set(chapters))
    if unknown:
        raise claims.ClaimError(f"claims of chapters not in the list: {unknown}")
    cols = ["claims", *claims.CATEGORIES]
    table = pd.DataFrame(0, index=pd.Index(list(chapters), name="chapter"), columns=cols)
    for c in rows:
        table.loc[c.chapter, ["claims", claims.category(c)]] += 1
    return table


def counts_table(counts) -> str:
    """:func:`counts_by_chapter` as a MyST Markdown table: each chapter linked to its page,
    and a last row with the totals."""
    cols = list(counts.columns)
    lines = ["| chapter | " + " | ".join(cols) + " |", "|---|" + "---:|" * len(cols)]
    for stem, row in counts.iterrows():
        lines.append(
            f"| {{doc}}`/chapters/{stem}` | " + " | ".join(str(int(row[c])) for c in cols) + " |"
        )
    total = counts.sum()
    lines.append("| all | " + " | ".join(f"**{int(total[c])}**" for c in cols) + " |")
    return "\n".join(lines)


def claims_list(rows: Sequence[claims.Claim]) -> str:
    """A MyST bullet list of claims: the chapter's number, the claim linked to its section,
    its status and the seeds (or cases) in which it held."""
    return "\n".join(
        f"* {c.chapter.split('_', 1)[0]}: {c.text} ({{ref}}`{c.section}`): "
        f"*{claims._status_cell(c)}*, held {claims._held(c)}"
        for c in rows
    )

"""The book's claims: each chapter checks and records them; the report page gathers them.

A chapter ends with a :class:`Ledger`. Each :meth:`Ledger.check` states one claim of the
chapter, the section that shows it, its honesty label, the chapter's own verdict, and
the measured evidence: whether the claim held in each seed, and the number that was
measured (per seed). The status is then *computed* from the evidence by one rule
(:func:`status`), and ``check`` asserts that it equals the chapter's verdict, so a page
can only say "reproduced" while its numbers do. :meth:`Ledger.finish` (or
:meth:`Ledger.save`) writes the claims as
JSON into ``BOOK_CLAIMS_DIR``, from which the reproduction report builds its table and
fails when a chapter's claims are missing.

The status rule: a claim that held in every seed is *reproduced* (a claim labelled NEW:
a *new result*); one that held in some seeds but not all, or only on the seed mean, is
*partly* reproduced; one that held in no seed is *not reproduced*.

The verdict ``"as measured"`` (:data:`AS_MEASURED`) means *reported, not asserted*: the
claim's status is computed from its evidence as for any other, shown, and counted apart
(:data:`REPORTED`), but no verdict is checked against it. The value stays
``"as measured"`` in the claims JSON, where the report reads it; the pages and tables
call it "reported, not asserted".

A try run (``make try``, :mod:`lib.book.trying`), whose settings are a reader's own, asserts
no verdict either: a claim whose status misses its verdict is recorded ``as measured``, the
verdict kept in ``try_verdict``, and the run ends with a table of them.

In the smoke mode (``BOOK_SMOKE=1``, :mod:`lib.env`), whose training runs make two steps,
:meth:`Ledger.check` asserts no verdict. Every claim is still checked for its form and
recorded with the status its two-step numbers give, marked ``smoke: true``. A claim whose
status is not the chapter's verdict is recorded ``as measured`` (reported, not asserted,
as the chapters and the report already read that verdict), with the chapter's verdict kept
in ``smoke_verdict``; the tables say so. Nothing is faked: a claim that did not hold is
recorded as not holding.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from ..env import smoke, trying
from .page import MISSING

LABELS = {"paper": "FROM THE PAPER", "recon": "RECONSTRUCTED", "new": "NEW"}
STATUSES = ("reproduced", "partly", "not reproduced", "new result")
AS_MEASURED = "as measured"  # reported, not asserted: the status is recorded, not checked
ENV = "BOOK_CLAIMS_DIR"


class ClaimError(AssertionError):
    """A claim whose computed status differs from the chapter's verdict, or a bad record."""


def status(label: str, holds: Sequence[bool]) -> str:
    """The status of a claim from whether it held in each seed (the rule above)."""
    if label not in LABELS:
        raise ClaimError(f"unknown label {label!r}; use one of {sorted(LABELS)}")
    h = [bool(x) for x in holds]
    if not h:
        raise ClaimError("a claim needs evidence: at least one seed")
    if all(h):
        return "new result" if label == "new" else "reproduced"
    return "partly" if any(h) else "not reproduced"


def claims_dir() -> Path:
    """Where chapters write their claims: ``BOOK_CLAIMS_DIR``, else ``build/claims``."""
    raw = os.environ.get(ENV, "").strip()
    return Path(raw) if raw else Path(__file__).resolve().parents[2] / "build" / "claims"


def _finite(x) -> float | None:
    x = float(x)
    return x if math.isfinite(x) else None


@dataclass
class Claim:
    id: str
    chapter: str
    text: str
    label: str
    section: str
    verdict: str
    holds: list[bool]
    values: list[float | None] = field(default_factory=list)
    unit: str = ""
    smoke: bool = False  # recorded by a smoke run (two training steps): not asserted
    smoke_verdict: str = ""  # a smoke run's claim that missed its verdict: the verdict
    try_verdict: str = ""  # a try run's claim that missed its verdict (lib.book.trying)

    @property
    def status(self) -> str:
        return status(self.label, self.holds)

    def summary(self) -> str:
        """The measured number with its spread over seeds, e.g. ``0.81 [0.74, 0.86]`` (the
        mean, then the smallest and largest seed), through the book's formatter."""
        from .page import interval, number

        v = [x for x in self.values if x is not None]
        if not v:
            return ""
        if len(v) == 1:
            return number(v[0], unit=self.unit)
        return interval(float(np.mean(v)), min(v), max(v), unit=self.unit)


FULL = {"paper": "reproduced", "recon": "reproduced", "new": "new result"}


class Ledger:
    """The claims one chapter checks, in order.

    The compact form, one line per claim after the group is set::

        claims = Ledger(ex.CHAPTER)
        claims.section("sec-stair-staircase", label="new")
        claims.check("climb", "every stair comes, in order", holds=per_seed, values=onsets)
        ...
        claims.finish()  # saves the ledger, glues the counts, shows the table

    A claim's verdict defaults to the full status of its label (*reproduced*, or *new
    result* for NEW); pass ``verdict=`` where the chapter states less.
    """

    def __init__(self, chapter: str):
        self.chapter = chapter
        self.claims: list[Claim] = []
        self.curves: dict[str, list] = {}
        self._section: str | None = None
        self._label: str | None = None

    def section(self, section: str, label: str | None = None) -> Ledger:
        """Set the section (its MyST label) and the honesty label of the claims that follow."""
        if label is not None and label not in LABELS:
            raise ClaimError(f"unknown label {label!r}; use one of {sorted(LABELS)}")
        self._section = section
        if label is not None:
            self._label = label
        return self

    def check(
        self,
        id: str,
        text: str,
        *,
        holds,
        values=(),
        unit: str = "",
        verdict: str | Sequence[str] | None = None,
        label: str | None = None,
        section: str | None = None,
    ) -> Claim:
        """Record a claim and assert that its computed status is ``verdict``.

        ``label`` and ``section`` default to those set by :meth:`section`; ``verdict`` to
        the full status of the label (:data:`FULL`).

        ``verdict`` may be a tuple of statuses when the chapter's claim allows either (for
        example "in every seed but at most one": ``("reproduced", "partly")``), so that it
        holds at every scale; the prose must say the same.

        ``verdict="as measured"`` records a comparison that the chapter reports without
        asserting (one whose outcome is the finding, e.g. a bin on a boundary): the
        report shows its computed status, marked as not asserted.

        ``holds``: whether the claim held, one bool per seed (or a single bool);
        ``values``: the measured number behind it, per seed (or one number);
        ``section``: the MyST label of the section that shows it.
        """
        label = label if label is not None else self._label
        section = section if section is not None else self._section
        if label is None or section is None:
            raise ClaimError(f"{id}: no label or section; call Ledger.section(...) first")
        if verdict is None:
            verdict = FULL.get(label, "reproduced")
        allowed = (verdict,) if isinstance(verdict, str) else tuple(verdict)
        if not allowed or any(v not in (*STATUSES, AS_MEASURED) for v in allowed):
            raise ClaimError(f"{id}: verdict {verdict!r} is not one of {STATUSES + (AS_MEASURED,)}")
        if any(c.id == id for c in self.claims):
            raise ClaimError(f"{self.chapter}: claim {id!r} is checked twice")
        holds = [bool(x) for x in np.atleast_1d(np.asarray(holds, dtype=bool))]
        vals = [_finite(x) for x in np.atleast_1d(np.asarray(values, dtype=float))]
        claim = Claim(
            id, self.chapter, text, label, section, " or ".join(allowed), holds, vals, unit
        )
        if smoke():  # two-step runs: record what they give, assert nothing
            claim.smoke = True
            if AS_MEASURED not in allowed and claim.status not in allowed:
                claim.smoke_verdict, claim.verdict = claim.verdict, AS_MEASURED
        elif trying():  # a reader's own settings: record what no longer holds, stop nothing
            if AS_MEASURED not in allowed and claim.status not in allowed:
                claim.try_verdict, claim.verdict = claim.verdict, AS_MEASURED
        elif AS_MEASURED not in allowed and claim.status not in allowed:
            raise ClaimError(
                f"{self.chapter}, claim {id!r}: the measurements say {claim.status!r} "
                f"(held in {sum(holds)} of {len(holds)} seeds), the chapter says {verdict!r}. "
                "Fix the chapter's verdict and prose to match what was measured."
            )
        self.claims.append(claim)
        return claim

    def keep(self, **curves) -> Ledger:
        """Keep a few curves of the chapter's key figure (numbers or arrays of numbers;
        NaN kept as ``None``) beside its claims, for the book's opening figure, which the
        report draws from them (:func:`load_curves`)."""
        for name, v in curves.items():
            a = np.asarray(v, dtype=float)
            self.curves[name] = np.where(np.isfinite(a), a.astype(object), None).tolist()
        return self

    def held(self, *ids: str) -> bool:
        """Whether each named claim is asserted (not *as measured*) and held in every seed.

        A chapter ends with ``assert claims.held(<its headline claims>)``: the claims its
        opening box states without qualification. Unknown ids raise :class:`ClaimError`.

        In the smoke mode nothing is asserted, as in :meth:`check`: the ids are checked and
        a claim recorded by the smoke run counts, whether or not its two-step numbers held
        (the ledger keeps what they gave).
        """
        known = {c.id: c for c in self.claims}
        missing = [i for i in ids if i not in known]
        if missing or not ids:
            raise ClaimError(f"{self.chapter}: no claim {missing or 'named'} in this ledger")
        return all(
            known[i].smoke or trying() or (known[i].verdict != AS_MEASURED and all(known[i].holds))
            for i in ids
        )

    def counts(self) -> dict[str, int]:
        """How many claims fall in each category (:func:`category`): ``n`` (all), then
        ``reproduced``, ``new``, ``partly``, ``not_reproduced`` and ``reported``."""
        return category_counts(self.claims)

    def finish(self, directory: Path | None = None):
        """End the chapter: save the ledger, glue its counts as ``claims_<key>`` (keys of
        :meth:`counts`) and the sentence of them as ``claims_line`` (:func:`counts_line`),
        and return the claims table."""
        from IPython.display import Markdown

        from .page import glue_all

        self.save(directory)
        glue_all(self.counts(), prefix="claims_")
        glue_all({"claims_line": counts_line(self.counts())})
        return Markdown(self.markdown())

    def markdown(self, link: bool = True) -> str:
        """The chapter's claims table (MyST Markdown): claim, label, status, measurement."""
        return claims_table(self.claims, link=link, chapter_column=False)

    def save(self, directory: Path | None = None) -> Path:
        """Write this chapter's claims to ``<directory>/<chapter>.json`` (atomically)."""
        if not self.claims:
            raise ClaimError(f"{self.chapter} records no claims")
        d = Path(directory) if directory is not None else claims_dir()
        d.mkdir(parents=True, exist_ok=True)
        path = d / f"{self.chapter}.json"
        if self.curves:
            _write(d / f"{self.chapter}{CURVES}", json.dumps(self.curves))
        _write(path, json.dumps([asdict(c) for c in self.claims], indent=1))
        return path


CURVES = ".curves.json"  # a chapter's kept curves, beside its claims (Ledger.keep)


def _write(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def load_curves(chapter: str, directory: Path | None = None) -> dict[str, np.ndarray]:
    """The curves ``chapter`` kept (:meth:`Ledger.keep`), as float arrays (``None`` read as
    NaN); raises :class:`ClaimError` naming the file when the chapter kept none."""
    d = Path(directory) if directory is not None else claims_dir()
    path = d / f"{chapter}{CURVES}"
    if not path.is_file():
        raise ClaimError(f"no kept curves {path}: execute chapter {chapter} first")
    raw = json.loads(path.read_text())
    return {k: np.array(v, dtype=object).astype(float) for k, v in raw.items()}


BADGES = {
    "paper": "{bdg-primary}`FROM THE PAPER`",
    "recon": "{bdg-warning}`RECONSTRUCTED`",
    "new": "{bdg-success}`NEW`",
}


def _status_cell(c: Claim) -> str:
    """The status, marked when it was not asserted (a smoke run, or ``as measured``)."""
    return c.status + (
        f" (try run; the chapter says {c.try_verdict}: not asserted)"
        if c.try_verdict
        else f" (smoke run; the chapter says {c.smoke_verdict}: not asserted)"
        if c.smoke_verdict
        else " (smoke run)"
        if c.smoke
        else " (reported, not asserted)"
        if c.verdict == AS_MEASURED
        else ""
    )


def _held(c: Claim) -> str:
    return f"{sum(c.holds)}/{len(c.holds)}"


def claims_table(rows: Sequence[Claim], link: bool = True, chapter_column: bool = True) -> str:
    """A MyST Markdown table of claims, for a chapter's end and for the report page: the
    claim (with its honesty badge and a link to its section), its status, the measured
    number (mean [min, max] over seeds) and the seeds or cases in which it held."""
    head = ["claim", "status", "measured: mean [min, max]", "held"]
    if chapter_column:
        head.insert(0, "chapter")
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for c in rows:
        text = c.text.replace("|", "\\|") + (f" ({{ref}}`{c.section}`)" if link else "")
        cells = [f"{text} {BADGES[c.label]}", _status_cell(c), c.summary() or MISSING, _held(c)]
        if chapter_column:
            cells.insert(0, c.chapter.split("_", 1)[0])
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def chapter_folds(rows: Sequence[Claim], chapters: Sequence[str], titles: dict[str, str]) -> str:
    """Every claim, one closed fold per chapter (MyST ``dropdown``), each titled with the
    chapter and its counts (:func:`counts_line`), holding its :func:`claims_table`."""
    out = []
    for ch in chapters:
        mine = [c for c in rows if c.chapter == ch]
        if not mine:
            continue
        title = f"{titles.get(ch, ch)}: {counts_line(category_counts(mine))}"
        out += [f"::::{{dropdown}} {title}", claims_table(mine, chapter_column=False), "::::", ""]
    return "\n".join(out)


def find(rows: Sequence[Claim], claim_id: str) -> Claim:
    """The one claim with this id among ``rows``; raises :class:`ClaimError` when there is
    none or more than one."""
    found = [c for c in rows if c.id == claim_id]
    if len(found) != 1:
        raise ClaimError(f"{len(found)} claims with id {claim_id!r} (want exactly one)")
    return found[0]


def book_chapters(root: Path | None = None) -> list[str]:
    """The chapters of the book's table of contents whose claims the report gathers
    (every chapter except the report pages, ``99_...``)."""
    import yaml

    root = Path(root) if root is not None else Path(__file__).resolve().parents[2]
    toc = yaml.safe_load((root / "_toc.yml").read_text())
    files = [c["file"] for part in toc.get("parts", [toc]) for c in part.get("chapters", [])]
    stems = [Path(f).name for f in files if not Path(f).name.startswith("99_")]
    if not stems:
        raise ClaimError(f"no chapters in {root / '_toc.yml'}")
    return stems


def load(chapters: Sequence[str], directory: Path | None = None) -> list[Claim]:
    """Every claim of ``chapters``; raises naming each chapter whose claims are missing."""
    d = Path(directory) if directory is not None else claims_dir()
    missing = [ch for ch in chapters if not (d / f"{ch}.json").is_file()]
    if missing:
        raise ClaimError(
            f"no recorded claims for {missing} in {d}: execute those chapters first "
            "(each ends with Ledger.save())"
        )
    out = []
    for ch in chapters:
        rows = json.loads((d / f"{ch}.json").read_text())
        if not rows:
            raise ClaimError(f"{ch} recorded an empty list of claims")
        out += [Claim(**r) for r in rows]
    return out


SHORT = ("partly", "not reproduced")  # the statuses the report lists first
# The statuses from best to worst: the columns of the report's summary and its bars.
RANKED = ("reproduced", "new result", "partly", "not reproduced")
# The one counting rule of the book, used by every chapter's verdict line and by the report:
# an asserted claim counts under its status, a claim reported without a verdict (``as
# measured``, or a smoke run's) in a category of its own. Every claim is in exactly one.
REPORTED = "reported, not asserted"
CATEGORIES = (*RANKED, REPORTED)
_KEYS = dict(zip(CATEGORIES, ("reproduced", "new", "partly", "not_reproduced", "reported"),
                 strict=True))  # fmt: skip


def category(c: Claim) -> str:
    """The claim's category under the book's one counting rule (:data:`CATEGORIES`)."""
    return REPORTED if c.verdict == AS_MEASURED else c.status


def category_counts(rows: Sequence[Claim]) -> dict[str, int]:
    """``n`` (every claim) and the number in each category, keyed ``reproduced``, ``new``,
    ``partly``, ``not_reproduced`` and ``reported``."""
    cats = [category(c) for c in rows]
    return {"n": len(cats), **{_KEYS[k]: cats.count(k) for k in CATEGORIES}}


def counts_line(counts: dict[str, int]) -> str:
    """The counts in words, categories with no claim left out: ``37 claims: 20
    reproduced, 9 new results, 2 not reproduced, 6 reported, not asserted``."""
    from .page import count

    words = {"reproduced": "reproduced", "new": ("new result", "new results"),
             "partly": "partly reproduced", "not_reproduced": "not reproduced",
             "reported": "reported, not asserted"}  # fmt: skip
    parts = []
    for key, word in words.items():
        n = counts[key]
        if n:
            parts.append(f"{n} {word[n != 1] if isinstance(word, tuple) else word}")
    return f"{count(counts['n'], 'claim')}: " + "; ".join(parts)


def counts_by_chapter(rows: Sequence[Claim], chapters: Sequence[str]):
    """How many claims each chapter has in each category (the book's one counting rule,
    :func:`category`): a DataFrame indexed by chapter stem (in the order of ``chapters``),
    with the columns ``claims`` (all) and one per category (:data:`CATEGORIES`), which add
    up to ``claims``. Raises :class:`ClaimError` for a claim of a chapter not in
    ``chapters``."""
    import pandas as pd

    unknown = sorted({c.chapter for c in rows} - set(chapters))
    if unknown:
        raise ClaimError(f"claims of chapters not in the list: {unknown}")
    cols = ["claims", *CATEGORIES]
    table = pd.DataFrame(0, index=pd.Index(list(chapters), name="chapter"), columns=cols)
    for c in rows:
        table.loc[c.chapter, ["claims", category(c)]] += 1
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


def claims_list(rows: Sequence[Claim]) -> str:
    """A MyST bullet list of claims: the chapter's number, the claim linked to its section,
    its status and the seeds (or cases) in which it held."""
    return "\n".join(
        f"* {c.chapter.split('_', 1)[0]}: {c.text} ({{ref}}`{c.section}`): "
        f"*{_status_cell(c)}*, held {_held(c)}"
        for c in rows
    )

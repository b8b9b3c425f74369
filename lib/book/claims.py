"""The book's claims: each chapter checks and records them; the report page gathers them.

A chapter ends with a :class:`Ledger`. Each :meth:`Ledger.check` states one claim: its
section, its honesty label, its tier (:data:`TIERS`), the chapter's verdict, and the
evidence (whether it held in each seed, and the number measured). The status is *computed*
from the evidence by one rule (:func:`status`: held in every seed, *reproduced*, or a *new
result* for a NEW claim; in some, *partly*; in none, *not reproduced*). For a check or a
finding, ``check`` asserts that the status is the verdict; a measured claim is recorded and
shown, never asserted. :meth:`Ledger.finish` writes the claims as JSON into
``BOOK_CLAIMS_DIR``, from which the report builds its tables.

A try run (``make try``) and the smoke mode (``BOOK_SMOKE=1``, two-step runs) assert no
verdict: a claim that misses it is recorded ``as measured`` (:data:`AS_MEASURED`), the
verdict kept in ``try_verdict`` or ``smoke_verdict``. Nothing is faked: a claim that did not
hold is recorded as not holding.
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
from .page import MISSING, counts_line, status_glue

LABELS = {"paper": "FROM THE PAPER", "recon": "RECONSTRUCTED", "new": "NEW"}
# The three tiers of a claim. A *check* is an identity, or an equation against autograd or
# simulation: asserted (tolerance-based, so it holds on every machine). A *finding* is a
# result the chapter stands on: asserted, and robust by the book's rules (family-wise
# controls, rates with intervals, horizons stated). *Measured* is everything else: its status
# is computed, recorded and shown, and it never stops the build.
TIERS = ("check", "finding", "measured")
ASSERTED_TIERS = ("check", "finding")
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
    try_verdict: str = ""  # a try run's claim that missed its verdict (bookbuild.trying)
    tier: str = "measured"  # TIERS: check, finding or measured
    cases: list[int] = field(default_factory=list)  # a rate's (held, of): Ledger.rate
    reference: str = ""  # the reference run's status at this scale, when it differs (report)

    @property
    def asserted(self) -> bool:
        """Whether the build stops when this claim's status is not its verdict."""
        return self.tier in ASSERTED_TIERS and self.verdict != AS_MEASURED

    @property
    def missed(self) -> bool:
        """A measured claim whose computed status is not the verdict the chapter states."""
        allowed = self.verdict.split(" or ")
        return self.verdict != AS_MEASURED and self.status not in allowed

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
        self._tier = "measured"

    def section(self, section: str, label: str | None = None, tier: str | None = None) -> Ledger:
        """Set the section (its MyST label), the honesty label and the tier (:data:`TIERS`;
        default ``measured``) of the claims that follow."""
        if label is not None and label not in LABELS:
            raise ClaimError(f"unknown label {label!r}; use one of {sorted(LABELS)}")
        if tier is not None and tier not in TIERS:
            raise ClaimError(f"unknown tier {tier!r}; use one of {TIERS}")
        self._section = section
        if label is not None:
            self._label = label
        if tier is not None:
            self._tier = tier
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
        tier: str | None = None,
    ) -> Claim:
        """Record a claim; assert that its computed status is ``verdict`` when it is a check
        or a finding.

        ``tier`` (:data:`TIERS`) defaults to the one set by :meth:`section`, else
        ``measured``: a measured claim's status is computed and recorded, and when it misses
        the chapter's ``verdict`` the build goes on (the table and the report show both, and
        the prose reads the status from glue, ``claim_<id>``, set by :meth:`finish`). The
        verdict ``"as measured"`` makes a claim measured.

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
        tier = tier if tier is not None else self._tier
        if tier not in TIERS:
            raise ClaimError(f"{id}: unknown tier {tier!r}; use one of {TIERS}")
        if verdict is None:
            verdict = FULL.get(label, "reproduced")
        if verdict == AS_MEASURED:
            tier = "measured"
        allowed = (verdict,) if isinstance(verdict, str) else tuple(verdict)
        if not allowed or any(v not in (*STATUSES, AS_MEASURED) for v in allowed):
            raise ClaimError(f"{id}: verdict {verdict!r} is not one of {STATUSES + (AS_MEASURED,)}")
        if any(c.id == id for c in self.claims):
            raise ClaimError(f"{self.chapter}: claim {id!r} is checked twice")
        holds = [bool(x) for x in np.atleast_1d(np.asarray(holds, dtype=bool))]
        vals = [_finite(x) for x in np.atleast_1d(np.asarray(values, dtype=float))]
        claim = Claim(
            id, self.chapter, text, label, section, " or ".join(allowed), holds, vals, unit,
            tier=tier,
        )  # fmt: skip
        if smoke():  # two-step runs: record what they give, assert nothing
            claim.smoke = True
            if AS_MEASURED not in allowed and claim.status not in allowed:
                claim.smoke_verdict, claim.verdict = claim.verdict, AS_MEASURED
        elif trying():  # a reader's own settings: record what no longer holds, stop nothing
            if AS_MEASURED not in allowed and claim.status not in allowed:
                claim.try_verdict, claim.verdict = claim.verdict, AS_MEASURED
        elif claim.asserted and claim.status not in allowed:
            raise ClaimError(
                f"{self.chapter}, {tier} {id!r}: the measurements say {claim.status!r} "
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

    def rate(
        self,
        id: str,
        text: str,
        *,
        holds,
        threshold: float,
        level: float = 0.95,
        values=(),
        unit: str = "",
        tier: str | None = None,
        **kw,
    ) -> Claim:
        """A claim that a rate over seeds (or instances) is high: the share of ``holds``
        that are true, with its exact (Clopper-Pearson) ``level`` interval from scipy. It
        holds when the *whole* interval clears ``threshold`` (a number fixed in the chapter's
        ``Config`` before the run), so a rate whose interval straddles it is not a finding:
        pass ``tier="measured"`` there. The claim's value is ``[share, lo, hi]`` (``values``
        after them)."""
        from scipy.stats import binomtest

        h = np.atleast_1d(np.asarray(holds, dtype=bool))
        if h.size == 0:
            raise ClaimError(f"{id}: a rate needs at least one case")
        if not 0 <= threshold < 1:
            raise ClaimError(f"{id}: a rate's threshold must be in [0, 1), got {threshold}")
        k, n = int(h.sum()), int(h.size)
        ci = binomtest(k, n).proportion_ci(confidence_level=level, method="exact")
        share = k / n
        more = [float(x) for x in np.atleast_1d(np.asarray(values, dtype=float))]
        text = (f"{text} (the rate's {level:.0%} interval lies above {threshold:g}; held "
                f"{k} of {n})")  # fmt: skip
        claim = self.check(id, text, holds=bool(ci.low >= threshold), tier=tier,
                           values=[share, ci.low, ci.high, *more],
                           unit=unit or "share, lo, hi", **kw)  # fmt: skip
        claim.cases = [k, n]
        return claim

    def held(self, *ids: str) -> bool:
        """Whether each named claim is asserted (a check or a finding, not *as measured*) and
        held in every seed.

        A chapter ends with ``assert claims.held(<its headline claims>)``: the claims its
        opening box states without qualification. Unknown ids raise :class:`ClaimError`, and
        so does a measured claim: a headline is a finding.

        In the smoke mode nothing is asserted, as in :meth:`check`: the ids are checked and
        a claim recorded by the smoke run counts, whether or not its two-step numbers held
        (the ledger keeps what they gave).
        """
        known = {c.id: c for c in self.claims}
        missing = [i for i in ids if i not in known]
        if missing or not ids:
            raise ClaimError(f"{self.chapter}: no claim {missing or 'named'} in this ledger")
        measured = [i for i in ids if known[i].tier not in ASSERTED_TIERS]
        if measured:
            raise ClaimError(
                f"{self.chapter}: the headline claims {measured} are measured, not findings: "
                "make them findings (tier='finding') or take them out of the headline"
            )
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
        glue_all(status_glue(self.claims))
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
    """The status, marked when it was not asserted (a smoke or try run, a measured claim)
    and when it differs from the reference run's."""
    out = c.status
    if c.try_verdict:
        out += f" (try run; the chapter says {c.try_verdict}: not asserted)"
    elif c.smoke_verdict:
        out += f" (smoke run; the chapter says {c.smoke_verdict}: not asserted)"
    elif c.smoke:
        out += " (smoke run)"
    elif c.tier == "measured" and c.missed:
        out += f" (the chapter states {c.verdict})"
    if c.reference:
        out += f"; reference: {c.reference}"
    return out


def _held(c: Claim) -> str:
    k, n = c.cases or (sum(c.holds), len(c.holds))
    return f"{k}/{n}"


def claims_table(rows: Sequence[Claim], link: bool = True, chapter_column: bool = True) -> str:
    """A MyST Markdown table of claims, for a chapter's end and for the report page: the
    claim (with its honesty badge and a link to its section), its status, the measured
    number (mean [min, max] over seeds) and the seeds or cases in which it held."""
    head = ["claim", "tier", "status", "measured: mean [min, max]", "held"]
    if chapter_column:
        head.insert(0, "chapter")
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for c in rows:
        text = c.text.replace("|", "\\|") + (f" ({{ref}}`{c.section}`)" if link else "")
        cells = [f"{text} {BADGES[c.label]}", c.tier, _status_cell(c), c.summary() or MISSING,
                 _held(c)]  # fmt: skip
        if chapter_column:
            cells.insert(0, c.chapter.split("_", 1)[0])
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


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
# checks in one category, findings under their status, measured claims (and a smoke run's)
# in a category of their own. Every claim is in exactly one.
CHECK = "check"
REPORTED = "measured"
CATEGORIES = (CHECK, *RANKED, REPORTED)
_KEYS = dict(zip(CATEGORIES, ("checks", "reproduced", "new", "partly", "not_reproduced",
                              "measured"), strict=True))  # fmt: skip


def category(c: Claim) -> str:
    """The claim's category under the book's one counting rule (:data:`CATEGORIES`)."""
    if c.tier == "measured" or c.verdict == AS_MEASURED or c.smoke_verdict or c.try_verdict:
        return REPORTED
    return CHECK if c.tier == "check" else c.status


def category_counts(rows: Sequence[Claim]) -> dict[str, int]:
    """``n`` (every claim), ``findings``, and the number in each category, keyed ``checks``,
    ``reproduced``, ``new``, ``partly``, ``not_reproduced`` (the findings by status) and
    ``measured``."""
    cats = [category(c) for c in rows]
    out = {"n": len(cats), **{_KEYS[k]: cats.count(k) for k in CATEGORIES}}
    out["findings"] = sum(cats.count(k) for k in RANKED)
    return out

"""The table ``make test`` prints at its end, and the record of each notebook's seconds
that orders the next run (``conftest.py``).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from .notebook import ROOT, atomic_write

DURATIONS_RECORD = Path(".cache") / "chapter-durations.json"  # read by conftest.py


def _junit_cases(path: Path) -> list[tuple[str, float, str]]:
    """(name, seconds, outcome) of every test case in a JUnit XML file (none if missing)."""
    import xml.etree.ElementTree as ET

    if not path.is_file():
        return []
    cases = []
    for case in ET.parse(path).getroot().iter("testcase"):
        kinds = {child.tag for child in case}
        outcome = next((k for k in ("failure", "error", "skipped") if k in kinds), "passed")
        cases.append((case.get("name", "?"), float(case.get("time", 0.0)), outcome))
    return cases


def timing_table(times: Path, root: Path = ROOT, record: bool = True) -> str:
    """The table ``make test`` prints at its end: the seconds of each phase (``phases.txt``:
    lines ``phase milliseconds``, as the Makefile writes them) and of each notebook (the
    JUnit XML files ``chapters.xml`` and ``report.xml`` of nbmake; ``cached.txt`` lists the
    chapters restored by :mod:`lib.book.testcache`, not run). With ``record``, the
    seconds of every notebook are merged into ``.cache/chapter-durations.json`` (those of
    one that failed only where they are longer than the recorded ones: a lower bound),
    from which the next run orders the chapters, the longest first (conftest.py)."""
    phases = []
    if (times / "phases.txt").is_file():
        for line in (times / "phases.txt").read_text().split("\n"):
            if line.strip():
                name, ms = line.split()
                phases.append((name, int(ms) / 1000))
    notebooks = [c for f in ("chapters.xml", "report.xml") for c in _junit_cases(times / f)]
    cached = (times / "cached.txt").read_text().split() if (times / "cached.txt").is_file() else []
    unit = _junit_cases(times / "unit.xml")
    w = max([len(Path(n).stem) + 2 for n, *_ in notebooks] + [34])
    lines = [f"make test: seconds per phase ({os.cpu_count()} cores)", f"{'phase':<{w}}{'s':>8}"]
    lines += [f"{n:<{w}}{t:>8.0f}" for n, t in phases]
    if phases:
        lines.append(f"{'total':<{w}}{sum(t for _, t in phases):>8.0f}")
    if unit:
        lines.append(f"{'(unit tests: ' + str(len(unit)) + ', summed)':<{w}}"
                     f"{sum(t for _, t, _ in unit):>8.0f}")  # fmt: skip
    if notebooks or cached:
        lines += ["", f"{'notebook (nbmake, BOOK_SCALE=ci)':<{w}}{'s':>8}  outcome"]
        lines += [f"{Path(n).stem:<{w}}{t:>8.0f}  {o}" for n, t, o in notebooks]
        # restored by lib.book.testcache: unchanged since they last passed, not run
        lines += [f"{n:<{w}}{'-':>8}  passed before, unchanged (FRESH=1 runs it)" for n in cached]
    if record and notebooks:
        path = root / DURATIONS_RECORD
        try:
            known = json.loads(path.read_text())
        except (OSError, ValueError):
            known = {}
        for n, t, o in notebooks:  # a failed run's seconds are a lower bound of its length
            stem = Path(n).stem
            known[stem] = round(t, 1) if o == "passed" else max(known.get(stem, 0.0), round(t, 1))
        atomic_write(path, json.dumps(known, indent=1, sort_keys=True))
    return "\n".join(lines)

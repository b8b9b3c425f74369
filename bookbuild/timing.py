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


def _phases(times: Path) -> list[tuple[str, float]]:
    """``(phase, seconds)`` from ``phases.txt`` (lines ``phase milliseconds``)."""
    phases = []
    if (times / "phases.txt").is_file():
        for line in (times / "phases.txt").read_text().split("\n"):
            if line.strip():
                name, ms = line.split()
                phases.append((name, int(ms) / 1000))
    return phases


def _total(times: Path, phases: list[tuple[str, float]]) -> float:
    """The run's seconds on the wall clock: the environment's, and ``wall.txt`` (the
    milliseconds of every other phase, some side by side) where it was written; else the
    sum of the phases."""
    if (times / "wall.txt").is_file():
        env = sum(t for n, t in phases if n == "environment")
        return env + int((times / "wall.txt").read_text().split()[0]) / 1000
    return sum(t for _, t in phases)


def timing_table(times: Path, root: Path = ROOT, record: bool = True) -> str:
    """The table ``make test`` prints at its end: the seconds of each phase (``phases.txt``:
    lines ``phase milliseconds``, as the Makefile writes them) and of each notebook (the
    JUnit XML files ``chapters.xml`` and ``report.xml`` of nbmake; ``cached.txt`` lists the
    chapters restored by :mod:`bookbuild.testcache`, not run). With ``record``, the
    seconds of every notebook are merged into ``.cache/chapter-durations.json`` (those of
    one that failed only where they are longer than the recorded ones: a lower bound),
    from which the next run orders the chapters, the longest first (conftest.py)."""
    phases = _phases(times)
    notebooks = [c for f in ("chapters.xml", "report.xml") for c in _junit_cases(times / f)]
    cached = (times / "cached.txt").read_text().split() if (times / "cached.txt").is_file() else []
    unit = _junit_cases(times / "unit.xml")
    w = max([len(Path(n).stem) + 2 for n, *_ in notebooks] + [34])
    lines = [f"make test: seconds per phase ({os.cpu_count()} cores)", f"{'phase':<{w}}{'s':>8}"]
    lines += [f"{n:<{w}}{t:>8.0f}" for n, t in phases]
    if phases:
        lines.append(f"{'total (wall clock)':<{w}}{_total(times, phases):>8.0f}")
    if unit:
        lines.append(f"{'(unit tests: ' + str(len(unit)) + ', summed)':<{w}}"
                     f"{sum(t for _, t, _ in unit):>8.0f}")  # fmt: skip
    if notebooks or cached:
        lines += ["", f"{'notebook (nbmake, BOOK_SCALE=ci)':<{w}}{'s':>8}  outcome"]
        lines += [f"{Path(n).stem:<{w}}{t:>8.0f}  {o}" for n, t, o in notebooks]
        # restored by bookbuild.testcache: unchanged since they last passed, not run
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


BOOK_TIME = Path("build") / "book-seconds.txt"  # written by `make book`: seconds, scale


def _machine() -> str:
    import platform

    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{os.cpu_count()} cores ({cpu})"


def timings_markdown(root: Path = ROOT, times: Path | None = None,
                     executed: Path | None = None) -> str:  # fmt: skip
    """``docs/timings.md``: the last ``make test`` (its phases and each notebook's seconds
    under nbmake, from ``build/test-times``) and the last ``make book`` (its total and each
    chapter's seconds, from ``build/book-seconds.txt`` and ``build/executed/durations.json``)
    of this checkout, with the commit, the date and the machine. A run not made yet is said
    to be missing, not invented."""
    import datetime
    import subprocess

    times = times or root / "build" / "test-times"
    executed = executed or root / "build" / "executed"
    try:
        commit = subprocess.run(["git", "-C", str(root), "rev-parse", "--short=12", "HEAD"],
                                capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        commit = "unknown"
    date = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d")
    lines = ["# Timings", "",
             f"Written by `make bench` on {date} from the last `make test` and `make book` of a "
             f"checkout at commit `{commit}`, on {_machine()}. Two chapters run side by side "
             "on two cores and slow each other down. The machine's speed varies by 10-20% from "
             "run to run, and by up to 1.6x from day to day: compare timings within one "
             "table, or rerun the baseline beside them.", ""]  # fmt: skip
    phases = _phases(times)
    ci = {Path(n).stem: (t, o) for f in ("chapters.xml", "report.xml")
          for n, t, o in _junit_cases(times / f)}  # fmt: skip
    cached = (times / "cached.txt").read_text().split() if (times / "cached.txt").is_file() else []
    if phases:
        total = _total(times, phases)
        how = ("every chapter run" if not cached
               else f"{len(cached)} chapter(s) restored from the test cache")  # fmt: skip
        lines += [f"`make test`: **{total:.0f} s** on the wall clock ({how}). The unit and "
                  "fault tests (checks) run beside the report, the strict build and the page "
                  "tests.", "", "| phase | s |", "|---|---:|"]  # fmt: skip
        lines += [f"| {n} | {t:.0f} |" for n, t in phases] + [""]
    else:
        lines += ["`make test`: no run recorded in this checkout.", ""]
    book = {}
    if (executed / "durations.json").is_file():
        book = json.loads((executed / "durations.json").read_text())
    if (root / BOOK_TIME).is_file():
        seconds, scale = (root / BOOK_TIME).read_text().split()[:2]
        lines += [
            f"`make book` at `{scale}`: **{float(seconds):.0f} s** once its environment is "
            "installed.",
            "",
        ]
    else:
        lines += ["`make book`: no run recorded in this checkout.", ""]
    stems = sorted(set(ci) | set(book) | set(cached))
    if stems:
        lines += ["| chapter | `ci` under nbmake (s) | `book` in `make book` (s) |",
                  "|---|---:|---:|"]  # fmt: skip
        for s in stems:
            c = "restored" if s in cached else (f"{ci[s][0]:.0f}" if s in ci else "—")
            if s in ci and ci[s][1] != "passed":
                c += f" ({ci[s][1]})"
            b = f"{book[s]:.0f}" if s in book else "—"
            lines.append(f"| {s} | {c} | {b} |")
    return "\n".join(lines) + "\n"

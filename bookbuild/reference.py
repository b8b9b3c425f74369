"""The reference run's claim statuses: written, and how another run differs from them.

``docs/reference_claims.json`` keeps every claim's tier and status at ``ci`` and at
``book`` from the reference run, with its commit, written by one command::

    python -m bookbuild reference build/executed/claims --scale book

A run on any machine compares itself with them. A check or a finding that changes its
status has already stopped that run (its verdict is asserted). A measured claim that
changes is printed once at the end of ``make book`` (:func:`print_changes`) and shown in
the report ("here: partly; reference: new result"; reading the reference is
:mod:`lib.book.reference`, which the report uses). ``make robust`` compares a perturbed
run with an unperturbed one (:func:`compare_runs`): it fails when a check or a finding
differs, and prints every measured claim that changed.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from lib.book.claims import ASSERTED_TIERS, CURVES, Claim
from lib.book.reference import REFERENCE, differences, reference

from .notebook import ROOT, atomic_write

__all__ = ["REFERENCE", "write_reference", "print_changes", "compare_runs", "load_available"]


def load_available(directory: Path) -> list[Claim]:
    """Every claim recorded in ``directory`` (a chapter that did not record is absent)."""
    out = []
    for f in sorted(Path(directory).glob("*.json")):
        if f.name.endswith(CURVES):
            continue
        out += [Claim(**r) for r in json.loads(f.read_text())]
    return out


def _commit(root: Path) -> str:
    try:
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head


def write_reference(claims: Path, scale: str, root: Path = ROOT, path: Path = REFERENCE) -> Path:
    """Record the tier and status of every claim in ``claims`` as the reference at
    ``scale``, with the commit they were made at; the other scales are kept."""
    rows = load_available(claims)
    if not rows:
        raise ValueError(f"no claims in {claims}: execute the chapters first")
    data = json.loads(path.read_text()) if path.is_file() else {}
    table: dict[str, dict[str, list[str]]] = {}
    for c in rows:
        table.setdefault(c.chapter, {})[c.id] = [c.tier, c.status]
    data[scale] = {"commit": _commit(root), "claims": table}
    atomic_write(path, json.dumps(data, indent=1, sort_keys=True) + "\n")
    return path


def _line(c: Claim, status: str | None) -> str:
    return f"  {c.chapter} {c.id} ({c.tier}): here {c.status}; other: {status or 'no such claim'}"


def print_changes(claims: Path, scale: str, path: Path = REFERENCE, log=print) -> int:
    """Print, once, the claims whose status differs from the reference run's at ``scale``;
    returns how many."""
    commit, table = reference(scale, path)
    if not table:
        return 0
    diff = differences(load_available(claims), table)
    if diff:
        log(f"{len(diff)} claim(s) differ from the reference run (commit {commit}, "
            f"BOOK_SCALE={scale}); measured claims do not stop the build:")  # fmt: skip
        for c, _tier, status in diff:
            log(_line(c, status).replace("other:", "reference:"))
    return len(diff)


def compare_runs(claims: Path, against: Path | None, scale: str, log=print) -> int:
    """Compare the claims of one run with another run's (``against``) or with the reference
    run's: 1 (and each named) when a check or a finding differs in status, or is missing
    from either run; 0 otherwise. Every measured claim that changed is printed."""
    rows = load_available(claims)
    if against is not None:
        other_rows = load_available(against)
        other = {(c.chapter, c.id): (c.tier, c.status) for c in other_rows}
        what = str(against)
    else:
        commit, other = reference(scale)
        what = f"the reference run (commit {commit})"
    if not rows or not other:
        log(f"error: nothing to compare: {claims} has {len(rows)} claims, {what} {len(other)}")
        return 1
    mine = {(c.chapter, c.id) for c in rows}
    lost = sorted(k for k, (tier, _) in other.items() if k not in mine and tier in ASSERTED_TIERS)
    diff = differences(rows, other)
    hard = [d for d in diff if d[0].tier in ASSERTED_TIERS or d[1] in ASSERTED_TIERS]
    soft = [d for d in diff if d not in hard]
    log(f"{len(rows)} claims compared with {what}: {len(hard) + len(lost)} check(s) or "
        f"finding(s) and {len(soft)} measured claim(s) changed status")  # fmt: skip
    for c, _tier, status in soft:
        log(_line(c, status))
    for c, _tier, status in hard:
        log("FAILED" + _line(c, status)[1:])
    for ch, i in lost:
        log(f"FAILED {ch} {i}: a check or finding of the other run that this run did not record")
    return 1 if hard or lost else 0

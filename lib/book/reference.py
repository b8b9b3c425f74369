"""The reference run's claim statuses, as the report shows them.

``docs/reference_claims.json`` keeps every claim's tier and status at ``ci`` and at
``book`` from the reference run, with its commit (written by ``python -m bookbuild
reference``, :mod:`bookbuild.reference`). :func:`mark` sets, on each claim of a run, the
reference run's status where it differs, and the report shows both ("here: partly;
reference: new result").
"""

from __future__ import annotations

import json
from pathlib import Path

from .claims import Claim

REFERENCE = Path(__file__).resolve().parents[2] / "docs" / "reference_claims.json"


def reference(scale: str, path: Path = REFERENCE) -> tuple[str, dict[tuple[str, str], tuple]]:
    """The reference run's commit and ``{(chapter, id): (tier, status)}`` at ``scale``
    (empty when none was recorded)."""
    data = json.loads(path.read_text()) if path.is_file() else {}
    ref = data.get(scale, {})
    table = {(ch, i): tuple(v) for ch, ids in ref.get("claims", {}).items() for i, v in ids.items()}
    return ref.get("commit", ""), table


def differences(rows: list[Claim], other: dict[tuple[str, str], tuple]) -> list[tuple]:
    """``(claim, other tier, other status)`` for each claim whose status differs from the
    other run's (``None``, ``None`` when the other run has no such claim)."""
    out = []
    for c in rows:
        tier, status = other.get((c.chapter, c.id), (None, None))
        if status != c.status:
            out.append((c, tier, status))
    return out


def mark(rows: list[Claim], scale: str, path: Path = REFERENCE) -> list[Claim]:
    """Set each claim's ``reference`` to the reference run's status where it differs."""
    _, table = reference(scale, path)
    if table:
        for c, _tier, status in differences(rows, table):
            c.reference = status or "not in the reference run"
    return rows

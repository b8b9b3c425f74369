"""Folding: plumbing cells are folded in the staged notebooks, the argument stays open."""

from __future__ import annotations

import json
from pathlib import Path

from .notebook import atomic_write

FOLD_TAGS = {"show-input", "hide-input", "remove-input", "remove-cell", "hide-cell"}


def fold_plumbing(nb: dict) -> dict:
    """Fold every code cell that carries none of :data:`FOLD_TAGS` (``hide-input``).

    The book's convention: plumbing is folded by default, and the cells that *are* the
    argument (the model, the loss, the measurement, the check of an equation) carry the
    tag ``show-input`` and stay open.
    """
    for cell in nb["cells"]:
        if cell["cell_type"] != "code":
            continue
        tags = cell.setdefault("metadata", {}).setdefault("tags", [])
        if not FOLD_TAGS & set(tags):
            tags.append("hide-input")
    return nb


def stage_notebook(src: Path, dst: Path) -> None:
    """Copy an executed notebook with its plumbing folded; write only when it changed."""
    text = json.dumps(fold_plumbing(json.loads(src.read_text(encoding="utf-8"))), indent=1)
    if dst.exists() and dst.read_text(encoding="utf-8") == text:
        return
    atomic_write(dst, text)

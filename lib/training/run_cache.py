"""Training runs that two chapters read, trained once.

:func:`cached_history` returns a run's :class:`~lib.training.engine.History` from a cache
on disk when a run with the same inputs has been trained, and otherwise trains it and
stores it. The key is everything the run depends on: the caller's description of the run
(its settings, seeds and steps), the device, the versions of torch and numpy, the source of
every module of ``lib`` and the switches of :mod:`lib.env` that change a run (the
perturbation of ``make robust`` and the smoke mode). A run read from the cache is the run
itself: training is deterministic on one machine, and the arrays are stored exactly
(``.npz``, read without pickle).

Two chapters that run side by side take turns on a run: the first trains it under a lock
on its key, and the second waits for the lock and reads what the first stored. The cache
is ``build/run-cache`` beside ``lib`` (``BOOK_RUN_CACHE`` names another folder;
``BOOK_RUN_CACHE=off`` trains every run).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import zipfile
from collections.abc import Callable, Mapping
from pathlib import Path

import numpy as np
import torch

from .. import env
from .engine import History

__all__ = ["cached_history", "run_key", "cache_folder"]

CACHE_ENV = "BOOK_RUN_CACHE"
KEEP = 32  # entries kept: the most recently used (a lib edit makes every key new)
LIB = Path(__file__).parent.parent  # not resolved: a book that links to lib keeps its own cache


def cache_folder() -> Path | None:
    """The cache's folder, or None when ``BOOK_RUN_CACHE=off``."""
    value = os.environ.get(CACHE_ENV, "")
    if value == "off":
        return None
    return Path(value) if value else LIB.parent / "build" / "run-cache"


def _jsonable(value):
    if isinstance(value, torch.Tensor):
        return value.detach().cpu().tolist()
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, int | float | str | bool) or value is None:
        return value
    raise TypeError(f"a run's key holds {type(value).__name__}: give numbers, strings or tensors")


def _source_digest() -> str:
    digest = hashlib.sha256()
    for path in sorted(LIB.rglob("*.py")):
        digest.update(path.relative_to(LIB).as_posix().encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def run_key(description: Mapping, device) -> str:
    """The hex key of a run: its ``description`` and everything else it depends on."""
    full = {
        "run": _jsonable(description),
        "device": str(device),
        "torch": torch.__version__,
        "numpy": np.__version__,
        "lib": _source_digest(),
        "perturb": os.environ.get(env.PERTURB_ENV, ""),
        "smoke": [env.smoke(), env.smoke_all_logs()],
    }
    return hashlib.sha256(json.dumps(full, sort_keys=True).encode()).hexdigest()[:32]


def _save(history: History, path: Path) -> None:
    names = list(history.metrics)
    arrays = {f"m{i}": np.asarray(history.metrics[n]) for i, n in enumerate(names)}
    part = path.with_name(path.name + ".part")
    with open(part, "wb") as f:
        np.savez(f, steps=np.asarray(history.steps), names=np.array(names), **arrays)
    os.replace(part, path)


def _load(path: Path) -> History:
    with np.load(path, allow_pickle=False) as z:
        names = [str(n) for n in z["names"]]
        return History(z["steps"], {n: z[f"m{i}"] for i, n in enumerate(names)})


def cached_history(description: Mapping, train: Callable[[], History], device) -> History:
    """``train()``'s history, trained once for every ``description`` (see the module)."""
    folder = cache_folder()
    if folder is None:
        return train()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{run_key(description, device)}.npz"
    with open(path.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # a chapter beside this one may be training it
        if path.exists():
            try:
                history = _load(path)
                path.touch()
                return history
            except (OSError, ValueError, KeyError, zipfile.BadZipFile):
                pass  # a damaged entry is trained again and replaced
        history = train()
        _save(history, path)
    _prune(folder)
    return history


def _prune(folder: Path) -> None:
    """Remove all but the :data:`KEEP` most recently used entries."""

    def used(path: Path) -> float:
        try:
            return path.stat().st_mtime
        except FileNotFoundError:  # pruned by a chapter beside this one
            return 0.0

    for old in sorted(folder.glob("*.npz"), key=used, reverse=True)[KEEP:]:
        old.unlink(missing_ok=True)
        old.with_suffix(".lock").unlink(missing_ok=True)

"""Scale and device: the one place that maps (chapter, scale) to an experiment config.

``BOOK_SCALE`` is ``ci`` (every chapter under nbmake in minutes), ``book`` (the
default, the rendered book on a laptop) or ``paper`` (the papers' scale, for a GPU).
When ``BOOK_SCALE`` is unset, ``paper`` is chosen automatically on a machine with
CUDA and ``book`` otherwise. ``BOOK_DEVICE`` overrides the device (default: ``cuda``
when available, else ``cpu``).
"""

from __future__ import annotations

import os
import platform
from types import MappingProxyType
from typing import Any

import torch

SCALES = ("ci", "book", "paper")


class ConfigError(ValueError):
    """A bad scale, device or experiment config."""


def get_scale() -> str:
    """The scale named by ``BOOK_SCALE``; ``paper`` on a CUDA machine, else ``book``."""
    raw = os.environ.get("BOOK_SCALE")
    if raw is None or raw.strip() == "":
        return "paper" if torch.cuda.is_available() else "book"
    scale = raw.strip().lower()
    if scale not in SCALES:
        raise ConfigError(
            f"BOOK_SCALE={raw!r} is not a known scale; valid values are: {', '.join(SCALES)}"
        )
    return scale


def get_device() -> torch.device:
    """``BOOK_DEVICE`` if set, else ``cuda`` when available, else ``cpu``."""
    raw = os.environ.get("BOOK_DEVICE", "").strip()
    if raw:
        try:
            dev = torch.device(raw)
        except RuntimeError as err:
            raise ConfigError(f"BOOK_DEVICE={raw!r} is not a torch device ({err})") from err
        if dev.type == "cuda" and not torch.cuda.is_available():
            raise ConfigError(f"BOOK_DEVICE={raw!r} but CUDA is not available on this machine")
        return dev
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def quiet() -> bool:
    """True inside the book build and the test suite: no progress bars in outputs."""
    return os.environ.get("BOOK_QUIET", "0") not in ("", "0", "false", "False")


# ---------------------------------------------------------------------------
# The experiment configs. One entry per chapter, one dict per scale; every
# constant a chapter uses lives here, so `ci` vs `book` vs `paper` is one table.
# ---------------------------------------------------------------------------
CONFIGS: dict[str, dict[str, dict[str, Any]]] = {
    "01_signatures": {
        "ci": dict(t1_reps=1, t3_reps=2, corpus_chars=400_000, bpe_vocab=512, top_tokens=60),
        "book": dict(t1_reps=2, t3_reps=4, corpus_chars=None, bpe_vocab=1024, top_tokens=100),
        "paper": dict(t1_reps=4, t3_reps=8, corpus_chars=None, bpe_vocab=4096, top_tokens=200),
    },
}


def _validate(chapter: str, scale: str) -> None:
    if chapter not in CONFIGS:
        raise ConfigError(
            f"no experiment config for chapter {chapter!r}; known chapters: {', '.join(sorted(CONFIGS))}"
        )
    missing = [s for s in SCALES if s not in CONFIGS[chapter]]
    if missing:
        raise ConfigError(f"chapter {chapter!r} has no config for scale(s) {missing}")
    keys = {s: set(CONFIGS[chapter][s]) for s in SCALES}
    if len({frozenset(k) for k in keys.values()}) != 1:
        raise ConfigError(f"chapter {chapter!r}: the scales define different keys: {keys}")
    if scale not in SCALES:
        raise ConfigError(f"unknown scale {scale!r}; valid values are: {', '.join(SCALES)}")


def chapter_config(chapter: str, scale: str | None = None) -> MappingProxyType:
    """The read-only experiment config of ``chapter`` at ``scale`` (default: ``get_scale()``)."""
    scale = get_scale() if scale is None else scale
    _validate(chapter, scale)
    return MappingProxyType(dict(CONFIGS[chapter][scale], scale=scale))


def announce(chapter: str) -> tuple[MappingProxyType, torch.device]:
    """Print the scale, device and versions a chapter runs at; return (config, device).

    Called in every chapter's first code cell, so the first output of the page
    says at what scale and on what device its numbers were made.
    """
    cfg = chapter_config(chapter)
    dev = get_device()
    torch.manual_seed(0)
    print(
        f"chapter {chapter} | BOOK_SCALE={cfg['scale']} | device={dev} | "
        f"torch {torch.__version__} | python {platform.python_version()}"
    )
    return cfg, dev

"""What a page shows of its numbers: glue a section's numbers in one call.

A chapter's sentences live in its Markdown; the numbers in them come from the computation
through myst-nb's ``glue``. :func:`glue_all` glues a mapping of them at once, so that a cell
of twenty ``glue(...)`` lines does not hide the argument.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np


def _plain(v):
    """numpy scalars and 0-d arrays as Python numbers (glue shows them the same everywhere)."""
    if isinstance(v, np.generic) or (isinstance(v, np.ndarray) and v.ndim == 0):
        return v.item()
    return v


def glue_all(values: Mapping[str, object], prefix: str = "") -> None:
    """``glue(prefix + key, value, display=False)`` for every item of ``values``."""
    from myst_nb import glue

    for key, v in values.items():
        if not isinstance(key, str) or not key.isidentifier():
            raise ValueError(f"glue key {key!r} is not an identifier")
        glue(prefix + key, _plain(v), display=False)

"""When an event comes on a logged curve: onsets, escapes, and the order of the stairs.

A curve is logged at steps ``(n_logs,)``, one column per instance. An onset is the first
logged step at which a curve reaches a level; an escape, the first at which a sign-bit loss
falls below a fraction of ``ln 2``. A stair that never comes reads ``inf`` (or NaN, where
the function says so), so that an order check fails when a stair is missing.
"""

from __future__ import annotations

import numpy as np

from . import metrics as M

__all__ = ["escape_steps", "stair_onsets", "staircase_climbs"]


def escape_steps(steps, bit_loss, frac: float = 0.5):
    """Per instance, the first logged step at which a sign-bit loss falls below ``frac * ln 2``.

    ``bit_loss`` is ``(n_logs, K)``; returns ``(K,)`` floats, ``inf`` where it never does.
    """
    v = np.asarray(bit_loss, dtype=float)
    hit = v < frac * np.log(2)
    first = hit.argmax(0)
    return np.where(hit.any(0), np.asarray(steps, dtype=float)[first], np.inf)


def stair_onsets(steps, curve, floor: float, frac: float = 0.5):
    """Onset of a stair per instance: first step at which the partial R reaches
    ``max(frac * its maximum, floor)``; ``inf`` where it never exceeds ``floor``.

    Same rule as :func:`lib.measure.metrics.relative_onset`, with ``inf`` (not NaN) for a stair that never
    comes, so that ``onset0 < onset1`` fails when order 1 never rises.
    """
    on, _ = M.relative_onset(steps, curve, frac=frac, floor=floor)
    return np.where(np.isnan(on), np.inf, on)


def staircase_climbs(onsets_by_order) -> bool:
    """The staircase check: every onset finite and strictly increasing with the order.

    ``onsets_by_order`` is a list (order 0, 1, ...) of per-instance onset arrays. False if
    any stair never comes (``inf``) or comes out of order, in any instance.
    """
    on = np.stack([np.asarray(o, dtype=float) for o in onsets_by_order])
    return bool(np.isfinite(on).all() and np.all(np.diff(on, axis=0) > 0))

"""How long a curve sits on a plateau, and how long it then takes to leave it.

A plateau of a sign-bit loss is a stretch of logged steps at which it is still near
``ln 2`` (:func:`plateau_mask`); :func:`plateau_and_fall` splits the time to an escape into
the wait on the plateau and the fall off it, in linear time, so that a plateau (a wait at
least as long as the fall) is told from a smooth decay (a short wait and a long fall).
"""

from __future__ import annotations

import numpy as np

from .onsets import escape_steps

__all__ = ["plateau_mask", "plateau_and_fall", "plateau_end"]


def plateau_mask(steps, bit_loss, after, level: float = 0.9):
    """The plateau of a bit, per instance: logged steps after ``after[k]`` (the previous
    stair's onset) and before the escape (:func:`escape_steps`) at which the bit's
    sign-bit loss is still at least ``level * ln 2``. Returns a boolean ``(n_logs, K)``.
    """
    steps = np.asarray(steps, dtype=float)[:, None]
    v = np.asarray(bit_loss, dtype=float)
    esc = escape_steps(steps[:, 0], v)
    return (
        (steps > np.asarray(after, dtype=float)[None])
        & (steps < esc[None])
        & (v >= level * np.log(2))
    )


def plateau_and_fall(steps, bit_loss, after, level: float = 0.9, frac: float = 0.5):
    """How long a sign-bit loss sits on its plateau, and how long it takes to fall off it.

    Per instance, in steps (linear time): ``wait`` from ``after[k]`` (the previous stair's
    onset) to the last logged step before the escape (:func:`escape_steps`, loss below
    ``frac * ln 2``) at which the loss is still at least ``level * ln 2``; ``fall`` from there
    to the escape. A plateau is a wait at least as long as the fall; a smooth decay from
    ``ln 2`` has a short wait and a long fall. Returns ``(wait, fall)``, NaN where the loss
    never escapes or never sits at the level after ``after``.
    """
    steps = np.asarray(steps, dtype=float)
    v = np.asarray(bit_loss, dtype=float)
    esc = escape_steps(steps, v, frac)
    after = np.asarray(after, dtype=float)
    wait, fall = np.full(v.shape[1], np.nan), np.full(v.shape[1], np.nan)
    for k in range(v.shape[1]):
        on = (steps >= after[k]) & (steps < esc[k]) & (v[:, k] >= level * np.log(2))
        if np.isfinite(esc[k]) and on.any():
            t_exit = steps[on].max()
            wait[k], fall[k] = t_exit - after[k], esc[k] - t_exit
    return wait, fall


def plateau_end(steps, mask) -> np.ndarray:
    """Per instance, the last logged step of a plateau (``mask``: ``(n_logs, K)`` bools, as in
    :attr:`Stairs.plateaus`); ``-inf`` where the instance has no plateau."""
    steps, mask = np.asarray(steps, dtype=float), np.asarray(mask, dtype=bool)
    last = np.where(mask.any(0), len(steps) - 1 - np.argmax(mask[::-1], 0), -1)
    return np.where(last >= 0, steps[np.maximum(last, 0)], -np.inf)

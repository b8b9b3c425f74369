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
    :attr:`lib.measure.staircase.Stairs.plateaus`); ``-inf`` where the instance has no plateau."""
    steps, mask = np.asarray(steps, dtype=float), np.asarray(mask, dtype=bool)
    last = np.where(mask.any(0), len(steps) - 1 - np.argmax(mask[::-1], 0), -1)
    return np.where(last >= 0, steps[np.maximum(last, 0)], -np.inf)


def plateau_and_rise(steps, R, null_hi, after, onset):
    """How long a residual curve sits inside its null after the previous stair, and how long
    it then takes to rise: per instance, in steps (linear time, as
    :func:`lib.measure.plateaus.plateau_and_fall` reads a loss), ``wait`` from ``after[k]`` (the
    previous stair's onset) to the last logged step before ``onset[k]`` at which the curve is
    still at or below the null's upper band ``null_hi``, and ``rise`` from there to the onset.
    A plateau is a wait at least as long as the rise (and at least two logs inside the
    null); a smooth rise from step 1 leaves the null early and rises slowly. NaN where
    there is no onset or no log inside the null."""
    steps = np.asarray(steps, dtype=float)
    R = np.asarray(R, dtype=float).reshape(len(steps), -1)
    after, onset = (np.broadcast_to(np.asarray(x, float), R.shape[1:]) for x in (after, onset))
    wait, rise = np.full(R.shape[1], np.nan), np.full(R.shape[1], np.nan)
    for k in range(R.shape[1]):
        inside = (steps >= after[k]) & (steps < onset[k]) & (R[:, k] <= np.asarray(null_hi))
        if np.isfinite(after[k]) and np.isfinite(onset[k]) and inside.sum() >= 2:
            t_exit = steps[inside].max()
            wait[k], rise[k] = t_exit - after[k], onset[k] - t_exit
    return wait, rise


def smooth_rises(steps, end, onset) -> dict[str, np.ndarray]:
    """The plateau test's negative controls, per instance: monotone curves from step 1 with
    the same level at the end as the measured one. ``log-linear``: a straight line on the log
    axis, 0 at step 1; ``exponential``: ``end * (1 - exp(-(t - 1) / tau))`` (its asymptote
    the end level) that reaches half of it at the measured onset (as Chapter 2's smooth
    decay escapes at the measured step). Each is ``(n_logs, K)``, NaN at step 0; their onsets are where they reach half."""
    t = np.asarray(steps, dtype=float)[:, None]
    end, onset = np.asarray(end, float)[None], np.asarray(onset, float)[None]
    with np.errstate(divide="ignore", invalid="ignore"):
        log_line = end * np.log(t) / np.log(t[-1])
        tau = (onset - 1) / np.log(2)
        expo = end * (1 - np.exp(-(t - 1) / tau))
    out = {"log-linear": log_line, "exponential": expo}
    return {n: np.where(t >= 1, c, np.nan) for n, c in out.items()}

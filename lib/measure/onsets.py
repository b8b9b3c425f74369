"""When an event comes on a logged curve: onsets, escapes, and the order of the stairs.

A curve is logged at steps ``(n_logs,)``, one column per instance. An onset is the first
logged step at which a curve reaches a level; an escape, the first at which a sign-bit loss
falls below a fraction of ``ln 2``. A stair that never comes reads ``inf`` (or NaN, where
the function says so), so that an order check fails when a stair is missing.
"""

from __future__ import annotations

import numpy as np
import torch

from . import metrics as M

__all__ = [
    "onset_step",
    "relative_onset",
    "rise_onset",
    "escape_steps",
    "stair_onsets",
    "staircase_climbs",
]


def _np(x) -> np.ndarray:
    return x.detach().cpu().numpy() if torch.is_tensor(x) else np.asarray(x, dtype=float)


def onset_step(steps, values, threshold: float):
    """The first logged step at which ``values >= threshold``.

    ``steps`` is ``(n_logs,)``; ``values`` is ``(n_logs,)`` (returns a float) or
    ``(n_logs, K)`` (returns a ``(K,)`` tensor, one onset per instance). An instance
    that never reaches the threshold gets NaN; NaN values count as not reached.
    """
    steps = M.as_f64(_np(steps))
    v = M.as_f64(_np(values))  # lists with None become NaN
    if v.shape[0] != steps.shape[0]:
        raise ValueError(f"{steps.shape[0]} steps but values has {v.shape[0]} rows")
    hit = v >= threshold
    first = hit.to(torch.int64).argmax(0)  # index of the first True (0 if none)
    onset = torch.where(hit.any(0), steps[first], torch.nan)
    return float(onset) if onset.dim() == 0 else onset


def relative_onset(steps, curves, frac: float = 0.5, floor: float = 0.0):
    """Onset of a stair, per instance: the first logged step at which the curve reaches
    ``max(frac * (its own maximum over the run), floor)``.

    ``curves`` is ``(n_logs, K)``; NaN entries (e.g. step 0) are ignored. The threshold is
    relative to what each instance's curve measures, so it needs no constant tuned to a
    run; ``floor`` (e.g. a run's permutation floor, :func:`lib.measure.nulls.floor_of`)
    keeps a curve that never rises above noise from getting an onset at all. Returns ``(onset (K,), threshold (K,))`` as numpy arrays;
    onset is NaN where the curve never reaches the threshold.
    """
    if not 0 < frac <= 1:
        raise ValueError(f"frac must be in (0, 1], got {frac}")
    curves = np.asarray(curves, dtype=float)
    if curves.ndim == 1:
        curves = curves[:, None]
    peak = np.nanmax(np.where(np.isnan(curves), -np.inf, curves), axis=0)
    thr = np.maximum(frac * peak, floor)
    onset = np.full(curves.shape[1], np.nan)
    for k in range(curves.shape[1]):  # K is a handful of instances
        if peak[k] > floor:
            onset[k] = float(onset_step(steps, curves[:, k], float(thr[k])))
    return onset, thr


def rise_onset(
    steps, curves, start, frac: float = 0.5, min_rise: float = 0.0, floor: float = -np.inf
):
    """Onset of a *later* stair, per instance: where the curve's largest climb after
    ``start`` is half done.

    A target that shares geometry with an earlier one moves with it at first (up, and back
    down); what marks a stair of its own is a climb *after* the earlier stair set in. For
    instance ``k``, over the logged steps ``t >= start[k]``, the climb to ``t`` is the curve
    at ``t`` minus its lowest value since ``start[k]``; ``rise`` is the largest climb,
    ``base`` the trough it starts from, and the onset the step at which the curve passes
    ``base + frac * rise`` for good: the last upward crossing before the peak, so that a
    transient that reaches the level and falls back is not the onset. A rise of at most ``min_rise`` (e.g. the
    half-width of the curve's null band), a peak of at most ``floor`` (e.g. clearly above
    the null), or a ``start`` of NaN, gives no onset (NaN).

    ``curves`` is ``(n_logs, K)``, ``start`` ``(K,)``. Returns ``(onset (K,), rise (K,),
    base (K,))`` as numpy arrays; ``rise`` is NaN where ``start`` is.
    """
    if not 0 < frac <= 1:
        raise ValueError(f"frac must be in (0, 1], got {frac}")
    steps = np.asarray(steps, dtype=float)
    curves = np.asarray(curves, dtype=float)
    if curves.ndim == 1:
        curves = curves[:, None]
    start = np.broadcast_to(np.asarray(start, dtype=float), curves.shape[1:])
    if curves.shape[0] != steps.shape[0]:
        raise ValueError(f"{steps.shape[0]} steps but curves has {curves.shape[0]} rows")
    onset, rise, base = (np.full(curves.shape[1], np.nan) for _ in range(3))
    for k in range(curves.shape[1]):  # K is a handful of instances
        if not np.isfinite(start[k]) or not (steps >= start[k]).any():
            continue
        i0 = int(np.argmax(steps >= start[k]))
        c = np.nan_to_num(curves[i0:, k], nan=-np.inf)
        trough = np.minimum.accumulate(np.where(np.isfinite(c), c, np.inf))
        climb = c - trough
        top = int(np.argmax(climb))
        rise[k] = climb[top]
        low = int(np.argmax(c[: top + 1] == trough[top]))  # where that trough was
        base[k] = trough[top]
        if rise[k] > min_rise and c[top] > floor:
            below = np.flatnonzero(c[low : top + 1] < base[k] + frac * rise[k])
            onset[k] = steps[i0 + low + (int(below[-1]) + 1 if below.size else 0)]
    return onset, rise, base


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

    Same rule as :func:`lib.measure.onsets.relative_onset`, with ``inf`` (not NaN) for a stair that never
    comes, so that ``onset0 < onset1`` fails when order 1 never rises.
    """
    on, _ = relative_onset(steps, curve, frac=frac, floor=floor)
    return np.where(np.isnan(on), np.inf, on)


def staircase_climbs(onsets_by_order) -> bool:
    """The staircase check: every onset finite and strictly increasing with the order.

    ``onsets_by_order`` is a list (order 0, 1, ...) of per-instance onset arrays. False if
    any stair never comes (``inf``) or comes out of order, in any instance.
    """
    on = np.stack([np.asarray(o, dtype=float) for o in onsets_by_order])
    return bool(np.isfinite(on).all() and np.all(np.diff(on, axis=0) > 0))


def half_onset(steps, curves) -> np.ndarray:
    """The first logged step at which each curve reaches half its last value."""
    c = np.nan_to_num(np.asarray(curves, dtype=float), nan=-np.inf)
    hit = c >= c[-1:] / 2
    return np.where(hit.any(0), np.asarray(steps, dtype=float)[hit.argmax(0)], np.nan)


def log_index(steps, onsets) -> np.ndarray:
    """Position of each onset on the logging grid (NaN stays NaN)."""
    onsets = np.asarray(onsets, dtype=float)
    idx = np.searchsorted(np.asarray(steps), np.nan_to_num(onsets, nan=0)).astype(float)
    return np.where(np.isnan(onsets), np.nan, idx)


def onset_moves(steps, a, b) -> np.ndarray:
    """How many logging steps each onset of ``a`` lies from the same instance's in ``b``:
    0 where neither has a stair, infinite where only one has."""
    ia, ib = log_index(steps, a), log_index(steps, b)
    return np.where(np.isnan(ia) & np.isnan(ib), 0.0, np.nan_to_num(np.abs(ia - ib), nan=np.inf))

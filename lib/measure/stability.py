"""Does a rerun read the same stairs? Stability of the staircase under reruns.

A stability rerun trains a run again from a perturbed init or on another number of
threads, for as long as its base run needs (:func:`rerun_horizon`), and is read against the
base run's onset levels. :func:`stability` compares the two readings seed by seed, in
logged steps (:func:`log_step_shift`); :func:`across_reruns` combines several reruns;
:func:`rerun_divergence` says how far a rerun's curve drifted from its base run's.
"""

from __future__ import annotations

import numpy as np

from .staircase import Stairs

__all__ = ["rerun_horizon", "log_step_shift", "across_reruns", "rerun_divergence", "stability"]


def rerun_horizon(steps, base: Stairs, tol: int) -> int:
    """The last step a stability rerun of ``base`` (logged on ``steps``) has to train for.

    A rerun event more than ``tol`` logged steps after the base run's last event fails the
    check (:func:`stability`) wherever it falls, so the rerun may stop ``tol`` logged steps
    after that event: an event it then never reaches reads ``inf``, which is more than
    ``tol`` logged steps away too. Where the base run misses an event (``inf``), the rerun
    runs to the end: a late event there would otherwise go unseen. Read the truncated rerun
    against the base run's onset levels (:meth:`lib.measure.staircase.BitRun.stairs`), not its own maximum.
    """
    steps = np.asarray(steps)
    events = np.concatenate([*base.onsets.values(), *base.escapes.values()]).astype(float)
    if not np.isfinite(events).all():
        return int(steps[-1])
    last = int(np.searchsorted(steps, events.max()))
    return int(steps[min(last + tol, len(steps) - 1)])


def log_step_shift(steps, a, b) -> np.ndarray:
    """Per instance, how many logged steps apart two step readings are (``inf`` = never).

    ``a`` and ``b`` are steps of the grid ``steps`` (or ``inf``, read as one step past its
    end). Two readings that are both ``inf`` are 0 apart.
    """
    steps = np.asarray(steps, dtype=float)
    idx = lambda v: np.where(
        np.isfinite(v), np.searchsorted(steps, np.where(np.isfinite(v), v, 0.0)), len(steps)
    )
    return np.abs(idx(np.asarray(a, dtype=float)) - idx(np.asarray(b, dtype=float)))


def across_reruns(outs, tol: int) -> dict:
    """Several :func:`stability` readings of one run (one per rerun), combined per seed.

    Returns ``{"decided": ..., "timing_ok": ..., "max_shift": ...}``, each ``(seeds,)``:
    the verdict is the same in every rerun (else the seed is undecided: not a result), every
    onset and escape stays within ``tol`` logged steps in every rerun, and the largest shift.
    """
    return {
        "decided": np.logical_and.reduce([o["same_verdict"] for o in outs]),
        "timing_ok": np.logical_and.reduce([o["shift"] <= tol for o in outs]),
        "max_shift": np.max([o["shift"] for o in outs], 0),
    }


def rerun_divergence(base_steps, base, other_steps, other, until) -> np.ndarray:
    """Per instance, how far a rerun's logged curve has drifted from its base run's.

    ``base`` and ``other`` are ``(n_logs, K)`` curves (e.g. the full-data loss) logged on
    ``base_steps`` and ``other_steps`` (a rerun cut at its horizon logs a prefix of its base
    run's steps). Returns ``(K,)``: the largest ``|other - base| / |base|`` over the steps
    both logged, up to ``until[k]`` (``inf``: all of them). A copy gives 0.
    """
    common, ib, io = np.intersect1d(np.asarray(base_steps), np.asarray(other_steps),
                                    return_indices=True)  # fmt: skip
    b, o = np.asarray(base, dtype=float)[ib], np.asarray(other, dtype=float)[io]
    rel = np.abs(o - b) / np.maximum(np.abs(b), np.finfo(float).tiny)
    upto = common[:, None] <= np.asarray(until, dtype=float)[None]
    return np.where(upto, rel, 0.0).max(0)


def stability(steps, base: Stairs, other: Stairs, tol: int = 2) -> dict:
    """Does a rerun (perturbed init, other thread count) read the same stairs as ``base``?

    Per seed: the largest shift, in logged steps (:func:`log_step_shift`), of any onset or
    escape, and whether the staircase verdict (:meth:`Stairs.climbs_per_seed`) is the same.
    Returns ``{"shift": (seeds,) ints, "same_verdict": (seeds,) bools, "holds": (seeds,)
    bools}``, ``holds`` where the shift is at most ``tol`` and the verdict is the same.
    """
    shifts = [log_step_shift(steps, base.onsets[o], other.onsets[o]) for o in base.onsets]
    shifts += [log_step_shift(steps, base.escapes[b], other.escapes[b]) for b in base.escapes]
    shift = np.max(np.stack(shifts), 0)
    same = np.array(base.climbs_per_seed()) == np.array(other.climbs_per_seed())
    return {"shift": shift, "same_verdict": same, "holds": (shift <= tol) & same}

"""Reading a curve at a matched loss (Chapter 8): two arms compared where both reach one loss.

Arms that learn at different speeds are compared at the same *loss*, not at the same step:
:func:`at_matched_loss` reads each instance where its logged loss first falls to a target,
and :func:`sharper_at_matched_loss` is the chapter's headline check built on it.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

__all__ = ["at_matched_loss", "first_log_below", "SharperCheck", "sharper_at_matched_loss"]


def at_matched_loss(loss: np.ndarray, values: np.ndarray, target: float) -> np.ndarray:
    """Each instance's ``values`` where its (logged) loss first falls to ``target``,
    interpolated linearly in log-loss between the two logging steps around that crossing.

    ``loss`` and ``values`` are (n_logs, K); instances that never reach ``target`` give NaN.
    """
    out = np.full(loss.shape[1], np.nan)
    for k in range(loss.shape[1]):
        below = np.nonzero(loss[:, k] <= target)[0]
        if len(below) == 0:
            continue
        j = below[0]
        if j == 0:
            out[k] = values[0, k]
            continue
        l0, l1 = np.log(loss[j - 1, k]), np.log(loss[j, k])
        w = (l0 - np.log(target)) / (l0 - l1)
        out[k] = (1 - w) * values[j - 1, k] + w * values[j, k]
    return out


def first_log_below(loss: np.ndarray, target: float) -> np.ndarray:
    """Index of the first logging step at which each instance's loss is <= target (or -1)."""
    idx = np.full(loss.shape[1], -1)
    for k in range(loss.shape[1]):
        below = np.nonzero(loss[:, k] <= target)[0]
        idx[k] = below[0] if len(below) else -1
    return idx


class SharperCheck(NamedTuple):
    """The result of :func:`sharper_at_matched_loss`."""

    holds: bool
    loss: float  # the matched loss both arms were read at
    test: np.ndarray  # (S,) distinct mass of the test arm there, per seed
    ref: np.ndarray  # (S,) the same for the reference arm


def sharper_at_matched_loss(loss_test, a_test, loss_ref, a_ref) -> SharperCheck:
    """The headline check of Chapter 8 (``sec-qkov-ratio``): at one loss that both arms reach, does
    the test arm put more attention on the distinct tokens than the reference arm, in every
    seed?

    ``loss_*`` and ``a_*`` are (n_logs, S) held-out losses and distinct-token masses of the
    two arms, column ``s`` of each from the same seed. The matched loss is the largest of
    the instances' lowest logged losses, so every instance reaches it; each instance is
    read there by :func:`at_matched_loss`. Applied to faster QK (r > 1) against equal
    rates it should hold; to slower QK (r < 1) it should not (the negative control).
    """
    loss_test, loss_ref = np.asarray(loss_test), np.asarray(loss_ref)
    if loss_test.shape[1] != loss_ref.shape[1]:
        raise ValueError("the two arms must have the same seeds (columns)")
    loss = float(max(loss_test.min(0).max(), loss_ref.min(0).max()))
    t = at_matched_loss(loss_test, np.asarray(a_test), loss)
    r = at_matched_loss(loss_ref, np.asarray(a_ref), loss)
    return SharperCheck(bool(np.all(t > r)), loss, t, r)

"""Rates over perturbed copies: how often a seed's verdict comes out one way.

A seed of the attention staircase can change its verdict under a relative change of 1e-6
in its initial weights: the verdict is then not a property of the seed but a coin, and the
book measures its odds. Each seed runs as an ensemble of copies whose inits differ by that
much (:func:`lib.experiments.staircase_runs.train_bits` with ``copies``); :func:`climb_rates` turns the
per-copy verdicts into one rate per seed with a Wilson score interval, the interval that
keeps its coverage at rates near 0 or 1 and at a handful of copies (Wilson 1927; Brown,
Cai and DasGupta 2001).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import scipy.stats

__all__ = ["Rate", "wilson", "climb_rates", "pooled_rate"]


class Rate(NamedTuple):
    """``k`` successes of ``n``: the rate ``p = k / n`` and its Wilson interval ``[lo, hi]``."""

    k: int
    n: int
    p: float
    lo: float
    hi: float

    def interval(self) -> tuple[float, float, float]:
        """``(p, lo, hi)``, the form :func:`lib.book.page.interval` and :func:`lib.book.page.table` read."""
        return (self.p, self.lo, self.hi)


def wilson(k: int, n: int, level: float = 0.95) -> Rate:
    """The rate ``k / n`` with its Wilson score interval at ``level`` (scipy's binomtest)."""
    k, n = int(k), int(n)
    if n < 1 or not 0 <= k <= n:
        raise ValueError(f"need 0 <= k <= n and n >= 1, got k={k}, n={n}")
    ci = scipy.stats.binomtest(k, n).proportion_ci(confidence_level=level, method="wilson")
    return Rate(k, n, k / n, float(ci.low), float(ci.high))


def climb_rates(holds, level: float = 0.95) -> list[Rate]:
    """One :class:`Rate` per seed from per-copy verdicts ``holds`` of shape (seeds, copies)."""
    h = np.asarray(holds, dtype=bool)
    if h.ndim != 2:
        raise ValueError(f"holds must be (seeds, copies), got shape {h.shape}")
    return [wilson(int(row.sum()), row.size, level) for row in h]


def pooled_rate(holds, level: float = 0.95) -> Rate:
    """The share of all (seed, copy) instances that hold, with its Wilson interval.

    The interval treats the instances as independent; copies of one seed are not, so read
    it as a lower bound on the uncertainty, and the per-seed rates for the spread.
    """
    h = np.asarray(holds, dtype=bool)
    return wilson(int(h.sum()), h.size, level)


def wilson_at_z(k: int, n: int, z: float = 1.96) -> tuple[float, float, float]:
    """A rate ``k / n`` and its Wilson score interval."""
    if n == 0:
        return (float("nan"),) * 3
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return p, max(0.0, centre - half), min(1.0, centre + half)

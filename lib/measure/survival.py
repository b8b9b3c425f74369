"""Event times with censoring: Kaplan-Meier curves, medians and their intervals.

An event that has not come by a run's horizon is *censored* there: it comes later, if at
all. Times are per seed, ``inf`` where censored; the horizon is the run's last step. The
curves are scipy's Kaplan-Meier estimate (``scipy.stats.ecdf`` on ``CensoredData``); the
intervals are seed bootstraps (``scipy.stats.bootstrap``'s resamples, read by percentile,
since a median can itself be censored).
"""

from __future__ import annotations

import warnings
from typing import NamedTuple

import numpy as np
import scipy.stats

__all__ = ["Estimate", "km", "km_median", "median_interval", "ratio_interval", "sign_test"]


class Estimate(NamedTuple):
    """A value with its interval ``[lo, hi]`` (``inf`` where the bound is censored)."""

    value: float
    lo: float
    hi: float

    def interval(self) -> tuple[float, float, float]:
        return (self.value, self.lo, self.hi)


def _split(times, horizon: float):
    t = np.asarray(times, dtype=float)
    if t.ndim != 1 or t.size == 0:
        raise ValueError(f"times must be a non-empty 1-d array, got shape {t.shape}")
    if np.isnan(t).any() or (t[np.isfinite(t)] > horizon).any():
        raise ValueError(f"times must be numbers <= the horizon {horizon:g}, or inf (censored)")
    done = np.isfinite(t)
    return t[done], np.full(int((~done).sum()), float(horizon))


def km(times, horizon: float):
    """The Kaplan-Meier estimate of ``P(event after t)``: scipy's ``ECDFResult`` (``.sf``
    has ``.quantiles``, ``.probabilities`` and ``.confidence_interval()``)."""
    events, censored = _split(times, horizon)
    if events.size == 0:
        raise ValueError("no event before the horizon: the curve is flat at 1")
    return scipy.stats.ecdf(scipy.stats.CensoredData(uncensored=events, right=censored))


def km_median(times, horizon: float) -> float:
    """The first time at which the Kaplan-Meier survival reaches 1/2 (``inf``: not by the
    horizon)."""
    events, _ = _split(times, horizon)
    if events.size == 0:
        return np.inf
    sf = km(times, horizon).sf
    hit = sf.probabilities <= 0.5
    return float(sf.quantiles[np.argmax(hit)]) if hit.any() else np.inf


def _boot(stat, data, n_boot: int, level: float, seed: int):
    """A percentile interval from scipy's seed bootstrap; resamples whose statistic is
    undefined (NaN, e.g. two censored medians in a ratio) are left out of the quantiles."""
    with np.errstate(invalid="ignore", divide="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", scipy.stats.DegenerateDataWarning)  # read below
        res = scipy.stats.bootstrap(
            data, stat, paired=True, vectorized=False, n_resamples=n_boot,
            confidence_level=level, method="basic", random_state=np.random.default_rng(seed),
        )  # fmt: skip
    dist = np.asarray(res.bootstrap_distribution, dtype=float)
    dist = dist[~np.isnan(dist)]
    if dist.size == 0:
        return np.nan, np.nan
    alpha = (1 - level) / 2
    q = lambda p: float(
        np.quantile(dist, p, method="inverted_cdf")
    )  # no interpolation: inf is a value
    return q(alpha), q(1 - alpha)


def median_interval(times, horizon: float, n_boot: int = 999, level: float = 0.95, seed: int = 0):
    """The Kaplan-Meier median over seeds with its seed-bootstrap ``level`` interval."""
    t = np.asarray(times, dtype=float)
    lo, hi = _boot(lambda s: km_median(s, horizon), (t,), n_boot, level, seed)
    return Estimate(km_median(t, horizon), lo, hi)


def ratio_interval(slow, fast, horizons, n_boot: int = 999, level: float = 0.95, seed: int = 0):
    """The ratio of two arms' Kaplan-Meier medians, ``median(slow) / median(fast)``, with a
    bootstrap interval over seeds, *paired*: ``slow[i]`` and ``fast[i]`` share seed i's init.
    ``horizons`` is ``(horizon of slow, horizon of fast)``."""
    a, b = np.asarray(slow, dtype=float), np.asarray(fast, dtype=float)
    if a.shape != b.shape:
        raise ValueError(f"paired arms need one time per seed each, got {a.shape} and {b.shape}")
    stat = lambda s, f: km_median(s, horizons[0]) / km_median(f, horizons[1])
    with np.errstate(invalid="ignore", divide="ignore"):
        value = stat(a, b)
    return Estimate(value, *_boot(stat, (a, b), n_boot, level, seed))


def sign_test(first, second):
    """Over seeds where both events came, how often ``first`` comes strictly before
    ``second``, after it, and tied; with scipy's two-sided exact binomial p-value on the
    untied seeds (1.0 where every seed ties). Returns ``(before, after, ties, p)``."""
    a, b = np.asarray(first, dtype=float), np.asarray(second, dtype=float)
    both = np.isfinite(a) & np.isfinite(b)
    before, after = int((a[both] < b[both]).sum()), int((a[both] > b[both]).sum())
    ties = int(both.sum()) - before - after
    n = before + after
    p = scipy.stats.binomtest(before, n).pvalue if n else 1.0
    return before, after, ties, float(p)

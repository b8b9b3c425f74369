"""Inference over seeds: bootstrap intervals, exponents and trend tests.

A chapter's seeds are few; every interval here resamples *seeds* (or whole groups of
instances) with replacement, so that the spread it shows is the spread between runs.
:func:`seed_bootstrap` is the percentile bootstrap they share; :func:`loglog_exponent`
fits a power law across levels (Chapter 9), :func:`trend_test` tests a monotone trend
with a permutation test that keeps the design, and :func:`share_band` gives a share per
level with its interval. :func:`paired_test` compares two instances' end levels
(:func:`curve_level`) against a permutation null, seed by seed (Chapter 5), and
:func:`split_half_ceiling` is the highest correlation a target estimated from a corpus
allows, from its split-half agreement.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import scipy.stats

__all__ = [
    "Interval",
    "seed_bootstrap",
    "loglog_exponent",
    "TrendTest",
    "trend_test",
    "share_band",
    "split_half_ceiling",
    "curve_level",
    "paired_test",
]


class Interval(NamedTuple):
    """A statistic with its percentile interval over resampled seeds."""

    value: float  # on all seeds
    lo: float
    hi: float


def seed_bootstrap(stat, n_seeds: int, n_boot: int = 2000, seed: int = 0, level: float = 0.95):
    """Percentile bootstrap over seeds: ``stat(idx)`` on all seeds (``idx = 0..n_seeds-1``)
    and on ``n_boot`` resamples of the seed indices drawn with replacement.

    ``stat`` takes an int array of seed indices (with repeats) and returns a float (NaN
    where the resample cannot be read; those are left out of the interval). Returns an
    :class:`Interval`; its ends are NaN when fewer than half the resamples can be read.
    """
    if n_seeds < 1 or n_boot < 1 or not 0 < level < 1:
        raise ValueError(
            f"need n_seeds >= 1, n_boot >= 1, 0 < level < 1; got {n_seeds}, {n_boot}, {level}"
        )
    gen = np.random.default_rng(seed)
    draws = gen.integers(0, n_seeds, size=(n_boot, n_seeds))
    boot = np.array([stat(idx) for idx in draws], dtype=float)
    value = float(stat(np.arange(n_seeds)))
    ok = boot[np.isfinite(boot)]
    if len(ok) < n_boot / 2:
        return Interval(value, np.nan, np.nan)
    q = 100 * (1 - level) / 2
    lo, hi = np.percentile(ok, [q, 100 - q])
    return Interval(value, float(lo), float(hi))


def _loglog_fit(x: np.ndarray, y: np.ndarray, min_levels: int) -> float:
    ok = np.isfinite(y) & (y > 0)
    if ok.sum() < min_levels:
        return np.nan
    return float(np.polyfit(np.log(x[ok]), np.log(y[ok]), 1)[0])


def loglog_exponent(x, Y, min_levels: int = 2, n_boot: int = 2000, seed: int = 0, level=0.95):
    r"""The exponent :math:`a` of :math:`y\propto x^a`, with a bootstrap interval over seeds.

    ``x`` is ``(n,)`` positive levels (e.g. rates); ``Y`` is ``(n, S)``, one value per level
    and seed, NaN where an instance does not count (excluded, or its event never came).
    At each level the median over the seeds that count is taken, and the exponent is the
    least-squares slope of log median against log x over the levels that have one; with
    fewer than ``min_levels`` such levels it is NaN. The interval resamples the seeds
    (columns) with replacement (:func:`seed_bootstrap`).
    """
    x = np.asarray(x, dtype=float)
    Y = np.asarray(Y, dtype=float)
    if Y.ndim != 2 or Y.shape[0] != x.shape[0]:
        raise ValueError(f"Y must be (len(x), n_seeds) = ({x.shape[0]}, S), got {Y.shape}")
    if np.any(x <= 0):
        raise ValueError("the levels x must be positive for a log-log fit")

    def stat(idx):
        cols = Y[:, idx]
        with np.errstate(all="ignore"):
            counted = np.isfinite(cols).any(1)
            med = np.full(len(x), np.nan)
            med[counted] = np.nanmedian(cols[counted], axis=1)
        return _loglog_fit(x, med, min_levels)

    return seed_bootstrap(stat, Y.shape[1], n_boot, seed, level)


class TrendTest(NamedTuple):
    """The result of :func:`trend_test`."""

    rho: float  # Spearman's rank correlation of y with x over the instances that count
    p: float  # permutation p-value (x shuffled within each group), for ``alternative``
    lo: float  # bootstrap interval of rho over groups (resampled with replacement)
    hi: float
    n: int  # instances that count


def _spearman_rows(rx: np.ndarray, ry: np.ndarray) -> np.ndarray:
    """Pearson correlation of each row of ``rx`` (m, n) with ``ry`` (n,): ranks in, rho out."""
    a = rx - rx.mean(-1, keepdims=True)
    b = ry - ry.mean()
    with np.errstate(all="ignore"):
        return (a @ b) / (np.sqrt((a * a).sum(-1)) * np.sqrt((b * b).sum()))


def trend_test(
    x,
    y,
    groups,
    alternative: str = "less",
    n_perm: int = 2000,
    n_boot: int = 2000,
    seed: int = 0,
    level: float = 0.95,
) -> TrendTest:
    """Does ``y`` fall (``alternative="less"``) or rise (``"greater"``) with ``x``?

    Spearman's rho between ``x`` and ``y`` over the instances where ``y`` is finite (NaN
    marks an instance that does not count). The p-value is a permutation test that keeps
    the design: ``x`` is shuffled *within* each group (e.g. the rates of one seed among
    that seed's instances), ``n_perm`` times; ``"two-sided"`` compares |rho|. The interval
    resamples whole groups with replacement (:func:`seed_bootstrap`). One value per
    instance: ``x``, ``y`` and ``groups`` are ``(n,)``.
    """
    if alternative not in ("less", "greater", "two-sided"):
        raise ValueError(
            f"alternative must be 'less', 'greater' or 'two-sided', got {alternative!r}"
        )
    x, y = np.asarray(x, dtype=float).ravel(), np.asarray(y, dtype=float).ravel()
    groups = np.asarray(groups).ravel()
    if not (x.shape == y.shape == groups.shape):
        raise ValueError(
            f"x, y and groups must have one value per instance: {x.shape}, {y.shape}, {groups.shape}"
        )
    ok = np.isfinite(y) & np.isfinite(x)
    x, y, groups = x[ok], y[ok], groups[ok]
    if len(y) < 3:
        return TrendTest(np.nan, np.nan, np.nan, np.nan, len(y))
    rx, ry = scipy.stats.rankdata(x), scipy.stats.rankdata(y)
    rho = float(_spearman_rows(rx[None], ry)[0])
    if not np.isfinite(rho):  # y or x constant: there is nothing to rank
        return TrendTest(rho, np.nan, np.nan, np.nan, len(y))
    gen = np.random.default_rng(seed)
    perm = np.tile(np.arange(len(x)), (n_perm, 1))
    labels = np.unique(groups)
    members = [np.nonzero(groups == label)[0] for label in labels]
    for where in members:  # shuffle x among the instances of one group only
        perm[:, where] = where[gen.permuted(np.tile(np.arange(len(where)), (n_perm, 1)), axis=1)]
    null = _spearman_rows(rx[perm], ry)
    if alternative == "less":
        p = (1 + np.sum(null <= rho + 1e-12)) / (n_perm + 1)
    elif alternative == "greater":
        p = (1 + np.sum(null >= rho - 1e-12)) / (n_perm + 1)
    else:
        p = (1 + np.sum(np.abs(null) >= abs(rho) - 1e-12)) / (n_perm + 1)

    def stat(idx):
        rows = np.concatenate([members[i] for i in idx])
        rxb, ryb = scipy.stats.rankdata(x[rows]), scipy.stats.rankdata(y[rows])
        return float(_spearman_rows(rxb[None], ryb)[0])  # NaN where a resample is constant

    iv = seed_bootstrap(stat, len(labels), n_boot, seed, level)
    return TrendTest(rho, float(p), iv.lo, iv.hi, len(y))


def split_half_ceiling(split_half: float) -> float:
    """The highest R an embedding can reach against a target estimated on the whole split,
    from the split-half agreement ``r`` of its halves: the square root of the Spearman-Brown
    reliability ``2r / (1 + r)`` (the correlation of a noisy estimate with the quantity it
    estimates). NaN where ``r <= 0``: no reliable target."""
    r = float(split_half)
    return float(np.sqrt(2 * r / (1 + r))) if r > 0 else float("nan")


def curve_level(R, at: int, n: int = 3) -> np.ndarray:
    """A curve's level at log ``at``: its mean over the ``n`` logs ending there (per
    instance, or per instance and permutation for a null)."""
    return np.asarray(R)[max(at - n + 1, 1) : at + 1].mean(0)


def share_band(flags: np.ndarray, n_boot: int, seed: int, level: float = 0.95) -> np.ndarray:
    """Per rate, the share of the counted instances that are True, with its bootstrap
    interval over seeds: ``flags`` is (r, seed) with NaN where an instance does not count;
    returns (r, 3) rows of (share, lo, hi), NaN at a rate without counted instances."""
    out = np.full((flags.shape[0], 3), np.nan)
    for i, row in enumerate(flags):
        if not np.isfinite(row).any():
            continue

        def share(idx, row=row):
            picked = row[idx]
            ok = np.isfinite(picked)
            return float(picked[ok].mean()) if ok.any() else np.nan

        out[i] = seed_bootstrap(share, len(row), n_boot, seed, level)
    return out


def paired_test(curve: dict, a, b, end_logs: int, q: float) -> dict:
    """The paired test, seed by seed: instance ``a[k]``'s level at the end minus instance
    ``b[k]``'s (both read against the same target; :func:`curve_level` over ``end_logs``
    logs), and the ``q`` quantile of the same difference under the permutation null (the
    same permutations for both, so a permutation moves both readings alike).

    ``curve`` holds ``R`` ``(n_logs, K)`` and ``null`` ``(n_logs, K, n_perm)``. Returns per
    seed ``a``, ``b``, ``diff``, ``null`` (the quantile) and ``margin = diff - null``;
    positive where ``a`` beats ``b``."""
    last = len(curve["R"]) - 1
    ra, rb = (
        curve_level(curve["R"][:, a], last, end_logs),
        curve_level(curve["R"][:, b], last, end_logs),
    )
    na = curve_level(curve["null"][:, a], last, end_logs)
    nb = curve_level(curve["null"][:, b], last, end_logs)
    qd = np.quantile(na - nb, q, axis=-1)
    return dict(a=ra, b=rb, diff=ra - rb, null=qd, margin=ra - rb - qd)

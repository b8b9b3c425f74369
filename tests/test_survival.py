"""Event times with censoring: Kaplan-Meier medians, bootstrap intervals, the sign test."""

import numpy as np
import pytest

from lib.measure import survival as sv

INF = np.inf


def test_km_median_and_censoring():
    t = np.array([100.0, 200.0, 300.0, INF, 400.0])
    assert sv.km_median(t, 1000) == 300.0
    assert sv.km_median(np.array([100.0, INF, INF]), 1000) == INF  # half never comes
    assert sv.km_median(np.array([INF, INF]), 1000) == INF
    sf = sv.km(t, 1000).sf
    np.testing.assert_allclose(sf.probabilities[:4], [0.8, 0.6, 0.4, 0.2])


def test_intervals_cover_the_estimate_and_ratios_are_paired():
    rng = np.random.default_rng(0)
    fast = rng.uniform(100, 200, 20)
    slow = 10 * fast
    m = sv.median_interval(fast, 1000, n_boot=199)
    assert m.lo <= m.value <= m.hi
    r = sv.ratio_interval(slow, fast, (5000, 1000), n_boot=199)
    assert r.value == pytest.approx(10) and r.lo == pytest.approx(10) and r.hi == pytest.approx(10)
    censored = sv.ratio_interval(np.full(20, INF), fast, (5000, 1000), n_boot=99)
    assert censored.value == INF and censored.lo == INF


def test_sign_test_counts_before_after_and_ties():
    before, after, ties, p = sv.sign_test([1, 2, 3, INF, 5], [2, 2, 1, 5, 9])
    assert (before, after, ties) == (2, 1, 1) and p == pytest.approx(1.0)
    assert sv.sign_test([1] * 10, [2] * 10)[3] < 0.01
    assert sv.sign_test([INF], [1])[3] == 1.0


def test_bad_times_get_one_clear_line():
    with pytest.raises(ValueError, match="horizon"):
        sv.km_median(np.array([100.0, 2000.0]), 1000)
    with pytest.raises(ValueError, match="non-empty"):
        sv.km_median(np.array([]), 1000)
    with pytest.raises(ValueError, match="no event"):
        sv.km(np.array([INF]), 1000)
    with pytest.raises(ValueError, match="one time per seed"):
        sv.ratio_interval([1.0, 2.0], [1.0], (10, 10))

"""Inference over seeds (lib.measure.statistics): bootstrap intervals, exponents, trend tests,
the paired test of end levels and the split-half ceiling."""

from __future__ import annotations

import numpy as np
import pytest

from lib.measure import statistics


def test_seed_bootstrap_is_reproducible_and_brackets_the_statistic():
    v = np.random.default_rng(0).normal(2.0, 1.0, size=8)
    a = statistics.seed_bootstrap(lambda idx: v[idx].mean(), 8, n_boot=500, seed=3)
    b = statistics.seed_bootstrap(lambda idx: v[idx].mean(), 8, n_boot=500, seed=3)
    assert a == b
    assert a.value == pytest.approx(v.mean())
    assert a.lo < a.value < a.hi
    # a statistic that cannot be read in most resamples has no interval
    c = statistics.seed_bootstrap(lambda idx: np.nan if len(set(idx)) < 8 else 1.0, 8, n_boot=200)
    assert np.isnan(c.lo) and np.isnan(c.hi)
    with pytest.raises(ValueError):
        statistics.seed_bootstrap(lambda idx: 0.0, 0)


def test_loglog_exponent_recovers_a_planted_power_law_with_its_interval():
    gen = np.random.default_rng(1)
    x = np.array([0.01, 0.03, 0.1, 0.3, 1.0, 3.0])
    Y = 5 * x[:, None] ** -0.5 * np.exp(gen.normal(0, 0.2, size=(6, 5)))
    fit = statistics.loglog_exponent(x, Y, min_levels=4, n_boot=500)
    assert abs(fit.value + 0.5) < 0.1
    assert fit.lo < -0.5 < fit.hi
    # excluded instances (NaN) are left out, levels without any are dropped
    Y[0] = np.nan
    Y[2, :3] = np.nan
    fit2 = statistics.loglog_exponent(x, Y, min_levels=4, n_boot=500)
    assert abs(fit2.value + 0.5) < 0.15
    # too few levels: no exponent
    assert np.isnan(statistics.loglog_exponent(x, Y, min_levels=6, n_boot=50).value)
    # a flat law has an interval around 0
    flat = statistics.loglog_exponent(x, 200 * np.exp(gen.normal(0, 0.1, size=(6, 5))), n_boot=500)
    assert flat.lo < 0 < flat.hi
    with pytest.raises(ValueError):
        statistics.loglog_exponent(x, Y[:3])


def _design(n_levels=7, n_groups=5):
    x = np.tile(np.geomspace(0.01, 10, n_levels), n_groups)
    groups = np.repeat(np.arange(n_groups), n_levels)
    return x, groups


def test_trend_test_finds_a_planted_trend():
    x, groups = _design()
    gen = np.random.default_rng(2)
    y = -0.1 * np.log(x) + gen.normal(0, 0.2, size=x.shape)
    t = statistics.trend_test(x, y, groups, n_perm=500, n_boot=300)
    assert t.rho < 0 and t.p < 0.05 and t.hi < 0 and t.n == len(x)
    # the same data read for a rise: no evidence
    assert statistics.trend_test(x, y, groups, alternative="greater", n_perm=500, n_boot=50).p > 0.5


def test_trend_test_is_calibrated_when_there_is_no_trend():
    x, groups = _design()
    gen = np.random.default_rng(3)
    rejections = 0
    for _ in range(60):
        # seeds differ (a group offset) but nothing depends on x
        y = gen.normal(0, 1, size=x.shape) + np.repeat(gen.normal(0, 2, size=5), 7)
        rejections += statistics.trend_test(x, y, groups, n_perm=300, n_boot=20, seed=_).p < 0.05
    assert rejections <= 8  # about 3 expected at alpha = 0.05


def test_trend_test_drops_instances_that_do_not_count_and_refuses_bad_input():
    x, groups = _design()
    y = -np.log(x)
    y[[0, 8, 20]] = np.nan
    t = statistics.trend_test(x, y, groups, n_perm=200, n_boot=50)
    assert t.n == len(x) - 3 and t.rho == pytest.approx(-1.0)
    assert np.isnan(statistics.trend_test(x[:2], y[:2], groups[:2]).rho)
    flat = statistics.trend_test(
        x, np.ones_like(x), groups
    )  # a constant has no trend and no p-value
    assert np.isnan(flat.rho) and np.isnan(flat.p)
    with pytest.raises(ValueError):
        statistics.trend_test(x, y, groups, alternative="down")
    with pytest.raises(ValueError):
        statistics.trend_test(x, y[:-1], groups)


def test_paired_test_is_the_difference_of_levels_against_the_same_permutations():
    rng = np.random.default_rng(0)
    n_logs, K, P, end_logs, q = 6, 4, 500, 3, 0.99
    R = rng.normal(0, 0.01, (n_logs, K))
    R[:, :2] += 0.1  # instances 0 and 1 carry the target, 2 and 3 do not
    null = rng.normal(0, 0.02, (n_logs, K, P))
    curve = {"R": R, "null": null}
    out = statistics.paired_test(curve, [0, 1], [2, 3], end_logs, q)
    last = R[-end_logs:].mean(0)
    np.testing.assert_allclose(out["diff"], last[:2] - last[2:])
    diff_null = null[-end_logs:].mean(0)
    np.testing.assert_allclose(out["null"], np.quantile(diff_null[:2] - diff_null[2:], q, axis=-1))
    assert (out["margin"] > 0).all()
    assert (statistics.paired_test(curve, [2, 3], [0, 1], end_logs, q)["margin"] < 0).all()


def test_curve_levels_never_read_step_0_and_the_ceiling_is_spearman_browns():
    R = np.arange(10.0)[:, None]
    assert statistics.curve_level(R, 9, 3)[0] == 8 and statistics.curve_level(R, 1, 3)[0] == 1
    assert statistics.split_half_ceiling(1.0) == 1.0
    assert statistics.split_half_ceiling(1 / 3) == pytest.approx(np.sqrt(0.5))
    assert np.isnan(statistics.split_half_ceiling(0.0))
    assert np.isnan(statistics.split_half_ceiling(-0.2))

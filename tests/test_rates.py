"""lib/measure/rates.py: per-seed rates with Wilson intervals."""

import numpy as np
import pytest

from lib.measure import rates


def test_wilson_matches_the_formula():
    k, n, z = 6, 8, 1.959963984540054
    p = k / n
    centre = (p + z**2 / (2 * n)) / (1 + z**2 / n)
    half = z / (1 + z**2 / n) * np.sqrt(p * (1 - p) / n + z**2 / (4 * n**2))
    r = rates.wilson(k, n)
    assert (r.k, r.n, r.p) == (6, 8, 0.75)
    assert r.lo == pytest.approx(centre - half) and r.hi == pytest.approx(centre + half)
    assert r.interval() == (r.p, r.lo, r.hi)


def test_wilson_at_the_edges_stays_in_0_1():
    none, every = rates.wilson(0, 8), rates.wilson(8, 8)
    assert none.lo == 0 and 0 < none.hi < 0.4
    assert every.hi == pytest.approx(1) and 0.6 < every.lo < 1
    with pytest.raises(ValueError):
        rates.wilson(3, 2)


def test_climb_rates_per_seed_and_pooled():
    holds = np.array([[1, 1, 1, 1], [1, 0, 0, 0], [0, 0, 0, 0]], bool)
    per = rates.climb_rates(holds)
    assert [r.k for r in per] == [4, 1, 0] and all(r.n == 4 for r in per)
    assert rates.pooled_rate(holds).p == pytest.approx(5 / 12)
    with pytest.raises(ValueError, match="seeds, copies"):
        rates.climb_rates(holds.ravel())


def test_wilson_at_a_fixed_z_keeps_its_interval_inside_0_and_1():
    p, lo, hi = rates.wilson_at_z(5, 5)
    assert p == 1 and hi == 1 and 0.5 < lo < 0.6  # 5 of 5: [0.57, 1]
    p, lo, hi = rates.wilson_at_z(0, 10)
    assert p == 0 and lo == 0 and 0.25 < hi < 0.35

"""The stair readings of Chapter 5 (lib/experiments/ch05_real_language_models.py)."""

from __future__ import annotations

import numpy as np
import pytest

from lib.experiments import ch05_real_language_models as ex
from lib.experiments import config
from lib.training import engine

STEPS = engine.log_steps(3000, 40).astype(float)


def stair(onset, end=0.15, width=0.15):
    """A stair on the log axis: flat at 0, rising to ``end`` around ``onset``."""
    x = np.log10(np.maximum(STEPS, 1) / onset) / width
    return end / (1 + np.exp(-x))


def test_plateau_test_passes_a_stair_and_fails_smooth_rises_from_step_1():
    null_hi = np.full(len(STEPS), 0.03)
    # a plateau in linear time: flat, then a rise over a tenth of the onset's steps
    R = np.stack([0.15 / (1 + np.exp(-(STEPS - t) / (t / 10))) for t in (300, 600)], 1)
    R[0] = np.nan
    onset = ex.half_onset(STEPS, R)
    wait, rise = ex.plateau_and_rise(STEPS, R, null_hi, [2, 2], onset)
    assert (wait / rise >= 1).all()
    for name, curve in ex.smooth_rises(STEPS, R[-1], onset).items():
        assert np.isnan(curve[0]).all()
        np.testing.assert_allclose(curve[-1], R[-1], rtol=0.05 if name == "exponential" else 1e-12)
        assert (np.diff(curve[1:], axis=0) >= 0).all()
        w, r = ex.plateau_and_rise(STEPS, curve, null_hi, [2, 2], ex.half_onset(STEPS, curve))
        assert not (w / r >= 1).any(), name
    # no onset, or never inside the null: no verdict (NaN)
    w, r = ex.plateau_and_rise(STEPS, np.full((len(STEPS), 1), 0.1), null_hi, [2], [np.nan])
    assert np.isnan(w).all() and np.isnan(r).all()


def test_paired_test_is_the_difference_of_levels_against_the_same_permutations():
    rng = np.random.default_rng(0)
    n_logs, K, P = 6, 4, 500
    R = rng.normal(0, 0.01, (n_logs, K))
    R[:, :2] += 0.1  # instances 0 and 1 carry the target, 2 and 3 do not
    null = rng.normal(0, 0.02, (n_logs, K, P))
    curves = {"t": {"R": R, "null": null}}
    cfg = config(ex, "ci")
    out = ex.paired(curves, "t", [0, 1], [2, 3], cfg)
    last = R[-cfg.end_logs :].mean(0)
    np.testing.assert_allclose(out["diff"], last[:2] - last[2:])
    diff_null = null[-cfg.end_logs :].mean(0)
    q = np.quantile(diff_null[:2] - diff_null[2:], cfg.paired_q, axis=-1)
    np.testing.assert_allclose(out["null"], q)
    assert (out["margin"] > 0).all()
    assert (ex.paired(curves, "t", [2, 3], [0, 1], cfg)["margin"] < 0).all()


def test_stairs_read_the_order_and_levels_of_synthetic_curves():
    cfg = config(ex, "ci")
    n_logs, P = len(STEPS), 50
    flat = np.zeros((n_logs, P))
    band = {"null": None, "null_lo": np.full(n_logs, -0.03), "null_hi": np.full(n_logs, 0.03)}
    nxt = np.stack([stair(3, 0.6), stair(3, 0.6)], 1)
    res2 = np.stack([stair(200), np.zeros(n_logs)], 1)  # the second instance never climbs
    res3 = np.stack([stair(1000), stair(1000)], 1)
    curves = {
        n: dict(band, R=r, null=flat[:, None].repeat(2, 1))
        for n, r in (("next", nxt), ("res_skip2", res2), ("res_skip3", res3))
    }
    st = ex.stairs(STEPS, curves, cfg)
    assert st["next"][0] <= 4 and 150 <= st["res_skip2"][0] <= 260 and st["res_skip3"][0] >= 800
    assert np.isnan(st["res_skip2"][1]) and np.isnan(st["res_skip3"][1])  # no skip-2, no skip-3
    assert ex.climbs(st, [0, 1]).tolist() == [True, False]
    assert ex.climbs(st, [0, 1], "res_skip3").tolist() == [True, False]
    np.testing.assert_allclose(st["res_skip2_end"], res2[-cfg.end_logs :].mean(0))
    v = ex.verdicts(st, [0, 1], [0.1, -0.1])
    assert v.tolist() == [[True, True, True, True], [True, False, False, False]]


def test_onset_moves_wilson_and_levels():
    steps = np.array([0, 1, 2, 4, 8, 16])
    moves = ex.onset_moves(steps, [4, np.nan, np.nan, 16], [2, np.nan, 8, 4])
    assert moves.tolist() == [1, 0, np.inf, 2]
    p, lo, hi = ex.wilson(5, 5)
    assert p == 1 and hi == 1 and 0.5 < lo < 0.6  # 5 of 5: [0.57, 1]
    p, lo, hi = ex.wilson(0, 10)
    assert p == 0 and lo == 0 and 0.25 < hi < 0.35
    R = np.arange(10.0)[:, None]
    assert ex.level(R, 9, 3)[0] == 8 and ex.level(R, 1, 3)[0] == 1  # never reads step 0


def test_ceiling_and_instances():
    assert ex.ceiling(1.0) == 1.0 and ex.ceiling(1 / 3) == pytest.approx(np.sqrt(0.5))
    assert np.isnan(ex.ceiling(0.0)) and np.isnan(ex.ceiling(-0.2))
    cfg = config(ex, "ci")
    inst = ex.instances(cfg, ["markov1", "markov2"], copies=2)
    n = len(cfg.seeds)
    assert len(inst) == n * (2 + 2 + 2)
    small = inst.index(source="text", init="small", copy=0)
    assert [inst["seed"][k] for k in small] == list(cfg.seeds)
    for c in (1, 2):
        rows = inst.index(source="text", copy=c)
        assert [inst["seed"][k] for k in rows] == list(cfg.seeds)
        assert {inst["init"][k] for k in rows} == {"small"}
    assert ex.gammas(cfg, inst).count(cfg.gamma_large) == n
    assert set(round(f * cfg.steps) for f in cfg.lengths) <= set(ex.log_at(cfg).tolist())
    for scale in ("ci", "book", "paper"):
        c = config(ex, scale)
        assert c.widths[0] == c.d_model and c.runs[0] == ("shakespeare", "char")
        assert set(c.paired_asserted) <= set(c.runs)

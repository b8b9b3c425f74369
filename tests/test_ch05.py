"""The stair readings of Chapter 5 (lib/experiments/ch05_real_language_models.py)."""

from __future__ import annotations

import numpy as np

from lib.experiments import ch05_real_language_models as ex
from lib.experiments import config
from lib.training import engine

STEPS = engine.log_steps(3000, 40).astype(float)


def stair(onset, end=0.15, width=0.15):
    """A stair on the log axis: flat at 0, rising to ``end`` around ``onset``."""
    x = np.log10(np.maximum(STEPS, 1) / onset) / width
    return end / (1 + np.exp(-x))


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
    assert np.isnan(st["res_skip2"][1])  # no skip-2 stair
    # every onset is searched from step 1: instance 1's skip-3 stair is found without a
    # skip-2 stair before it, and only the order of the two counts as a climb in order
    assert st["res_skip3"][1] >= 800
    assert ex.climbs(st, [0, 1]).tolist() == [True, False]
    assert ex.climbs(st, [0, 1], "res_skip3").tolist() == [True, False]
    np.testing.assert_allclose(st["res_skip2_end"], res2[-cfg.end_logs :].mean(0))
    v = ex.verdicts(st, [0, 1], [0.1, -0.1])
    assert v.tolist() == [[True, True, True, True], [True, False, False, False]]


def test_instances_label_every_source_init_seed_and_copy():
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

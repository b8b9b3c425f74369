"""The stair readings of Chapter 5 (the package lib/experiments/ch05_real_language_models and
lib/experiments/real_lm_stairs.py)."""

from __future__ import annotations

import numpy as np
import torch

from lib.experiments import ch05_real_language_models as ex
from lib.experiments import config
from lib.experiments import real_lm_stairs as rd
from lib.training import engine

STEPS = engine.log_steps(3000, 40).astype(float)


def stair(onset, end=0.15, width=0.15):
    """A stair on the log axis: flat at 0, rising to ``end`` around ``onset``."""
    x = np.log10(np.maximum(STEPS, 1) / onset) / width
    return end / (1 + np.exp(-x))


def curves_of(**named):
    n_logs = len(STEPS)
    band = {"null_lo": np.full(n_logs, -0.03), "null_hi": np.full(n_logs, 0.03)}
    K = next(iter(named.values())).shape[1]
    null = np.random.default_rng(0).normal(0, 0.015, (n_logs, K, 200))
    return {n: dict(band, R=r, null=null) for n, r in named.items()}


def test_every_onset_is_searched_from_step_1_and_no_order_is_built_in():
    cfg = config(ex, "ci")
    nxt = np.stack([stair(3, 0.6), stair(3, 0.6)], 1)
    res2 = np.stack([stair(200), np.zeros(len(STEPS))], 1)  # the second never climbs
    res3 = np.stack([stair(1000), stair(1000)], 1)
    names = ["next", "res_skip2", "res_skip3"]
    st = rd.stairs(STEPS, curves_of(next=nxt, res_skip2=res2, res_skip3=res3), names, cfg)
    assert st["next"][0] <= 4 and 150 <= st["res_skip2"][0] <= 260 and st["res_skip3"][0] >= 800
    assert np.isnan(st["res_skip2"][1])
    # instance 1's skip-3 stair is found though no skip-2 stair came before it
    assert st["res_skip3"][1] >= 800
    assert rd.climbs(st, [0, 1], "res_skip2").tolist() == [True, False]
    assert rd.climbs(st, [0, 1], "res_skip3").tolist() == [True, True]
    np.testing.assert_allclose(st["res_skip2_end"], res2[-cfg.readings.end_logs :].mean(0))


def test_familywise_floor_passes_a_flat_control_and_catches_a_planted_stair():
    flat = np.zeros((len(STEPS), 3))
    planted = np.stack([stair(300, 0.2)] * 3, 1)
    curves = curves_of(res_skip2=flat, res_skip3=flat)
    floor, top = rd.familywise(curves, slice(None), ["res_skip2", "res_skip3"], 0.99)
    assert (top < floor).all()
    curves = curves_of(res_skip2=flat, res_skip3=planted)
    floor, top = rd.familywise(curves, slice(None), ["res_skip2", "res_skip3"], 0.99)
    assert (top > floor).all()


def test_order_test_finds_a_planted_order_and_not_a_shuffled_one():
    rising = np.array(
        [[5, 100, 900.0], [7, 200, 1500], [3, 80, np.nan]]
    )  # missing: past the horizon
    out = rd.order_test(rising, n_perm=10000)
    assert np.allclose(out["tau"], 1) and out["p"] < 0.01
    mixed = np.array([[900, 100, 5.0], [7, 1500, 200], [80, 3, 40]])
    assert rd.order_test(mixed, n_perm=10000)["p"] > 0.3
    assert np.isnan(rd.order_test(np.full((3, 3), np.nan), 100)["p"])


def test_resolved_stops_at_the_first_stair_whose_positive_control_fails():
    cfg = config(ex, "ci")
    positive = {
        1: np.array([1, 1, 1], bool),
        2: np.array([1, 1, 1], bool),
        3: np.array([1, 0, 1], bool),
        4: np.array([1, 1, 1], bool),
    }
    assert rd.resolved(positive, cfg) == 2


def test_two_sided_plateau_rejects_a_dip_below_the_band():
    n = len(STEPS)
    band = {"null_lo": np.full(n, -0.03), "null_hi": np.full(n, 0.03)}
    dip = np.where((STEPS > 10) & (STEPS < 300), -0.1, 0.0) + stair(400)
    flat = np.zeros(n) + stair(400)
    R = np.stack([dip, flat], 1)
    onset = np.array([400.0, 400.0])
    ratio = rd.plateau_two_sided(STEPS, dict(band, R=R), slice(None), np.array([5.0, 5.0]), onset)
    assert ratio[1] > ratio[0] or np.isnan(ratio[0])


def test_within_class_removes_the_class_means_and_token_classes_read_the_text():
    x = np.array([[1.0, 2], [3, 4], [10, 10], [12, 14]])
    out = rd.within_class(x, ["a", "a", "b", "b"])
    np.testing.assert_allclose(out[:2].mean(0), 0)
    np.testing.assert_allclose(out[2:].mean(0), 0)
    assert [rd.token_class(t) for t in ("Ġthe", "The", "7", ",", "Ġ")] == [
        "space-lower",
        "upper",
        "digit",
        "punct",
        "space-space",
    ]


def test_conditional_entropies_fall_with_context_and_vanish_on_a_cycle():
    cycle = torch.arange(3).repeat(200)
    H = rd.conditional_entropies(cycle, 3)
    assert abs(H[1] - np.log2(3)) < 1e-6 and H[2] < 1e-9 and H[4] < 1e-9


def test_semipartial_ceiling_is_one_for_a_target_with_itself_and_the_part_reads_less():
    gen = torch.Generator().manual_seed(0)
    a = {n: torch.randn(12, 7, generator=gen, dtype=torch.float64) for n in ("next", "res_skip2")}
    assert abs(ex.semipartial_agreement(a, a, "next", ()) - 1) < 1e-9
    part = ex.semipartial_agreement(a, a, "res_skip2", ("next",))
    assert 0 < part <= 1 + 1e-9


def test_instances_label_every_source_gamma_and_seed():
    cfg = config(ex, "ci")
    inst = ex.instances(cfg, ["markov1", "markov2"])
    n = len(cfg.seeds)
    assert len(inst) == n * (len(cfg.gammas) + 2)
    small = inst.index(source="text", gamma=cfg.gamma)
    assert [inst["seed"][k] for k in small] == list(cfg.seeds)
    assert {inst["gamma"][k] for k in inst.index(source="markov2")} == {cfg.gamma}
    for scale in ("ci", "book", "paper"):
        c = config(ex, scale)
        assert c.gammas[:2] == (c.gamma, c.gamma_large) and c.runs[0] == ("shakespeare", "char")
        assert ex.target_names(c) == ["next"] + [
            f"res_skip{k}" for k in range(2, max(c.chains.orders) + 1)
        ]
        assert all(n in ex.target_names(c) for n, _ in c.tests.paired_tests)


def test_learned_pairs_each_chain_model_with_the_one_below_seed_by_seed():
    cfg = config(ex, "ci")
    inst = ex.instances(cfg, ["markov2", "markov3"])
    n = len(cfg.seeds)
    loss = np.zeros((4, len(inst)))
    loss[-1, inst.index(source="markov3")] = 2.0 + 0.01 * np.arange(n)  # learned: lower
    loss[-1, inst.index(source="markov2")] = 2.1
    hist = engine.History(steps=np.arange(4), metrics={"chain_loss3": loss})
    assert np.allclose(ex.runs.learned(hist, inst, 3), -0.1 + 0.01 * np.arange(n))
    assert ex.runs.learned(hist, inst, 2) is None  # no order-1 model, no order-2 windows
    cut = engine.History(steps=np.arange(4), metrics={})
    assert ex.runs.learned(cut, inst, 3) is None


def test_learned_text_says_which_unresolved_stair_the_reading_limits_and_which_the_run():
    from types import SimpleNamespace

    cfg = config(ex, "ci")
    inst = ex.instances(cfg, ["markov2", "markov3", "markov4"])
    n = len(cfg.seeds)
    loss = {o: np.full((4, len(inst)), 2.0) for o in (3, 4)}
    loss[3][:, inst.index(source="markov3")] = [[2.0] * n, [1.97] * n, [1.95] * n, [1.9] * n]
    hist = engine.History(steps=np.array([0, 10, 20, 40]), metrics={
        f"chain_loss{o}": v for o, v in loss.items()})  # fmt: skip
    res = SimpleNamespace(ks=[1, 2, 3, 4], k_res=2, hist=hist, inst=inst, steps=hist.steps,
                          positive={3: np.array([1, 0, 0]), 4: np.zeros(n, bool)})  # fmt: skip
    res.learned = {k: ex.runs.learned(hist, inst, k) for k in (3, 4)}
    text = ex.readings.learned_text(cfg, res)
    assert "learned order-3 statistics of its chain in 3 of 3 seeds" in text
    assert "0.100 nats below the order-2 chain's model's at the end, 0.050 at half" in text
    assert "the reading, not the learning, limits stair 3" in text
    assert "order-4 statistics of its chain in no seed" in text
    assert "the run is too short or the model too small for it" in text
    assert text.endswith(
        "more as it trains, without its token embedding showing them in every seed"
    )

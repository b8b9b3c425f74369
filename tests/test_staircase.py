"""The staircase measurements of lib/measure/staircase.py against direct computations."""

import math

import numpy as np
import pytest
import torch

from lib.data import tasks
from lib.experiments import staircase_runs
from lib.measure import onsets, plateaus, staircase_callbacks
from lib.measure import staircase as st
from lib.training import engine, layers, models


def test_increment():
    g = torch.Generator().manual_seed(0)
    E0 = torch.randn(2, 102, 8, generator=g)
    E = E0 + torch.randn(2, 102, 8, generator=g)
    tok = [1, 5, 7, 100]
    dE = st.increment(E, E0, tok)
    raw = st.increment(E, E0, tok, subtract_mean_row=False)
    np.testing.assert_allclose(raw.numpy(), (E - E0)[:, tok].double().numpy(), atol=1e-6)
    np.testing.assert_allclose(dE.mean(-2).numpy(), 0, atol=1e-12)
    with pytest.raises(ValueError, match="shape"):
        st.increment(E, E0[0], tok)


def test_onsets():
    steps = np.array([0, 1, 2, 4, 8, 16, 32, 64])
    rise = np.array([np.nan, 0.0, 0.1, 0.2, 0.5, 0.8, 0.8, 0.7])  # peak 0.8 -> threshold 0.4
    late = np.array([np.nan, 0.0, 0.0, 0.0, 0.1, 0.2, 0.6, 0.6])
    noise = np.array([np.nan, 0.05, -0.05, 0.08, 0.0, 0.02, -0.1, 0.07])
    onset, thr = onsets.relative_onset(steps, np.stack([rise, late, noise], 1), frac=0.5, floor=0.1)
    assert onset[0] == 8 and onset[1] == 32 and math.isnan(onset[2])
    np.testing.assert_allclose(thr, [0.4, 0.3, 0.1])
    with pytest.raises(ValueError):
        onsets.relative_onset(steps, rise, frac=0.0)


# ---------------------------------------------------------------- one stair per order

PB2, LAY2 = tasks.gated_parity_bits(n_keys=4)
PB3, LAY3 = tasks.gated_parity_bits(n_keys=3, order2=True)


def test_order_targets_centred_and_by_hand():
    tg = st.parity_targets(PB3, LAY3)
    assert tg.orders == (0, 1, 2) and tg.tokens == tuple(LAY3.anchors)
    for phi in tg.phis.values():
        assert torch.allclose(phi.mean(0), torch.zeros(phi.shape[1], dtype=phi.dtype), atol=1e-12)
    # Order 1 by hand for anchor 1: E[(e_g - mean)(e_y - mean)] over its sequences.
    rows = PB3.X[:, 1] == 1
    Y = torch.nn.functional.one_hot(PB3.y[rows], PB3.n_labels).double()
    G = (PB3.X[rows, 4] == LAY3.gates[0]).double()
    inter_plus = ((G - G.mean())[:, None] * (Y - Y.mean(0))).mean(0)
    raw = st.order_targets(PB3.X, PB3.y, PB3.n_labels, [1, 2, 3], 4, LAY3.gates)
    full = raw.phis[1] + 0  # mean row removed over the three tokens: undo by recomputing
    assert full.shape == (3, 2 * PB3.n_labels)
    one = st.order_targets(PB3.X, PB3.y, PB3.n_labels, [1, 2, 3, 4], 4, LAY3.gates).phis[1]
    assert one.shape[0] == 4 and torch.isfinite(one).all()
    direct = []
    for a in [1, 2, 3]:
        r = PB3.X[:, 1] == a
        Ya = torch.nn.functional.one_hot(PB3.y[r], PB3.n_labels).double()
        Ga = torch.stack([(PB3.X[r, 4] == g).double() for g in LAY3.gates], 1)
        direct.append(((Ga - Ga.mean(0)).T @ (Ya - Ya.mean(0)) / len(Ya)).flatten())
    direct = torch.stack(direct)
    assert torch.allclose(raw.phis[1], direct - direct.mean(0), atol=1e-12)
    assert torch.allclose(direct[0, PB3.n_labels :], -inter_plus, atol=1e-12)  # g- = -(g+)
    # Order 2 is zero without the second family, and absent when not asked for.
    assert 2 not in st.parity_targets(PB2, LAY2).phis


def test_order_partials_batched_and_floor():
    tg = st.parity_targets(PB2, LAY2)
    g = torch.Generator().manual_seed(0)
    dE = torch.randn(5, 12, 16, generator=g, dtype=torch.float64)
    dE = dE - dE.mean(-2, keepdim=True)
    batched = st.order_partials(dE, tg)
    for k in range(5):
        single = st.order_partials(dE[k], tg)
        for o in tg.orders:
            assert abs(float(batched[o][k]) - float(single[o])) < 1e-12
    # An increment built from the order-0 signature aligns with order 0, not order 1.
    aligned = st.order_partials(
        tg.phis[0] @ torch.randn(tg.phis[0].shape[1], 16, generator=g, dtype=torch.float64), tg
    )
    assert float(aligned[0]) > 0.5 > float(aligned[1])


@pytest.mark.parametrize("per_instance", [False, True])
def test_bit_callbacks_shared_and_per_instance(per_instance):
    mdl = models.EmbMLP(PB2.vocab_size, 8, 8, PB2.n_labels)
    p = models.build(mdl, [0, 1], gamma=1.0)
    tg = st.parity_targets(PB2, LAY2)
    data = PB2
    if per_instance:
        data = tasks.TaskData(
            PB2.X.expand(2, *PB2.X.shape),
            PB2.y.expand(2, -1),
            PB2.vocab_size,
            PB2.n_labels,
            PB2.groups,
            "per-instance",
        )
    cb = staircase_callbacks.bit_callbacks(mdl, data, LAY2, tg, p["E"])
    out = {k: f(0, p) for k, f in cb.items()}
    assert set(out) == {"R0", "R1", "loss_all", "acc", "bit1"}
    # An increment that is exactly the order-1 feature (parity) aligns with order 1.
    parity = torch.tensor([1.0 if a % 2 else -1.0 for a in LAY2.anchors])
    q = {k: v.clone() for k, v in p.items()}
    q["E"][:, LAY2.anchors] += parity[None, :, None] * torch.ones(8)
    r0, r1 = cb["R0"](5, q), cb["R1"](5, q)
    assert (r1 > 0.5).all() and (r1 > r0).all(), (r0, r1)
    for v in out.values():
        assert v.shape == (2,)
    # At zero logits every label is equally likely: the sign-bit loss is exactly ln 2.
    zero = {k: torch.zeros_like(v) for k, v in p.items()}
    cb0 = staircase_callbacks.bit_callbacks(mdl, data, LAY2, tg, p["E"])
    assert torch.allclose(cb0["bit1"](1, zero), torch.full((2,), math.log(2), dtype=torch.float64))
    # The loss matches the engine's cross-entropy.
    ce = engine.cross_entropy(mdl.forward(p, data.X), data.y).double()
    assert torch.allclose(out["loss_all"], ce, atol=1e-5)


def test_onsets_escapes_and_the_climb_check():
    steps = np.array([0, 1, 2, 4, 8, 16])
    rising = np.array([[np.nan, 0.0, 0.1, 0.2, 0.8, 0.9]]).T
    flat = np.array([[np.nan, 0.0, 0.05, 0.1, 0.1, 0.1]]).T
    assert onsets.stair_onsets(steps, rising, floor=0.3)[0] == 8
    assert onsets.stair_onsets(steps, flat, floor=0.3)[0] == math.inf
    bit = np.array([[0.69, 0.69, 0.69, 0.5, 0.1, 0.0]]).T
    assert onsets.escape_steps(steps, bit)[0] == 8
    assert onsets.escape_steps(steps, np.full((6, 1), 0.69))[0] == math.inf
    assert onsets.staircase_climbs([[1, 2], [5, 6]])
    assert not onsets.staircase_climbs([[1, 2], [5, math.inf]])  # a stair that never comes
    assert not onsets.staircase_climbs([[1, 7], [5, 6]])  # out of order in one instance
    mask = plateaus.plateau_mask(steps, np.hstack([bit, np.full((6, 1), 0.69)]), after=[1, 2])
    assert mask[:, 0].tolist() == [False, False, True, False, False, False]
    assert mask[:, 1].tolist() == [False, False, False, True, True, True]


@pytest.mark.parametrize("model_name", ["mlp", "attention"])
def test_train_bits_batched_runs(model_name):
    tg = st.parity_targets(PB2, LAY2)
    if model_name == "mlp":
        mdl, kw = models.EmbMLP(PB2.vocab_size, 8, 8, PB2.n_labels), {}
    else:
        mdl = models.Transformer(PB2.vocab_size, 8, 3, 1, PB2.n_labels, d_mlp=8)
        kw = dict(zero_frozen=("P",), group_lr={"qk": 1e-3})
    h, gk, sk = staircase_runs.train_bits(
        mdl, PB2, LAY2, tg, [0, 1], [1.0, 0.5], 3, lr=1e-2, log_at=[0, 3], **kw
    )
    assert list(gk) == [1.0, 1.0, 0.5, 0.5] and list(sk) == [0, 1, 0, 1]
    assert h["R0"].shape == (2, 4) and np.isnan(h["R0"][0]).all()


def test_run_bits_reads_arms_by_gamma_and_matches_the_hand_made_reading():
    tg = st.parity_targets(PB2, LAY2)
    mdl = models.EmbMLP(PB2.vocab_size, 8, 8, PB2.n_labels)
    floor = {0: 0.2, 1: 0.2}
    run = staircase_runs.run_bits(
        mdl, PB2, LAY2, tg, [0, 1], [1.0, 0.5], 6, floor, lr=1e-2, log_at=[0, 1, 2, 4, 6]
    )
    h, gk, _ = staircase_runs.train_bits(
        mdl, PB2, LAY2, tg, [0, 1], [1.0, 0.5], 6, lr=1e-2, log_at=[0, 1, 2, 4, 6]
    )
    assert run.gammas == [0.5, 1.0] and run.data["R0"].dims == ("step", "gamma", "seed")
    steps, m = run.arm(0.5)
    np.testing.assert_allclose(m["bit1"], h["bit1"][:, gk == 0.5], atol=1e-6)  # same seeds
    assert m["R1"].shape == (5, 2)
    with pytest.raises(KeyError, match="was not run"):
        run.arm(0.3)
    s = run.stairs(0.5)
    assert set(s.onsets) == {0, 1} and set(s.escapes) == set(s.plateaus) == {1}
    np.testing.assert_array_equal(s.onsets[1], onsets.stair_onsets(steps, m["R1"], floor[1]))
    np.testing.assert_array_equal(s.escapes[1], onsets.escape_steps(steps, m["bit1"]))
    mask = plateaus.plateau_mask(steps, m["bit1"], s.onsets[0])
    np.testing.assert_array_equal(s.plateaus[1], mask)
    for k in range(2):
        want = np.median(m["R1"][mask[:, k], k]) if mask[:, k].any() else np.nan
        np.testing.assert_equal(s.plateau_R[1][k], want)
    assert s.climbs() == all(s.climbs_per_seed())
    own = run.stairs(0.5, levels=run.onset_levels(0.5))  # its own levels: the same reading
    for o in s.onsets:
        np.testing.assert_array_equal(own.onsets[o], s.onsets[o])
    # a rerun cut at step 4, logged on the same steps, is the full run's beginning
    cut = staircase_runs.run_bits(
        mdl, PB2, LAY2, tg, [0, 1], [1.0, 0.5], 4, floor, lr=1e-2, log_at=[0, 1, 2, 4]
    )
    for k in ("R0", "R1", "bit1"):
        np.testing.assert_array_equal(cut.arm(0.5)[1][k], m[k][:4])
    high = {o: np.full(2, 1e9) for o in s.onsets}  # levels never reached: no onset
    assert all(np.isinf(v).all() for v in cut.stairs(0.5, levels=high).onsets.values())


def test_stairs_climb_check_per_seed():
    s = st.Stairs(
        onsets={0: np.array([1.0, 1.0]), 1: np.array([5.0, math.inf])},
        escapes={},
        plateaus={},
        plateau_R={},
    )
    assert s.climbs_per_seed() == [True, False] and not s.climbs()


def test_plateau_and_fall_tells_a_plateau_from_a_smooth_decay():
    steps = np.unique(np.round(np.geomspace(1, 600, 40)))
    ln2 = np.log(2)
    plateau = np.where(steps < 150, ln2, ln2 * np.exp(-(steps - 150) / 15))  # sits, then falls
    smooth = ln2 * np.exp(-steps / 200)  # a decay from ln 2 with no plateau, same escape
    wait, fall = plateaus.plateau_and_fall(steps, np.stack([plateau, smooth], 1), after=[1, 1])
    assert wait[0] >= fall[0]  # the plateau passes
    assert wait[1] < fall[1]  # the control fails
    never = np.full((len(steps), 1), ln2)
    w, f = plateaus.plateau_and_fall(steps, never, after=[1])
    assert np.isnan(w[0]) and np.isnan(f[0])  # no escape: no plateau to measure


def test_leading_term_callback_holds_at_small_init_and_fails_at_large():
    from lib.data import tasks
    from lib.training import models

    data, lay = tasks.gated_parity_bits(n_keys=4, n_anchors=8)
    mlp = models.EmbMLP(data.vocab_size, 32, 32, data.n_labels, "silu")
    c1 = layers.ACTIVATION_TAYLOR["silu"][0]
    lead = staircase_callbacks.leading_term_callback(mlp, data, lay.anchors, c1)
    small = lead(0, models.build(mlp, [0, 1], gamma=1.5))
    large = lead(0, models.build(mlp, [0, 1], gamma=0.2))
    assert small.shape == (2,) and small.min() > 0.999
    assert large.max() < 0.99  # the control: at large init the expansion fails


def test_raw_alignment_reads_the_rows_not_the_increment():
    from lib.data import tasks

    data, lay = tasks.gated_parity_bits(n_keys=4, n_anchors=8)
    tg = st.parity_targets(data, lay)
    cb = staircase_callbacks.raw_alignment_callbacks(tg)
    gen = torch.Generator().manual_seed(0)
    d = tg.phis[0].shape[1]
    E = torch.randn(2, data.vocab_size, d, generator=gen, dtype=torch.float64)
    noise = cb["rawR0"](0, {"E": E})
    E2 = E.clone()
    E2[:, list(lay.anchors)] = 1e3 * tg.phis[0]  # the order-0 geometry planted
    planted = cb["rawR0"](1, {"E": E2})
    assert planted.min() > 0.99 and noise.abs().max() < 0.9


def test_raw_alignment_null_finds_planted_rows_and_not_random_ones():
    from lib.data import tasks
    from lib.measure.nulls import run_floors
    from lib.training.engine import History

    data, lay = tasks.gated_parity_bits(n_keys=4, n_anchors=8)
    tg = st.parity_targets(data, lay)
    null = st.label_null(data, lay, n_perm=40)
    cb = staircase_callbacks.raw_alignment_callbacks(tg, null=null)
    gen = torch.Generator().manual_seed(0)
    phi1 = tg.phis[1].reshape(len(lay.anchors), -1)
    E = torch.randn(6, data.vocab_size, phi1.shape[1], generator=gen, dtype=torch.float64)
    E2 = E.clone()  # the order-1 geometry planted on top of the random rows
    E2[:, list(lay.anchors)] += 30 * phi1 / phi1.norm(dim=1).mean()  # 4x the noise
    logged = [cb[k](0, {"E": E}) for k in ("rawR1", "rawnull1")]
    assert logged[1].shape == (6, 40)
    h = History(steps=np.array([0]), metrics={"rawnull1": logged[1][None].numpy()})
    floor = run_floors(h, q=0.95, prefix="raw")[1]
    planted = cb["rawR1"](1, {"E": E2})
    assert planted.min() > floor  # found where it was planted
    assert (logged[0] > floor).sum() <= 1  # and not in random rows (a 5% floor: one may pass)


# ---------------------------------------------------------------- ensembles of perturbed copies


def test_copies_are_the_seed_perturbed_and_read_back_per_seed():
    tg = st.parity_targets(PB2, LAY2)
    mdl = models.EmbMLP(PB2.vocab_size, 8, 8, PB2.n_labels)
    kw = dict(lr=1e-2, log_at=[0, 2, 4])
    one = staircase_runs.run_bits(mdl, PB2, LAY2, tg, [0, 1], [1.0], 4, {0: 0.2, 1: 0.2}, **kw)
    ens = staircase_runs.run_bits(
        mdl, PB2, LAY2, tg, [0, 1], [1.0], 4, {0: 0.2, 1: 0.2}, copies=3, **kw
    )
    assert ens.copies == 3 and one.copies == 1 and ens.seeds == [0, 1]
    assert ens.data["R0"].dims == ("step", "gamma", "seed", "copy")
    _, m1 = one.arm(1.0)
    _, m3 = ens.arm(1.0)
    assert m3["loss_all"].shape == (3, 6)
    by_seed = ens.per_seed(m3["loss_all"].T)  # (seeds, copies, n_logs)
    # copy 0 of each seed is the seed itself; the other copies start 1e-6 away
    np.testing.assert_array_equal(by_seed[:, 0], m1["loss_all"].T)
    assert not np.array_equal(by_seed[:, 1], by_seed[:, 0])
    np.testing.assert_allclose(by_seed[:, 1:, 0], np.repeat(by_seed[:, :1, 0], 2, 1), rtol=1e-4)
    assert len(ens.stairs(1.0).onsets[1]) == 6


def test_copy_zero_of_an_ensemble_is_the_run_without_copies():
    tg = st.parity_targets(PB2, LAY2)
    mdl = models.EmbMLP(PB2.vocab_size, 8, 8, PB2.n_labels)
    null = st.label_null(PB2, LAY2, n_perm=10)
    kw = dict(null=null, lr=1e-2, log_at=[0, 2, 4])
    one = staircase_runs.run_bits(mdl, PB2, LAY2, tg, [0, 1], [1.0], 4, **kw)
    ens = staircase_runs.run_bits(mdl, PB2, LAY2, tg, [0, 1], [1.0], 4, copies=3, **kw)
    zero, first = ens.copy(0), ens.copy(1)
    assert zero.copies == 1 and zero.seeds == [0, 1] and "copy" not in zero.sweep.axes
    # the same trajectories (readings summed over another batch agree to rounding)
    np.testing.assert_array_equal(zero.history["loss_all"], one.history["loss_all"])
    for name, v in one.history.metrics.items():
        np.testing.assert_allclose(zero.history[name], v, rtol=1e-12, atol=1e-14)
    assert zero.floor == pytest.approx(one.floor, rel=1e-12)  # its own instances' null
    assert torch.equal(zero.params["E"], one.params["E"])
    assert not np.array_equal(first.history["loss_all"], zero.history["loss_all"])
    with pytest.raises(ValueError, match="no copies"):
        one.copy(0)
    with pytest.raises(ValueError, match="copy 3 was not run"):
        ens.copy(3)


def test_copy_noise_depends_on_the_seed_and_copy_alone():
    from lib.training.sweep import Sweep

    mdl = models.EmbMLP(PB2.vocab_size, 8, 8, PB2.n_labels)
    both = staircase_runs.copy_params(mdl, Sweep(gamma=[1.0], seed=[0, 1], copy=[0, 1, 2]), 1e-6)
    alone = staircase_runs.copy_params(mdl, Sweep(gamma=[1.0], seed=[1], copy=[0, 1, 2]), 1e-6)
    assert torch.equal(both["E"][3:], alone["E"])
    rel = (both["E"][1] - both["E"][0]) / both["E"][0]
    assert 1e-7 < rel.abs().max() < 1e-5


def test_run_bits_with_a_null_reads_its_own_permutation_floor():
    from lib.measure import nulls

    tg = st.parity_targets(PB2, LAY2)
    mdl = models.EmbMLP(PB2.vocab_size, 8, 8, PB2.n_labels)
    null = st.label_null(PB2, LAY2, n_perm=10)
    run = staircase_runs.run_bits(
        mdl, PB2, LAY2, tg, [0], [1.0], 4, null=null, lr=1e-2, log_at=[0, 2, 4]
    )
    assert run.history["null1"].shape == (3, 1, 10)
    assert run.floor[1] == nulls.floor_of(run.history["null1"])
    with pytest.raises(ValueError, match="floor or a null"):
        staircase_runs.run_bits(mdl, PB2, LAY2, tg, [0], [1.0], 4, lr=1e-2, log_at=[0, 4])


def test_gate_blind_keeps_order0_and_removes_bit1_information():
    task = st.parity_task(12, 12, n_perm=5)
    data, layout = task.data, task.layout
    blind, own = st.gate_blind(task, seed=0, n_perm=5)
    lay = blind.layout
    B = layout.block
    # The order-0 part i_z + a of every label is kept; only the block (bit 1) changes.
    assert torch.equal(blind.data.y % B, data.y % B)
    assert torch.equal(blind.data.y // B, (lay.bit1 == -1).long())
    # Same multiset of bits, now independent of (gate, anchor parity): each of the four
    # cells has about half of each sign, while the real task is deterministic in them.
    g = (data.X[:, -1] == layout.gates[0]).long()
    odd = (data.X[:, 1] % 2).long()
    assert sorted(lay.bit1.tolist()) == sorted(layout.bit1.tolist())
    for cell in range(4):
        rows = (2 * g + odd) == cell
        assert abs(float((lay.bit1[rows] == 1).double().mean()) - 0.5) < 0.2
        assert float((layout.bit1[rows] == 1).double().mean()) in (0.0, 1.0)
    # The control is read against the rule's targets and null; its own targets differ.
    assert blind.targets is task.targets and blind.null is task.null
    assert set(own.targets.phis) == {0, 1} and own.null is not task.null
    assert not torch.allclose(own.targets.phis[1], task.targets.phis[1])

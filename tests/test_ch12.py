"""Chapter 12's library: the selective task's readings, its arms and its identities."""

import numpy as np
import pytest
import torch

from lib.data import tasks
from lib.experiments import ch12_attention_that_learns as ex
from lib.experiments import config, merge
from lib.experiments import selective_escape as se
from lib.measure import staircase as st
from lib.measure import staircase_callbacks
from lib.training import models

pytestmark = pytest.mark.usefixtures("one_thread")


def _small(**kw):
    small = dict(
        task=dict(n_anchors=4, width=3),
        d_model=8,
        d_mlp=8,
        seeds=(0, 1),
        readings=dict(n_perm=3),
        n_logs=3,
    )
    return merge(merge(config(ex, "ci"), small, "test"), kw, "test")


def test_uniform_attention_gives_exactly_half_and_the_identities_hold():
    cfg = _small()
    data, layout, _ = ex.task(cfg)
    mdl = ex.model(cfg, data)
    learned = {k: v.double() for k, v in models.build(mdl, [0, 1], gamma=0.3).items()}
    uniform = {k: v.clone() for k, v in learned.items()}
    uniform["Q0"].zero_(), uniform["K0"].zero_()
    c = ex.derivation_checks(mdl, learned, uniform, data, layout)
    assert c["formula_err"] < 1e-12 and c["order_gap"] < 1e-12 and c["order_gap_learned"] > 1e-6
    np.testing.assert_array_equal(c["uniform_acc"], [0.5, 0.5])
    row = ex.readout_row(mdl, learned, data.X)
    torch.testing.assert_close(row.sum(-1), torch.ones_like(row[..., 0]))


def test_arm_callbacks_on_distinct_sequences_equal_the_full_task():
    cfg = _small()
    data, layout, targets = ex.task(cfg)
    mdl = ex.model(cfg, data)
    p = models.build(mdl, [0, 1, 2], gamma=0.5)
    X, P = tasks.label_distributions(data)
    got = {k: f(0, p) for k, f in ex.arm_callbacks(mdl, X, P, layout, targets, p["E"]).items()}
    full = staircase_callbacks.bit_callbacks(mdl, data, layout, targets, p["E"])
    torch.testing.assert_close(got["bit1"], full["bit1"](0, p))
    torch.testing.assert_close(got["loss_all"], full["loss_all"](0, p))
    row = ex.readout_row(mdl, p, data.X)
    torch.testing.assert_close(got["contrast"], (row[..., 2] - row[..., 1]).abs().mean(1))
    torch.testing.assert_close(
        got["A_key"] + got["A_other"] + got["A_gate"], torch.ones(3).double()
    )


def test_ratio_summary_counts_converged_instances_by_the_excess_loss():
    cfg = _small(ratio=dict(grid=(0.1, 1.0), seeds=(0, 1), steps=6))
    data, layout, targets = ex.task(cfg)
    null = st.label_null(data, layout, 3, targets=st.selective_targets)
    h, sw, floor = ex.train_ratios(
        cfg, ex.model(cfg, data), data, layout, targets, null, "cpu", "t"
    )
    s = ex.ratio_summary(h, sw, floor, cfg)
    assert s["converged"].shape == (2, 2) and not s["counted"].any()  # six steps learn nothing
    assert not s["trapped"].any() and set(floor) == {0, 1}  # at chance: not trapped
    grown, stray = ex.attention_before_gates(h, sw, 0)
    assert grown.shape == stray.shape == (2,)


def test_order_blind_and_sham_labels_carry_no_order():
    cfg = _small(task=dict(n_anchors=6))
    data, layout, _ = ex.task(cfg)
    X, P_task = tasks.label_distributions(data)
    swap = {tuple(x.tolist()): i for i, x in enumerate(X)}
    partner = torch.tensor([swap[(x[0].item(), x[2].item(), x[1].item(), x[3].item())] for x in X])
    assert not torch.equal(P_task, P_task[partner])  # the task's label depends on the order
    flipped = []
    for labels in ("blind", "sham0", "sham1"):
        P = se.targets_of(cfg, data, layout, labels)
        torch.testing.assert_close(P, P[partner])  # both orders of a pair: one distribution
        torch.testing.assert_close(P.sum(-1), P_task.sum(-1))
        flipped.append(P)
    # a sham differs from the order-blind task on exactly half of the anchors
    differs = (flipped[1] != flipped[0]).any(-1)
    assert differs.float().mean() == 0.5
    with pytest.raises(ValueError, match="unknown labels"):
        se.targets_of(cfg, data, layout, "bogus")


def test_train_arms_runs_every_arm_from_the_seeds_inits():
    cfg = _small(arms=dict(n_sham=1, frozen_gammas=(0.5,)))
    arms = se.fast_arms(cfg)
    assert [a.name for a in arms] == [
        "learned",
        "blind",
        "sham0",
        "frozen 0.5",
        "learned 0.5",
        "uniform",
    ]
    run, params = se.train_arms(cfg, arms, 4)
    S = len(cfg.seeds)
    assert params["E"].shape[0] == len(arms) * S
    assert run.of("uniform", "contrast").shape == (len(run.history.steps), S)
    data, _, _ = ex.task(cfg)
    init = models.build(ex.model(cfg, data), list(cfg.seeds), gamma=cfg.gamma,
                        group_gamma={"qk": 0.5})  # fmt: skip
    torch.testing.assert_close(run.params_of("frozen 0.5", params)["Q0"], init["Q0"])  # frozen
    assert run.params_of("uniform", params)["Q0"].abs().max() == 0  # zero, and stays zero
    assert "R1" in run.history.metrics and run.history["R1"].shape[1] == S  # first arm only


def _run(contrasts: dict, steps=(0, 1, 2, 4, 8)):
    from lib.training.engine import History

    arms = [
        se.Arm(n, 1.0, True, n if n.startswith(("sham", "blind")) else "task") for n in contrasts
    ]
    S = next(iter(contrasts.values())).shape[1]
    h = History(np.asarray(steps), {"contrast": np.concatenate(list(contrasts.values()), 1)})
    return se.Run(h, arms, tuple(range(S)), {})


def test_paired_event_reads_the_learned_minus_blind_contrast_against_the_shams():
    z = np.zeros((5, 2))
    blind = z + 0.3
    learned = blind + np.array([[0, 0], [0, 0], [0.05, 0], [0.5, 0.0], [0.6, 0.1]])
    shams = {f"sham{j}": blind + 0.1 * (j + 1) * (np.arange(5) > 0)[:, None] for j in range(3)}
    run = _run({"learned": learned, "blind": blind, **shams})
    event, floor, paired, null = se.paired_event(run, level=0.01)
    assert floor == pytest.approx(0.3)  # the largest |sham - blind| over steps >= 1
    np.testing.assert_array_equal(event, [4, np.inf])
    assert null.shape == (5, 3, 2)
    with pytest.raises(ValueError, match="sham"):
        se.paired_event(_run({"learned": learned, "blind": blind}), 0.01)


def test_parity_probe_sees_a_planted_code_and_not_noise():
    rng = np.random.default_rng(0)
    y = np.where(np.arange(12) % 2 == 0, 1.0, -1.0)
    E = rng.normal(size=(6, 12, 16))
    planted = E.copy()
    planted[..., 0] += 3 * y
    acc, null = se.parity_probe(np.concatenate([E, planted]), y, folds=3, ridge=10.0, n_perm=20)
    assert acc.shape == (12,) and null.shape == (20, 12)
    assert acc[6:].min() > 0.9 and np.median(acc[:6]) < 0.8

"""lib.theory.order and tasks.competing_orders: the competing-orders task, its strength weights,
escapes, the boundary and its prediction (Chapter 10)."""

import math

import numpy as np
import pytest
import torch

from lib.data import tasks
from lib.theory import order
from lib.training import engine, models


@pytest.fixture(scope="module")
def comp():
    return tasks.competing_orders(4), tasks.competing_orders(4, same_order=True)


def test_competing_orders_labels(comp):
    (data, lay), (ctrl, lay_c) = comp
    assert data.X.shape == (16, 2) and data.vocab_size == 10 and data.n_labels == 2
    assert lay.low == [0, 1, 2, 3] and lay.high == [4, 5, 6, 7] and lay.gates == [8, 9]
    assert lay.order == 1 and lay_c.order == 0
    assert torch.equal(lay.family, (data.X[:, 0] >= 4).long())
    for a in lay.low:  # order 0: the anchor alone sets the label, in both tasks
        assert set(data.y[data.X[:, 0] == a].tolist()) == {int(a >= 2)}
    for b in lay.high:  # order 1: both labels equally often; the gate decides
        rows = data.X[:, 0] == b
        assert data.y[rows].float().mean() == 0.5
        for g in lay.gates:
            want = int((b % 2 == 1) == (g == lay.gates[0]))
            assert data.y[rows & (data.X[:, 1] == g)].tolist() == [want]
        assert set(ctrl.y[ctrl.X[:, 0] == b].tolist()) == {b % 2}  # control: order 0
    with pytest.raises(ValueError, match="even number"):
        tasks.competing_orders(3)


def test_strength_weights():
    family = torch.tensor([0, 0, 1, 1, 1])
    w = order.strength_weights(family, [1.0, 4.0])
    assert torch.allclose(w.sum(1), torch.ones(2))
    assert torch.allclose(w[1, 2] / w[1, 0], torch.tensor(4.0))
    assert torch.allclose(w[0], torch.full((5,), 0.2))
    with pytest.raises(ValueError, match="finite and > 0"):
        order.strength_weights(family, [0.0])


@pytest.mark.parametrize("per_instance_X", [False, True])
def test_weighted_ce_and_family_losses(comp, per_instance_X):
    (data, lay), (ctrl, _) = comp
    m = models.EmbMLP(data.vocab_size, 6, 5, 2)
    p = models.build(m, [0, 1], gamma=0.5)
    X = data.X.expand(2, -1, -1) if per_instance_X else data.X  # (K, B, L) or (B, L)
    Y = torch.stack([data.y, ctrl.y])  # per-instance labels (K, B)
    w = order.strength_weights(lay.family, [1.0, 1.0])
    loss = order.weighted_cross_entropy(w)(m.forward(p, X), Y)
    ref = torch.stack(
        [engine.cross_entropy(m.forward(p, data.X)[k : k + 1], Y[k]) for k in range(2)]
    )
    assert torch.allclose(loss, ref[:, 0], atol=1e-6)  # uniform weights: the plain mean
    cb = order.family_loss_callbacks(m, X, Y, lay.family)
    with torch.no_grad():
        ce = torch.nn.functional.cross_entropy(
            m.forward(p, data.X).double().reshape(-1, 2), Y.reshape(-1), reduction="none"
        ).view(2, -1)
        fam = lay.family.bool()
        assert torch.allclose(cb["loss_low"](0, p), ce[:, ~fam].mean(1))
        assert torch.allclose(cb["loss_high"](0, p), ce[:, fam].mean(1))
    # instances do not mix: instance 1's weights get no gradient from instance 0's loss
    (gE,) = torch.autograd.grad(loss[0], [p["E"]])
    assert gE[1].abs().max() == 0 and gE[0].abs().max() > 0
    with pytest.raises(ValueError, match="weights have shape"):
        order.weighted_cross_entropy(w[:1])(m.forward(p, X), Y)


def test_escapes_and_who_first():
    steps = np.array([0, 1, 2, 3])
    loss = np.array([[0.7, 0.7, 0.1], [0.7, 0.2, 0.1], [0.7, 0.2, 0.1], [0.1, 0.2, 0.1]])
    loss[:, 2] = [0.2, 0.7, 0.7, 0.7]  # below the level at step 0: no stair to time
    e = order.escapes(steps, loss)
    assert e[0] == 3 and e[1] == 1 and np.isnan(e[2])
    never = order.escapes(steps, np.full((4, 1), math.log(2)))
    assert np.isinf(never[0])
    w = order.who_first([1, 5, 3, np.inf, np.nan], [4, 2, 3, np.inf, 1])
    assert w[:3].tolist() == [-1, 1, 0] and np.isnan(w[3]) and np.isnan(w[4])
    assert order.who_first([1.0], [np.inf])[0] == -1  # a family that never escapes is second


def test_boundary_finds_a_planted_crossing():
    x = np.log([0.25, 1, 4, 16, 64])
    t_low = np.full((5, 1), 10.0)
    t_high = 10.0 * np.exp(np.log(8.0) - x)[:, None]  # ln(t_high/t_low) = ln 8 - ln rho
    assert order.boundary(x, t_low, t_high)[0] == pytest.approx(math.log(8.0))
    assert order.boundary(x, t_low, t_high / 100)[0] == -np.inf  # high first everywhere
    assert order.boundary(x, t_low, t_high * 1e3)[0] == np.inf  # low first everywhere
    # an infinite escape on one side of the crossing: the midpoint in ln rho
    assert order.boundary(x, t_low, np.where(x[:, None] < 1.5, np.inf, 1.0))[0] == pytest.approx(
        (x[2] + x[3]) / 2
    )
    assert np.isnan(order.boundary(x, t_low, np.where(x[:, None] > 2, np.nan, t_high))[0])
    with pytest.raises(ValueError, match="ascending"):
        order.boundary(x[::-1], t_low, t_high)


def test_slope_interval_recovers_a_planted_slope():
    x = np.array([0.25, 0.5, 0.75, 1.0])
    rng = np.random.default_rng(0)
    Y = 3.0 * x[:, None] + 0.05 * rng.standard_normal((4, 5))
    slope, lo, hi = order.slope_interval(x, Y, n_boot=500)
    assert slope == pytest.approx(3.0, abs=0.2) and lo < 3.0 < hi
    flat, lo0, hi0 = order.slope_interval(x, 0.05 * rng.standard_normal((4, 5)), n_boot=500)
    assert lo0 < 0 < hi0
    assert np.isnan(order.slope_interval(x, np.full((4, 3), np.inf))[0])


def test_feature_drive_and_predicted_boundary(comp):
    (data, lay), _ = comp
    K, V, d = 2, data.vocab_size, 3
    gen = torch.Generator().manual_seed(0)
    E, G = torch.randn(K, V, d, generator=gen), torch.randn(K, V, d, generator=gen)
    out = order.feature_drive(E, G, lay)
    f_low = torch.tensor([-1.0, -1, 1, 1], dtype=torch.float64)
    f_high = torch.tensor([-1.0, 1, -1, 1], dtype=torch.float64)
    for k in range(K):
        x = (f_low[:, None] * E[k, :4].double()).sum(0).norm()
        dx = (f_high[:, None] * -G[k, 4:8].double()).sum(0).norm()
        assert out["x_low"][k] == pytest.approx(float(x))
        assert out["drive_high"][k] == pytest.approx(float(dx))
    rho = order.predicted_boundary(out)
    want = out["x_high"] * out["drive_low"] / (3 * out["x_low"] * out["drive_high"])
    assert torch.allclose(rho, want)
    assert order.power_count_slope(10, 64) == pytest.approx(math.log(640))


def test_rising_phase_and_log_overlap():
    steps = np.array([1, 2, 4, 8, 16, 32])
    c = np.array([[0.0, 0.0], [0.5, 0.0], [1.0, 0.0], [1.0, 0.1], [1.0, 0.9], [1.0, 1.0]])
    lo, hi = order.rising_phase(steps, c)
    assert lo.tolist() == [2, 8] and hi.tolist() == [4, 16]
    lo_f, _ = order.rising_phase(steps, c, floor=1.5)  # never above the floor
    assert np.isnan(lo_f).all()
    assert order.log_overlap(2, 4, 8, 16) == 0  # one done before the other starts
    assert order.log_overlap(2, 16, 4, 8) == 1  # one inside the other
    assert order.log_overlap(2, 8, 4, 16) == pytest.approx(0.5)
    assert order.log_overlap(4, 4, 2, 8) == 1 and order.log_overlap(32, 32, 2, 8) == 0
    assert np.isnan(order.log_overlap(np.nan, 4, 2, 8))

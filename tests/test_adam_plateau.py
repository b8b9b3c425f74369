"""The gamma law of Chapter 11 (lib/theory/adam_plateau.py): the symmetry, the bilinear contrast,
the readings of a run and the two-phase law, each against a direct computation."""

import math

import numpy as np
import pytest
import torch

from lib.data import tasks
from lib.experiments import ch11_plateau_length_under_adam as ex
from lib.theory import adam_plateau as ap
from lib.training import engine, models

pytestmark = pytest.mark.usefixtures("one_thread")


def _tiny(seed=0, gamma=0.5):
    data, layout = tasks.gated_parity_bits(n_keys=2, n_anchors=4)
    model = models.EmbMLP(data.vocab_size, 8, 8, data.n_labels, "silu")
    params = models.build(model, [seed, seed + 1], gamma=gamma)
    return data, layout, model, {k: v.detach().double() for k, v in params.items()}


def test_sigma_maps_the_data_set_to_itself_and_is_an_involution():
    data, layout, _, params = _tiny()
    swap, flip = ap.gate_swap(layout, data.vocab_size), ap.label_flip(layout, data.n_labels)
    rows = {tuple(r) for r in torch.cat([data.X, data.y[:, None]], 1).tolist()}
    mapped = {tuple(r) for r in torch.cat([swap[data.X], flip[data.y][:, None]], 1).tolist()}
    assert rows == mapped
    # flipping only the labels (or only the gates) does not map the data set to itself
    assert rows != {tuple(r) for r in torch.cat([data.X, flip[data.y][:, None]], 1).tolist()}
    twice = ap.sigma(ap.sigma(params, layout, data.n_labels), layout, data.n_labels)
    for k in params:
        torch.testing.assert_close(twice[k], params[k])
    sym, anti = ap.split_sigma(params, layout, data.n_labels)
    s_sym = ap.sigma(sym, layout, data.n_labels)
    s_anti = ap.sigma(anti, layout, data.n_labels)
    for k in params:
        torch.testing.assert_close(sym[k] + anti[k], params[k])
        torch.testing.assert_close(s_sym[k], sym[k])
        torch.testing.assert_close(s_anti[k], -anti[k])
    assert anti["E"].abs().max() > 0 and anti["W1"].abs().max() == 0


def test_the_loss_is_sigma_invariant_and_a_symmetric_point_has_a_symmetric_gradient():
    data, layout, model, params = _tiny(gamma=0.3)
    n = data.n_labels

    def loss_grad(p):
        p = {k: v.clone().requires_grad_(True) for k, v in p.items()}
        loss = engine.cross_entropy(model.forward(p, data.X), data.y)
        return loss, dict(zip(p, torch.autograd.grad(loss.sum(), list(p.values())), strict=True))

    loss, _ = loss_grad(params)
    loss_s, _ = loss_grad(ap.sigma(params, layout, n))
    torch.testing.assert_close(loss, loss_s)
    sym, _ = ap.split_sigma(params, layout, n)
    _, grad_at_sym = loss_grad(sym)
    _, grad_anti = ap.split_sigma(grad_at_sym, layout, n)
    assert max(float(v.abs().max()) for v in grad_anti.values()) < 1e-12
    _, grad_at_p = loss_grad(params)  # off the symmetric point the antisymmetric part is there
    assert float(ap.split_sigma(grad_at_p, layout, n)[1]["E"].abs().max()) > 1e-6
    flip = ap.label_flip(layout, n)[data.y]
    assert float(ap.xor_contrast(model.forward(sym, data.X), data.y, flip).abs().max()) < 1e-12


def test_the_bilinear_contrast_is_the_first_order_term():
    data, layout, model, params = _tiny(gamma=0.5)
    sym, anti = ap.split_sigma(params, layout, data.n_labels)
    flip = ap.label_flip(layout, data.n_labels)[data.y]
    errors = []
    for eps in (1e-2, 1e-3):
        p = {k: sym[k] + eps * anti[k] for k in sym}
        D = ap.xor_contrast(model.forward(p, data.X), data.y, flip)
        D_lin = ap.bilinear_contrast(p, data, layout)["D_lin"]
        assert D.abs().min() > 0
        errors.append(float((D_lin / D - 1).abs().max()))
    assert errors[1] < 0.2 * errors[0] and errors[1] < 1e-2  # the error is O(eps)
    assert float(ap.bilinear_contrast(sym, data, layout)["D_lin"].abs().max()) == 0


def test_the_readings_of_a_curve():
    steps = np.arange(101)
    norm = np.where(steps <= 40, 2.0 * steps, 80 + 0.1 * (steps - 40))
    assert ap.knee(steps, norm[:, None])[0] == 41
    assert np.isnan(ap.knee(steps, (2.0 * steps)[:, None])[0])  # a line has no knee
    halved = np.where(steps <= 40, 2.0 * steps, 80 + 1.0 * (steps - 40))
    assert np.isnan(ap.knee(steps, halved[:, None])[0])  # nor a rise that only halves
    slope, r2 = ap.linear_fit(steps, norm[:, None], 5, 30)
    assert slope[0] == pytest.approx(2.0) and r2[0] == pytest.approx(1.0)
    assert np.isnan(ap.linear_fit(steps, norm[:, None], 5, 6)[0][0])  # two points: no fit
    D = 1e-4 * np.exp(0.05 * steps)
    D[:3] = -1.0  # a negative D carries no rate: skipped
    assert ap.log_rate(steps, D[:, None], 0, hi=0.1)[0] == pytest.approx(0.05)
    bent = np.where(D < 1e-3, D, 1e-3 * np.exp(0.2 * (steps - np.argmax(D >= 1e-3))))
    assert ap.log_rate(steps, bent[:, None], 0, hi=1e-3)[0] == pytest.approx(0.05)
    assert ap.log_rate(steps, bent[:, None], 0, hi=1.0)[0] > 0.06  # the fast stretch counts
    # the stretch from 1e-3 to 1 alone: the fast rate; on a single exponential, the one rate
    both = np.stack([bent, np.abs(D), np.full(len(steps), 1e-5)], 1)
    fast = ap.stretch_rate(steps, both, 1e-3, 1.0)
    assert fast[0] == pytest.approx(0.2) and fast[1] == pytest.approx(0.05)
    assert np.isnan(fast[2])  # never reaches 1e-3


def test_the_escape_level_and_the_seed_exponent():
    for frac in (0.5, 0.25):
        d_star = ap.escape_level(frac)
        assert math.log1p(math.exp(-d_star)) == pytest.approx(frac * math.log(2))
    assert ap.escape_level(0.5) == pytest.approx(-math.log(math.sqrt(2) - 1))
    with pytest.raises(ValueError):
        ap.escape_level(1.0)
    model = models.EmbMLP(27, 16, 128, 50)
    assert ap.seed_exponent(model) == pytest.approx(math.log(27 * 128))


def test_the_two_phase_law_and_the_controls():
    kw = dict(gamma_cal=1.0, D_entry=1e-3, t_entry=40.0, rate=0.05, exponent=8.0, d_star=1.0)
    T = ap.predict_escape([1.0, 1.25, 0.5, 0.0], **kw)
    assert T[0] == pytest.approx(40 + math.log(1e3) / 0.05)
    assert T[1] - T[0] == pytest.approx(0.25 * 8.0 / 0.05)  # linear in gamma on the plateau
    D_p = 1e-3 * math.exp(8.0 * 0.5)  # below D*: still the plateau branch
    assert T[2] == pytest.approx(40 + math.log(1 / D_p) / 0.05)
    assert T[3] == pytest.approx(40 / (1e-3 * math.exp(8.0)))  # above D*: learned in phase 1
    with pytest.raises(ValueError):
        ap.predict_escape([1.0], **(kw | {"rate": 0.0}))
    flow = ap.gradient_flow_escape([-1e-4, 1e-2], 0.05, 1.0)
    np.testing.assert_allclose(flow, [math.log(1e4) / 0.05, math.log(1e2) / 0.05])
    grid = [0, 1, 2, 4, 8]
    np.testing.assert_array_equal(
        ap.on_grid([0.5, 3, 4, 8, 9, np.inf], grid), [1, 4, 4, 8, np.inf, np.inf]
    )
    np.testing.assert_allclose(ap.rel_error([12, 8], [10, 10]), [0.2, -0.2])


def test_calibrate_reads_the_arm_without_its_escape():
    steps = np.arange(101)
    W1 = np.where(steps <= 40, 2.0 * steps, 80 + 0.1 * (steps - 40))
    D = np.where(steps <= 41, 1e-4, 1e-4 * np.exp(0.05 * (steps - 41)))
    hist = engine.History(steps, {"W1": np.stack([W1, W1], 1), "D": np.stack([D, 2 * D], 1)})
    probe = ex.Probe(hist, np.array([1.25, 1.25]), np.array([100, 101]))
    t_p, D_entry, rate = ap.calibrate(probe, 1.25, [100, 101])
    assert t_p == 41 and D_entry == pytest.approx(1.5e-4) and rate == pytest.approx(0.05)
    flat = engine.History(steps, {"W1": np.stack([2.0 * steps] * 2, 1), "D": np.stack([D, D], 1)})
    with pytest.raises(ValueError, match="no knee"):
        ap.calibrate(ex.Probe(flat, np.array([1.25, 1.25]), np.array([100, 101])), 1.25, [100, 101])


def test_run_probe_logs_every_step_and_selects_arms():
    data, layout, model, _ = _tiny()
    probe = ex.run_probe(model, data, layout, [0.5, 0.5, 1.0], [0, 1, 0], 4, lr=1e-2)
    h = probe.history
    np.testing.assert_array_equal(h.steps, np.arange(5))
    for name in ("D", "D_lin", "u", "M", "W1", "bit1", "step"):
        assert h[name].shape == (5, 3)
    assert probe.arm(0.5, "D").shape == (5, 2) and probe.arm(0.5, "D", seeds=[1]).shape == (5, 1)
    assert h["bit1"][0, 2] == pytest.approx(math.log(2), abs=1e-3)  # small init: bit 1 unknown
    assert np.all(np.diff(h["W1"][:, 2]) > 0)  # Adam's sign steps grow W1 from a small init
    with pytest.raises(KeyError, match="gamma=0.7"):
        probe.arm(0.7, "D")
    with pytest.raises(ValueError, match="one gamma per seed"):
        ex.run_probe(model, data, layout, [0.5], [0, 1], 2)


def test_adam_clock_is_the_step_after_a_burst():
    """After a burst of gradients that then stops, Adam's 1/sqrt(v_hat) is phi(t)/sqrt(G),
    on the engine's own Adam step; a burst that does not stop breaks the law (control)."""
    from lib.training.optimizers import Hyper, adam_step

    h = Hyper(0.0, (0.9, 0.999), 0.0, 0.0, False)
    t_p, T = 40, 300
    burst = torch.linspace(0.5, 2.0, t_p, dtype=torch.float64)

    def inv_root_vhat(tail: float) -> np.ndarray:
        p, st, out = torch.zeros(2, dtype=torch.float64), {}, []
        for t in range(1, T + 1):
            g = burst[t - 1] if t <= t_p else torch.tensor(tail, dtype=torch.float64)
            adam_step(p, g.expand(2).clone(), st, 1e-3, t, h)
            out.append(float((1 - 0.999**t) ** 0.5 / st["v"][0].sqrt()))
        return np.array(out)

    t = np.arange(1, T + 1)
    G = float(((0.999 ** -torch.arange(1, t_p + 1, dtype=torch.float64)) * burst**2).sum())
    after = t > t_p
    law = ap.adam_clock(t[after]) / math.sqrt(G)
    np.testing.assert_allclose(inv_root_vhat(0.0)[after], law, rtol=1e-9)
    assert ap.adam_clock(t[-1]) / ap.adam_clock(t_p) > 2.5  # the step grows ~ sqrt(t)
    assert np.max(np.abs(inv_root_vhat(1.0)[after] / law - 1)) > 0.5  # gradients that go on
    with pytest.raises(ValueError, match="starts at step 1"):
        ap.adam_clock([0, 1])


def test_the_probe_reads_adams_step_on_the_bit1_coordinates():
    data, layout, model, _ = _tiny()
    state: dict = {}
    params = models.build(model, [0, 1], gamma=0.5)
    cb = ap.probe_callbacks(model, data, layout, opt_state=state)
    hist = engine.train(model, params, (data.X, data.y), 6, log_at=np.arange(7), callbacks=cb,
                        lr=1e-2, opt_state=state)  # fmt: skip
    step = hist["step"]
    assert step.shape == (7, params["E"].shape[0]) and np.isnan(step[0]).all()
    # by hand, at the last step
    corr = (1 - 0.999**6) ** 0.5  # Adam's bias correction and eps, as in its update
    e = (1 / (state["E"]["v"][:, list(layout.gates)].sqrt() / corr + 1e-8)).flatten(1).mean(-1)
    w = (1 / (state["W2"]["v"][..., : 2 * layout.block].sqrt() / corr + 1e-8)).flatten(1).mean(-1)
    np.testing.assert_allclose(step[-1], (e * w).sqrt().double().numpy(), rtol=1e-6)
    # without Adam's state (plain GD) the probe reads nan, not a number
    gd_state: dict = {}
    gd = engine.train(model, models.build(model, [0, 1], gamma=0.5), (data.X, data.y), 2,
                      log_at=np.arange(3), optimizer="gd", lr=1e-2, opt_state=gd_state,
                      callbacks=ap.probe_callbacks(model, data, layout, opt_state=gd_state))  # fmt: skip
    assert np.isnan(gd["step"]).all()


def test_run_probe_scales_the_antisymmetric_part_of_the_init():
    data, layout, model, _ = _tiny()
    run = lambda scale, **kw: ex.run_probe(
        model, data, layout, [0.5] * 3, [0, 0, 2], 3, anti_scale=scale, lr=1e-2, **kw
    )
    plain, one = run(1.0), run([1.0, 1.0, 1.0])
    np.testing.assert_array_equal(plain.history["D"], one.history["D"])  # 1: the plain init
    sym = run(0.0, dtype=torch.float64).history["D"]
    assert np.all(np.abs(sym) < 1e-12)  # a symmetric init stays blind to bit 1
    eps = np.array([1e-3, 1e-4, 1e-3])
    lin = run(eps, dtype=torch.float64).history["D"]
    per_eps2 = lin / eps**2  # D is sigma-even: second order in the antisymmetric part
    np.testing.assert_allclose(per_eps2[:, 0], per_eps2[:, 1], rtol=1e-3)
    assert np.all(np.abs(lin[:, 0] / 1e-3 / (lin[:, 1] / 1e-4) - 1) > 5)  # not first order
    assert per_eps2[0, 2] != pytest.approx(per_eps2[0, 0], rel=1e-2)  # instance 2: seed 2
    with pytest.raises(ValueError, match="anti_scale"):
        run(-1.0)


def test_parting_finds_a_planted_split_and_no_other():
    steps = np.arange(40)
    wave = np.sin(steps / 3.0)[:, None] * np.array([1.0, 1e-9, 50.0])  # crosses zero, any scale
    part, gap = ap.parting(steps, wave, wave * (1 + 1e-6), 0.25)
    assert np.all(np.isnan(part)) and np.all(gap < 1e-5)  # the same curve: never parts
    split = wave.copy()
    split[20:] += 0.5 * np.abs(wave).max(0)  # planted: half the peak, from step 20
    part, gap = ap.parting(steps, wave, split, 0.25)
    np.testing.assert_array_equal(part, [20, 20, 20])
    assert np.all(gap >= 0.5)
    zeros = np.zeros((40, 1))
    assert np.isnan(ap.parting(steps, zeros, zeros, 0.25)[0][0])  # 0 / 0 is no gap
    with pytest.raises(ValueError, match="shape"):
        ap.parting(steps, wave, wave[:, :2], 0.25)

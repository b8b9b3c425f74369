"""lib/training/qkov.py: the four parameterizations agree, the reduced theory is what it says, and
the runs and readings of Chapters 7 and 8 (lib.experiments.qkov_*) do what they say."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from lib.book import page
from lib.data import tasks
from lib.experiments import ch07_rescaling_and_reduced_dynamics as ch07
from lib.experiments import ch08_sharper_attention as ch08
from lib.experiments import config
from lib.experiments import qkov_official as official
from lib.experiments import qkov_readings as readings
from lib.experiments import qkov_training as training
from lib.experiments.qkov_training import ScanSnapRuns
from lib.measure import matched_loss
from lib.theory import qkov_flow, reduced
from lib.training import engine, qkov
from lib.training.init import init_params


def _batch(n=16, seq_len=20, seed=0):
    return tasks.scan_snap_batch(n, seq_len=seq_len, generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("name", list(qkov.PARAMETERIZATIONS))
def test_parameterizations_agree_when_factors_multiply_to_the_same_matrices(name):
    K, V = 3, 50
    ref = qkov.SingleQueryAttention.named("CACO")
    model = qkov.SingleQueryAttention.named(name)
    p = init_params(model.specs(), list(range(K)), gamma=0.5, dtype=torch.float64)
    collapsed = {"W_QK": model.qk_matrix(p).detach(), "W_OV": model.ov_matrix(p).detach()}
    b = _batch()
    z, a = model.forward(p, b.X, return_attention=True)
    z_ref, a_ref = ref.forward(collapsed, b.X, return_attention=True)
    torch.testing.assert_close(z, z_ref)
    torch.testing.assert_close(a, a_ref)
    assert z.shape == (K, 16, V) and a.shape == (K, 16, 19)
    torch.testing.assert_close(a.sum(-1), torch.ones(K, 16, dtype=torch.float64))


def test_forward_matches_a_plain_position_loop():
    model = qkov.SingleQueryAttention.named("CACO")
    p = init_params(model.specs(), [0], gamma=0.3, dtype=torch.float64)
    b = _batch(n=4)
    z, a = model.forward(p, b.X, return_attention=True)
    W_QK, W_OV = p["W_QK"][0].detach(), p["W_OV"][0].detach()
    for i in range(4):
        x = b.X[i]
        s = W_QK[x[-1], x] / 50**0.5
        att = torch.softmax(s, 0)
        h = (att[:, None] * torch.eye(50, dtype=torch.float64)[x]).sum(0)
        torch.testing.assert_close(a[0, i], att)
        torch.testing.assert_close(z[0, i], W_OV @ h)


def test_per_instance_batches_and_identity_init():
    model = qkov.SingleQueryAttention.named("FACO")
    p = init_params(model.specs(), [0, 1], gamma=0.5)
    qkov.code_init_(model, p)
    eye = 1e-6 * torch.eye(50)
    for n in p:
        torch.testing.assert_close(p[n][1], eye)
    X = _batch(n=6).X.view(2, 3, -1)
    assert model.forward(p, X).shape == (2, 3, 50)
    with pytest.raises(ValueError):
        qkov.SingleQueryAttention(qk="bogus")


def test_balancedness_is_conserved_to_second_order_in_the_step():
    """One SGD step changes W_Q W_Q^T - W_K W_K^T by O(eta^2) only (§4.1)."""
    model = qkov.SingleQueryAttention.named("FAFO")
    p = init_params(model.specs(), [0], gamma=0.5, dtype=torch.float64)
    b = _batch(n=64)
    loss = torch.nn.functional.cross_entropy(model.forward(p, b.X)[0], b.y)
    grads = torch.autograd.grad(loss, list(p.values()))
    D0 = qkov_flow.balancedness(model, p)
    drift = []
    for eta in (1e-2, 1e-3):
        q = {n: (w - eta * g).detach() for (n, w), g in zip(p.items(), grads, strict=True)}
        D1 = qkov_flow.balancedness(model, q)
        drift.append(max(float((D1[c] - D0[c]).detach().norm()) for c in ("qk", "ov")))
    assert drift[1] < drift[0] / 50  # quadratic, not linear, in eta


def test_collapsed_flow_is_the_first_order_step_of_the_product():
    model = qkov.SingleQueryAttention.named("FAFO")
    p = init_params(model.specs(), [0], gamma=0.5, dtype=torch.float64)
    b = _batch(n=64)
    W = {
        "W_QK": model.qk_matrix(p).detach().requires_grad_(),
        "W_OV": model.ov_matrix(p).detach().requires_grad_(),
    }
    ref = qkov.SingleQueryAttention.named("CACO")
    loss_c = torch.nn.functional.cross_entropy(ref.forward(W, b.X)[0], b.y)
    g_qk, g_ov = torch.autograd.grad(loss_c, [W["W_QK"], W["W_OV"]])
    v_qk, v_ov = qkov_flow.collapsed_flow(model, p, g_qk, g_ov)
    loss = torch.nn.functional.cross_entropy(model.forward(p, b.X)[0], b.y)
    grads = torch.autograd.grad(loss, list(p.values()))
    eta = 1e-5
    q = {n: (w - eta * g).detach() for (n, w), g in zip(p.items(), grads, strict=True)}
    dqk = (model.qk_matrix(q) - model.qk_matrix(p)).detach() / eta
    dov = (model.ov_matrix(q) - model.ov_matrix(p)).detach() / eta
    assert float((dqk - v_qk).detach().norm() / v_qk.detach().norm()) < 1e-3
    assert float((dov - v_ov).detach().norm() / v_ov.detach().norm()) < 1e-3


def test_fixed_attention_model():
    alpha = torch.tensor([0.2, 1.0], dtype=torch.float64)
    model = qkov.FixedAttentionOV(alpha, ov="factorized")
    assert set(model.specs()) == {"W_V", "W_O"}
    p = init_params(model.specs(), [0, 1], gamma=0.5, dtype=torch.float64)
    b = _batch(n=5)
    z = model.forward(p, b.X)
    # with alpha = 1 the output only sees distinct tokens
    X2 = b.X.clone()
    X2[~b.distinct_mask] = 0
    torch.testing.assert_close(model.forward(p, X2)[1], z[1])


# ---------------------------------------------------------------------------
# Reduced theory
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("kind", list(qkov.PARAMETERIZATIONS))
def test_rhs_is_a_preconditioned_gradient_flow_on_the_reduced_loss(kind):
    R = reduced.ReducedModel()
    rng = np.random.default_rng(0)
    for _ in range(5):
        mu = torch.tensor(rng.uniform(0.1, 5, size=2), dtype=torch.float64, requires_grad=True)
        a = torch.sigmoid(mu[0] + np.log(R.m / R.n))
        L = torch.log1p((R.M - 1) * torch.exp(-a * mu[1]))
        g_qk, g_ov = torch.autograd.grad(L, mu)[0].tolist()
        eta_qk, eta_ov = 3.0, 0.7
        f_qk = 2 * mu[0].item() if kind[:2] == "FA" else 1.0
        f_ov = 2 * mu[1].item() if kind[2:] == "FO" else 1.0
        want = [-eta_qk * R.c_qk * f_qk * g_qk, -eta_ov * R.c_ov * f_ov * g_ov]
        got = R.rhs(0.0, mu.detach().numpy(), eta_qk, eta_ov, kind)
        np.testing.assert_allclose(got, want, rtol=1e-12)
        np.testing.assert_allclose(float(R.loss(*mu.tolist())), L.item(), rtol=1e-13)


def test_closed_form_solves_its_defining_equation():
    R = reduced.ReducedModel()
    for r in (0.01, 1.0, 100.0):
        mu_ov = np.linspace(0, 30, 7)
        a = R.alpha_closed_form(mu_ov, r, mu_qk0=0.3, mu_ov0=0.0)
        x = a / (1 - a)
        lhs = np.log(x) + x
        rhs = np.log(R.m / R.n) + R.G(0.3) + R.k(r) * mu_ov**2
        np.testing.assert_allclose(lhs, rhs, rtol=1e-12, atol=1e-12)
        # the same alpha is what G^{-1} of the invariant gives
        mu_qk = np.log(x * R.n / R.m)
        np.testing.assert_allclose(
            R.invariant(mu_qk, mu_ov, r), R.invariant(0.3, 0.0, r), atol=1e-10
        )
        loss = 0.01
        a_star = R.alpha_at_loss(loss, r)
        mu_ov_star = R.margin_at_loss(loss) / a_star
        np.testing.assert_allclose(R.alpha_closed_form(mu_ov_star, r), a_star, rtol=1e-10)


def test_invariant_conserved_and_closed_form_matches_ode():
    R = reduced.ReducedModel()
    for r in (0.1, 1.0, 10.0):
        sol = R.solve(r, stop_losses=(1e-2,), t_max=1e12)
        inv = R.invariant(sol.y[0], sol.y[1], r)
        assert (
            np.max(np.abs(inv - inv[0])) / np.abs(inv[0]) < 1e-6
            or np.max(np.abs(inv - inv[0])) < 1e-7
        )
        mu_qk, mu_ov = sol.y_events[0][0]
        assert abs(R.alpha(mu_qk) - R.alpha_at_loss(1e-2, r)) < 1e-6
    with pytest.raises(ValueError):
        R.rhs(0, [0.0, 0.0], 1.0, 1.0, kind="XYZ")


def test_at_matched_loss_interpolates_in_log_loss():
    loss = np.array([[1.0, 1.0], [0.1, 0.5], [0.01, 0.4]])
    vals = np.array([[0.0, 0.0], [1.0, 1.0], [2.0, 2.0]])
    out = matched_loss.at_matched_loss(
        loss, vals, np.sqrt(0.1)
    )  # halfway in log between logs 0 and 1
    np.testing.assert_allclose(out[0], 0.5)
    assert np.isnan(out[1])  # never reaches the target
    np.testing.assert_array_equal(matched_loss.first_log_below(loss, 0.1), [1, -1])


def test_headline_check_holds_for_a_sharper_arm_and_fails_for_a_blunter_one():
    # Two seeds; both arms fall from loss 1 to 0.01, the test arm with more distinct mass.
    loss = np.array([[1.0, 1.0], [0.1, 0.1], [0.01, 0.01]])
    sharp = np.array([[0.35, 0.35], [0.6, 0.55], [0.8, 0.7]])
    blunt = np.array([[0.35, 0.35], [0.4, 0.45], [0.5, 0.5]])
    yes = matched_loss.sharper_at_matched_loss(loss, sharp, loss, blunt)
    assert yes.holds and yes.loss == pytest.approx(0.01)
    np.testing.assert_allclose(yes.test, [0.8, 0.7])
    assert not matched_loss.sharper_at_matched_loss(loss, blunt, loss, sharp).holds
    # One seed the other way round is enough to fail: the check is per seed.
    mixed = sharp.copy()
    mixed[:, 1] = blunt[:, 1] - 0.01
    assert not matched_loss.sharper_at_matched_loss(loss, mixed, loss, blunt).holds
    # The matched loss is one that every instance reaches: here the slower arm's lowest.
    slow = np.array([[1.0, 1.0], [0.3, 0.2], [0.1, 0.1]])
    res = matched_loss.sharper_at_matched_loss(loss, sharp, slow, blunt)
    assert res.loss == pytest.approx(0.1) and np.isfinite(res.test).all()
    with pytest.raises(ValueError):
        matched_loss.sharper_at_matched_loss(loss, sharp, loss[:, :1], blunt[:, :1])


def test_distinct_mass_bins_and_modal_status():
    pct = readings.distinct_mass_percent([0.05, 0.3, 0.35, 0.39, 1.0])
    np.testing.assert_allclose(pct, [20, 60, 0, 0, 20])
    assert readings.modal_bin_status(pct, 1) == "reproduced"
    assert readings.modal_bin_status(pct, 4) == "not reproduced"
    assert readings.modal_bin_status(pct, None) == "not comparable"
    assert set(official.FIG2_MODAL_BIN) >= {"FAFO", "FACO", "CACO, r=5"}


def test_official_fig3_record_and_default_init_rate():
    for v in official.FIG3_FINAL_LOSS.values():
        assert len(v) == len(official.FIG3_ALPHAS) and np.all(np.diff(v) < 0)
    assert official.FIG3_FLOW_TIME == pytest.approx(1250.0)
    g = qkov.torch_default_gamma(50)
    assert 50.0 ** (-g) == pytest.approx(150.0**-0.5)
    W = init_params(
        qkov.FixedAttentionOV(torch.tensor([0.5]), ov="collapsed").specs(), [0], gamma=g
    )["W_OV"]
    ref = torch.nn.Linear(50, 50).weight.detach()
    assert float(W.detach().std()) == pytest.approx(float(ref.std()), rel=0.1)


def test_fixed_attention_output_bias_shifts_every_logit():
    alpha = torch.tensor([0.3, 0.9])
    m = qkov.FixedAttentionOV(alpha, ov="collapsed", bias=True)
    assert set(m.specs()) == {"W_OV", "b_OV"}
    p = init_params(m.specs(), [0, 1], gamma=0.5)
    X = _batch(n=4).X
    z0 = qkov.FixedAttentionOV(alpha, ov="collapsed").forward({"W_OV": p["W_OV"]}, X)
    torch.testing.assert_close(m.forward(p, X) - z0, p["b_OV"][:, None, :].expand_as(z0))


def test_streams_and_snapshots_land_on_the_requested_device():
    X, y = training.scan_snap_stream(3, 4, 12, seed=0, device="cpu")(0)
    assert X.shape == (3, 4, 11) and y.shape == (3, 4) and X.device.type == "cpu"
    X2, _ = training.scan_snap_stream(3, 4, 12, seed=0, device=torch.device("cpu"))(0)
    torch.testing.assert_close(X, X2)  # the same stream whatever the device argument
    h = _tiny_history()
    snap = training.snapshots(h, qkov.SingleQueryAttention.named("CACO"), -1, torch.device("cpu"))
    assert set(snap) == {"W_QK", "W_OV"} and snap["W_QK"].device.type == "cpu"


# ---------------------------------------------------------------------------
# The runs of Chapters 7 and 8 and what they read from them
# ---------------------------------------------------------------------------


def _tiny_history(steps=6):

    m = qkov.SingleQueryAttention.named("CACO")
    p = init_params(m.specs(), [0, 1], gamma=0.5)
    return engine.train(
        m,
        p,
        training.scan_snap_stream(2, 4, 12, seed=0),
        steps,
        optimizer="sgd",
        lr=0.5,
        log_at=engine.log_grid(steps, 3),
        callbacks=training.snapshot_callbacks(m),
        desc="test",
    )


def test_stats_over_training_has_one_row_per_log_and_means_of_the_samples():
    h = _tiny_history()
    m = qkov.SingleQueryAttention.named("CACO")
    st = readings.stats_over_training(h, m, _batch(n=8, seq_len=12))
    n = len(h.steps)
    assert st["loss"].shape == (n, 2) and st["distinct_samples"].shape == (n, 2, 8)
    np.testing.assert_allclose(st["distinct"], st["distinct_samples"].mean(-1), rtol=1e-6)
    means = readings.means_at_matched_loss(
        {"CACO": st}, {"all": ("CACO", slice(None))}, 10.0, ("distinct",)
    )
    assert means["all"]["distinct"] == pytest.approx(float(st["distinct"][0].mean()))


def test_fit_lines_recovers_a_slope_through_the_origin():
    dO = np.linspace(0, 1, 9)[:, None] * np.array([1.0, 2.0])
    dG = dO * np.array([0.5, 3.0])
    k, r2 = readings.fit_lines(dG, dO)
    np.testing.assert_allclose(k, [0.5, 3.0])
    np.testing.assert_allclose(r2, [1.0, 1.0])


def test_unbalanced_fraction_is_zero_for_a_balanced_change():
    p0 = {n: torch.eye(3).expand(2, 3, 3).clone() for n in ("W_Q", "W_K", "W_O", "W_V")}
    p1 = {n: 2 * w for n, w in p0.items()}  # every Gram grows alike: the change is balanced
    drift = readings.unbalanced_fraction_callback(p0)(0, p1)
    assert drift.shape == (2, 2) and float(drift.abs().max()) < 1e-12
    p1["W_Q"] = 3 * p0["W_Q"]
    assert float(readings.unbalanced_fraction_callback(p0)(0, p1)[:, 0].min()) > 0.1


def test_group_by_stacks_instances_by_label():
    np.testing.assert_array_equal(
        readings.group_by([1, 2, 3, 4], [0.5, 0.5, 2, 2], [2, 0.5]), [[3, 4], [1, 2]]
    )


def test_fig2_rows_read_each_panel_twice_and_name_the_panels_that_never_stopped():
    h = _tiny_history()
    m = qkov.SingleQueryAttention.named("CACO")
    st = {"CACO": readings.stats_over_training(h, m, _batch(n=8, seq_len=12))}
    panels = {"FAFO": ("CACO", slice(None)), "CAFO": ("CACO", slice(None))}
    loss_star = float(st["CACO"]["loss"].min(0).max())
    rows, not_reached = readings.fig2_rows(st, {"CACO": (m, h)}, panels, loss_star, lr=0.5)
    assert [(r["panel"], r["reading"]) for r in rows] == [
        ("FAFO", "matched loss"),
        ("FAFO", "code: lowest train loss"),  # a 6-step run never reaches a loss of 1e-3
        ("CAFO", "matched loss"),
        ("CAFO", "code: lowest train loss"),
    ]
    assert not_reached == ["FAFO", "CAFO"]
    for r in rows:
        pct = [r[b] for b in official.BIN_NAMES]
        assert sum(pct) == pytest.approx(100.0, abs=0.3)
        assert r["our mode"] == official.BIN_NAMES[int(np.argmax(pct))]
    assert rows[0]["status"] in ("reproduced", "not reproduced")
    assert rows[2]["status"] == "not comparable" and rows[2]["official mode"] == "no output"


def test_shk_table_gives_the_mean_and_range_per_multiplier():
    at = {k: np.array([1.0, 3.0, 10.0, 20.0]) for k in ("H", "Hn", "prev", "final loss")}
    at["step"] = np.array([100.0, 300.0, 50.0, 70.0])
    rows = readings.shk_table(at, [1, 1, 10, 10], (1.0, 10.0))
    assert [r["QK multiplier"] for r in rows] == [1.0, 10.0]
    assert rows[0]["entropy (nats)"] == (2.0, 1.0, 3.0)
    assert rows[0]["step at matched loss"] == (200.0, 100.0, 300.0)
    assert rows[1]["final val. loss"] == (15.0, 10.0, 20.0)
    assert page.table_markdown(rows).splitlines()[2] == (
        "| 1 | 2 [1, 3] | 2 [1, 3] | 2 [1, 3] | 200 [100, 300] | 2 [1, 3] |"
    )


def test_the_two_chapters_train_the_same_scan_and_snap_runs():
    """Chapters 7 and 8 both read the equal-rate runs: one group of settings, equal in both
    chapters at every scale, names them."""
    for scale in ("ci", "book", "paper"):
        c7, c8 = config(ch07, scale), config(ch08, scale)
        assert isinstance(c7.runs, ScanSnapRuns) and c7.runs == c8.runs, scale

"""The init function, the batched models and the training engine."""

import numpy as np
import pytest
import torch

from lib.env import ConfigError
from lib.training.engine import TrainingDivergedError, cross_entropy, log_grid, log_steps, train
from lib.training.init import ParamSpec, init_params
from lib.training.layers import embed_sum, rmsnorm
from lib.training.models import EmbMLP, LinearEmb, Transformer, build


def _data(V=11, L=4, N=64, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, V, (N, L), generator=g), torch.randint(0, V, (N,), generator=g)


def test_init_std_follows_fan_in_power_gamma():
    specs = {"W": ParamSpec((400, 300), 400, "mlp")}
    for gamma in (0.5, 1.0):
        W = init_params(specs, [0], gamma=gamma)["W"]
        assert W.std().item() == pytest.approx(400 ** (-gamma), rel=0.02)


def test_init_per_instance_gamma_and_group_override():
    specs = {"E": ParamSpec((50, 200), 50, "embedding"), "W": ParamSpec((200, 50), 200, "mlp")}
    p = init_params(specs, [0, 1], gamma=[0.5, 1.0], group_gamma={"embedding": 1.5})
    assert p["W"][0].std().item() == pytest.approx(200**-0.5, rel=0.05)
    assert p["W"][1].std().item() == pytest.approx(200**-1.0, rel=0.05)
    assert p["E"][0].std().item() == pytest.approx(50**-1.5, rel=0.05)


def test_init_instance_independent_of_batch_companions():
    specs = EmbMLP(11, 8, 16, 11).specs()
    both = init_params(specs, [3, 7], gamma=[1.0, 0.5])
    alone = init_params(specs, [7], gamma=0.5)
    for n in specs:
        assert torch.equal(both[n][1], alone[n][0])


def test_init_rejects_bad_input():
    specs = {"W": ParamSpec((3, 3), 3, "mlp")}
    with pytest.raises(ValueError, match="K=2"):
        init_params(specs, [0, 1], gamma=[1.0, 1.0, 1.0])
    with pytest.raises(ValueError, match="unknown group"):
        init_params(specs, [0], group_gamma={"bogus": 1.0})
    with pytest.raises(ValueError, match="parameter group"):
        ParamSpec((3,), 3, "nope")


def test_embed_sum_equals_gather_sum_shared_and_per_instance():
    E = torch.randn(3, 11, 5)
    X, _ = _data()
    ref = torch.stack([E[k][X].sum(1) for k in range(3)])
    assert torch.allclose(embed_sum(E, X), ref, atol=1e-6)
    Xk = torch.stack([X, X.flip(0), X])
    refk = torch.stack([E[k][Xk[k]].sum(1) for k in range(3)])
    assert torch.allclose(embed_sum(E, Xk), refk, atol=1e-6)


@pytest.mark.parametrize("optimizer", ["gd", "sgd", "adam", "adamw"])
def test_batched_equals_sequential(optimizer):
    """K instances trained together follow exactly the trajectories they follow alone."""
    model = EmbMLP(11, 8, 16, 11, activation="gelu")
    X, y = _data()
    kw = dict(optimizer=optimizer, weight_decay=0.01, log_at=[0, 5, 10])
    kw["batch_size"] = None if optimizer == "gd" else 16
    lrs = [0.05, 0.2, 0.1]
    pb = build(model, [0, 1, 2], gamma=[1.0, 0.5, 0.8])
    hb = train(model, pb, (X, y), 10, lr=lrs, momentum=0.9 if optimizer == "sgd" else 0.0, **kw)
    for k, (g, lr) in enumerate(zip([1.0, 0.5, 0.8], lrs, strict=True)):
        ps = build(model, [k], gamma=g)
        hs = train(model, ps, (X, y), 10, lr=lr, momentum=0.9 if optimizer == "sgd" else 0.0, **kw)
        for n in ps:
            assert torch.allclose(pb[n][k], ps[n][0], atol=1e-5), (optimizer, n, k)
        np.testing.assert_allclose(hb["loss"][:, k], hs["loss"][:, 0], rtol=1e-5)


def test_group_lr_per_instance_and_frozen():
    model = LinearEmb(11, 6, 11)
    X, y = _data()
    p = build(model, [0, 1])
    E0, W0 = p["E"].detach().clone(), p["W"].detach().clone()
    train(model, p, (X, y), 3, optimizer="gd", lr=0.5, group_lr={"embedding": [0.0, 0.5]})
    assert torch.equal(p["E"][0], E0[0]) and not torch.equal(p["E"][1], E0[1])
    assert not torch.equal(p["W"][0], W0[0])
    p = build(model, [0])
    E0 = p["E"].detach().clone()
    train(model, p, (X, y), 3, optimizer="gd", lr=0.5, frozen=["E"])
    assert torch.equal(p["E"], E0)


def test_freeze_at_stops_one_weight_mid_run_and_the_rest_carry_on():
    model = EmbMLP(11, 4, 8, 11)
    X, y = _data()
    p = build(model, [0, 1], gamma=0.5)
    q = {n: t.detach().clone().requires_grad_(True) for n, t in p.items()}
    train(model, p, (X, y), 2, optimizer="adam", lr=0.05)
    E_at_2 = p["E"].detach().clone()
    train(model, q, (X, y), 5, optimizer="adam", lr=0.05, freeze_at={"E": 2})
    assert torch.equal(q["E"], E_at_2)  # updated at steps 0 and 1, never after
    assert not torch.equal(q["W1"], p["W1"])  # the others went on training
    r = {n: t.detach().clone().requires_grad_(True) for n, t in build(model, [0, 1], 0.5).items()}
    train(model, r, (X, y), 5, optimizer="adam", lr=0.05)
    assert not torch.equal(r["E"], E_at_2)  # without freeze_at, E keeps moving (the control)
    with pytest.raises(ConfigError, match="freeze_at names 'P'"):
        train(model, r, (X, y), 1, freeze_at={"P": 1})
    with pytest.raises(ConfigError, match="step >= 0"):
        train(model, r, (X, y), 1, freeze_at={"E": -1})


def test_opt_state_exposes_adams_moments_and_changes_nothing():
    """A dict passed as ``opt_state`` holds Adam's raw moments per weight, on (B, L) and
    (K, B, L) tokens, and the run is bit-identical to one without it."""
    model = EmbMLP(11, 4, 8, 11)
    X, y = _data()
    for Xk, yk in ((X, y), (X.expand(2, *X.shape).clone(), y.expand(2, *y.shape).clone())):
        p = build(model, [0, 1], gamma=0.5)
        q = {n: t.detach().clone().requires_grad_(True) for n, t in p.items()}
        state: dict = {}
        train(model, p, (Xk, yk), 3, optimizer="adam", lr=0.05)
        train(model, q, (Xk, yk), 3, optimizer="adam", lr=0.05, opt_state=state)
        assert all(torch.equal(p[n], q[n]) for n in p)
        assert set(state) == set(p) and all(state[n]["v"].shape == p[n].shape for n in p)
        assert all(bool((state[n]["v"] > 0).any()) for n in p)


def test_gd_step_matches_autograd():
    model = EmbMLP(11, 4, 8, 11)
    X, y = _data()
    p = build(model, [0], gamma=0.5)
    ref = {n: t.detach().clone().requires_grad_(True) for n, t in p.items()}
    loss = torch.nn.functional.cross_entropy(model.forward(ref, X)[0], y)
    grads = torch.autograd.grad(loss, list(ref.values()))
    train(model, p, (X, y), 1, optimizer="gd", lr=0.3)
    for (n, t), g in zip(ref.items(), grads, strict=True):
        assert torch.allclose(p[n], t - 0.3 * g, atol=1e-6)


def test_callbacks_and_log_steps():
    steps = log_steps(1000, 20)
    assert steps[0] == 0 and steps[-1] == 1000 and np.all(np.diff(steps) > 0)
    model = LinearEmb(11, 4, 11)
    X, y = _data()
    p = build(model, [0, 1, 2])
    h = train(
        model,
        p,
        (X, y),
        50,
        optimizer="gd",
        lr=0.5,
        log_at=10,
        callbacks={"normE": lambda step, params: params["E"].flatten(1).norm(dim=1)},
    )
    assert h["normE"].shape == (len(h.steps), 3) and h["loss"].shape == (len(h.steps), 3)
    assert h.steps[0] == 0 and h.steps[-1] == 50
    assert np.all(h["loss"][-1] < h["loss"][0])


def test_the_smoke_mode_makes_two_steps_logs_from_the_grid_and_records_the_time(
    monkeypatch, tmp_path
):
    """BOOK_SMOKE=1: a 30-step run updates the weights exactly as a 2-step run does, logs at
    the first 3 of the 30-step run's logging steps and its last (at every one, the same
    history shape, with BOOK_SMOKE_LOGS=all, and in a run logged at every step), and writes one JSON line with its seconds per
    step; a run of at most 2 steps is unchanged. Without it, nothing changes."""
    import json

    model = EmbMLP(11, 8, 16, 11)
    X, y = _data()
    kw = dict(optimizer="adam", lr=1e-2, batch_size=16, log_at=12)
    cb = {"normE": lambda step, params: params["E"].flatten(1).norm(dim=1)}

    def run(steps):
        p = build(model, [0, 1, 2])
        return p, train(model, p, (X, y), steps, callbacks=cb, **kw)

    p2, h2 = run(2)
    p30, h30 = run(30)
    log = tmp_path / "smoke.jsonl"
    monkeypatch.setenv("BOOK_SMOKE_LOG", str(log))
    monkeypatch.setenv("BOOK_SMOKE", "1")
    s2, g2 = run(2)
    s30, g30 = run(30)
    p = build(model, [0, 1, 2])  # a probe logged at every step keeps every log: h.steps[i] == i
    every = train(model, p, (X, y), 30, callbacks=cb, **{**kw, "log_at": np.arange(31)})
    assert every.steps.tolist() == list(range(31)) and every["normE"].shape == (31, 3)
    assert np.allclose(every["normE"][2:], h2["normE"][-1])  # frozen after 2 steps
    monkeypatch.setenv("BOOK_SMOKE_LOGS", "all")
    a30, f30 = run(30)
    for n in p2:
        assert torch.equal(s2[n], p2[n]) and torch.equal(s30[n], p2[n])
        assert torch.equal(a30[n], p2[n]) and not torch.equal(p30[n], p2[n])
    assert len(h30.steps) > 5 and len(h30.steps) > len(h2.steps)
    assert g30.steps.tolist() == h30.steps[:3].tolist() + h30.steps[-1:].tolist()
    assert np.array_equal(f30.steps, h30.steps)
    assert f30["normE"].shape == h30["normE"].shape and f30["loss"].shape == h30["loss"].shape
    late = f30.steps >= 2  # frozen weights: the callback reads the 2-step weights throughout
    assert np.allclose(f30["normE"][late], h2["normE"][-1])
    rows = [json.loads(line) for line in log.read_text().splitlines()]
    assert [(r["steps"], r["run_steps"], len(r["step_s"]), r["K"], r["n_logs_run"]) for r in rows] == [
        (2, 2, 2, 3, len(h2.steps)), (30, 2, 2, 3, 4), (30, 2, 2, 3, 31),
        (30, 2, 2, 3, len(h30.steps))]  # fmt: skip
    assert rows[1]["n_logs"] == len(h30.steps) and all(t > 0 for t in rows[1]["step_s"])
    monkeypatch.setenv("BOOK_SMOKE", "0")
    n30, _ = run(30)
    assert all(torch.equal(n30[n], p30[n]) for n in p30)
    assert len(log.read_text().splitlines()) == 4  # nothing recorded outside the smoke mode
    monkeypatch.setenv("BOOK_SMOKE", "yes")
    with pytest.raises(ConfigError, match="BOOK_SMOKE=1"):
        run(2)
    monkeypatch.setenv("BOOK_SMOKE", "1")
    monkeypatch.setenv("BOOK_SMOKE_LOGS", "some")
    with pytest.raises(ConfigError, match="BOOK_SMOKE_LOGS=all"):
        run(2)


def test_cross_entropy_per_instance():
    logits = torch.randn(2, 5, 7)
    y = torch.randint(0, 7, (5,))
    ce = cross_entropy(logits, y)
    for k in range(2):
        assert ce[k].item() == pytest.approx(
            torch.nn.functional.cross_entropy(logits[k], y).item(), rel=1e-6
        )


def test_nan_guard_names_step_instance_parameter():
    model = LinearEmb(11, 4, 11)
    X, y = _data()
    p = build(model, [0, 1, 2])

    def poison(step):
        if step == 3:
            with torch.no_grad():
                p["W"][2, 0, 0] = float("nan")
        return X, y

    with pytest.raises(TrainingDivergedError, match=r"step 3, instance 2: parameter 'W'"):
        train(model, p, poison, 10, optimizer="gd", lr=0.1, log_at=[0])


def test_divergence_from_huge_lr_is_caught():
    model = EmbMLP(11, 4, 8, 11)
    X, y = _data()
    p = build(model, [0, 1], gamma=0.3)
    with pytest.raises(TrainingDivergedError, match="instance 1"):
        train(model, p, (X, y), 200, optimizer="gd", lr=[0.01, 1e12], log_at=[0])


def test_bad_config_errors():
    model = LinearEmb(11, 4, 11)
    X, y = _data()
    p = build(model, [0, 1])
    with pytest.raises(ConfigError, match="unknown optimizer"):
        train(model, p, (X, y), 1, optimizer="lbfgs")
    with pytest.raises(ConfigError, match="K=2"):
        train(model, p, (X, y), 1, lr=[0.1, 0.1, 0.1])
    with pytest.raises(ConfigError, match="lacks"):
        train(model, p, (X, y), 1, group_lr={"qk": 0.1})
    with pytest.raises(ConfigError, match="full-batch"):
        train(model, p, (X, y), 1, optimizer="gd", batch_size=8)
    with pytest.raises(ValueError, match="activation"):
        EmbMLP(11, 4, 8, 11, activation="swish2")


def _transformer_loop(model, params, X, k):
    """A plain single-instance implementation of the same forward pass."""
    p = {n: t[k] for n, t in params.items()}
    L = X.shape[1]
    h = p["E"][X] + p["P"][:L]
    for layer in range(model.n_layers):
        x = rmsnorm(h) if model.norm == "rms" else h
        s = (x @ p[f"Q{layer}"]) @ (x @ p[f"K{layer}"]).transpose(1, 2) / model.d_model**0.5
        s = s.masked_fill(torch.triu(torch.ones(L, L, dtype=torch.bool), 1), float("-inf"))
        h = h + torch.softmax(s, -1) @ (x @ p[f"V{layer}"]) @ p[f"O{layer}"]
        if model.d_mlp:
            x = rmsnorm(h) if model.norm == "rms" else h
            h = h + torch.relu(x @ p[f"W1_{layer}"]) @ p[f"W2_{layer}"]
    if model.norm == "rms":
        h = rmsnorm(h)
    out = h @ p["U"]
    return out[:, -1] if model.readout == "last" else out


@pytest.mark.parametrize("norm", ["none", "rms"])
@pytest.mark.parametrize("readout", ["last", "all"])
def test_transformer_matches_plain_loop(norm, readout):
    model = Transformer(11, 8, context_len=6, n_layers=2, d_mlp=12, norm=norm, readout=readout)
    params = build(model, [0, 1, 2], gamma=0.5)
    X = torch.randint(0, 11, (5, 6), generator=torch.Generator().manual_seed(1))
    out = model.forward(params, X)
    for k in range(3):
        assert torch.allclose(out[k], _transformer_loop(model, params, X, k), atol=1e-5)


def test_transformer_is_causal_and_uniform_at_small_init():
    model = Transformer(11, 16, context_len=8, readout="all")
    params = build(model, [0], gamma=2.0)
    X = torch.randint(0, 11, (4, 8), generator=torch.Generator().manual_seed(0))
    X2 = X.clone()
    X2[:, -1] = (X2[:, -1] + 1) % 11
    out, attn = model.forward(params, X, return_attention=True)
    out2 = model.forward(params, X2)
    assert torch.allclose(out[..., :-1, :], out2[..., :-1, :])
    A = attn[0][0]
    uniform = torch.tril(torch.ones(8, 8)) / torch.arange(1, 9)[:, None]
    assert torch.allclose(A.sum(-1), torch.ones(4, 8))
    assert (A - uniform).abs().max() < 1e-3  # tiny init -> uniform causal averaging


def test_transformer_trains_with_per_group_rates():
    model = Transformer(11, 8, context_len=4, readout="all")
    params = build(model, [0, 1], gamma=0.5)
    X = torch.randint(0, 11, (32, 5), generator=torch.Generator().manual_seed(0))
    q0 = params["Q0"].detach().clone()
    h = train(
        model,
        params,
        (X[:, :-1], X[:, 1:]),
        20,
        optimizer="adam",
        lr=1e-2,
        group_lr={"qk": [0.0, 1e-2]},
        log_at=[0, 20],
    )
    assert torch.equal(params["Q0"][0], q0[0]) and not torch.equal(params["Q0"][1], q0[1])
    assert np.all(h["loss"][-1] < h["loss"][0])


def test_instance_batches_and_accuracy_callback():
    from lib.training.engine import accuracy_callback, instance_batches

    d0 = (torch.zeros(10, 3, dtype=torch.long), torch.zeros(10, dtype=torch.long))
    d1 = (torch.ones(7, 3, dtype=torch.long), torch.ones(7, dtype=torch.long))
    data = instance_batches([d0, d1], [1, 0, 1], batch_size=4, seed=0)
    X, y = data(0)
    assert X.shape == (3, 4, 3) and y.shape == (3, 4)
    assert X[0].eq(1).all() and X[1].eq(0).all() and torch.equal(X[0], X[2])
    with pytest.raises(ConfigError, match="outside"):
        instance_batches([d0], [1], 4)
    model = LinearEmb(2, 3, 2)
    p = build(model, [0, 1])
    with torch.no_grad():  # instance 0 always predicts class 1, instance 1 class 0
        p["W"][0] = torch.tensor([[0.0, 1.0]] * 3)
        p["W"][1] = torch.tensor([[1.0, 0.0]] * 3)
        p["E"].fill_(1.0)
    acc = accuracy_callback(model, X[0], y[0])(0, p)
    assert acc.tolist() == [1.0, 0.0]


def test_importing_lib_flushes_denormals():
    import lib  # noqa: F401  (the import sets the flag)

    # 1e-30 * 1e-10 = 1e-40 is a float32 denormal: flushed to zero it is exactly 0.
    assert float(torch.tensor([1e-30]) * 1e-10) == 0.0


def test_log_grid_has_both_ends_is_sorted_and_holds_the_extra_steps():
    grid = log_grid(500, 24, extra=[10, 499])
    assert grid[0] == 0 and grid[-1] == 500
    assert list(grid) == sorted(set(grid.tolist()))
    assert {1, 2, 3, 10, 499} <= set(grid.tolist())  # the log part resolves the first steps
    assert len(grid) > 24

"""The expansion terms of lib.theory.flow against autograd on tiny problems.

Scaling tests: multiplying every weight by t shrinks the term of order eps^k by t^k, so
the relative error of the expansion truncated after order k must shrink as the next
power of t (order 0 of the Emb-MLP: t^2; after order 1: t^3; after the contextual term:
t^5 for SiLU, whose cubic Taylor coefficient is 0).
"""

import numpy as np
import pytest
import torch

from lib.measure import attention
from lib.theory import attention_flow, flow, saddle
from lib.training.models import EmbMLP, LinearEmb, Transformer, build

V, n, L, N = 11, 7, 3, 200


def data(seed=0):
    g = torch.Generator().manual_seed(seed)
    X = torch.randint(0, V - 1, (N, L), generator=g)  # token V-1 never occurs
    y = (X[:, 0] + 2 * X[:, 1] * X[:, 2]) % n  # needs context: orders 0 and 1 both nonzero
    return X, y


def rel_err(a, b):
    return ((a - b).norm(dim=(1, 2)) / a.norm(dim=(1, 2))).numpy()


def scaled(params, t):
    return {k: v.detach().double() * t for k, v in params.items()}


def slope(ts, errs):
    return np.polyfit(np.log(ts), np.log(errs), 1)[0]


@pytest.mark.parametrize("activation", ["silu", "gelu", "tanh"])
def test_emb_mlp_expansion_orders(activation):
    X, y = data()
    S = flow.counted_signatures(X, y, V, n)
    model = EmbMLP(V, 6, 9, n, activation)
    p = build(model, [1, 2], gamma=0.5)
    ts = [0.1, 0.05, 0.025]
    e0, e1, e2 = [], [], []
    for t in ts:
        q = scaled(p, t)
        g = flow.neg_grad_E(model, q, X, y)
        T = flow.emb_mlp_terms(model, q, S)
        e0.append(rel_err(g, T["order0"]))
        e1.append(rel_err(g, T["order0"] + T["order1"]))
        e2.append(rel_err(g, T["order0"] + T["order1"] + T["contextual"]))
        assert torch.all(g[:, V - 1] == 0) and torch.all(T["order1"][:, V - 1] == 0)
    e0, e1, e2 = map(np.array, (e0, e1, e2))
    for k in range(2):
        # tanh (c2 = 0): no order-1 term, so the leading error is the contextual eps^5 term
        assert slope(ts, e0[:, k]) == pytest.approx(3 if activation == "tanh" else 2, abs=0.15)
        if activation != "tanh":  # tanh: c2 = 0, the order-1 term vanishes identically
            assert slope(ts, e1[:, k]) == pytest.approx(3, abs=0.15)
        next_power = 5 if activation in ("silu", "gelu") else 4  # tanh has sigma''' != 0
        assert slope(ts, e2[:, k]) == pytest.approx(next_power, abs=0.3)
    if activation == "tanh":
        assert torch.all(T["order1"] == 0)


def test_emb_mlp_paths_sum_to_gradient_and_centring():
    X, y = data(1)
    S = flow.counted_signatures(X, y, V, n)
    model = EmbMLP(V, 6, 9, n, "gelu")
    p = scaled(build(model, [3], gamma=0.3), 1.0)
    P = flow.emb_mlp_paths(model, p, X, y)
    g = flow.neg_grad_E(model, p, X, y)
    assert rel_err(g, P["linear"] + P["nonlinear"]).max() < 1e-12
    # Centring on a tensor equal to u reproduces the uniform centring.
    u = torch.full((n,), 1.0 / n, dtype=torch.float64)
    a = flow.emb_mlp_order0(model, p, S, "uniform")
    b = flow.emb_mlp_order0(model, p, S, u)
    assert torch.allclose(a, b)
    with pytest.raises(ValueError):
        flow.emb_mlp_order0(model, p, S, "median")


def test_attention_expansion_orders():
    X, y = data(3)
    S = flow.counted_signatures(X, y, V, n, joint=False)
    model = Transformer(V, 6, L, n_layers=1, n_out=n)
    p = build(model, [5, 6], gamma=0.5)
    ts = [0.4, 0.2, 0.1]
    e0, e1, qk = [], [], []
    for t in ts:
        q = scaled(p, t)
        g = flow.neg_grad_E(model, q, X, y)
        T = attention_flow.attention_terms(model, q, S)
        e0.append(rel_err(g, T["residual"]))
        e1.append(rel_err(g, T["residual"] + T["value"] + T["self"]))
        qk.append(
            attention_flow.attention_qk_path(model, q, X, y).norm(dim=(1, 2)) / g.norm(dim=(1, 2))
        )
    e0, e1, qk = np.array(e0), np.array(e1), np.array([x.numpy() for x in qk])
    for k in range(2):
        assert slope(ts, e0[:, k]) == pytest.approx(2, abs=0.2)
        assert slope(ts, e1[:, k]) == pytest.approx(4, abs=0.3)
        assert slope(ts, qk[:, k]) == pytest.approx(6, abs=0.3)  # QK path: eps^7 / eps^1
    with pytest.raises(ValueError):
        attention_flow.attention_terms(Transformer(V, 6, L, n_layers=2, n_out=n), p, S)


def test_attention_distance_and_entropy():
    A = torch.ones(3, 3).tril()
    A = (A / A.sum(-1, keepdim=True))[None, None]
    assert float(attention.attention_distance(A)) == 0.0
    assert float(attention.readout_attention_entropy(A)) == pytest.approx(np.log(3))
    B = torch.eye(3)[None, None]
    assert float(attention.attention_distance(B)) == pytest.approx((0 + 0.5 + 2 / 3) / 3)


def test_linear_mode_early_solution_and_onset():
    """The closed form solves the linearised flow; the onset inverts it."""
    from scipy.integrate import solve_ivp

    rng = np.random.default_rng(0)
    s, a0, b0 = np.array([0.7]), rng.normal(size=(1, 4)) * 0.01, rng.normal(size=(1, 4)) * 0.01
    sol = solve_ivp(
        lambda t, z: np.concatenate([s[0] * z[4:], s[0] * z[:4]]),
        (0, 8),
        np.concatenate([a0[0], b0[0]]),
        rtol=1e-10,
        atol=1e-14,
        dense_output=True,
    )
    ts = np.linspace(0, 8, 9)
    z = sol.sol(ts)
    u_num = (z[:4] * z[4:]).sum(0)
    u_th = flow.linear_mode_strength_early(s, a0, b0, ts)[:, 0]
    np.testing.assert_allclose(u_th, u_num, rtol=1e-6, atol=1e-12)
    t_on = flow.linear_mode_onset(s, a0, b0, theta=0.5)
    assert flow.linear_mode_strength_early(s, a0, b0, t_on)[0, 0] == pytest.approx(0.5)


def test_signature_matrix_drives_linear_model():
    """At small init the linear model's -dL/dE is M W^T to leading order."""
    X, y = data(4)
    S = flow.counted_signatures(X, y, V, n, joint=False)
    model = LinearEmb(V, 5, n)
    p = scaled(build(model, [7], gamma=1.0), 0.1)
    g = flow.neg_grad_E(model, p, X, y)
    Mm = flow.signature_matrix(S)
    pred = Mm[None] @ p["W"].transpose(1, 2)
    assert rel_err(g, pred).max() < 0.02
    assert torch.allclose(Mm.sum(1), torch.zeros(V, dtype=torch.float64), atol=1e-12)


# ------------------------------------------------------------- escape from a symmetric saddle


def _tiny_mlp(per_instance_seeds=(0, 1), gamma=0.3):
    torch.manual_seed(0)
    V, n, d = 9, 5, 4
    mdl = EmbMLP(V, d, 6, n, "silu")
    p = {
        k: v.detach().double() for k, v in build(mdl, list(per_instance_seeds), gamma=gamma).items()
    }
    X = torch.randint(0, V, (20, 3))
    y = torch.randint(0, n, (20,))
    return mdl, p, X, y


def test_antisymmetric_hessian_matches_autograd():
    mdl, p, X, y = _tiny_mlp()
    first, second = [0, 2], [1, 3]
    H = saddle.antisymmetric_hessian(mdl, p, X, y, first, second)
    assert H.shape == (2, 8, 8) and torch.allclose(H, H.transpose(1, 2), atol=1e-14)
    for k in range(2):

        def loss(u, k=k):
            E = p["E"][k : k + 1].clone()
            E[:, first] = E[:, first] + u
            E[:, second] = E[:, second] - u
            q = {name: v[k : k + 1] for name, v in p.items()}
            q["E"] = E
            return flow.cross_entropy(mdl.forward(q, X), y).sum()

        Ha = torch.autograd.functional.hessian(loss, torch.zeros(1, 2, 4, dtype=torch.float64))
        assert torch.allclose(Ha.reshape(8, 8), H[k], atol=1e-12)


def test_input_hessian_matches_autograd_per_sequence():
    mdl, p, X, y = _tiny_mlp(per_instance_seeds=(3,))
    Hn = saddle.emb_mlp_input_hessian(mdl, p, X, y)
    assert Hn.shape == (1, 20, 4, 4)
    h = (torch.nn.functional.one_hot(X, 9).double().sum(1) @ p["E"][0])[4]

    def loss(hh):
        f = torch.nn.functional.silu(hh @ p["W1"][0]) @ p["W2"][0]
        return torch.nn.functional.cross_entropy(f[None], y[4:5])

    assert torch.allclose(torch.autograd.functional.hessian(loss, h), Hn[0, 4], atol=1e-12)


def test_propagate_linear_and_growth_rate():
    # A diagonal map: mode norms follow (1 - eta/2 h)^t exactly.
    H = torch.diag(torch.tensor([-0.2, 0.1], dtype=torch.float64))[None].repeat(2, 1, 1)
    H[1] = torch.diag(torch.tensor([-0.4, 0.1], dtype=torch.float64))
    norms = saddle.propagate_linear([0, 5], H, [1.0, 1.0], torch.tensor([1.0, 0.0]), 8)
    assert np.isclose(norms[5], 1.1**5) and np.isclose(norms[8], 1.1**5 * 1.2**3)
    lam = saddle.growth_rate(H, np.array([1.0, 2.0]))
    assert np.allclose(lam, [0.1, 0.4])


def test_antisymmetric_part():
    mdl, p, X, y = _tiny_mlp()
    A = saddle.antisymmetric_part(p["E"], [0, 2], [1, 3])
    assert A.shape == (2, 2, 4)
    assert torch.allclose(A[:, 0], (p["E"][:, 0] - p["E"][:, 1]) / 2)


def test_escape_prediction_holds():
    assert saddle.escape_prediction_holds([100, 130], [110, 110], 0.25)
    assert not saddle.escape_prediction_holds([100, 140], [110, 110], 0.25)
    assert not saddle.escape_prediction_holds([np.inf], [100], 0.25)


# ------------------------------------------------------------- small helpers of Chapters 3 and 4


def test_mean_prediction_is_uniform_at_zero_output_and_matches_softmax():
    X, y = data(5)
    model = EmbMLP(V, 6, 9, n, "silu")
    p = build(model, [1, 2], gamma=0.5)
    pm = flow.mean_prediction(model, p, X)
    assert pm.shape == (2, n) and pm.dtype == torch.float64
    assert torch.allclose(pm.sum(-1), torch.ones(2, dtype=torch.float64))
    p64 = {k: v.detach().double() for k, v in p.items()}
    assert torch.allclose(pm[1], torch.softmax(model.forward(p64, X)[1], -1).mean(0))
    zero = dict(p, W2=torch.zeros_like(p["W2"]))
    assert torch.allclose(
        flow.mean_prediction(model, zero, X), torch.full((2, n), 1.0 / n).double()
    )


def test_attention_scores_give_the_models_attention():
    X, _ = data(6)
    model = Transformer(V, 6, L, n_layers=1, n_out=n)
    p = build(model, [1, 2], gamma=0.3)
    s = attention_flow.attention_scores(model, p, X)
    assert s.shape == (2, N, L, L) and torch.isnan(s[..., 0, 1:]).all()
    with torch.no_grad():
        _, A = model.forward({k: v.double() for k, v in p.items()}, X, return_attention=True)
    assert torch.allclose(torch.softmax(torch.nan_to_num(s, nan=-torch.inf), -1), A[0], atol=1e-12)


def test_first_order_attention_distance_matches_at_small_scores():
    """D = (1/2i) sum_j |s_ij - mean s_i| + O(s^2): the relative error falls with the scores."""
    X, _ = data(7)
    model = Transformer(V, 6, L, n_layers=1, n_out=n)
    p = build(model, [3], gamma=0.3)
    errs = []
    for t in (1.0, 0.5, 0.25):
        q = scaled(p, t)
        with torch.no_grad():
            _, A = model.forward(q, X, return_attention=True)
        D = attention.attention_distance(A[0])
        D1 = attention_flow.first_order_attention_distance(
            attention_flow.attention_scores(model, q, X)
        )
        errs.append(float((D1 / D - 1).abs()))
    assert errs[-1] < 1e-2 and errs[0] > errs[1] > errs[2]
    s = torch.zeros(1, 1, L, L).masked_fill(~torch.ones(L, L, dtype=torch.bool).tril(), torch.nan)
    assert float(attention_flow.first_order_attention_distance(s)) == 0.0  # equal scores: uniform


def test_psd_sqrt_and_gram_cos_pairs():
    rng = torch.Generator().manual_seed(0)
    W = torch.randn(2, 5, 3, dtype=torch.float64, generator=rng)
    G = W @ W.transpose(1, 2)  # rank 3: two zero eigenvalues, clamped
    R = flow.psd_sqrt(G)
    assert torch.allclose(R @ R, G, atol=1e-10) and torch.allclose(R, R.transpose(1, 2))
    tokens = [0, 2, 4]
    from lib.measure import metrics as M

    want = M.upper_triangle(M.cosine_similarity_matrix(W[:, tokens]))
    assert torch.allclose(flow.gram_cos_pairs(G, tokens), want, atol=1e-12)
    assert flow.gram_cos_pairs(G[0], tokens).shape == (3,)

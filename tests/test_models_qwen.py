"""The Qwen2.5-shaped options of :class:`lib.training.models.Transformer`: norm, mlp, positions.

``norm="rms"``, ``mlp="swiglu"``, ``positions="rotary"`` make the book's transformer a
small decoder shaped like Qwen2.5. The defaults stay the book's model, every option
matches a hand-written single-instance reference, RoPE is relative, the instances stay
isolated for shared and per-instance tokens, and bad values are refused by name.
"""

from __future__ import annotations

import itertools
import math

import pytest
import torch
import torch.nn.functional as F

from lib.training.init import ParamSpec, init_params
from lib.training.layers import apply_rope, rmsnorm, rope_tables
from lib.training.models import Transformer

torch.set_num_threads(1)

K, B, V, D, L = 3, 4, 11, 8, 5
QWEN = dict(n_layers=2, norm="rms", mlp="swiglu", positions="rotary", readout="all")


def _model(**kw) -> Transformer:
    base = dict(vocab_size=V, d_model=D, context_len=L, n_out=7, d_mlp=12)
    return Transformer(**{**base, **kw})


def _params(model, seeds=(11, 12, 13)):
    return init_params(model.specs(), list(seeds), gamma=0.5, dtype=torch.float64)


def _tokens(seed=0, shape=(B, L)):
    return torch.randint(0, V, shape, generator=torch.Generator().manual_seed(seed))


# ----------------------------------------------------------------------------- reference


def _ref_norm(h, norm):
    if norm == "rms":
        return h / (h.square().mean(-1, keepdim=True) + 1e-6).sqrt()
    return h


def _ref_rope(x):
    """RoPE as a complex rotation of the pairs (x_j, x_{j + dh/2}) at angle t * 10000^(-2j/dh)."""
    T, dh = x.shape[-2:]
    half = dh // 2
    theta = torch.arange(T, dtype=torch.float64)[:, None] * 10000.0 ** (
        -2 * torch.arange(half, dtype=torch.float64) / dh
    )
    z = torch.complex(x[..., :half], x[..., half:]) * torch.polar(torch.ones_like(theta), theta)
    return torch.cat([z.real, z.imag], dim=-1)


def _reference(model, params, X, k):
    """A plain single-instance loop for instance k and its tokens X (B, L)."""
    p = {n: t[k] for n, t in params.items()}
    T = X.shape[-1]
    h = p["E"][X] + (p["P"][:T] if model.positions == "learned" else 0)
    future = torch.triu(torch.ones(T, T, dtype=torch.bool), 1)
    for layer in range(model.n_layers):
        x = _ref_norm(h, model.norm)
        q, kk, v = x @ p[f"Q{layer}"], x @ p[f"K{layer}"], x @ p[f"V{layer}"]
        if model.positions == "rotary":
            q, kk = _ref_rope(q), _ref_rope(kk)
        s = (q @ kk.transpose(-1, -2) / math.sqrt(model.d_model)).masked_fill(future, -math.inf)
        h = h + torch.softmax(s, -1) @ v @ p[f"O{layer}"]
        x = _ref_norm(h, model.norm)
        if model.mlp == "swiglu":
            h = h + (F.silu(x @ p[f"W1_{layer}"]) * (x @ p[f"W3_{layer}"])) @ p[f"W2_{layer}"]
        else:
            h = h + torch.relu(x @ p[f"W1_{layer}"]) @ p[f"W2_{layer}"]
    out = _ref_norm(h, model.norm) @ p["U"]
    return out[:, -1] if model.readout == "last" else out


OPTIONS = list(itertools.product(["none", "rms"], ["plain", "swiglu"], ["learned", "rotary"]))


@pytest.mark.parametrize("readout", ["last", "all"])
@pytest.mark.parametrize("norm,mlp,positions", OPTIONS)
def test_every_option_matches_a_hand_written_reference(norm, mlp, positions, readout):
    model = _model(n_layers=2, norm=norm, mlp=mlp, positions=positions, readout=readout)
    params = _params(model)
    X2, X3 = _tokens(1), _tokens(2, (K, B, L))
    out2, out3 = model.forward(params, X2), model.forward(params, X3)
    for k in range(K):
        torch.testing.assert_close(out2[k], _reference(model, params, X2, k), rtol=0, atol=1e-12)
        torch.testing.assert_close(out3[k], _reference(model, params, X3[k], k), rtol=0, atol=1e-12)


# ----------------------------------------------------------------------------- defaults


def test_the_example_is_unchanged():
    ex = Transformer.example(3)
    assert (ex.norm, ex.mlp, ex.positions) == ("none", "plain", "learned")
    assert ex == Transformer(vocab_size=11, d_model=8, context_len=5, n_layers=2, n_out=7, d_mlp=8)


def test_the_qwen_options_change_the_weights_as_documented():
    specs = _model(**QWEN).specs()
    assert "P" not in specs
    for layer in range(2):
        assert specs[f"W3_{layer}"] == ParamSpec((D, 12), D, "mlp")
    assert list(specs)[:1] == ["E"] and list(specs)[-1] == "U"


# ----------------------------------------------------------------------------- isolation


@pytest.mark.parametrize("layout", ["shared", "per_instance"])
def test_qwen_instances_are_isolated(layout):
    model = _model(**QWEN)
    params = _params(model)
    X = _tokens(3) if layout == "shared" else _tokens(4, (K, B, L))
    base = model.forward(params, X)
    assert base.shape == (K, B, L, 7)
    gen = torch.Generator().manual_seed(5)
    for k in range(K):
        # Instance k run alone (K=1) is the same function as inside the batch.
        X_k = X[k : k + 1] if layout == "per_instance" else X
        alone = model.forward({n: w[k : k + 1] for n, w in params.items()}, X_k)
        torch.testing.assert_close(alone[0], base[k], rtol=0, atol=1e-12)
        # Perturbing instance k's weights moves instance k's logits alone.
        moved = {n: w.detach().clone() for n, w in params.items()}
        for w in moved.values():
            w[k] += 0.1 * torch.randn(w.shape[1:], generator=gen, dtype=w.dtype)
        out = model.forward(moved, X)
        _only_k_changed(out, base, k)
        if layout == "per_instance":
            X_alt = X.clone()
            X_alt[k] = (X[k] + 1) % V
            _only_k_changed(model.forward(params, X_alt), base, k)


def _only_k_changed(out, base, k):
    for j in range(K):
        if j == k:
            assert not torch.allclose(out[j], base[j]), "the perturbation did nothing"
        else:
            assert torch.equal(out[j], base[j]), f"changing instance {k} moved instance {j}"


@pytest.mark.parametrize("layout", ["shared", "per_instance"])
def test_qwen_loss_of_one_instance_has_zero_gradient_for_every_other(layout):
    model = _model(**QWEN)
    params = _params(model)
    X = _tokens(3) if layout == "shared" else _tokens(4, (K, B, L))
    out = model.forward(params, X)
    names = list(params)
    for k in range(K):
        grads = torch.autograd.grad(
            out[k].square().sum(), [params[n] for n in names], retain_graph=True
        )
        for n, g in zip(names, grads, strict=True):
            assert g[k].abs().sum() > 0, f"instance {k}'s loss does not reach its {n}"
            others = torch.cat([g[:k], g[k + 1 :]])
            assert torch.count_nonzero(others) == 0, f"instance {k}'s loss moves others' {n}"


# ----------------------------------------------------------------------------- pieces


def test_rope_scores_depend_only_on_the_offset():
    dh, T = 6, 12
    cos, sin = rope_tables(T, dh, dtype=torch.float64)
    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(2, dh, generator=g, dtype=torch.float64)
    q = apply_rope(a.expand(T, dh), cos, sin)  # the same query at every position
    k = apply_rope(b.expand(T, dh), cos, sin)
    S = q @ k.T
    for i, j, s in itertools.product(range(T), range(T), range(1, 4)):
        if max(i, j) + s < T:
            assert abs(S[i + s, j + s] - S[i, j]) < 1e-12
    assert not torch.allclose(S[0, 1], S[0, 2])  # but it does depend on the offset


def test_rope_in_the_model_is_relative():
    """A sequence of one repeated token has the same h at every position, so with RoPE
    log A_ij - log A_ii = s_ij - s_ii is a function of i - j alone."""
    model = _model(**{**QWEN, "n_layers": 1}, context_len=8)
    params = _params(model)
    X = torch.full((2, 8), 3)
    _, attn = model.forward(params, X, return_attention=True)
    logA = attn[0].log()
    rel = logA - logA.diagonal(dim1=-2, dim2=-1)[..., :, None]
    for i, j in itertools.product(range(1, 8), range(1, 8)):
        if j <= i:
            torch.testing.assert_close(rel[..., i, j], rel[..., i - 1, j - 1], rtol=0, atol=1e-12)
    assert not torch.allclose(rel[..., 7, 0], rel[..., 7, 6])


def test_rope_at_length_one_is_the_identity():
    cos, sin = rope_tables(1, 6, dtype=torch.float64)
    x = torch.randn(2, 3, 1, 6, dtype=torch.float64)
    assert torch.equal(apply_rope(x, cos, sin), x)
    # The rotary model at L=1 is the learned-position model with P = 0.
    rot = _model(**QWEN)
    lrn = _model(**{**QWEN, "positions": "learned"})
    p_rot = _params(rot)
    p_lrn = {**p_rot, "P": torch.zeros(K, L, D, dtype=torch.float64)}
    X = _tokens(6, (B, 1))
    assert torch.equal(rot.forward(p_rot, X), lrn.forward(p_lrn, X))


def test_rmsnorm_output_has_unit_rms():
    h = 3.0 * torch.randn(4, 5, 16, dtype=torch.float64) + 1.0
    y = rmsnorm(h)
    rms = y.square().mean(-1).sqrt()
    torch.testing.assert_close(rms, torch.ones_like(rms), rtol=0, atol=1e-6)
    torch.testing.assert_close(y, h / (h.square().mean(-1, keepdim=True) + 1e-6).sqrt())


def test_swiglu_matches_a_hand_written_mlp():
    """With W_O = 0 the attention adds nothing, and h_1 = h_0 + (silu(h_0 W1) * (h_0 W3)) W2."""
    model = _model(n_layers=1, mlp="swiglu", readout="all")
    params = {n: w.detach() for n, w in _params(model).items()}
    params["O0"] = torch.zeros_like(params["O0"])
    X = _tokens(7)
    h0 = params["E"][:, X] + params["P"][:, None, :L]  # (K, B, L, d)
    W1, W2, W3 = (params[n][:, None] for n in ("W1_0", "W2_0", "W3_0"))
    mlp = (F.silu(h0 @ W1) * (h0 @ W3)) @ W2
    expected = (h0 + mlp) @ params["U"][:, None]
    torch.testing.assert_close(model.forward(params, X), expected, rtol=0, atol=1e-12)


# ----------------------------------------------------------------------------- training


def test_qwen_gradients_reach_every_parameter():
    model = _model(**QWEN)
    params = _params(model)
    out = model.forward(params, _tokens(8, (K, B, L)))
    weights = torch.randn(out.shape, generator=torch.Generator().manual_seed(0), dtype=out.dtype)
    grads = torch.autograd.grad((out * weights).sum(), list(params.values()), allow_unused=True)
    for n, g in zip(params, grads, strict=True):
        assert g is not None, f"{n} gets no gradient"
        assert torch.isfinite(g).all() and (g.flatten(1).abs().sum(1) > 0).all(), n


@pytest.mark.parametrize("layout", ["shared", "per_instance"])
def test_qwen_is_causal(layout):
    model = _model(**QWEN)
    params = _params(model)
    X = _tokens(9) if layout == "shared" else _tokens(9, (K, B, L))
    base = model.forward(params, X)
    for t in range(L):
        X_alt = X.clone()
        X_alt[..., t] = (X[..., t] + 1) % V
        out = model.forward(params, X_alt)
        assert torch.equal(out[..., :t, :], base[..., :t, :]), f"token {t} leaks backwards"
        assert not torch.allclose(out[..., t, :], base[..., t, :])


# ----------------------------------------------------------------------------- validation


@pytest.mark.parametrize(
    "kw,field",
    [
        (dict(norm="batch"), "norm"),
        (dict(norm="RMS"), "norm"),
        (dict(mlp="geglu"), "mlp"),
        (dict(positions="alibi"), "positions"),
        (dict(norm="layer"), "norm"),
        (dict(positions="rotary", qk="collapsed"), "positions"),
        (dict(positions="rotary", d_model=5), "d_model"),
        (dict(mlp="swiglu", d_mlp=0), "d_mlp"),
    ],
)
def test_bad_options_are_refused_by_name(kw, field):
    with pytest.raises(ValueError, match=field) as err:
        _model(**kw)
    assert "\n" not in str(err.value)

"""``AttnEmbMLP``: the Emb-MLP whose bag of embeddings is pooled by attention (Chapter 2).

It must equal a direct, position-by-position computation of its formula for shared
``(B, L)`` and per-instance ``(K, B, L)`` tokens, in value and in gradient; reduce to
:class:`lib.training.models.EmbMLP` with the same ``E, W1, W2`` at uniform attention (and differ from
it when attention is not uniform); draw ``E, W1, W2`` as ``EmbMLP`` does for a seed; keep its
instances isolated; and refuse bad input with one line.
"""

from __future__ import annotations

import pytest
import torch

from lib.training.init import init_params
from lib.training.layers import ACTIVATIONS
from lib.training.models import AttnEmbMLP, EmbMLP, build

pytestmark = pytest.mark.usefixtures("one_thread")

K, B, V, D, H, N_OUT, L = 3, 6, 11, 8, 10, 7, 5
SHAPES = [(B, L), (K, B, L)]
IDS = ["shared", "per-instance"]


def _model(**kw) -> AttnEmbMLP:
    return AttnEmbMLP(**{**dict(vocab_size=V, d_model=D, d_hidden=H, n_out=N_OUT, d_head=4), **kw})


def _params(model, gamma=0.3):
    return init_params(model.specs(), [1, 2, 3], gamma=gamma, dtype=torch.float64)


def _tokens(shape, seed=0):
    return torch.randint(0, V, shape, generator=torch.Generator().manual_seed(seed))


def _reference(model, p, X):
    """The formula, one position at a time: x = E[X], q = x_L W_Q, s_j = q . x_j W_K / sqrt(dh)."""
    Xk = X.expand(K, *X.shape) if X.dim() == 2 else X
    x = torch.stack([p["E"][k][Xk[k]] for k in range(K)])  # (K, B, L, d)
    q = torch.einsum("kbd,kde->kbe", x[:, :, -1], p["Q"])
    keys = torch.einsum("kbld,kde->kble", x, p["K"])
    A = torch.softmax(torch.einsum("kbe,kble->kbl", q, keys) / model.dh**0.5, -1)
    h = Xk.shape[-1] * torch.einsum("kbl,kbld->kbd", A, x)
    act = ACTIVATIONS[model.activation](torch.einsum("kbd,kdh->kbh", h, p["W1"]))
    return torch.einsum("kbh,kho->kbo", act, p["W2"]), A


@pytest.mark.parametrize("shape", SHAPES, ids=IDS)
def test_forward_and_gradient_equal_the_formula(shape):
    model = _model()
    p = _params(model, gamma=0.2)  # scores of order 1: attention far from uniform
    X = _tokens(shape)
    logits, A = model.forward(p, X, return_attention=True)
    ref, A_ref = _reference(model, p, X)
    assert logits.shape == (K, B, N_OUT) and A.shape == (K, B, L)
    torch.testing.assert_close(logits, ref, rtol=0, atol=1e-12)
    torch.testing.assert_close(A, A_ref, rtol=0, atol=1e-12)
    assert (A.max(-1).values > 1.5 / L).any()  # not uniform: the check has teeth
    g = torch.autograd.grad(logits.square().sum(), list(p.values()))
    g_ref = torch.autograd.grad(ref.square().sum(), list(p.values()))
    for a, b in zip(g, g_ref, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("shape", SHAPES, ids=IDS)
def test_uniform_attention_is_the_emb_mlp(shape):
    model, mlp = _model(), EmbMLP(V, D, H, N_OUT)
    p = _params(model)
    X = _tokens(shape, seed=1)
    flat = {**p, "Q": torch.zeros_like(p["Q"])}  # zero scores: A_j = 1/L, h = sum_j E[x_j]
    q = {n: p[n] for n in mlp.specs()}
    torch.testing.assert_close(model.forward(flat, X), mlp.forward(q, X), rtol=1e-12, atol=1e-12)
    assert not torch.allclose(model.forward(p, X), mlp.forward(q, X), atol=1e-6)


def test_a_seed_draws_the_emb_mlp_weights_first():
    model, mlp = _model(d_head=None), EmbMLP(V, D, H, N_OUT)
    p, q = build(model, [4, 5]), build(mlp, [4, 5])
    for name, spec in mlp.specs().items():
        assert model.specs()[name] == spec
        assert torch.equal(p[name], q[name])
    assert model.specs()["Q"].group == model.specs()["K"].group == "qk"


@pytest.mark.parametrize("shape", SHAPES, ids=IDS)
def test_instances_are_isolated(shape):
    model = _model()
    p = _params(model, gamma=0.2)
    X = _tokens(shape, seed=2)
    out = model.forward(p, X)
    p2 = {n: t.clone() for n, t in p.items()}
    p2["E"][1] += 1.0
    p2["Q"][1] *= 3.0
    out2 = model.forward(p2, X)
    torch.testing.assert_close(out2[[0, 2]], out[[0, 2]], rtol=0, atol=0)
    assert not torch.allclose(out2[1], out[1])


def test_hidden_and_bad_input():
    model = _model()
    p = _params(model)
    logits, hid = model.forward(p, _tokens((B, L)), return_hidden=True)
    assert hid["pooled"].shape == (K, B, D) and hid["mlp"].shape == (K, B, H)
    torch.testing.assert_close(logits, hid["mlp"] @ p["W2"], rtol=0, atol=1e-12)
    with pytest.raises(ValueError, match="tokens must be"):
        model.forward(p, _tokens((2, B, L)))
    with pytest.raises(ValueError, match="unknown activation"):
        _model(activation="swish")

"""``Transformer(ov="identity")``: attention that mixes the residual stream itself (Chapter 4).

It must be the learned-OV model with W_V = W_O = I, for shared ``(B, L)`` and per-instance
``(K, B, L)`` tokens; keep its instances isolated; have no value or output weights to train;
and be refused by the expansion of :mod:`lib.theory.flow`, which is derived with W_V W_O.
"""

from __future__ import annotations

import pytest
import torch

from lib.theory import attention_flow
from lib.training.init import init_params
from lib.training.models import Transformer

pytestmark = pytest.mark.usefixtures("one_thread")

K, B, V, D, L = 3, 4, 11, 8, 5


def _model(**kw) -> Transformer:
    return Transformer(**{**dict(vocab_size=V, d_model=D, context_len=L, n_out=7, d_mlp=6), **kw})


def _tokens(shape, seed=0):
    return torch.randint(0, V, shape, generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("shape", [(B, L), (K, B, L)], ids=["shared", "per-instance"])
@pytest.mark.parametrize("extra", [{}, dict(n_layers=2, norm="rms")], ids=["1L", "2L"])
def test_identity_ov_is_learned_ov_with_identity_weights(shape, extra):
    ident, learned = _model(ov="identity", **extra), _model(**extra)
    p = init_params(learned.specs(), [1, 2, 3], gamma=0.5, dtype=torch.float64)
    for layer in range(learned.n_layers):
        p[f"V{layer}"] = torch.eye(D, dtype=torch.float64).expand(K, D, D).clone()
        p[f"O{layer}"] = torch.eye(D, dtype=torch.float64).expand(K, D, D).clone()
    q = {n: t for n, t in p.items() if n in ident.specs()}
    X = _tokens(shape)
    torch.testing.assert_close(ident.forward(q, X), learned.forward(p, X), rtol=0, atol=1e-12)
    # and it is not the learned model at its random OV init (the comparison can fail)
    p0 = init_params(learned.specs(), [1, 2, 3], gamma=0.5, dtype=torch.float64)
    assert not torch.allclose(ident.forward(q, X), learned.forward(p0, X))


def test_identity_ov_has_no_value_or_output_weights():
    names = set(_model(ov="identity", n_layers=2).specs())
    assert not any(n[0] in "VO" and n[1:].isdigit() for n in names)
    assert {"Q0", "K0", "Q1", "K1", "E", "P", "U"} <= names


@pytest.mark.parametrize("shape", [(B, L), (K, B, L)], ids=["shared", "per-instance"])
def test_identity_ov_instances_are_isolated(shape):
    model = _model(ov="identity")
    p = init_params(model.specs(), [1, 2, 3], gamma=0.5, dtype=torch.float64)
    X = _tokens(shape)
    out = model.forward(p, X)
    p2 = {n: t.clone() for n, t in p.items()}
    p2["E"][1] += 1.0  # change instance 1 only
    X2 = X.clone()
    if X2.dim() == 3:
        X2[1] = _tokens((B, L), seed=5)
    out2 = model.forward(p2, X2)
    torch.testing.assert_close(out2[[0, 2]], out[[0, 2]], rtol=0, atol=0)
    assert not torch.allclose(out2[1], out[1])
    one = {n: t[2:3] for n, t in p.items()}
    Xk = X if X.dim() == 2 else X[2:3]
    torch.testing.assert_close(model.forward(one, Xk)[0], out[2], rtol=0, atol=1e-12)


def test_bad_ov_is_refused_by_name_and_flow_refuses_identity():
    with pytest.raises(ValueError, match="ov must be one of"):
        _model(ov="tied")
    model = Transformer(vocab_size=V, d_model=D, context_len=L, n_out=7, ov="identity")
    p = init_params(model.specs(), [0], gamma=1.0)
    with pytest.raises(ValueError, match="ov='learned'"):
        attention_flow.attention_terms(model, p, None)


@pytest.mark.parametrize("shape", [(B, L), (K, B, L)], ids=["shared", "per-instance"])
@pytest.mark.parametrize(
    "kw",
    [dict(), dict(ov="identity"), dict(qk="collapsed"), dict(positions="rotary", n_layers=2)],
    ids=["learned", "identity", "collapsed", "rotary-2L"],
)
def test_readout_last_computes_the_readout_row_only_with_the_same_logits(shape, kw):
    """Readout 'last' skips the last layer's other rows; return_attention computes them all."""
    model = _model(**kw)
    p = init_params(model.specs(), [1, 2, 3], gamma=0.5, dtype=torch.float64)
    X = _tokens(shape)
    full, attn = model.forward(p, X, return_attention=True)
    assert attn[-1].shape[-2:] == (L, L)
    torch.testing.assert_close(model.forward(p, X), full, rtol=0, atol=1e-12)


@pytest.mark.parametrize("shape", [(B, L), (K, B, L)], ids=["shared", "per-instance"])
def test_hidden_parts_rebuild_the_logits(shape):
    """logits = (E[x_L] + P_L + attention0 + mlp0 W2) U for the one-layer, norm-free model."""
    for ov in ("learned", "identity"):
        model = _model(ov=ov)
        p = init_params(model.specs(), [1, 2, 3], gamma=0.5, dtype=torch.float64)
        X = _tokens(shape)
        logits, hid = model.forward(p, X, return_hidden=True)
        assert hid["attention0"].shape[-2] == 1 and hid["mlp0"].shape[-1] == 6
        last = X[..., -1]
        E_last = (
            p["E"][:, last] if X.dim() == 2 else torch.stack([p["E"][k, last[k]] for k in range(K)])
        )
        h = E_last + p["P"][:, None, L - 1] + hid["attention0"][:, :, 0]
        h = h + torch.bmm(hid["mlp0"][:, :, 0], p["W2_0"])
        torch.testing.assert_close(torch.bmm(h, p["U"]), logits, rtol=0, atol=1e-12)
        hid["mlp0"] = hid["mlp0"] * 0  # the check can fail: without the MLP's part it does not
        h0 = E_last + p["P"][:, None, L - 1] + hid["attention0"][:, :, 0]
        assert not torch.allclose(torch.bmm(h0, p["U"]), logits)


@pytest.mark.parametrize("shape", [(B, L), (K, B, L)], ids=["shared", "per-instance"])
@pytest.mark.parametrize(
    "kw",
    [dict(), dict(ov="identity"), dict(qk="collapsed"), dict(mlp="swiglu"), dict(d_mlp=0)],
    ids=["learned", "identity", "collapsed", "swiglu", "no-mlp"],
)
def test_one_layer_token_tables_match_every_position_path(shape, kw):
    """The one-layer readout computed from vocabulary tables (``_one_layer_readout``) has the
    logits, hidden parts and gradients of the path that embeds every position (the one
    ``return_attention`` takes), and keeps instances apart."""
    model = _model(**kw)
    assert model._token_table_path()
    p = init_params(model.specs(), [1, 2, 3], gamma=0.5, dtype=torch.float64)
    p = {n: t.requires_grad_(True) for n, t in p.items()}
    X = _tokens(shape)
    fast, hid = model.forward(p, X, return_hidden=True)
    full, _, hid_full = model.forward(p, X, return_attention=True, return_hidden=True)
    torch.testing.assert_close(fast, full, rtol=0, atol=1e-12)
    for name in hid_full:
        torch.testing.assert_close(hid[name], hid_full[name][:, :, -1:], rtol=0, atol=1e-12)
    weights = torch.randn(fast.shape, generator=torch.Generator().manual_seed(3), dtype=fast.dtype)
    g_fast = torch.autograd.grad((fast * weights).sum(), list(p.values()))
    g_full = torch.autograd.grad((full * weights).sum(), list(p.values()))
    for name, a, b in zip(p, g_fast, g_full, strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-12, msg=name)
    # instance 1's new weights change instance 1's logits only
    p2 = {n: t.detach().clone() for n, t in p.items()}
    p2["E"][1] += 0.5
    out2 = model.forward(p2, X)
    torch.testing.assert_close(out2[[0, 2]], fast.detach()[[0, 2]], rtol=0, atol=0)
    assert not torch.allclose(out2[1], fast.detach()[1])


def test_token_tables_only_where_they_hold():
    """Two layers, a norm or rotary positions take the every-position path."""
    assert not _model(n_layers=2)._token_table_path()
    assert not _model(norm="rms")._token_table_path()
    assert not _model(readout="all")._token_table_path()
    assert not _model(positions="rotary")._token_table_path()

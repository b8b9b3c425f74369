"""The collapsed query-key circuit of :class:`lib.training.models.Transformer` (Chapter 9).

``qk="collapsed"`` holds one (d, d) matrix ``W_QK`` per layer; with ``W_QK = W_Q W_K^T``
it is the same function as the factorized model, for shared and per-instance tokens,
and its instances stay isolated.
"""

from __future__ import annotations

import pytest
import torch

from lib.training.init import init_params
from lib.training.models import Transformer

K, B = 3, 5


def _pair(n_layers=2, **kw):
    fac = Transformer(11, 8, 5, n_layers=n_layers, n_out=7, d_mlp=8, **kw)
    col = Transformer(11, 8, 5, n_layers=n_layers, n_out=7, d_mlp=8, qk="collapsed", **kw)
    p_fac = init_params(fac.specs(), [1, 2, 3], gamma=0.5, dtype=torch.float64)
    p_col = {n: v for n, v in p_fac.items() if n[0] not in "QK"}
    for layer in range(n_layers):
        p_col[f"QK{layer}"] = p_fac[f"Q{layer}"] @ p_fac[f"K{layer}"].transpose(1, 2)
    return fac, col, p_fac, p_col


def test_collapsed_specs_have_one_qk_matrix_per_layer():
    fac, col, _, _ = _pair()
    names = set(col.specs())
    assert {"QK0", "QK1"} <= names and not {"Q0", "K0", "Q1", "K1"} & names
    assert col.specs()["QK0"].shape == (8, 8) and col.specs()["QK0"].group == "qk"
    assert col.specs()["QK0"].fan_in == 8
    assert set(fac.specs()) - {"Q0", "K0", "Q1", "K1"} == names - {"QK0", "QK1"}


@pytest.mark.parametrize("norm", ["none", "rms"])
@pytest.mark.parametrize("readout", ["last", "all"])
def test_collapsed_equals_factorized_with_the_product(norm, readout):
    fac, col, p_fac, p_col = _pair(norm=norm, readout=readout)
    g = torch.Generator().manual_seed(0)
    X2 = torch.randint(0, 11, (B, 5), generator=g)
    X3 = torch.randint(0, 11, (K, B, 5), generator=g)
    for X in (X2, X3):
        z_f, A_f = fac.forward(p_fac, X, return_attention=True)
        z_c, A_c = col.forward(p_col, X, return_attention=True)
        torch.testing.assert_close(z_c, z_f, rtol=1e-10, atol=1e-12)
        for a, b in zip(A_c, A_f, strict=True):
            torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)


def test_collapsed_instances_are_isolated():
    _, col, _, p_col = _pair()
    p = {n: v.detach().clone().requires_grad_(True) for n, v in p_col.items()}
    X = torch.randint(0, 11, (K, B, 5), generator=torch.Generator().manual_seed(1))
    y = torch.randint(0, 7, (K, B), generator=torch.Generator().manual_seed(2))
    logits = col.forward(p, X)
    loss = torch.nn.functional.cross_entropy(logits[1], y[1])
    grads = torch.autograd.grad(loss, list(p.values()))
    for name, gr in zip(p, grads, strict=True):
        assert gr[[0, 2]].abs().max() == 0, name
    assert grads[list(p).index("QK0")][1].abs().max() > 0


def test_unknown_qk_is_refused_in_one_line():
    with pytest.raises(ValueError, match="qk must be") as e:
        Transformer(11, 8, 5, qk="tied")
    assert "\n" not in str(e.value)

"""``Transformer(readout_sees_self=False)``: the readout row attends to the context only.

The selective task (Chapter 12) reads its anchor through the residual stream; its attention
must choose among the context tokens. The fast one-layer path and the every-position path
must compute the same function with the flag, the readout row must put no mass on itself,
and both token layouts must work.
"""

from __future__ import annotations

import pytest
import torch

from lib.training.init import init_params
from lib.training.models import Transformer

pytestmark = pytest.mark.usefixtures("one_thread")

K, B, V, D, L = 3, 5, 11, 8, 4


def _model(**kw) -> Transformer:
    base = dict(vocab_size=V, d_model=D, context_len=L, n_out=7, d_mlp=6, readout_sees_self=False)
    return Transformer(**{**base, **kw})


def _tokens(shape, seed=0):
    return torch.randint(0, V, shape, generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("shape", [(B, L), (K, B, L)], ids=["shared", "per-instance"])
@pytest.mark.parametrize("kw", [{}, dict(ov="identity"), dict(qk="collapsed")],
                         ids=["learned-ov", "identity-ov", "collapsed"])  # fmt: skip
def test_fast_path_equals_every_position_path(shape, kw):
    model = _model(**kw)
    p = init_params(model.specs(), [1, 2, 3], gamma=0.5, dtype=torch.float64)
    X = _tokens(shape)
    assert model._token_table_path()
    fast = model.forward(p, X)  # the table path
    slow, _ = model.forward(p, X, return_attention=True)  # every position
    torch.testing.assert_close(fast, slow, rtol=0, atol=1e-12)


@pytest.mark.parametrize("shape", [(B, L), (K, B, L)], ids=["shared", "per-instance"])
def test_readout_row_puts_no_mass_on_itself(shape):
    model = _model(ov="identity")
    p = init_params(model.specs(), [1, 2, 3], gamma=0.3, dtype=torch.float64)
    _, attn = model.forward(p, _tokens(shape), return_attention=True)
    row = attn[-1][..., -1, :]  # (K, B, L)
    assert torch.all(row[..., -1] == 0)
    torch.testing.assert_close(row.sum(-1), torch.ones(K, B, dtype=row.dtype))
    assert torch.all(row[..., :-1] > 0)
    # the other rows keep causal self-attention (the flag is about the readout row only)
    assert torch.all(attn[-1][..., 0, 0] == 1)


def test_the_flag_changes_the_function():
    seen, blind = _model(readout_sees_self=True), _model()
    p = init_params(seen.specs(), [1, 2, 3], gamma=0.3, dtype=torch.float64)
    X = _tokens((B, L))
    assert not torch.allclose(seen.forward(p, X), blind.forward(p, X))


def test_the_flag_needs_one_layer_and_readout_last():
    with pytest.raises(ValueError, match="readout_sees_self"):
        _model(n_layers=2)
    with pytest.raises(ValueError, match="readout_sees_self"):
        _model(readout="all")

"""lib.measure.attention.faithfulness against a sequence-by-sequence computation, for (B, L) and
(K, B, L) tokens."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from lib.measure import attention
from lib.training.models import Transformer, build

K, B, L, V, PAD = 3, 6, 7, 10, 0


def _setup():
    model = Transformer(vocab_size=V, d_model=8, context_len=L, n_out=2, readout="last")
    params = {n: w.detach() for n, w in build(model, [1, 2, 3], gamma=0.3).items()}
    g = torch.Generator().manual_seed(0)
    X = torch.randint(1, V, (B, L), generator=g)
    X[:, :2] = PAD  # leading padding, as in the agreement sentences
    y = torch.randint(0, 2, (B,), generator=g)
    pos = torch.randint(2, L, (B,), generator=g)
    return model, params, X, y, pos


def _one(model, params, k, x):
    """Class probabilities and the readout attention row of instance k on one sequence."""
    p = {n: w[k : k + 1] for n, w in params.items()}
    z, att = model.forward(p, x[None], return_attention=True)
    return torch.softmax(z[0, 0], -1), att[0][0, 0, -1]


def _by_hand(model, params, X, y, pos):
    out = {
        k: np.zeros(K) for k in ("accuracy", "rationale mass", "comprehensiveness", "sufficiency")
    }
    for k in range(K):
        for b in range(B):
            x = X[k, b] if X.dim() == 3 else X[b]
            yb = y[k, b] if y.dim() == 2 else y[b]
            prob, a = _one(model, params, k, x)
            pred = int(prob.argmax())
            top = int(torch.where(x == PAD, -1.0, a).argmax())
            assert x[top] != PAD
            without = x.clone()
            without[top] = PAD
            only = torch.full_like(x, PAD)
            only[top] = x[top]
            out["accuracy"][k] += float(pred == yb) / B
            out["rationale mass"][k] += float(a[pos[b]]) / B
            out["comprehensiveness"][k] += (
                float(prob[pred] - _one(model, params, k, without)[0][pred]) / B
            )
            out["sufficiency"][k] += float(prob[pred] - _one(model, params, k, only)[0][pred]) / B
    return out


@pytest.mark.parametrize("layout", ["shared", "per_instance"])
def test_faithfulness_is_the_sequence_by_sequence_computation(layout):
    model, params, X, y, pos = _setup()
    if layout == "per_instance":  # each instance its own sequences
        X = torch.stack([X.roll(k, dims=0) for k in range(K)])
        y = torch.stack([y.roll(k) for k in range(K)])
    got = attention.faithfulness(model, params, X, y, pos, PAD)
    want = _by_hand(model, params, X, y, pos)
    for key, v in want.items():
        assert got[key].shape == (K,)
        np.testing.assert_allclose(got[key], v, atol=1e-6, err_msg=key)


def test_faithfulness_is_the_same_for_shared_tokens_and_their_per_instance_copy():
    model, params, X, y, pos = _setup()
    shared = attention.faithfulness(model, params, X, y, pos, PAD)
    copied = attention.faithfulness(
        model, params, X.expand(K, B, L), y.expand(K, B), pos.expand(K, B), PAD
    )
    for key in shared:
        np.testing.assert_allclose(shared[key], copied[key], atol=1e-6)


def test_faithfulness_finds_a_planted_rationale_and_a_sufficient_token():
    """A sequence of one token and padding: that token is the top-1 one, all attention it
    can take is on it, and keeping only it changes nothing (sufficiency 0)."""
    model, params, _, _, _ = _setup()
    X = torch.full((B, L), PAD)
    X[:, -1] = torch.arange(1, B + 1)  # the readout position holds the only real token
    pos = torch.full((B,), L - 1)
    got = attention.faithfulness(model, params, X, torch.zeros(B, dtype=torch.long), pos, PAD)
    np.testing.assert_allclose(got["sufficiency"], 0.0, atol=1e-7)
    # the rationale mass is the readout's own attention weight, as for any other position
    _, att = model.forward(params, X, return_attention=True)
    np.testing.assert_allclose(got["rationale mass"], att[0][:, :, -1, -1].mean(-1), atol=1e-7)

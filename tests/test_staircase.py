"""The staircase measurements of lib/staircase.py against direct computations."""

import math

import numpy as np
import pytest
import torch

from lib import metrics as M
from lib import staircase as st
from lib import tasks

D3 = tasks.gated_addition(seed=0, reps=1).train
T3 = st.t3_targets(D3)


def test_t3_targets_identities():
    # The six anchor pairs (2m-1, 2m) and the two gates share order 0 exactly ...
    assert set(T3.shared0) == {(2 * m, 2 * m + 1) for m in range(7)}
    S0, S1 = T3.S0.numpy(), T3.S1.numpy()
    for i, j in T3.shared0:
        assert S0[i, j] == pytest.approx(1.0, abs=1e-12)
        assert S1[i, j] < 0  # ... and are opposite at order 1
    assert T3.names[-2:] == ("g+", "g-")
    assert T3.phi0.shape == (14, D3.n_labels)
    assert T3.phi1.shape == (14, 14 * D3.n_labels)
    assert T3.order_corr < 0.5


def test_stair_targets_bad_input():
    with pytest.raises(ValueError, match="at least 3"):
        st.stair_targets(D3.X, D3.y, D3.vocab_size, D3.n_labels, [1, 2], [100])
    with pytest.raises(ValueError, match="never occurs"):
        st.stair_targets(D3.X, D3.y, D3.vocab_size, D3.n_labels, [1, 2, 30], [100])
    with pytest.raises(ValueError, match="names"):
        st.stair_targets(D3.X, D3.y, D3.vocab_size, D3.n_labels, [1, 2, 3], [100], names=["a"])


def test_increment():
    g = torch.Generator().manual_seed(0)
    E0 = torch.randn(2, 102, 8, generator=g)
    E = E0 + torch.randn(2, 102, 8, generator=g)
    tok = [1, 5, 7, 100]
    dE = st.increment(E, E0, tok)
    raw = st.increment(E, E0, tok, subtract_mean_row=False)
    np.testing.assert_allclose(raw.numpy(), (E - E0)[:, tok].double().numpy(), atol=1e-6)
    np.testing.assert_allclose(dE.mean(-2).numpy(), 0, atol=1e-12)
    with pytest.raises(ValueError, match="shape"):
        st.increment(E, E0[0], tok)


def test_callbacks_match_metrics():
    g = torch.Generator().manual_seed(1)
    K, d = 3, 16
    E0 = torch.randn(K, D3.vocab_size, d, generator=g, dtype=torch.float64)
    E = E0 + torch.randn(K, D3.vocab_size, d, generator=g, dtype=torch.float64)
    # Make the gates move identically in instance 0: their shared-order-0 cosine is 1.
    E[0, 101] = E0[0, 101] + (E[0, 100] - E0[0, 100])
    cbs = st.stair_callbacks(T3, E0)
    params = {"E": E}
    tok = list(T3.tokens)
    phi0_full = torch.zeros(D3.vocab_size, T3.phi0.shape[1], dtype=torch.float64)
    phi0_full[tok] = T3.phi0
    phi1_full = torch.zeros(D3.vocab_size, T3.phi1.shape[1], dtype=torch.float64)
    phi1_full[tok] = T3.phi1
    np.testing.assert_allclose(
        cbs["R0"](1, params).numpy(), M.r_cos(E, phi0_full, tokens=tok, W0=E0).numpy(), atol=1e-12
    )
    np.testing.assert_allclose(
        cbs["R1_0"](1, params).numpy(),
        M.r_cos_partial(E, phi1_full, phi0_full, tokens=tok, W0=E0).numpy(),
        atol=1e-12,
    )
    dE = (E - E0)[:, tok]
    dE = dE - dE.mean(1, keepdim=True)
    np.testing.assert_allclose(
        cbs["erank"](1, params).numpy(), M.effective_rank(dE).numpy(), atol=1e-12
    )
    np.testing.assert_allclose(
        cbs["S_emb"](1, params).numpy(), M.cosine_similarity_matrix(dE).numpy(), atol=1e-12
    )
    shared = cbs["shared0_cos"](1, params)
    assert shared.shape == (K, 7)
    assert shared[0, -1] == pytest.approx(1.0, abs=1e-12)
    # A new step recomputes the increment (the cache is per logging step).
    E2 = E.clone()
    E2[0, 101] = E0[0, 101] - (E[0, 100] - E0[0, 100])
    assert cbs["shared0_cos"](2, {"E": E2})[0, -1] == pytest.approx(-1.0, abs=1e-12)


def test_null_level_and_onsets():
    null = st.null_r_level(T3, d=32, n=300)
    assert set(null) == {"R0", "R1", "R0_1", "R1_0"}
    assert all(0 < v < 1 for v in null.values())
    assert null == st.null_r_level(T3, d=32, n=300)  # seeded
    with pytest.raises(ValueError):
        st.null_r_level(T3, d=32, q=1.5)

    steps = np.array([0, 1, 2, 4, 8, 16, 32, 64])
    rise = np.array([np.nan, 0.0, 0.1, 0.2, 0.5, 0.8, 0.8, 0.7])  # peak 0.8 -> threshold 0.4
    late = np.array([np.nan, 0.0, 0.0, 0.0, 0.1, 0.2, 0.6, 0.6])
    noise = np.array([np.nan, 0.05, -0.05, 0.08, 0.0, 0.02, -0.1, 0.07])
    onset, thr = st.onset_steps(steps, np.stack([rise, late, noise], 1), frac=0.5, floor=0.1)
    assert onset[0] == 8 and onset[1] == 32 and math.isnan(onset[2])
    np.testing.assert_allclose(thr, [0.4, 0.3, 0.1])
    with pytest.raises(ValueError):
        st.onset_steps(steps, rise, frac=0.0)


class _Oracle:
    """Logits that put `sharp` on the true label, or split it between z+m and z-m."""

    def __init__(self, data, split):
        self.data, self.split = data, split

    def forward(self, params, X):
        y = self.data.y
        m = (y - X[:, 0]).abs()
        logits = torch.zeros(params["k"].shape[0], len(y), self.data.n_labels)
        rows = torch.arange(len(y))
        if self.split:
            logits[:, rows, X[:, 0] + m] = 30.0
            logits[:, rows, X[:, 0] - m] = 30.0
        else:
            logits[:, rows, y] = 30.0
        return logits


def test_t3_accuracy_callbacks():
    params = {"k": torch.zeros(2)}
    exact = st.t3_accuracy_callbacks(_Oracle(D3, split=False), D3)
    assert float(exact["acc"](0, params)[0]) == 1.0
    assert float(exact["loss_sign"](0, params)[1]) == pytest.approx(0.0, abs=1e-9)
    half = st.t3_accuracy_callbacks(_Oracle(D3, split=True), D3)
    assert float(half["acc_mag"](0, params)[0]) == 1.0
    assert float(half["loss_sign"](0, params)[0]) == pytest.approx(math.log(2), abs=1e-9)


def test_train_staircase_layout():
    from lib import models

    model = models.EmbMLP(D3.vocab_size, 8, 8, D3.n_labels)
    h, gk, sk = st.train_staircase(
        model, D3, T3, seeds=[0, 1], gammas=[1.0, 0.5], steps=3, lr=1e-2, log_at=[0, 3]
    )
    assert gk.tolist() == [1.0, 1.0, 0.5, 0.5] and sk.tolist() == [0, 1, 0, 1]
    assert h["R0"].shape == (2, 4) and h["S_emb"].shape == (2, 4, 14, 14)
    assert h["acc"].shape == (2, 4) and np.isnan(h["R0"][0]).all()
    with pytest.raises(ValueError):
        st.train_staircase(model, D3, T3, seeds=[], gammas=[1.0], steps=1)

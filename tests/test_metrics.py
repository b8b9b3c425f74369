"""Every alignment metric against a hand computation in numpy / scipy."""

import math

import numpy as np
import pytest
import scipy.stats
import torch

from lib.measure import attention, onsets
from lib.measure import metrics as M

rng = np.random.default_rng(0)
V, d, n, K = 9, 5, 4, 3


def cos_np(A):
    A = A.reshape(len(A), -1)
    out = np.zeros((len(A), len(A)))
    for s in range(len(A)):
        for t in range(len(A)):
            ns, nt = np.linalg.norm(A[s]), np.linalg.norm(A[t])
            out[s, t] = 0.0 if ns == 0 or nt == 0 else A[s] @ A[t] / (ns * nt)
    return out


def upper_np(S):
    return np.array([S[s, t] for s in range(len(S)) for t in range(s + 1, len(S))])


def test_cosine_and_upper_triangle():
    A = rng.normal(size=(V, d))
    A[2] = 0  # a zero row has similarity 0, not NaN
    S = M.cosine_similarity_matrix(A)
    np.testing.assert_allclose(S.numpy(), cos_np(A), atol=1e-12)
    np.testing.assert_allclose(M.upper_triangle(S).numpy(), upper_np(cos_np(A)), atol=1e-12)
    B = rng.normal(size=(K, V, d))
    np.testing.assert_allclose(
        M.upper_triangle(M.cosine_similarity_matrix(B))[1].numpy(),
        upper_np(cos_np(B[1])),
        atol=1e-12,
    )


def test_r_cos_and_spearman():
    W, W0, phi = rng.normal(size=(V, d)), rng.normal(size=(V, d)), rng.normal(size=(V, 3, n))
    tok = [0, 2, 3, 5, 8]
    E = (W - W0)[tok]
    E = E - E.mean(0)
    P = phi[tok].reshape(len(tok), -1)
    se, sp = upper_np(cos_np(E)), upper_np(cos_np(P - P.mean(0)))  # both sides centred alike
    assert math.isclose(M.r_cos(W, phi, tok, W0), np.corrcoef(se, sp)[0, 1], abs_tol=1e-12)
    rho = scipy.stats.spearmanr(se, sp).statistic
    assert math.isclose(M.spearman_cos(W, phi, tok, W0), rho, abs_tol=1e-12)
    raw = np.corrcoef(upper_np(cos_np(W)), upper_np(cos_np(phi.reshape(V, -1))))[0, 1]
    assert math.isclose(M.r_cos(torch.tensor(W), phi, subtract_mean_row=False), raw, abs_tol=1e-12)


def test_spearman_ties():
    W = rng.normal(size=(V, d))
    phi = rng.integers(0, 2, size=(V, 2)).astype(float) + 1  # few distinct rows: many tied cosines
    se, sp = upper_np(cos_np(W - W.mean(0))), upper_np(cos_np(phi - phi.mean(0))).round(12)
    assert len(np.unique(sp)) < len(sp) / 4
    assert math.isclose(
        M.spearman_cos(W, phi), scipy.stats.spearmanr(se, sp).statistic, abs_tol=1e-12
    )


@pytest.mark.parametrize("f", [M.r_cos, M.spearman_cos])
def test_batched_equals_loop(f):
    W, W0, phi = rng.normal(size=(K, V, d)), rng.normal(size=(V, d)), rng.normal(size=(V, n))
    out = f(W, phi, [1, 2, 4, 6, 7], W0)
    assert out.shape == (K,)
    for k in range(K):
        assert math.isclose(out[k].item(), f(W[k], phi, [1, 2, 4, 6, 7], W0), abs_tol=1e-12)


def test_linear_cka():
    A = rng.normal(size=(50, 6))
    Q, _ = np.linalg.qr(rng.normal(size=(6, 6)))
    assert math.isclose(M.linear_cka(A, 3.0 * A @ Q), 1.0, abs_tol=1e-12)
    assert M.linear_cka(A, rng.normal(size=(50, 4))) < 0.5
    Ac, B = A - A.mean(0), rng.normal(size=(50, 4))
    Bc = B - B.mean(0)
    hand = np.linalg.norm(Bc.T @ Ac) ** 2 / (np.linalg.norm(Ac.T @ Ac) * np.linalg.norm(Bc.T @ Bc))
    assert math.isclose(M.linear_cka(A, B), hand, abs_tol=1e-12)
    batched = M.linear_cka(np.stack([A, A @ Q]), np.stack([B, B]))
    np.testing.assert_allclose(batched.numpy(), [hand, hand], atol=1e-12)


def test_strong_pair_recall():
    # 10 tokens -> 45 pairs; top=0.1 -> the 4 (= round(4.5)) strongest pairs.
    m = 10
    pairs = [(s, t) for s in range(m) for t in range(s + 1, m)]
    S_sig, S_emb = np.zeros((m, m)), np.zeros((m, m))
    for r, (s, t) in enumerate(pairs):
        S_sig[s, t] = S_sig[t, s] = r / 100  # strongest by signature: the last 4 pairs
        S_emb[s, t] = S_emb[t, s] = -r / 100  # reversed order ...
    for s, t in pairs[-2:]:  # ... except that 2 of the 4 strong pairs are planted on top
        S_emb[s, t] = S_emb[t, s] = 1.0
    assert M.strong_pair_recall(S_emb, S_sig, top=0.1) == 0.5
    assert M.strong_pair_recall(S_sig, S_sig, top=0.1) == 1.0
    out = M.strong_pair_recall(np.stack([S_emb, S_sig, -S_sig]), S_sig, top=0.1)
    np.testing.assert_allclose(out.numpy(), [0.5, 1.0, 0.0])


def test_partial_corr():
    m = 200
    z = rng.normal(size=(m, 2))
    x = z @ [1.0, -2.0] + rng.normal(size=m)
    y = z @ [0.5, 1.0] + 0.3 * x + rng.normal(size=m)
    Z = np.column_stack([np.ones(m), z])
    rx = x - Z @ np.linalg.lstsq(Z, x, rcond=None)[0]
    ry = y - Z @ np.linalg.lstsq(Z, y, rcond=None)[0]
    hand = np.corrcoef(rx, ry)[0, 1]
    assert math.isclose(M.partial_corr(x, y, z), hand, abs_tol=1e-12)
    z1 = z[:, 0]
    Z1 = np.column_stack([np.ones(m), z1])
    rx1 = x - Z1 @ np.linalg.lstsq(Z1, x, rcond=None)[0]
    ry1 = y - Z1 @ np.linalg.lstsq(Z1, y, rcond=None)[0]
    assert math.isclose(M.partial_corr(x, y, z1), np.corrcoef(rx1, ry1)[0, 1], abs_tol=1e-12)
    # A collinear duplicate control changes nothing.
    assert math.isclose(M.partial_corr(x, y, np.column_stack([z, z[:, :1]])), hand, abs_tol=1e-12)


def test_r_cos_partial():
    W, phi, ctl = rng.normal(size=(K, V, d)), rng.normal(size=(V, n)), rng.normal(size=(V, n))
    out = M.r_cos_partial(W, phi, ctl)
    c = lambda A: A - A.mean(0)  # every side centred alike
    for k in range(K):
        E = W[k] - W[k].mean(0)
        hand = M.partial_corr(
            upper_np(cos_np(E)), upper_np(cos_np(c(phi))), upper_np(cos_np(c(ctl)))
        )
        assert math.isclose(out[k].item(), hand, abs_tol=1e-12)
    ctl2 = rng.normal(size=(V, 2, n))
    z = np.column_stack([upper_np(cos_np(c(ctl))), upper_np(cos_np(c(ctl2.reshape(V, -1))))])
    hand = M.partial_corr(upper_np(cos_np(c(W[0]))), upper_np(cos_np(c(phi))), z)
    assert math.isclose(M.r_cos_partial(W[0], phi, [ctl, ctl2]), hand, abs_tol=1e-12)


def test_effective_rank():
    u, v = rng.normal(size=(7, 1)), rng.normal(size=(1, 5))
    assert math.isclose(M.effective_rank(u @ v), 1.0, abs_tol=1e-9)
    assert math.isclose(M.effective_rank(np.eye(6)), 6.0, abs_tol=1e-12)
    A = rng.normal(size=(K, 6, 4))
    s = np.linalg.svd(A[1], compute_uv=False)
    p = s / s.sum()
    hand = np.exp(-(p * np.log(p)).sum())
    assert math.isclose(M.effective_rank(A)[1].item(), hand, abs_tol=1e-12)


def test_onset_step():
    steps = [0, 10, 20, 40, 80]
    assert onsets.onset_step(steps, [0.1, 0.3, 0.6, 0.5, 0.9], 0.5) == 20
    assert math.isnan(onsets.onset_step(steps, [0.1, None, 0.2, 0.3, 0.4], 0.5))
    vals = np.array(
        [[0.1, 0.9, 0.0], [0.2, 0.9, np.nan], [0.7, 0.9, 0.1], [0.2, 0.9, 0.2], [0.9, 0.9, 0.4]]
    )
    out = onsets.onset_step(steps, torch.tensor(vals), 0.6)
    np.testing.assert_array_equal(out.numpy(), [20.0, 0.0, np.nan])


def test_shape_errors():
    with pytest.raises(ValueError):
        M.r_cos(rng.normal(size=(V, d)), rng.normal(size=(V + 1, n)))
    with pytest.raises(ValueError):
        onsets.onset_step([0, 1], [0.1, 0.2, 0.3], 0.5)


def test_partial_from_correlations_is_partial_corr_with_one_control():
    g = torch.Generator().manual_seed(0)
    x, y, z = torch.randn(3, 50, generator=g, dtype=torch.float64)
    y = y + 0.5 * z
    r = lambda a, b: float(np.corrcoef(a, b)[0, 1])
    t = lambda v: torch.tensor(v, dtype=torch.float64)
    got = M.partial_from_correlations(t(r(x, y)), t(r(x, z)), t(r(y, z)))
    assert abs(float(got) - float(M.partial_corr(x, y, z))) < 1e-12


def test_attention_entropy_is_zero_for_one_hot_and_log_t_for_uniform():
    a = torch.tensor([[1.0, 0.0, 0.0, 0.0], [0.25, 0.25, 0.25, 0.25]], dtype=torch.float64)
    H = attention.attention_entropy(a)
    assert float(H[0]) == 0.0 and abs(float(H[1]) - math.log(4)) < 1e-12


def test_rise_onset_finds_a_planted_later_rise_and_not_a_flat_curve():
    """A curve that moves with an earlier stair (up, then back down to a trough) and then
    climbs has its onset in the late climb; a flat noisy curve, a rise within min_rise or a
    peak under the floor has none."""
    steps = np.arange(0, 400, 10)
    rng = np.random.default_rng(0)
    flat = 0.1 + 0.005 * rng.standard_normal(len(steps))
    early = np.where(steps < 50, 0.12, 0.05)  # the shared move, then a trough
    climb = np.where(steps < 100, early, np.minimum(0.05 + (steps - 100) * 0.002, 0.3))
    curves = np.stack([climb, flat], 1)
    onset, rise, base = onsets.rise_onset(steps, curves, start=[0, 0], frac=0.5, min_rise=0.05)
    assert 100 < onset[0] <= 180 and np.isclose(rise[0], 0.25) and np.isclose(base[0], 0.05)
    assert np.isnan(onset[1]) and rise[1] < 0.05
    # a peak under the floor is no stair; a start that never came gives no onset
    assert np.isnan(onsets.rise_onset(steps, curves, start=[0, 0], min_rise=0.05, floor=0.35)[0][0])
    onset, rise, _ = onsets.rise_onset(steps, curves, start=[np.nan, 0], min_rise=0.05)
    assert np.isnan(onset[0]) and np.isnan(rise[0])
    late, _, base_late = onsets.rise_onset(steps, climb[:, None], start=[250], min_rise=0.01)
    assert base_late[0] > 0.25 and np.isnan(late[0])  # already at its top: no later stair


def test_rise_onset_is_where_the_climb_passes_half_way_for_good_not_an_early_spike():
    """A spike at the start that reaches half the later climb and falls back (a transient
    of the reading) is not the onset: the onset is the last upward crossing before the peak."""
    steps = np.arange(0, 400, 10)
    climb = np.where(steps < 200, 0.0, np.minimum((steps - 200) * 0.004, 0.3))
    spiky = climb.copy()
    spiky[1] = 0.2  # step 10: above half the final rise (0.15), then back to 0
    onset, rise, base = onsets.rise_onset(steps, np.stack([climb, spiky], 1), start=[0, 0])
    assert onset[0] == onset[1] and 230 <= onset[1] <= 250 and np.allclose(rise, 0.3)

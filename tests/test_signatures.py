"""Every signature estimator against a brute-force loop over samples and positions."""

import math

import numpy as np
import pytest
import torch

from lib import signatures as sig

N, L, V, NL = 40, 5, 7, 4
TOL = dict(rtol=0, atol=1e-12, equal_nan=True)


@pytest.fixture(scope="module")
def data():
    g = torch.Generator().manual_seed(0)
    X = torch.randint(0, V - 1, (N, L), generator=g)  # token V-1 never occurs: its rows are NaN
    y = torch.randint(0, NL, (N,), generator=g)
    return X, y


def counts_loop(X):
    c = np.zeros((len(X), V))
    for n, row in enumerate(X.tolist()):
        for tok in row:
            c[n, tok] += 1
    return c


def close(a, b):
    torch.testing.assert_close(a, torch.as_tensor(b, dtype=torch.float64), **TOL)


def test_counts_and_rate(data):
    X, _ = data
    c = counts_loop(X)
    close(sig.token_counts(X, V), c)
    close(sig.token_rate(X, V), c.mean(0))


def test_label_signature(data):
    X, y = data
    num, den = np.zeros((V, NL)), np.zeros(V)
    for n in range(N):
        for i in range(L):
            s = int(X[n, i])
            num[s, int(y[n])] += 1
            den[s] += 1
    with np.errstate(invalid="ignore"):
        expect = num / den[:, None]
    phi = sig.label_signature(X, y, V, NL)
    close(phi, expect)
    assert phi.dtype == torch.float64
    assert torch.isnan(phi[V - 1]).all() and not torch.isnan(phi[: V - 1]).any()


def test_contextual_and_joint_signature(data):
    X, y = data
    ctx, joint, den = np.zeros((V, V)), np.zeros((V, V, NL)), np.zeros(V)
    for n in range(N):
        for i in range(L):  # all position pairs (i, j), i = j included: sums to c_s c_mu
            s = int(X[n, i])
            den[s] += 1
            for j in range(L):
                mu = int(X[n, j])
                ctx[s, mu] += 1
                joint[s, mu, int(y[n])] += 1
    with np.errstate(invalid="ignore"):
        ctx, joint = ctx / den[:, None], joint / den[:, None, None]
    close(sig.contextual_signature(X, V), ctx)
    tokens = [3, 0, 6, 3]  # unsorted, with a duplicate and an absent token
    close(sig.joint_signature(X, y, V, NL, tokens), joint[tokens])
    close(sig.joint_signature(X, y, V, NL), joint)

    marg = np.bincount(y.numpy(), minlength=NL) / N  # every sequence has length L
    close(sig.label_marginal(X, y, V, NL), marg)
    for how, c in [("uniform", np.full(NL, 1 / NL)), ("marginal", marg)]:
        expect = joint[tokens] - ctx[tokens][:, :, None] * c
        close(sig.centred_joint_signature(X, y, V, NL, tokens, how=how), expect)
    phi_y = sig.label_signature(X, y, V, NL)
    expect = joint[tokens] - ctx[tokens][:, :, None] * phi_y.numpy()[tokens][:, None, :]
    close(sig.joint_interaction(X, y, V, NL, tokens), expect)
    close(sig.centre(phi_y, "marginal", marg), phi_y.numpy() - marg)
    close(sig.centre(phi_y), phi_y.numpy() - 1 / NL)


def test_joint_signature_chunked(data, monkeypatch):
    X, y = data
    whole = sig.joint_signature(X, y, V, NL)
    monkeypatch.setattr(sig, "_PAIR_CHUNK", 3 * L * L)  # 3 samples per chunk
    close(sig.joint_signature(X, y, V, NL), whole)


def test_traceback_signature(data):
    X, y = data
    num, den = np.zeros((NL, V)), np.zeros(NL)
    for n in range(N):
        den[int(y[n])] += 1
        for i in range(L):
            num[int(y[n]), int(X[n, i])] += 1
    close(sig.traceback_signature(X, y, V, NL), num / den[:, None])


# ---------------------------------------------------------------- language modelling

T, VL = 200, 6


@pytest.fixture(scope="module")
def stream():
    return torch.randint(0, VL, (T,), generator=torch.Generator().manual_seed(1))


def cond_loop(pairs, rows):
    """P(b | a) for a in rows, from a list of (a, b) pairs."""
    out = np.zeros((len(rows), VL))
    for r, s in enumerate(rows):
        for a, b in pairs:
            if a == s:
                out[r, b] += 1
    with np.errstate(invalid="ignore"):
        return out / out.sum(1, keepdims=True)


@pytest.mark.parametrize("rows", [None, [4, 1, 4]])
def test_lm_signatures(stream, rows):
    x = stream.tolist()
    r = list(range(VL)) if rows is None else rows
    for k in (1, 2, 5):
        pairs = [(x[t], x[t + k]) for t in range(T - k)]
        close(sig.skip_signature(stream, VL, k, rows), cond_loop(pairs, r))
    close(sig.next_token_signature(stream, VL, rows), sig.skip_signature(stream, VL, 1, rows))
    pre = [(x[t + 1], x[t]) for t in range(T - 1)]  # rows are the next token nu
    close(sig.previous_token_signature(stream, VL, rows), cond_loop(pre, r))

    w = sig.window_weights(16, 4)
    expect = sum(
        w[k - 1].item() * cond_loop([(x[t], x[t + k]) for t in range(T - k)], r)
        for k in range(1, 5)
    )
    close(sig.window_signature(stream, VL, 16, 4, rows), expect)


def test_batched_stream_pairs_stay_in_rows(stream):
    B = stream.view(4, 50)
    x = B.tolist()
    pairs = [(row[t], row[t + 2]) for row in x for t in range(48)]
    close(sig.skip_signature(B, VL, 2), cond_loop(pairs, list(range(VL))))


@pytest.mark.parametrize("Tc,W", [(1, None), (7, None), (7, 3), (30, 30), (30, 1)])
def test_window_weights(Tc, W):
    W_ = Tc if W is None else W
    w = np.zeros(W_)
    for t in range(1, Tc + 1):  # query position t predicts x_{t+1}, attends 1/t to j = 1..t
        for j in range(1, t + 1):
            k = t + 1 - j
            if k <= W_:
                w[k - 1] += 1 / (Tc * t)
    if W is None:
        assert math.isclose(
            w.sum(), 1.0, abs_tol=1e-12
        )  # untruncated weights need no renormalising
    close(sig.window_weights(Tc, W), w / w.sum())


def test_errors(data):
    X, y = data
    bad = X.clone()
    bad[3, 2] = V
    for f in (
        lambda: sig.token_counts(bad, V),
        lambda: sig.label_signature(X, y, V, int(y.max())),  # label out of range
        lambda: sig.label_signature(X, y[:-1], V, NL),  # mismatched N
        lambda: sig.joint_signature(X, y, V, NL, tokens=[V]),
        lambda: sig.token_counts(-X, V),
        lambda: sig.token_counts(X.double(), V),
        lambda: sig.next_token_signature(torch.tensor([0, 1, VL]), VL),
        lambda: sig.window_weights(4, 5),
        lambda: sig.centre(torch.ones(3, 2), "marginal"),
    ):
        with pytest.raises(ValueError):
            f()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_matches_cpu(data, stream):
    X, y = data
    for f in (sig.label_signature, lambda X, y, V, n: sig.joint_signature(X, y, V, n, [1, 2])):
        out = f(X.cuda(), y.cuda(), V, NL)
        assert out.device.type == "cuda"
        close(out.cpu(), f(X, y, V, NL))
    close(
        sig.window_signature(stream.cuda(), VL, 8, 3).cpu(), sig.window_signature(stream, VL, 8, 3)
    )


def test_label_signature_gap_and_marginal_deviation(data):
    X, y = data
    phi = sig.label_signature(X, y, V, NL).numpy()
    pairs = [(0, 1), (2, 3), (1, 4)]
    expect = max(np.abs(phi[a] - phi[b]).max() for a, b in pairs)
    assert sig.label_signature_gap(X, y, V, NL, pairs) == pytest.approx(expect, abs=1e-15)
    assert sig.label_signature_gap(X, y, V, NL, [(2, 2)]) == 0.0
    pbar = sig.label_marginal(X, y, V, NL).numpy()
    expect = np.abs(phi[[0, 3]] - pbar).max()
    assert sig.marginal_deviation(X, y, V, NL, [0, 3]) == pytest.approx(expect, abs=1e-15)
    # A token present once in every sequence carries the label marginal itself.
    Xg = torch.cat([X[:, :-1], torch.full((N, 1), V - 1)], 1)
    assert sig.marginal_deviation(Xg, y, V, NL, [V - 1]) < 1e-15

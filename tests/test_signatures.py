"""Every signature estimator against a brute-force loop over samples and positions."""

import math

import numpy as np
import pytest
import torch

from lib.data import chains
from lib.data import signatures as sig

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
    return cond_loop_v(pairs, rows, VL)


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


def test_pair_counts_in_one_table_equal_the_masked_ones(stream, monkeypatch):
    """A small vocabulary counts every pair in one V x V table; a large one only the
    requested rows: the same conditionals (NaN where a row never occurs)."""
    B = stream.view(4, 50)
    for rows in (None, [3, 0, 3], [VL - 1]):
        table = sig.skip_signature(B, VL, 2, rows)
        monkeypatch.setattr(sig, "_FULL_TABLE", 0)
        masked = sig.skip_signature(B, VL, 2, rows)
        monkeypatch.undo()
        assert torch.equal(table.isnan(), masked.isnan())
        assert torch.equal(table.nan_to_num(), masked.nan_to_num())


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


# ---------------------------------------------------------------- beyond the Markov chain

VM = 8


pytestmark = pytest.mark.usefixtures("one_thread")


def chain_sample(P, n_chains, length, seed, order=1, noise=None):
    """``(n_chains, length)`` parallel samples: order 1 from transition matrix ``P``; order 2
    from ``x_t = f(x_{t-2})`` (``P`` is then the map f) with probability ``1 - noise``."""
    g = torch.Generator().manual_seed(seed)
    x = torch.empty(n_chains, length, dtype=torch.long)
    x[:, :2] = torch.randint(0, VM, (n_chains, 2), generator=g)
    for t in range(2, length):
        if order == 1:
            x[:, t] = torch.multinomial(P[x[:, t - 1]], 1, generator=g).squeeze(1)
        else:
            rand = torch.randint(0, VM, (n_chains,), generator=g)
            keep = torch.rand(n_chains, generator=g) >= noise
            x[:, t] = torch.where(keep, P[x[:, t - 2]], rand)
    return x


@pytest.fixture(scope="module")
def first_order():
    g = torch.Generator().manual_seed(5)
    P = torch.rand(VM, VM, generator=g, dtype=torch.float64) ** 3
    P = P / P.sum(1, keepdim=True)
    return chain_sample(P, 64, 300, 0), chain_sample(P, 64, 3000, 1)


@pytest.fixture(scope="module")
def second_order():
    f = torch.randperm(VM, generator=torch.Generator().manual_seed(6))
    return chain_sample(f, 32, 400, 2, order=2, noise=0.2)


def dense_chain(stream, V):
    """The empirical chain by loops: rows of tokens without a successor are the successor
    distribution, rows of absent tokens a self-loop."""
    x = stream.tolist()
    pairs = [(a, b) for a, b in zip(x[:-1], x[1:], strict=True)]
    P = cond_loop_v(pairs, list(range(V)), V)
    q = np.bincount(x[1:], minlength=V) / (len(x) - 1)
    for s in range(V):
        if np.isnan(P[s]).any():
            P[s] = q if s in x else np.eye(V)[s]
    return P


def cond_loop_v(pairs, rows, V):
    out = np.zeros((len(rows), V))
    for r, s in enumerate(rows):
        for a, b in pairs:
            if a == s:
                out[r, b] += 1
    with np.errstate(invalid="ignore"):
        return out / out.sum(1, keepdims=True)


@pytest.fixture(scope="module")
def sinky():
    """A stream over 7 tokens in which 6 never occurs and 5 occurs only at the end."""
    s = torch.randint(0, 5, (150,), generator=torch.Generator().manual_seed(7))
    return torch.cat([s, torch.tensor([5])])


def test_markov_prediction_is_the_chain_power(sinky):
    V7 = 7
    P = dense_chain(sinky, V7)
    np.testing.assert_allclose(P.sum(1), 1.0, atol=1e-12)
    rows = [5, 0, 6, 3, 0]
    # k = 1 is the next-token signature bit for bit, wherever that is defined
    nxt = sig.next_token_signature(sinky, V7)
    assert torch.equal(chains.markov_prediction(sinky, V7, 1)[:5], nxt[:5])
    for k in (1, 2, 3, 5):
        expect = np.linalg.matrix_power(P, k).copy()
        expect[6] = np.nan  # absent token
        out = chains.markov_prediction(sinky, V7, k)
        assert out.dtype == torch.float64 and out.shape == (V7, V7)
        close(out, expect)
        close(chains.markov_prediction(sinky, V7, k, rows), expect[rows])
    # the token without a successor gets the successor distribution
    q = np.bincount(sinky.tolist()[1:], minlength=V7) / (len(sinky) - 1)
    close(chains.markov_prediction(sinky, V7, 1, [5]), q[None])


def test_markov_prediction_of_a_batched_stream():
    B = torch.randint(0, VM, (3, 60), generator=torch.Generator().manual_seed(8))
    pairs = [(r[t], r[t + 1]) for r in B.tolist() for t in range(59)]
    P = cond_loop_v(pairs, list(range(VM)), VM)
    close(chains.markov_prediction(B, VM, 2), P @ P)
    close(chains.markov_prediction(B, VM, 1), sig.next_token_signature(B, VM))


def test_residuals_of_a_first_order_chain_vanish(first_order):
    small, large = first_order
    dev = []
    for x in (small, large):
        rs = [chains.residual_skip_signature(x, VM, k) for k in (1, 2, 3, 5)]
        assert torch.equal(rs[0], torch.zeros(VM, VM, dtype=torch.float64))  # k = 1 exactly
        for r in rs:
            assert r.shape == (VM, VM) and float(r.sum(1).abs().max()) < 1e-12
        rw = chains.residual_window_signature(x, VM, 8)
        dev.append(max(float(r.abs().max()) for r in [*rs, rw]))
    assert dev[0] < 0.06 and dev[1] < 0.02
    assert dev[1] < dev[0] / 2  # 10x more tokens: ~ sqrt(10) smaller


def test_residuals_of_a_second_order_chain_do_not(second_order, first_order):
    r2 = chains.residual_skip_signature(second_order, VM, 2)
    assert float(r2.abs().max()) > 0.4
    rw = chains.residual_window_signature(second_order, VM, 6)
    null = chains.residual_window_signature(first_order[0], VM, 6)
    assert float(rw.abs().max()) > 0.05 and float(rw.abs().max()) > 3 * float(null.abs().max())


def test_residual_window_is_the_weighted_sum(sinky, stream):
    for x, Vx in ((stream, VL), (sinky, 7)):
        w = sig.window_weights(10, 4)
        expect = sum(w[k - 1] * chains.residual_skip_signature(x, Vx, k) for k in range(1, 5))
        torch.testing.assert_close(
            chains.residual_window_signature(x, Vx, 10, 4),
            expect,
            rtol=0,
            atol=1e-12,
            equal_nan=True,
        )
        mwp = chains.markov_window_prediction(x, Vx, 10, 4, rows=[1, 0])
        expect = sum(w[k - 1] * chains.markov_prediction(x, Vx, k, [1, 0]) for k in range(1, 5))
        torch.testing.assert_close(mwp, expect, rtol=0, atol=1e-12, equal_nan=True)


def test_markov_prediction_scales_to_a_large_vocabulary():
    V_big = 20_000  # a dense V x V float64 would be 3.2 GB
    x = torch.randint(0, V_big, (30_000,), generator=torch.Generator().manual_seed(9))
    R = chains.markov_prediction(x, V_big, 3, rows=x[:5])
    assert R.shape == (5, V_big)
    torch.testing.assert_close(R.sum(1), torch.ones(5, dtype=torch.float64))


def _tri(x):
    """Trigram keys x_t * VM + x_{t+1} and successors x_{t+2}, never across rows."""
    x = x.reshape(-1, x.shape[-1])
    return x[:, :-2] * VM + x[:, 1:-1], x[:, 2:]


def _cond(key, succ, V):
    """P(succ | key) over the V*V keys, and the count of each key."""
    c = torch.bincount(key.reshape(-1) * V + succ.reshape(-1), minlength=V**3).view(V * V, V)
    c = c.to(torch.float64)
    return c / c.sum(1, keepdim=True), c.sum(1)


def test_markov_stream_reproduces_its_chain(second_order):
    src = second_order
    one = chains.markov_stream(src, VM, 1, 64_000, seed=0)
    two = chains.markov_stream(src, VM, 2, 64_000, seed=0)
    assert one.shape == two.shape == (64_000,) and one.dtype == torch.long
    chains1 = one.view(256, 250)  # the documented layout: 256 chains of 250 tokens
    err1 = sig.next_token_signature(chains1, VM) - sig.next_token_signature(src, VM)
    assert float(err1.abs().max()) < 0.03
    P_src, n_src = _cond(*_tri(src), VM)
    seen = n_src > 20
    err = {
        o: float((_cond(*_tri(s.view(256, 250)), VM)[0] - P_src)[seen].abs().max())
        for o, s in ((1, one), (2, two))
    }
    assert err[2] < 0.08 and err[1] > 0.4
    # order 2 also keeps the skip-2 signature, which order 1 washes out
    s2 = sig.skip_signature(src, VM, 2)
    assert float((sig.skip_signature(two.view(256, 250), VM, 2) - s2).abs().max()) < 0.05
    assert float((sig.skip_signature(chains1, VM, 2) - s2).abs().max()) > 0.4


def test_markov_stream_seeds_vocabulary_and_layout():
    src = torch.tensor([0, 2, 5, 7])[torch.randint(0, 4, (500,), generator=torch.Generator())]
    a = chains.markov_stream(src, 10, 2, 1001, seed=3, n_chains=16)
    assert a.shape == (1001,)
    assert torch.equal(a, chains.markov_stream(src, 10, 2, 1001, seed=3, n_chains=16))
    assert not torch.equal(a, chains.markov_stream(src, 10, 2, 1001, seed=4, n_chains=16))
    assert set(a.tolist()) <= set(src.tolist())
    assert chains.markov_stream(src, 10, 1, 5, seed=0, n_chains=64).shape == (5,)


def test_markov_stream_restarts_after_a_dead_end(sinky):
    # token 5 ends the corpus: order-1 chains restart from the successor distribution,
    # the row markov_prediction gives it, so the sample is a sample of that chain
    out = chains.markov_stream(sinky, 7, 1, 200_000, seed=1, n_chains=500).view(500, 400)
    assert bool((out == 5).any())
    assert not bool((out == 6).any())
    emp = sig.next_token_signature(out, 7, rows=[5, 0, 1])
    torch.testing.assert_close(
        emp, chains.markov_prediction(sinky, 7, 1, rows=[5, 0, 1]), rtol=0, atol=0.06
    )
    # order 2: the context (x, 5) has no successor either
    assert chains.markov_stream(sinky, 7, 2, 5000, seed=1).shape == (5000,)


def test_markov_errors(stream):
    for f in (
        lambda: chains.markov_prediction(stream, VL, 0),
        lambda: chains.markov_prediction(stream, VL, 1.5),
        lambda: chains.markov_prediction(torch.tensor([3]), VL, 1),
        lambda: chains.markov_prediction(stream, VL, 2, rows=[VL]),
        lambda: chains.residual_skip_signature(stream, VL, len(stream)),
        lambda: chains.residual_window_signature(stream, VL, 4, 5),
        lambda: chains.markov_stream(stream, VL, 0, 10, 0),
        lambda: chains.markov_stream(stream, VL, 1, 0, 0),
        lambda: chains.markov_stream(stream, VL, 1, 10, 0, n_chains=0),
        lambda: chains.markov_stream(stream[:2], VL, 2, 10, 0),
        lambda: chains.markov_stream(stream, 10**4, 5, 10, 0),
        lambda: chains.markov_stream(stream.double(), VL, 1, 10, 0),
    ):
        with pytest.raises(ValueError):
            f()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_markov_cuda_matches_cpu(sinky, second_order):
    for k in (1, 3):
        out = chains.markov_prediction(sinky.cuda(), 7, k, [5, 0, 6])
        assert out.device.type == "cuda"
        close(out.cpu(), chains.markov_prediction(sinky, 7, k, [5, 0, 6]))
    close(
        chains.residual_window_signature(second_order.cuda(), VM, 6).cpu(),
        chains.residual_window_signature(second_order, VM, 6),
    )
    a = chains.markov_stream(second_order.cuda(), VM, 2, 3000, seed=2)
    assert a.device.type == "cuda"
    assert torch.equal(a.cpu(), chains.markov_stream(second_order, VM, 2, 3000, seed=2))


def chain_prediction_loop(x, V, k):
    """E[Q(x_{t+1..t+k-1}) | x_t = s] by loops: Q counts every window of k tokens."""
    from collections import Counter, defaultdict

    Q = defaultdict(Counter)
    for row in x.reshape(-1, x.shape[-1]).tolist():
        for j in range(len(row) - k + 1):
            Q[tuple(row[j : j + k - 1])][row[j + k - 1]] += 1
    out, n = np.zeros((V, V)), np.zeros(V)
    for row in x.reshape(-1, x.shape[-1]).tolist():
        for t in range(len(row) - k):
            q = Q[tuple(row[t + 1 : t + k])]
            for nu, c in q.items():
                out[row[t], nu] += c / sum(q.values())
            n[row[t]] += 1
    with np.errstate(invalid="ignore"):
        return out / n[:, None]


def third_order(n_chains=64, length=400, noise=0.2, seed=11):
    """x_t = f(x_{t-3}) with probability 1 - noise, else uniform: an order-3 chain whose
    dependence on three back is invisible to the trigram chain."""
    g = torch.Generator().manual_seed(seed)
    f = torch.randperm(VM, generator=g)
    x = torch.randint(0, VM, (n_chains, length), generator=g)
    for t in range(3, length):
        keep = torch.rand(n_chains, generator=g) >= noise
        x[:, t] = torch.where(keep, f[x[:, t - 3]], x[:, t])
    return x


@pytest.mark.parametrize("k", [2, 3, 4])
def test_chain_prediction_is_the_loop(k, sinky):
    B = torch.randint(0, VM, (3, 80), generator=torch.Generator().manual_seed(12))
    for x, Vx in ((B, VM), (sinky, 7)):
        expect = chain_prediction_loop(x, Vx, k)
        close(chains.chain_prediction(x, Vx, k), expect)
        close(chains.chain_prediction(x, Vx, k, rows=[3, 1, 3]), expect[[3, 1, 3]])
        r = chains.residual_beyond_chain(x, Vx, k)
        have = ~torch.isnan(r).any(1)
        assert float(r[have].sum(1).abs().max()) < 1e-12


def test_residual_beyond_chain_vanishes_one_order_down(second_order, first_order):
    # k = 2 is the skip-2 residual of the bigram chain, up to the stream's ends
    x = first_order[1]
    torch.testing.assert_close(
        chains.residual_beyond_chain(x, VM, 2),
        chains.residual_skip_signature(x, VM, 2),
        rtol=0,
        atol=5e-3,
    )
    # zero up to noise on an order-(k-1) chain, not on an order-k one
    big2 = chains.markov_stream(second_order, VM, 2, 256 * 400, seed=0).view(256, 400)
    x3 = third_order()
    r3_on_2 = float(chains.residual_beyond_chain(big2, VM, 3).abs().max())
    r3_on_3 = float(chains.residual_beyond_chain(x3, VM, 3).abs().max())
    assert r3_on_2 < 0.03 and r3_on_3 > 0.3
    # the skip-2 residual cannot see what three back adds beyond the trigram chain
    r2_on_3 = float(chains.residual_beyond_chain(x3, VM, 2).abs().max())
    assert r2_on_3 < r3_on_3 / 3


def test_chain_prediction_errors(stream):
    for f in (
        lambda: chains.chain_prediction(stream, VL, 1),
        lambda: chains.chain_prediction(stream[:3], VL, 3),
        lambda: chains.chain_prediction(stream, 10**4, 6),
    ):
        with pytest.raises(ValueError):
            f()

"""The k-gram predictors, their KL to a model and the callbacks of lib/measure/ngram.py."""

from collections import Counter

import numpy as np
import pytest
import torch

from lib.data import chains
from lib.measure import ngram
from lib.training import engine
from lib.training.models import Transformer, build

pytestmark = pytest.mark.usefixtures("one_thread")

V = 4
STREAM = torch.tensor([0, 1, 2, 0, 1, 3, 0, 1, 2, 2, 1, 0, 3, 3, 0, 1, 2, 0, 0, 1, 2, 3, 1, 0])


def brute_counts(rows, k):
    """{context tuple: Counter of next tokens} by plain Python, rows never joined."""
    out: dict = {}
    for row in rows:
        row = [int(t) for t in row]
        for t in range(k - 1, len(row)):
            out.setdefault(tuple(row[t - k + 1 : t]), Counter())[row[t]] += 1
    return out


def key_of(ctx):
    key = 0
    for t in ctx:
        key = key * V + t
    return key


@pytest.mark.parametrize("rows", [STREAM[None], torch.stack([STREAM, STREAM.flip(0)])])
def test_counts_match_a_brute_force_count(rows):
    models = ngram.kgram_models(rows if len(rows) > 1 else rows[0], V)
    for k, m in models.items():
        ref = brute_counts(rows.tolist(), k)
        assert len(m.keys) == len(ref) and np.all(np.diff(m.keys) > 0)
        for ctx, c in ref.items():
            row = m.counts[np.searchsorted(m.keys, key_of(ctx))]
            assert row.tolist() == [c[w] for w in range(V)]
            # maximum likelihood: counts over the context's total
            p = m.logp[np.searchsorted(m.keys, key_of(ctx))].double().exp()
            assert np.allclose(p.numpy(), row / row.sum(), atol=1e-6)


def test_kn_matches_the_interpolated_discounting_recursion():
    models = ngram.kgram_models(STREAM, V, smoothing="kn", discount=0.5, eps=1e-9)
    uni = np.bincount(STREAM.numpy(), minlength=V).astype(float)
    n1, n2 = (uni == 1).sum(), (uni == 2).sum()
    d1 = 1.0 if n1 == 0 or n2 == 0 else n1 / (n1 + 2 * n2)
    add = (uni + 1e-9) / (uni.sum() + 1e-9 * V)
    N, u = uni.sum(), (uni > 0).sum()
    p = {(): np.maximum(uni - d1, 0) / N + d1 * u / N * add}

    def prob(ctx):  # Tokengrams' recursion, with backoff for an unseen context
        if ctx in p:
            return p[ctx]
        below = prob(ctx[1:])
        c = brute_counts([STREAM.tolist()], len(ctx) + 1).get(ctx)
        if c is None:
            return below
        n = np.array([c[w] for w in range(V)], float)
        p[ctx] = np.maximum(n - 0.5, 0) / n.sum() + 0.5 * (n > 0).sum() / n.sum() * below
        return p[ctx]

    X = torch.tensor([[0, 1, 2, 3, 3, 2, 1, 0, 2, 2]])
    for k, m in models.items():
        lp = ngram.kgram_log_probs(m, X)[0].double().exp().numpy()
        for t in range(X.shape[1]):
            ctx = tuple(X[0, max(0, t - k + 2) : t + 1].tolist()) if k > 1 else ()
            assert np.allclose(lp[t], prob(ctx), atol=1e-6), (k, t)


@pytest.mark.parametrize("smoothing", ["none", "kn"])
def test_log_probs_normalise_and_back_off(smoothing):
    models = ngram.kgram_models(STREAM, V, smoothing=smoothing)
    X = torch.randint(0, V, (3, 5, 9), generator=torch.Generator().manual_seed(0))
    for k, m in models.items():
        lp = ngram.kgram_log_probs(m, X)
        assert lp.shape == (3, 5, 9, V)
        assert torch.allclose(lp.double().exp().sum(-1), torch.ones(3, 5, 9, dtype=torch.float64))
        # the first position has one token of context: it is the bigram's row
        if k > 1:
            assert torch.equal(lp[..., 0, :], ngram.kgram_log_probs(models[2], X)[..., 0, :])
    if smoothing == "none":
        # the context (3, 2, 2) never occurs and (2, 2) does: the 4-gram backs off to it
        X = torch.tensor([[3, 2, 2]])
        assert key_of((3, 2, 2)) not in models[4].keys and key_of((2, 2)) in models[3].keys
        assert torch.equal(ngram.kgram_log_probs(models[4], X)[0, 2],
                           ngram.kgram_log_probs(models[3], X)[0, 2])  # fmt: skip


def test_kl_is_zero_for_the_kgram_itself_and_positive_otherwise():
    models = ngram.kgram_models(STREAM, V)
    X = STREAM[:20].reshape(2, 10)
    for k, m in models.items():
        own = ngram.kgram_log_probs(m, X)
        other = torch.randn(2, 10, V, generator=torch.Generator().manual_seed(k))
        kl = ngram.kl_to_kgrams(torch.stack([own, other]), X, {k: m})[k]
        assert kl.shape == (2,)
        assert abs(float(kl[0])) < 1e-5 and float(kl[1]) > 0.05
        # a precomputed target gives the same, and (B, L, V) logits are one instance
        assert torch.allclose(ngram.kl_to_kgrams(other, X, {k: m}, targets={k: own})[k], kl[1:])


def test_callbacks_log_every_order_for_shared_and_per_instance_windows():
    L = 8
    model = Transformer(V, 8, context_len=L, readout="all")
    params = build(model, [0, 1])
    models = ngram.kgram_models(STREAM, V, orders=(1, 2, 3))
    chain = chains.markov_stream(STREAM, V, 1, 4 * (L + 1), seed=0, n_chains=4).view(4, L + 1)
    windows = {1: (chain[:, :-1], chain[:, 1:])}
    shared = STREAM[:16].reshape(2, L)
    per_instance = torch.stack([shared, shared.flip(-1)])
    for X in (shared, per_instance):
        cb = ngram.ngram_callbacks(model, X, models, chain_windows=windows)
        assert sorted(cb) == ["chain_loss1", "kl1", "kl2", "kl3"]
        with torch.no_grad():
            ref = ngram.kl_to_kgrams(model.forward(params, X), X, models)
            for k in models:
                assert torch.allclose(cb[f"kl{k}"](0, params), ref[k])
            ce = engine.cross_entropy(model.forward(params, windows[1][0]), windows[1][1])
            assert torch.allclose(cb["chain_loss1"](0, params), ce)
        data = (per_instance, torch.roll(per_instance, -1, -1))
        hist = engine.train(model, params, data, 3, log_at=[0, 3], callbacks=cb, desc="ngram")
        assert hist["kl2"].shape == hist["chain_loss1"].shape == (2, 2)
    # instance k of per-instance windows reads its own windows
    with torch.no_grad():
        X1 = per_instance[1]
        own = ngram.kl_to_kgrams(model.forward(params, X1)[1:], X1, models)[2]
        assert torch.allclose(cb["kl2"](9, params)[1:], own)


def test_nearest_steps_on_a_planted_v_shaped_curve():
    steps = np.array([0, 10, 20, 30, 40, 50])
    v = lambda at: np.abs(steps - at).astype(float) + 1.0
    kl = {1: np.stack([v(10), v(20)], 1), 2: np.stack([v(30), v(30)], 1)}
    kl[3] = np.stack([np.array([3.0, 1, 2, 1, 5, 6]), np.full(6, np.nan)], 1)
    kl[3][0, 1] = 2.0
    near = ngram.nearest_steps(steps, kl)
    assert near[1].tolist() == [10, 20] and near[2].tolist() == [30, 30]
    assert near[3].tolist() == [10, 0]  # ties go to the first; NaN logs are skipped
    assert ngram.lag(steps, kl, a=1, b=2).tolist() == [20, 10]

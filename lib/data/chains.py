r"""Beyond the Markov chain: what a token stream's empirical chains predict, and the rest.

A stream's empirical first-order chain :math:`\hat P` (the next-token signature as a
transition matrix) predicts the token ``k`` places on by its power :math:`\hat P^k`
(:func:`markov_prediction`); what the token at distance ``k`` tells beyond that is the
residual skip signature :math:`\phi^{(k)}-\hat P^k` (:func:`residual_skip_signature`), zero
up to noise on a Markov stream. The order-``(k-1)`` chain's prediction from the tokens in
between (:func:`chain_prediction`) gives the residual a token ``k`` back drives once a model
predicts with that chain (:func:`residual_beyond_chain`). :func:`markov_stream` samples a
stream from the empirical chain of any order (the chapters' controls), and
:func:`lm_signatures` gathers the centred language-model targets of a set of tracked
tokens. The counting estimators these build on are :mod:`lib.data.signatures`.
"""

from __future__ import annotations

import operator
import warnings
from collections.abc import Sequence

import torch

from . import signatures as sig
from .signatures import (
    F64,
    _pair_conditional,
    _rows,
    _stream,
    skip_signature,
    window_signature,
    window_weights,
)

__all__ = [
    "markov_prediction",
    "residual_skip_signature",
    "chain_prediction",
    "residual_beyond_chain",
    "markov_window_prediction",
    "residual_window_signature",
    "markov_stream",
    "lm_signatures",
]


def _n_steps(k, name: str = "k") -> int:
    """``k`` as a positive int (numpy and 0-d tensor ints accepted), or a ValueError."""
    try:
        n = operator.index(k)
    except TypeError:
        n = 0
    if isinstance(k, bool) or n < 1:
        raise ValueError(f"{name} must be a positive integer, got {k!r}")
    return n


# Key spaces up to this size are counted with bincount (one pass) instead of sorted by
# torch.unique (n log n over every position of the stream); the results are the same.
_COUNT_KEYS = 1 << 25


def _unique(keys: torch.Tensor, size: int, inverse: bool = False):
    """``torch.unique(keys, return_counts=True)`` (or ``return_inverse=True``) of keys in
    ``[0, size)``: the sorted distinct keys and their counts (or each key's index among them)."""
    if size > _COUNT_KEYS:
        return torch.unique(keys, return_inverse=inverse, return_counts=not inverse)
    counts = torch.bincount(keys, minlength=size)
    present = counts > 0
    distinct = present.nonzero().squeeze(1)
    if inverse:
        return distinct, (torch.cumsum(present, 0) - 1)[keys]
    return distinct, counts[distinct]


def _pairs_stream(tokens, V: int) -> torch.Tensor:
    """A stream with at least one ``(x_t, x_{t+1})`` pair in each row."""
    x = _stream(tokens, V)
    if x.shape[-1] < 2:
        raise ValueError(
            f"a stream of {x.shape[-1]} token(s) per row has no (x_t, x_t+1) pair: pass >= 2 tokens"
        )
    return x


def _chain_transpose(x: torch.Tensor, V: int):
    r"""The empirical first-order chain of stream ``x``: ``(P^T, occurs, q)``.

    ``P^T`` is the transpose of :math:`\hat P` as a sparse COO ``(V, V)`` float64 tensor
    (transposed so that a step is sparse @ dense, which every backend supports);
    ``occurs[s]`` says whether ``s`` occurs in the stream; ``q`` is the distribution of
    successors (the tokens :math:`x_2 \dots x_T` of each row), the row of a token that
    occurs but has no successor. A token that never occurs gets a self-loop: its row is
    never reached from an occurring token, so this only keeps :math:`\hat P` stochastic.
    """
    first, second = x[..., :-1].reshape(-1), x[..., 1:].reshape(-1)
    dev = x.device
    occurs = torch.bincount(x.reshape(-1), minlength=V) > 0
    out_deg = torch.bincount(first, minlength=V).to(F64)
    succ = torch.bincount(second, minlength=V).to(F64)
    q = succ / succ.sum()
    keys, cnt = _unique(first * V + second, V * V)
    a, b = keys // V, keys % V
    sink = (occurs & (out_deg == 0)).nonzero().squeeze(1)
    support = (succ > 0).nonzero().squeeze(1)
    absent = (~occurs).nonzero().squeeze(1)
    sa, sb = sink.repeat_interleave(len(support)), support.repeat(len(sink))
    src = torch.cat([a, sa, absent])
    dst = torch.cat([b, sb, absent])
    val = torch.cat(
        [cnt.to(F64) / out_deg[a], q[sb], torch.ones(len(absent), dtype=F64, device=dev)]
    )
    PT = torch.sparse_coo_tensor(
        torch.stack([dst, src]), val, (V, V), check_invariants=False
    ).coalesce()
    return PT, occurs, q


def _markov_powers(x: torch.Tensor, V: int, rows: torch.Tensor, K: int):
    r"""Yield :math:`(\hat P^k)[\text{rows}]` for ``k = 1..K``, each ``(len(rows), V)``.

    The first is the next-token signature itself (bit for bit), with the rows of tokens
    that have no successor set to ``q`` (see :func:`_chain_transpose`); each further power
    is one sparse @ dense step :math:`R_{k+1}^\top = \hat P^\top R_k^\top`. Rows of tokens
    that never occur are NaN.
    """
    PT, occurs, q = _chain_transpose(x, V)
    R = _pair_conditional(x[..., :-1], x[..., 1:], V, rows)
    sink = occurs[rows] & torch.isnan(R).any(1)
    R = torch.where(sink[:, None], q, R)
    absent = ~occurs[rows]
    RT = torch.where(absent[:, None], 0.0, R).T.contiguous()  # (V, len(rows))
    nan = torch.tensor(float("nan"), dtype=F64, device=x.device)
    for k in range(1, K + 1):
        if k > 1:
            RT = torch.sparse.mm(PT, RT)
        yield torch.where(absent[:, None], nan, RT.T)


def markov_prediction(tokens, V: int, k: int, rows=None) -> torch.Tensor:
    r"""The ``k``-step prediction of the stream's empirical first-order chain, :math:`(\hat P^k)[\text{rows}]`.

    :math:`\hat P_{s\nu} = \phi^{\rm next}_s(\nu)` is the next-token transition matrix
    estimated from the stream (pairs never cross the rows of a ``(B, T)`` stream), so
    :math:`(\hat P^k)_{s\nu}` is what chaining ``k`` next-token predictions says about
    :math:`x_{t+k}` given :math:`x_t = s`; at ``k = 1`` it is
    :func:`lib.data.signatures.next_token_signature` exactly. Shape ``(len(rows), V)``.

    :math:`\hat P` is sparse (at most one entry per distinct pair of the stream), so ``V``
    may be ~10^4: the powers are computed as :math:`R_1 = \hat P[\text{rows}]`,
    :math:`R_{j+1} = R_j \hat P`, a dense ``len(rows) x V`` block times a sparse matrix,
    never a dense ``V x V``. A token that occurs but has no successor (only at the end of
    the stream, or of a row) has no row of its own; it gets the distribution of successors
    (the empirical unigram of :math:`x_2 \dots x_T`, the law :func:`markov_stream`
    restarts from), so the chain is stochastic and ``markov_stream(order=1)`` samples
    exactly this chain. Rows of tokens that never occur are NaN, as for the other estimators.
    """
    x = _pairs_stream(tokens, V)
    k = _n_steps(k)
    *_, last = _markov_powers(x, V, _rows(rows, V, x.device), k)
    return last


def residual_skip_signature(tokens, V: int, k: int, rows=None) -> torch.Tensor:
    r"""What the token at distance ``k`` tells beyond the first-order chain: :math:`\phi^{(k)} - \hat P^k`.

    Shape ``(len(rows), V)``; every row sums to 0, and at ``k = 1`` it is exactly 0.

    **Zero for a Markov stream.** If the stream is a first-order Markov chain with
    transition matrix :math:`P` (homogeneous; any initial law), the Markov property and
    Chapman–Kolmogorov give :math:`P(x_{t+k}=\nu \mid x_t=s) = (P^k)_{s\nu}` for every
    ``t``, so

    .. math:: E\Big[\sum_t 1[x_t=s]\,1[x_{t+k}=\nu]\Big] = (P^k)_{s\nu}\; E\Big[\sum_t 1[x_t=s]\Big]:

    the numerator of :math:`\phi^{(k)}_s(\nu)` has :math:`P^k` times the mean of its
    denominator. When the chain is stationary (ergodic), both counts grow like
    :math:`T\pi_s` and concentrate, so :math:`\phi^{(k)}_s \to (P^k)_s` with
    :math:`O(1/\sqrt{T\pi_s})` fluctuations (a ratio estimator: its mean is :math:`P^k` up to
    :math:`O(1/T)`). Likewise :math:`\hat P \to P` and :math:`\hat P^k \to P^k`, so the
    residual is zero up to sampling noise, shrinking like :math:`1/\sqrt T`.

    **What it measures otherwise.** Conditioning on the token at distance ``k-1``,

    .. math:: \phi^{(k)}_s(\nu) = \sum_u \phi^{(k-1)}_s(u)\,P(x_{t+k}=\nu \mid x_{t+k-1}=u, x_t=s),

    and the chain replaces the last factor by :math:`P_{u\nu}`. Writing
    :math:`D_j = \phi^{(j)} - \phi^{(j-1)} P` (the part of the distance-``j`` dependence on
    ``s`` not carried by the token just before; :math:`\phi^{(0)} = I`, :math:`D_1 = 0`),

    .. math:: \phi^{(k)} - P^k = (\phi^{(k)} - \phi^{(k-1)}P) + (\phi^{(k-1)} - P^{k-1})P
              = \sum_{j=2}^{k} D_j\, P^{k-j}:

    the direct effects of :math:`x_t` on each later token, propagated forward by the
    chain. Non-zero means the context at distance ``k`` adds information about
    :math:`x_{t+k}` beyond chaining next-token predictions (the stream is not first-order
    Markov); a pairwise statistic, so zero does not by itself prove Markov.
    """
    x = _pairs_stream(tokens, V)
    return skip_signature(x, V, k, rows) - markov_prediction(x, V, k, rows)


def chain_prediction(tokens, V: int, k: int, rows=None) -> torch.Tensor:
    r"""What the order-``(k-1)`` chain predicts for :math:`x_{t+k}` from the tokens in between,
    averaged over the occurrences of :math:`x_t = s`: :math:`E[\hat Q(x_{t+1..t+k-1}) \mid x_t=s]`.

    :math:`\hat Q(c)_\nu` is the stream's empirical order-``(k-1)`` chain: how often the
    context :math:`c` of ``k - 1`` tokens is followed by :math:`\nu`, over every window of
    ``k`` tokens (pairs never cross the rows of a ``(B, T)`` stream). Each position
    :math:`t` with :math:`x_t = s` and a token ``k`` places on contributes the chain's row of
    its own context :math:`x_{t+1..t+k-1}`, which always has a successor. Shape
    ``(len(rows), V)``; rows of tokens with no successor at distance ``k`` are NaN.

    Why this and not a power of a chain: a model that already predicts
    :math:`x_{t+k}` from the ``k - 1`` tokens before it leaves the error
    :math:`e_{x_{t+k}} - \hat Q(x_{t+1..t+k-1})`, and a token ``k`` places back receives that
    error through the value path; averaged over its occurrences, its drive is
    :math:`\phi^{(k)}_s - E[\hat Q(x_{t+1..t+k-1}) \mid x_t=s]`
    (:func:`residual_beyond_chain`). At ``k = 2`` the chain is the bigram chain and the
    average is :math:`\phi^{\rm next}_s\hat P`, which is :math:`(\hat P^2)_s` up to the
    stream's ends (:func:`markov_prediction`).
    """
    x = _stream(tokens, V)
    k = _n_steps(k)
    if not 2 <= k < x.shape[-1]:
        raise ValueError(
            f"k must be in [2, {x.shape[-1] - 1}] for a stream of length {x.shape[-1]}, got {k}"
        )
    if V ** (k - 1) >= 2**62:
        raise ValueError(f"V**(k-1) = {V}**{k - 1} overflows the int64 context keys: lower k")
    x = x.reshape(-1, x.shape[-1])
    T = x.shape[1]
    rows = _rows(rows, V, x.device)
    # Context keys of every window of k tokens (start j, context x[j..j+k-2], target x[j+k-1]).
    key = torch.zeros_like(x[:, : T - k + 1])
    for i in range(k - 1):
        key = key * V + x[:, i : T - k + 1 + i]
    ctx, ctx_id = _unique(key.reshape(-1), V ** (k - 1), inverse=True)
    ctx_id = ctx_id.view(key.shape)
    target = x[:, k - 1 :]
    n_ctx = len(ctx)
    cell, cnt = _unique(ctx_id.reshape(-1) * V + target.reshape(-1), n_ctx * V)
    c, nu = cell // V, cell % V
    per_ctx = torch.bincount(ctx_id.reshape(-1), minlength=n_ctx).to(F64)
    Q = torch.sparse_coo_tensor(  # Q-hat, (n_ctx, V)
        torch.stack([c, nu]), cnt.to(F64) / per_ctx[c], (n_ctx, V), check_invariants=False
    ).coalesce()
    # A[r, c]: how often a tracked token (row r) is followed by context c (sparse: a dense
    # block of tracked tokens x contexts is gigabytes for a large vocabulary).
    uniq, inv = torch.unique(rows, return_inverse=True)
    row_of = torch.full((V,), -1, dtype=torch.long, device=x.device)
    row_of[uniq] = torch.arange(len(uniq), device=x.device)
    src = row_of[x[:, : T - k]].reshape(-1)  # positions t with a token k places on
    after = ctx_id[:, 1:].reshape(-1)  # the context x[t+1..t+k-1]
    keep = src >= 0
    pair, n_pair = _unique(src[keep] * n_ctx + after[keep], len(uniq) * n_ctx)
    A = torch.sparse_coo_tensor(
        torch.stack([pair // n_ctx, pair % n_ctx]), n_pair.to(F64), (len(uniq), n_ctx),
        check_invariants=False,
    ).coalesce()  # fmt: skip
    n_row = torch.zeros(len(uniq), dtype=F64, device=x.device).index_add_(
        0, pair // n_ctx, n_pair.to(F64)
    )
    with warnings.catch_warnings():  # sparse @ sparse goes through CSR, "in beta" in torch
        warnings.simplefilter("ignore", UserWarning)
        out = torch.sparse.mm(A, Q).to_dense() / n_row[:, None]
    return out[inv]


def residual_beyond_chain(tokens, V: int, k: int, rows=None) -> torch.Tensor:
    r"""What the token ``k`` places back adds beyond the order-``(k-1)`` chain:
    :math:`\phi^{(k)}_s - E[\hat Q(x_{t+1..t+k-1}) \mid x_t=s]` (:func:`chain_prediction`).

    The drive a token ``k`` back receives once a model predicts with the order-``(k-1)``
    chain (the skip-3 target of the third stair is ``k = 3``). Every row sums to 0.
    **Zero for an order-(k-1) chain:** there :math:`P(x_{t+k}=\nu \mid x_{\le t+k-1}) =
    Q(x_{t+1..t+k-1})_\nu`, so each term :math:`1[x_{t+k}=\nu] - Q(\cdot)_\nu` has mean zero
    given the past, and the average over the occurrences of ``s`` vanishes up to
    :math:`O(1/\sqrt{n_s})` noise (tested on an order-2 stream at ``k = 3``). At ``k = 2`` it
    is :func:`residual_skip_signature` up to the stream's ends.
    """
    x = _stream(tokens, V)
    return skip_signature(x, V, k, rows) - chain_prediction(x, V, k, rows)


def markov_window_prediction(
    tokens, V: int, context_len: int, window: int | None = None, rows=None
) -> torch.Tensor:
    r"""The first-order chain's window signature :math:`\sum_{k=1}^W \omega_k (\hat P^k)[\text{rows}]`.

    :math:`\omega` from :func:`window_weights`; the powers from one pass of
    :func:`markov_prediction`'s iteration. Shape ``(len(rows), V)``.
    """
    x = _pairs_stream(tokens, V)
    w = window_weights(context_len, window, device=x.device)
    powers = _markov_powers(x, V, _rows(rows, V, x.device), len(w))
    return sum(wk * R for wk, R in zip(w, powers, strict=True))


def residual_window_signature(
    tokens, V: int, context_len: int, window: int | None = None, rows=None
) -> torch.Tensor:
    r"""Residual window signature :math:`\sum_{k=1}^W \omega_k (\phi^{(k)} - \hat P^k)`.

    The causal window signature (:func:`window_signature`) minus what the first-order
    chain predicts for it (:func:`markov_window_prediction`): what the whole context window
    adds beyond the next-token statistics (:func:`residual_skip_signature` for why it is
    zero up to noise on a Markov stream). Shape ``(len(rows), V)``; NaN where
    :func:`window_signature` is.
    """
    x = _pairs_stream(tokens, V)
    return window_signature(x, V, context_len, window, rows) - markov_window_prediction(
        x, V, context_len, window, rows
    )


def markov_stream(
    tokens, V: int, order: int, n_tokens: int, seed: int, n_chains: int = 256
) -> torch.Tensor:
    r"""A stream sampled from the empirical order-``order`` Markov chain fitted to ``tokens``.

    ``order = 1`` is the bigram chain, ``order = 2`` the trigram chain (any order with
    ``V**order < 2**62`` works): the next token is drawn from the successors of the
    current context :math:`(x_{t-m+1}, \dots, x_t)` in the corpus, in proportion to their
    counts. No ``V^m x V`` table is built: the corpus positions are sorted by their context
    key (:math:`x_{t-1}`, or :math:`x_{t-2} V + x_{t-1}`, ...), and each step of
    ``n_chains`` chains in parallel picks a uniformly random occurrence of its context
    (``torch.searchsorted`` on the sorted keys) and takes its successor. A chain whose
    context never occurs with a successor (only at the end of the corpus) restarts at a
    uniformly random corpus position: it emits that position's token and continues from
    the corpus's own context there. Each chain starts the same way, so its first token
    follows the successor distribution. The vocabulary is the corpus's own; pairs never
    cross the rows of a ``(B, T)`` corpus.

    Layout: chain ``c`` is ``out[c*L : (c+1)*L]`` with ``L = ceil(n_tokens / n_chains)``
    (the last chain cut short), so ``out.view(n_chains, L)`` gives the chains when
    ``n_tokens`` is a multiple of ``n_chains``. The chains are independent, so a 1-D use
    of the stream counts ``n_chains - 1`` junction pairs (the end of one chain, the start
    of the next) that are not from the chain; pass the ``(n_chains, L)`` view to the
    estimators to avoid them. 1M tokens take ~0.5-1 s on one CPU core. Seeded
    with a ``torch.Generator`` (same seed, same stream, on any device); returns a 1-D long
    tensor of ``n_tokens`` on the corpus's device.
    """
    x = _stream(tokens, V)
    m, n_tokens, n_chains = (
        _n_steps(order, "order"),
        _n_steps(n_tokens, "n_tokens"),
        _n_steps(n_chains, "n_chains"),
    )
    if V**m >= 2**62:
        raise ValueError(f"V**order = {V}**{m} overflows the int64 context keys: lower the order")
    x = x.reshape(-1, x.shape[-1])
    T = x.shape[1]
    if T <= m:
        raise ValueError(
            f"a corpus of {T} token(s) per row has no context of {m} with a successor: "
            "pass a longer corpus or a lower order"
        )
    key = torch.zeros_like(x[:, m:])
    for i in range(m):
        key = key * V + x[:, i : T - m + i]
    key, perm = torch.sort(key.reshape(-1))
    succ = x[:, m:].reshape(-1)[perm]
    N, dev = key.numel(), x.device
    L = -(-n_tokens // n_chains)
    gen = torch.Generator().manual_seed(int(seed))
    u = torch.rand((L, n_chains), generator=gen, dtype=F64).to(dev)
    out = torch.empty((L, n_chains), dtype=torch.long, device=dev)
    mod = V ** (m - 1)
    restart = (u * N).long().clamp_max(N - 1)  # a uniformly random corpus position
    # The distinct contexts, where each starts in the sorted keys and how often it occurs: a
    # step searches this short table, not every corpus position.
    contexts, count = torch.unique_consecutive(key, return_counts=True)
    start = torch.cumsum(count, 0) - count
    n_ctx = contexts.numel()
    ctx = torch.zeros(n_chains, dtype=torch.long, device=dev)
    for step in range(L):
        j = restart[step]  # step 0: every chain starts as a restart
        if step:
            at = torch.searchsorted(contexts, ctx).clamp_max(n_ctx - 1)
            cnt = torch.where(contexts[at] == ctx, count[at], 0)
            j = torch.where(cnt > 0, start[at] + torch.minimum((u[step] * cnt).long(), cnt - 1), j)
        out[step] = succ[j]
        ctx = (key[j] % mod) * V + out[step]  # the context after the emitted token
    return out.T.reshape(-1)[:n_tokens]


def lm_signatures(
    stream,
    V: int,
    tracked: Sequence[int],
    context_len: int,
    skip_offsets: Sequence[int] = (2, 3, 4),
    residual: bool = False,
    window: bool = True,
) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    r"""The centred language-model signatures of the ``tracked`` tokens of a token stream.

    Returns ``(phi, pre)``: ``phi`` maps ``"next"``, ``"skip{k}"`` for each ``k`` in
    ``skip_offsets`` and ``"window"`` (the causal window signature of a context of
    ``context_len``) to the rows of the tracked tokens, the targets of the embedding;
    ``pre`` maps ``"previous"`` to :math:`\varphi^{\rm pre}`, the target of the
    unembedding. Every row is centred on the uniform distribution (:func:`lib.data.signatures.centre`).

    With ``residual=True``, ``phi`` also has ``"res_skip{k}"`` for each ``k`` in
    ``skip_offsets`` and ``"res_window"``: the same signatures minus what the stream's
    first-order chain predicts for them, :math:`\phi^{(k)} - \hat P^k`
    (:func:`lib.data.chains.residual_skip_signature`,
    :func:`lib.data.chains.residual_window_signature`), the part a second stair has to
    learn beyond chaining next-token predictions. Their rows sum to zero, so the uniform
    centring leaves them unchanged; :func:`lib.measure.lm.alignment_curves` removes the mean row anyway.
    ``window=False`` leaves out the window signatures (``context_len`` skip signatures
    each, the slow part on a long stream).
    """
    phi = {"next": sig.next_token_signature(stream, V, rows=tracked)}
    for k in skip_offsets:
        phi[f"skip{k}"] = sig.skip_signature(stream, V, k, rows=tracked)
    if window:
        phi["window"] = sig.window_signature(stream, V, context_len, rows=tracked)
    if residual:
        for k in skip_offsets:
            markov = markov_prediction(stream, V, k, rows=tracked)
            phi[f"res_skip{k}"] = phi[f"skip{k}"] - markov
        if window:
            markov = markov_window_prediction(stream, V, context_len, rows=tracked)
            phi["res_window"] = phi["window"] - markov
    pre = {"previous": sig.previous_token_signature(stream, V, rows=tracked)}
    return {n: sig.centre(p) for n, p in phi.items()}, {n: sig.centre(p) for n, p in pre.items()}

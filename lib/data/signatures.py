r"""Probability signatures, estimated by counting on the training set.

Notation (Chapter 1; the symbols of Yao & Xu, *Probability Signature*, arXiv:2509.20124,
and Wang et al. 2025 on modular addition): a dataset :math:`\{(X_n, y_n)\}_{n=1}^N` with
:math:`X_n = (x_{n,1}, \dots, x_{n,L})`, token ids in ``[0, V)`` and labels in
``[0, n_labels)``; :math:`c_s(X) = \#\{i : x_i = s\}`. The counts :math:`c_s` are
the weights the gradient gives each sample, because every occurrence of ``s``
contributes to the gradient of its embedding row.

Every estimator is vectorized (one matmul or one ``bincount``), works in float64,
and returns a tensor on the device of its input. A row whose conditioning event
never occurs (a token absent from the data) is all-NaN, never silently zero, so a
caller has to choose its token subset explicitly.

Here: the label signatures of sequence tasks (orders 0 and 1, their centring) and the
pair signatures of a token stream (next token, skip-k, previous token, the causal window).
What a stream's empirical Markov chains predict, and what lies beyond them, is
:mod:`lib.data.chains`.
"""

from __future__ import annotations

import torch

F64 = torch.float64
# Pairs bincounted at once in joint_signature: bounds the index tensor to ~128 MiB.
_PAIR_CHUNK = 1 << 24


def _ids(t, name: str, V: int, dim: int | tuple[int, ...]) -> torch.Tensor:
    """Check that ``t`` is an integer tensor of rank ``dim`` with values in ``[0, V)``."""
    t = torch.as_tensor(t)
    dims = (dim,) if isinstance(dim, int) else dim
    if t.dim() not in dims:
        raise ValueError(
            f"{name} must have {' or '.join(map(str, dims))} dims, got shape {tuple(t.shape)}"
        )
    if t.is_floating_point() or t.is_complex() or t.dtype == torch.bool:
        raise ValueError(f"{name} must hold integer ids, got dtype {t.dtype}")
    if t.numel() and (int(t.min()) < 0 or int(t.max()) >= V):
        raise ValueError(f"{name} has ids in [{int(t.min())}, {int(t.max())}], outside [0, {V})")
    return t.long()


def _data(X, y, V: int, n_labels: int | None = None):
    X = _ids(X, "X", V, 2)
    if y is None:
        return X, None
    y = _ids(y, "y", n_labels, 1).to(X.device)
    if y.shape[0] != X.shape[0]:
        raise ValueError(f"X has {X.shape[0]} samples but y has {y.shape[0]} labels")
    return X, y


def _rows(rows, V: int, device) -> torch.Tensor:
    """Requested row ids (default: all of ``range(V)``) as a 1-D long tensor."""
    if rows is None:
        return torch.arange(V, device=device)
    return _ids(rows, "rows/tokens", V, (0, 1)).reshape(-1).to(device)


def token_counts(X, V: int) -> torch.Tensor:
    r"""Count matrix :math:`C_{ns} = c_s(X_n)`, shape ``(N, V)``, in float64, from validated
    token ids (a model counts the same way: :func:`lib.training.layers.token_counts`)."""
    X, _ = _data(X, None, V)
    C = torch.zeros((*X.shape[:-1], V), dtype=F64, device=X.device)
    return C.scatter_add_(-1, X, torch.ones(X.shape, dtype=F64, device=X.device))


def token_rate(X, V: int) -> torch.Tensor:
    r"""Token rate :math:`r_s = \frac1N \sum_n c_s(X_n)`, shape ``(V,)``."""
    return token_counts(X, V).mean(0)


def label_signature(X, y, V: int, n_labels: int) -> torch.Tensor:
    r"""Order-0 signature (Chapter 1, ``eq-sig-orders``), shape ``(V, n_labels)``:

    .. math:: \phi^y_s(\nu) = \frac{\sum_n c_s(X_n) 1[y_n=\nu]}{\sum_n c_s(X_n)}
              \approx P(y=\nu \mid s \in X).

    Rows of tokens that never occur are NaN.
    """
    X, y = _data(X, y, V, n_labels)
    C = token_counts(X, V)
    Y = torch.nn.functional.one_hot(y, n_labels).to(F64)
    return (C.T @ Y) / C.sum(0)[:, None]


def contextual_signature(X, V: int) -> torch.Tensor:
    r"""Co-occurrence signature (Chapter 1, ``eq-sig-orders``), shape ``(V, V)``:

    .. math:: \phi^X_s(\mu) = \frac{\sum_n c_s(X_n) c_\mu(X_n)}{\sum_n c_s(X_n)},

    the expected count of :math:`\mu` in a sequence containing ``s`` (weighted by
    :math:`c_s`), including :math:`\mu = s`. Rows of absent tokens are NaN.
    """
    C = token_counts(X, V)
    return (C.T @ C) / C.sum(0)[:, None]


def joint_signature(X, y, V: int, n_labels: int, tokens=None) -> torch.Tensor:
    r"""Order-1 (context token, label) signature (Chapter 1, ``eq-sig-joint``) for rows
    ``s in tokens``, shape ``(len(tokens), V, n_labels)``:

    .. math:: \phi^{X|y}_s(\mu,\nu) = \frac{\sum_n c_s(X_n) c_\mu(X_n) 1[y_n=\nu]}{\sum_n c_s(X_n)}.

    Computed with one bincount over all position pairs ``(i, j)`` of each sequence
    (``i = j`` included): summing :math:`1[x_i=s]1[x_j=\mu]` over pairs gives
    :math:`c_s c_\mu`. Only pairs whose first token is a requested row are kept,
    so the cost is :math:`O(N L^2)` and the output :math:`O(|T| V n)`.
    Summing over :math:`\nu` gives back :math:`\phi^X_s(\mu)`. Rows of absent tokens are NaN.
    """
    X, y = _data(X, y, V, n_labels)
    rows = _rows(tokens, V, X.device)
    uniq, inv = torch.unique(rows, return_inverse=True)  # duplicates in `tokens` are allowed
    R, L = len(uniq), X.shape[1]
    row_of = torch.full((V,), -1, dtype=torch.long, device=X.device)
    row_of[uniq] = torch.arange(R, device=X.device)
    num = torch.zeros(R * V * n_labels, dtype=F64, device=X.device)
    step = max(1, _PAIR_CHUNK // max(1, L * L))  # samples per chunk
    for start in range(0, X.shape[0], step):  # chunks bound memory; not a loop over samples
        Xc, yc = X[start : start + step], y[start : start + step]
        a = row_of[Xc][:, :, None].expand(-1, L, L)  # row of x_i
        b = Xc[:, None, :].expand(-1, L, L)  # x_j
        lab = yc[:, None, None].expand(-1, L, L)
        keep = a >= 0
        idx = (a[keep] * V + b[keep]) * n_labels + lab[keep]
        num += torch.bincount(idx, minlength=R * V * n_labels).to(F64)
    den = token_counts(X, V).sum(0)[uniq]
    return (num.view(R, V, n_labels) / den[:, None, None])[inv]


def label_marginal(X, y, V: int, n_labels: int) -> torch.Tensor:
    r"""Label marginal as the gradient weights it, shape ``(n_labels,)``:

    .. math:: \bar p = \frac{\sum_s r_s \phi^y_s}{\sum_s r_s}
              = \frac{\sum_n |X_n| 1[y_n=\nu]}{\sum_n |X_n|},

    i.e. the label frequency (all sequences have the same length ``L``). Absent
    tokens have :math:`r_s = 0` and drop out instead of propagating NaN.
    """
    X, y = _data(X, y, V, n_labels)
    C = token_counts(X, V)
    Y = torch.nn.functional.one_hot(y, n_labels).to(F64)
    return (C.T @ Y).sum(0) / C.sum()


def label_signature_gap(X, y, V: int, n_labels: int, pairs) -> float:
    r"""Largest difference between the label signatures of token pairs,
    :math:`\max_{(a,b)}\max_\nu|\phi^y_a(\nu)-\phi^y_b(\nu)|`: zero iff every pair is
    identical at order 0.

    ``pairs`` is a sequence of ``(a, b)`` token ids.
    """
    phi = label_signature(X, y, V, n_labels)
    a, b = (torch.tensor(t, device=phi.device) for t in zip(*pairs, strict=True))
    return float((phi[a] - phi[b]).abs().max())


def marginal_deviation(X, y, V: int, n_labels: int, tokens) -> float:
    r"""Largest deviation of the tokens' label signatures from the label marginal,
    :math:`\max_s\max_\nu|\phi^y_s(\nu)-\bar p(\nu)|` over ``tokens``: zero iff each of them
    carries the marginal itself (as a token present in every sequence does)."""
    phi = label_signature(X, y, V, n_labels)[list(tokens)]
    return float((phi - label_marginal(X, y, V, n_labels)).abs().max())


def centre(phi: torch.Tensor, how: str = "uniform", marginal=None) -> torch.Tensor:
    r"""Centre a signature on its last (label) axis: :math:`\phi - (\sum_\nu \phi(\nu))\, c`.

    ``c`` is the uniform distribution :math:`u = 1/n` (``how="uniform"``) or the label
    marginal :math:`\bar p` (``how="marginal"``, pass ``marginal`` from
    :func:`label_marginal`). For a distribution row (:math:`\phi^y_s`, mass 1) this
    is :math:`\phi_s - c`; for :math:`\phi^{X|y}_s(\mu,\cdot)`, whose mass is
    :math:`\phi^X_s(\mu)`, it is the centred joint signature
    :math:`\phi^{X|y}_s(\mu,\nu) - \phi^X_s(\mu) c_\nu`.
    """
    phi = torch.as_tensor(phi).to(F64)
    n = phi.shape[-1]
    if how == "uniform":
        c = torch.full((n,), 1.0 / n, dtype=F64, device=phi.device)
    elif how == "marginal":
        if marginal is None:
            raise ValueError('centre(how="marginal") needs the label marginal p̄ (label_marginal)')
        c = torch.as_tensor(marginal).to(device=phi.device, dtype=F64)
        if c.shape != (n,):
            raise ValueError(f"marginal has shape {tuple(c.shape)}, expected ({n},)")
    else:
        raise ValueError(f'how must be "uniform" or "marginal", got {how!r}')
    return phi - phi.sum(-1, keepdim=True) * c


def centred_joint_signature(
    X, y, V: int, n_labels: int, tokens=None, how: str = "uniform", marginal=None
) -> torch.Tensor:
    r"""Centred order-1 signature :math:`\tilde\phi^{X|y}_s(\mu,\nu) = \phi^{X|y}_s(\mu,\nu) - \phi^X_s(\mu)\, c_\nu`.

    ``c`` is uniform (``how="uniform"``) or the label marginal (``how="marginal"``;
    computed from the data when ``marginal`` is None). Shape ``(len(tokens), V, n_labels)``.
    """
    if how == "marginal" and marginal is None:
        marginal = label_marginal(X, y, V, n_labels)
    return centre(joint_signature(X, y, V, n_labels, tokens), how, marginal)


def joint_interaction(X, y, V: int, n_labels: int, tokens=None) -> torch.Tensor:
    r"""What order 1 adds beyond orders 0: :math:`\phi^{X|y}_s(\mu,\nu) - \phi^X_s(\mu)\,\phi^y_s(\nu)`.

    Zero when, given ``s``, the label is independent of which other tokens are present;
    so tokens whose joint signatures differ only through their label or contextual
    signatures have identical interactions. Shape ``(len(tokens), V, n_labels)``.
    """
    rows = _rows(tokens, V, torch.as_tensor(X).device)
    joint = joint_signature(X, y, V, n_labels, rows)
    ctx = contextual_signature(X, V)[rows]
    lab = label_signature(X, y, V, n_labels)[rows]
    return joint - ctx[:, :, None] * lab[:, None, :]


def traceback_signature(X, y, V: int, n_labels: int) -> torch.Tensor:
    r"""Trace-back (label-conditioned input) signature, shape ``(n_labels, V)``:

    .. math:: \psi^X_\nu(s) = \frac{\sum_n 1[y_n=\nu] c_s(X_n)}{\sum_n 1[y_n=\nu]},

    the expected count of ``s`` in a sequence with label :math:`\nu`. Rows of absent labels are NaN.
    """
    X, y = _data(X, y, V, n_labels)
    Y = torch.nn.functional.one_hot(y, n_labels).to(F64)
    return (Y.T @ token_counts(X, V)) / Y.sum(0)[:, None]


# ---------------------------------------------------------------- language modelling


def _stream(tokens, V: int) -> torch.Tensor:
    """A token stream ``(T,)``, or ``(B, T)`` for B separate contexts (pairs never cross rows)."""
    return _ids(tokens, "tokens", V, (1, 2))


# Vocabularies up to this many (first, second) pairs count every pair in one table.
_FULL_TABLE = 1 << 22


def _pair_conditional(first: torch.Tensor, second: torch.Tensor, V: int, rows) -> torch.Tensor:
    r""":math:`P(\text{second}=\nu \mid \text{first}=s)` for ``s in rows``, from aligned id tensors."""
    rows = _rows(rows, V, first.device)
    if V * V <= _FULL_TABLE:  # one pass over every pair, no masking: the same counts
        counts = torch.bincount(first.reshape(-1) * V + second.reshape(-1), minlength=V * V)
        counts = counts.to(F64).view(V, V)[rows]
        return counts / counts.sum(1, keepdim=True)
    uniq, inv = torch.unique(rows, return_inverse=True)
    row_of = torch.full((V,), -1, dtype=torch.long, device=first.device)
    row_of[uniq] = torch.arange(len(uniq), device=first.device)
    a, b = row_of[first.reshape(-1)], second.reshape(-1)
    keep = a >= 0
    counts = torch.bincount(a[keep] * V + b[keep], minlength=len(uniq) * V).to(F64).view(-1, V)
    return (counts / counts.sum(1, keepdim=True))[inv]


def skip_signature(tokens, V: int, k: int, rows=None) -> torch.Tensor:
    r"""Skip-``k`` signature :math:`\phi^{(k)}_s(\nu) = P(x_{t+k}=\nu \mid x_t=s)`, shape ``(len(rows), V)``.

    Estimated from all pairs ``(x_t, x_{t+k})`` in the stream; ``k=1`` is the
    next-token signature. Rows of tokens with no successor at distance ``k`` are NaN.
    """
    x = _stream(tokens, V)
    if not 1 <= k < x.shape[-1]:
        raise ValueError(
            f"k must be in [1, {x.shape[-1] - 1}] for a stream of length {x.shape[-1]}, got {k}"
        )
    return _pair_conditional(x[..., :-k], x[..., k:], V, rows)


def next_token_signature(tokens, V: int, rows=None) -> torch.Tensor:
    r"""Next-token signature :math:`\phi^{\rm next}_s(\nu) = P(x_{t+1}=\nu \mid x_t=s)`, shape ``(len(rows), V)``."""
    return skip_signature(tokens, V, 1, rows)


def previous_token_signature(tokens, V: int, rows=None) -> torch.Tensor:
    r"""Previous-token signature :math:`\varphi^{\rm pre}_\nu(s) = P(x_t=s \mid x_{t+1}=\nu)`.

    Indexed by the *next* token: row :math:`\nu \in` ``rows``, column ``s``; shape ``(len(rows), V)``.
    """
    x = _stream(tokens, V)
    return _pair_conditional(x[..., 1:], x[..., :-1], V, rows)


def window_weights(context_len: int, window: int | None = None, device=None) -> torch.Tensor:
    r"""Weights :math:`\omega_k`, ``k = 1..W``, that uniform causal attention gives offset ``k``.

    In a context of length :math:`T` the prediction of :math:`x_{t+1}` at query
    position :math:`t` (1-indexed) attends uniformly, with weight :math:`1/t`, to
    positions :math:`j = 1..t`; the key at :math:`j` sits at offset
    :math:`k = t+1-j` from the target. Averaging over the :math:`T` query positions,

    .. math:: \omega_k = \frac1T \sum_{t=k}^{T} \frac1t
                       = \frac1T \sum_{j=1}^{T-k+1} \frac{1}{j+k-1}
                       = \frac{H_T - H_{k-1}}{T},

    (:math:`H` the harmonic numbers), which already sums to 1 over ``k = 1..T``. We
    keep ``k <= window`` (default ``T``) and renormalise to sum 1.
    """
    T = int(context_len)
    W = T if window is None else int(window)
    if T < 1 or not 1 <= W <= T:
        raise ValueError(
            f"need 1 <= window <= context_len, got window={window}, context_len={context_len}"
        )
    H = torch.cat(
        [torch.zeros(1, dtype=F64), torch.cumsum(1.0 / torch.arange(1, T + 1, dtype=F64), 0)]
    )
    w = (H[T] - H[:W]) / T  # H[k-1] for k = 1..W
    return (w / w.sum()).to(device) if device is not None else w / w.sum()


def window_signature(
    tokens, V: int, context_len: int, window: int | None = None, rows=None
) -> torch.Tensor:
    r"""Causal bag-of-context signature :math:`\bar\phi^W_s = \sum_{k=1}^W \omega_k \phi^{(k)}_s`.

    :math:`\omega` from :func:`window_weights`. Shape ``(len(rows), V)``. A row is NaN
    if the token has no successor at some distance ``k <= W``.
    """
    x = _stream(tokens, V)
    w = window_weights(context_len, window, device=x.device)
    return sum(w[k - 1] * skip_signature(x, V, k, rows) for k in range(1, len(w) + 1))


# ---------------------------------------------------------------- beyond the Markov chain


# ---------------------------------------------------------------- synthetic null streams


__all__ = [
    "token_counts",
    "token_rate",
    "label_signature",
    "contextual_signature",
    "joint_signature",
    "centred_joint_signature",
    "traceback_signature",
    "label_marginal",
    "label_signature_gap",
    "marginal_deviation",
    "centre",
    "next_token_signature",
    "skip_signature",
    "previous_token_signature",
    "window_weights",
    "window_signature",
    "frequent_in_both_halves",
    "frequent_in_every_stream",
]


# ---------------------------------------------------------------- which tokens to track


def frequent_in_both_halves(stream, halves, V: int, top: int, before: int = 1, after: int = 3):
    """The ``top`` most frequent tokens of ``stream`` that occur in both ``halves`` with
    ``before`` tokens before them and ``after`` after (the offsets a target reads): a token
    of one half only has no split-half estimate. A list of token ids, most frequent first."""
    counts = torch.bincount(stream, minlength=V)
    order = torch.argsort(counts, descending=True)
    both = (torch.bincount(halves[0][before:-after], minlength=V) > 0) & (
        torch.bincount(halves[1][before:-after], minlength=V) > 0
    )
    return order[both[order]][:top].tolist()


def frequent_in_every_stream(streams, top: int, L: int, min_count: int):
    """Tokens to track over several streams of one tokenizer (a text and its two halves),
    on compact ids: the token ids that occur in any stream (``used``), each stream in compact
    ids (``parts``), and the ``top`` compact ids most frequent in the first stream among
    those seen ``min_count`` times in every stream, each stream counted without its last
    ``L`` tokens (so that a tracked token has successors at every offset a target reads).
    Returns ``(used, parts, top ids)``."""
    used, compact = torch.unique(torch.cat(streams), return_inverse=True)
    parts = torch.split(compact, [len(s) for s in streams])
    counts = torch.stack([torch.bincount(p[:-L], minlength=len(used)) for p in parts])
    eligible = torch.nonzero((counts >= min_count).all(0)).flatten()
    return used, parts, eligible[torch.argsort(counts[0, eligible], descending=True)[:top]]

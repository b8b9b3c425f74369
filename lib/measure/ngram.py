r"""The n-gram picture of a language-model run: how close the model passes to each k-gram.

After Belrose et al., *Neural networks learn statistics of increasing complexity* (ICML
2024; EleutherAI/features-across-time, ``scripts/inference/ngrams.py`` and
``scripts/script_utils/divergences.py``): the k-gram predictors are counted from the
training stream (:func:`kgram_models`), and at every logged step the model is read against
each of them on a fixed set of windows (:func:`ngram_callbacks`):

* ``kl{k}`` is :math:`\mathrm{KL}(p_k\,\|\,q_\theta)`, the k-gram's distribution first and
  the model's second, averaged over every position of the windows, in nats (their
  ``kl_divergence_from_logits(ngram_logprobs, logits)``; a token the k-gram never
  predicts adds nothing). At position ``t`` the k-gram reads the ``k - 1`` tokens ending
  at ``t``, the prefix the model predicts ``t + 1`` from; a position with a shorter prefix
  uses the highest order it has.
* ``chain_loss{o}`` is the model's cross-entropy on windows sampled from a chain fitted
  to the text (their ``mean_{n}_gram_loss`` on n-gram-sampled sequences).

Smoothing (``smoothing=``): ``"none"`` (default) is the maximum-likelihood k-gram of their
main figures; a context the stream never shows backs off to the longest suffix it does
show (their unsmoothed KL counts such a position as 0; backing off keeps every position
informative). ``"kn"`` is their smoothed variant, Tokengrams' interpolated absolute
discounting: :math:`p_k(w|c)=\max(n_{cw}-\delta,0)/n_c+\delta\,u_c/n_c\;p_{k-1}(w|c')`
(``u_c`` the distinct successors of ``c``, ``c'`` its suffix), the unigram interpolated
with an additive one, :math:`\delta=0.5` above the unigram and :math:`n_1/(n_1+2n_2)` for it.

:func:`nearest_steps` reads, per instance, the logged step where each ``kl{k}`` curve is
lowest, and :func:`lag` the steps between two orders' nearest passes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np
import torch

from ..training.engine import cached_callbacks, cross_entropy

__all__ = [
    "KGram",
    "kgram_models",
    "kgram_log_probs",
    "kl_to_kgrams",
    "ngram_callbacks",
    "nearest_steps",
    "lag",
]

SMOOTHINGS = ("none", "kn")


@dataclass(frozen=True, eq=False)
class KGram:
    """A k-gram predictor over the contexts its stream shows.

    ``keys`` (n_ctx,) are the sorted context keys (the ``order - 1`` previous tokens read as
    a base-``V`` number, oldest first; one key 0 for the unigram), ``counts`` (n_ctx, V) how
    often each token follows each context, ``logp`` (n_ctx, V) the predictor's
    log-probabilities, and ``lower`` the order below (what an unseen context backs off to).
    """

    order: int
    V: int
    keys: np.ndarray
    counts: np.ndarray
    logp: torch.Tensor
    lower: KGram | None
    smoothing: str


def _rows(stream) -> np.ndarray:
    """The stream as an int64 (R, T) array: a 1-D stream is one row; rows never join."""
    x = stream.detach().cpu().numpy() if torch.is_tensor(stream) else np.asarray(stream)
    x = x.astype(np.int64)
    return x.reshape(1, -1) if x.ndim == 1 else x.reshape(-1, x.shape[-1])


def _keys(x: np.ndarray, m: int, V: int) -> np.ndarray:
    """Base-``V`` keys of every run of ``m`` tokens along the last axis: (..., T - m + 1)."""
    T = x.shape[-1]
    key = np.zeros(x.shape[:-1] + (T - m + 1,), dtype=np.int64)
    for i in range(m):
        key = key * V + x[..., i : T - m + 1 + i]
    return key


def _count(x: np.ndarray, m: int, V: int) -> tuple[np.ndarray, np.ndarray]:
    """The distinct contexts of length ``m`` followed by a token, and their (n_ctx, V) counts."""
    ctx = _keys(x[:, :-1], m, V) if m else np.zeros_like(x)
    pair = (ctx[:, : x.shape[1] - m] * V + x[:, m:]).reshape(-1)
    u, n = np.unique(pair, return_counts=True)
    keys, row = np.unique(u // V, return_inverse=True)
    counts = np.zeros((len(keys), V), dtype=np.int64)
    counts[row, u % V] = n
    return keys, counts


def _interpolate(counts: np.ndarray, delta: float, below: np.ndarray) -> np.ndarray:
    """Interpolated absolute discounting: each row's discounted counts plus the mass they
    give up, ``delta * u_c / n_c``, spread by the lower-order distribution ``below``."""
    n = counts.sum(1, keepdims=True).astype(np.float64)
    used = (counts > 0).sum(1, keepdims=True)
    return np.maximum(counts - delta, 0.0) / n + delta * used / n * below


def kgram_models(
    stream, V: int, orders=(1, 2, 3, 4), smoothing: str = "none", discount: float = 0.5,
    eps: float = 1e-9,
) -> dict[int, KGram]:  # fmt: skip
    """The k-gram predictors of ``stream`` (1-D, or (R, T) rows that never join), one per
    order of ``orders`` (1: unigram, 2: bigram, ...), counted with numpy over the contexts
    the stream shows. ``smoothing`` is ``"none"`` or ``"kn"`` (the module docstring);
    ``discount`` is the ``"kn"`` discount above the unigram and ``eps`` its additive
    unigram's pseudo-count."""
    if smoothing not in SMOOTHINGS:
        raise ValueError(f"smoothing must be one of {SMOOTHINGS}, got {smoothing!r}")
    orders = sorted({int(k) for k in orders})
    if not orders or orders[0] < 1:
        raise ValueError(f"orders must be positive integers, got {orders}")
    if V ** (orders[-1] - 1) >= 2**62:
        raise ValueError(f"V**(order - 1) = {V}**{orders[-1] - 1} overflows the int64 keys")
    x = _rows(stream)
    if x.size and (x.min() < 0 or x.max() >= V):
        raise ValueError(f"stream has tokens outside [0, {V})")
    built: dict[int, KGram] = {}
    lower, p_lower = None, None
    for k in range(1, orders[-1] + 1):
        if x.shape[1] < k:
            raise ValueError(f"rows of {x.shape[1]} tokens have no {k}-gram: lower the order")
        keys, counts = _count(x, k - 1, V)
        n = counts.sum(1, keepdims=True).astype(np.float64)
        if smoothing == "none":
            p = counts / n
        elif k == 1:
            n1, n2 = (counts == 1).sum(), (counts == 2).sum()
            d1 = 1.0 if n1 == 0 or n2 == 0 else n1 / (n1 + 2.0 * n2)
            p = _interpolate(counts, d1, (counts + eps) / (n + eps * V))
        else:
            suffix = keys % V ** (k - 2)
            at = np.searchsorted(lower.keys, suffix)  # every suffix of a seen context is seen
            p = _interpolate(counts, discount, p_lower[at])
        with np.errstate(divide="ignore"):
            logp = torch.from_numpy(np.log(p)).float()
        lower = built[k] = KGram(k, V, keys, counts, logp, lower, smoothing)
        p_lower = p
    return {k: built[k] for k in orders}


def kgram_log_probs(model: KGram, X) -> torch.Tensor:
    """The k-gram's log-probabilities of the token after each position of ``X`` (..., L):
    (..., L, V), float32. Position ``t`` reads the ``order - 1`` tokens ending at ``t``; a
    position with fewer before it, or an unseen context, takes the order below's row."""
    X = torch.as_tensor(X)
    x = _rows(X)
    N, L = x.shape
    if model.lower is None:
        out = model.logp[0].expand(N, L, model.V).clone()
    else:
        out = kgram_log_probs(model.lower, x)
        m = model.order - 1
        if L >= m:
            key = _keys(x, m, model.V)  # position t = m - 1 + column
            at = np.minimum(np.searchsorted(model.keys, key), len(model.keys) - 1)
            seen = model.keys[at] == key
            r, c = np.nonzero(seen)
            out[r, c + m - 1] = model.logp[at[r, c]]
    return out.reshape(*X.shape, model.V)


def _kl(lp: torch.Tensor, lq: torch.Tensor) -> torch.Tensor:
    """KL(p || q) along the last axis from log-probabilities; a token with p = 0 adds 0."""
    p = lp.exp()
    return torch.where(p > 0, p * (lp - lq), torch.zeros_like(p)).sum(-1)


def kl_to_kgrams(logits: torch.Tensor, X, models: Mapping[int, KGram], targets=None) -> dict:
    """Per instance, the mean over positions of KL(k-gram || model) in nats, ``{k: (K,)}``.

    ``logits`` (K, B, L, V) (or (B, L, V), one instance) are the model's on windows ``X``
    ((B, L) shared, or (K, B, L)); ``targets`` ``{k: kgram_log_probs(models[k], X)}`` may be
    passed when ``X`` is fixed, so that the k-gram rows are looked up once.
    """
    if logits.dim() == 3:
        logits = logits[None]
    lq = torch.log_softmax(logits, -1)
    out = {}
    for k, m in models.items():
        lp = (targets or {}).get(k)
        lp = kgram_log_probs(m, X) if lp is None else lp
        out[k] = _kl(lp.to(lq), lq).flatten(1).mean(1)
    return out


def ngram_callbacks(
    model, X_eval, models: Mapping[int, KGram], chain_windows: Mapping | None = None
) -> dict[str, Callable]:
    """Callbacks for :func:`lib.training.engine.train`, each logging a (K,) value per step:
    ``kl{k}`` for every order of ``models`` on ``X_eval`` ((B, L) shared or (K, B, L)),
    and, with ``chain_windows = {o: (X, y)}``, ``chain_loss{o}``: the cross-entropy on the
    windows of chain ``o`` (as :func:`lib.data.chains.markov_stream` samples them).

    One forward of all instances per eval set and log (shared through
    :func:`lib.training.engine.cached_callbacks`); the k-gram rows of ``X_eval`` are looked
    up once, here.
    """
    chain_windows = dict(chain_windows or {})
    targets = {k: kgram_log_probs(m, X_eval) for k, m in models.items()}

    def measure(step, params):
        dev = next(iter(params.values())).device
        X = torch.as_tensor(X_eval).to(dev)
        tg = {k: t.to(dev) for k, t in targets.items()}
        kl = kl_to_kgrams(model.forward(params, X), X, models, targets=tg)
        out = {f"kl{k}": v for k, v in kl.items()}
        for o, (Xc, yc) in chain_windows.items():
            out[f"chain_loss{o}"] = cross_entropy(model.forward(params, Xc.to(dev)), yc.to(dev))
        return out

    names = [f"kl{k}" for k in models] + [f"chain_loss{o}" for o in chain_windows]
    return cached_callbacks(measure, names)


def nearest_steps(steps, kl: Mapping[int, np.ndarray]) -> dict[int, np.ndarray]:
    """Per order and instance, the logged step where ``kl[k]`` ((n_logs, K) or (n_logs,)) is
    lowest: the argmin of the curve, the first logged one on a tie; NaN logs are skipped."""
    steps = np.asarray(steps)
    out = {}
    for k, v in kl.items():
        v = np.asarray(v, dtype=np.float64)
        out[k] = steps[np.argmin(np.where(np.isnan(v), np.inf, v), axis=0)]
    return out


def lag(steps, kl: Mapping[int, np.ndarray], a: int = 2, b: int = 3) -> np.ndarray:
    """Per instance, how many steps after its nearest pass to the ``a``-gram the model passes
    nearest the ``b``-gram (negative: the ``b``-gram first)."""
    near = nearest_steps(steps, {a: kl[a], b: kl[b]})
    return near[b] - near[a]

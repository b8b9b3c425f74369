r"""Alignment metrics between embeddings and probability signatures (Chapters 1-6).

:math:`R_{\cos}` is the measure of Yao & Xu, *Probability Signature* (arXiv:2509.20124);
the partial :math:`R_{\cos}` and the onsets are the book's (Chapters 2 and 5); reading a
metric at a matched loss is Chapter 7's.

Everything runs in float64 and accepts torch tensors or numpy arrays. Embeddings
may carry a leading instance dimension ``K`` (``W`` of shape ``(V, d)`` or
``(K, V, d)``); a metric then returns a ``(K,)`` tensor instead of a float.
Signatures are used as given: centre them first (:func:`lib.data.signatures.centre`).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import scipy.stats
import torch

F64 = torch.float64


def as_f64(x, device=None) -> torch.Tensor:
    """``x`` as a float64 tensor on ``device``, detached: metrics are measurements."""
    if torch.is_tensor(x):
        x = x.detach()  # metrics are measurements, never part of a graph
    return torch.as_tensor(x).to(device=device, dtype=F64)


def _np(x) -> np.ndarray:
    return x.detach().cpu().numpy() if torch.is_tensor(x) else np.asarray(x, dtype=float)


def _out(x: torch.Tensor):
    """A 0-d result as a Python float, a batched one as a tensor."""
    return float(x) if x.dim() == 0 else x


def cosine_similarity_matrix(A) -> torch.Tensor:
    r""":math:`S_{st} = \cos(A_s, A_t)` between rows, shape ``(..., V, V)``; a zero row has similarity 0."""
    A = as_f64(A)
    norm = A.norm(dim=-1, keepdim=True)
    An = torch.where(norm > 0, A / norm.clamp_min(torch.finfo(F64).tiny), 0.0)
    return An @ An.transpose(-1, -2)


def upper_triangle(S) -> torch.Tensor:
    """Entries ``S[..., s, t]`` with ``s < t`` (row-major order), shape ``(..., V(V-1)/2)``."""
    S = as_f64(S)
    i, j = torch.triu_indices(S.shape[-2], S.shape[-1], offset=1, device=S.device)
    return S[..., i, j]


def _pearson(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Pearson correlation along the last axis (broadcast over leading dims)."""
    x = x - x.mean(-1, keepdim=True)
    y = y - y.mean(-1, keepdim=True)
    return (x * y).sum(-1) / ((x * x).sum(-1) * (y * y).sum(-1)).sqrt()


def _cos_pairs(W, phi, tokens=None, W0=None, subtract_mean_row=True):
    """Upper triangles of cos-sim of the embedding rows (``(..., P)``) and of the signature rows (``(P,)``)."""
    E = as_f64(W)
    phi = as_f64(phi, E.device)
    if W0 is not None:
        E = E - as_f64(W0, E.device)  # the increment W(t) - W(0): W(0) is noise under small init
    if E.dim() not in (2, 3):
        raise ValueError(f"W must have shape (V, d) or (K, V, d), got {tuple(E.shape)}")
    if phi.shape[0] != E.shape[-2]:
        raise ValueError(f"W has {E.shape[-2]} rows but the signature has {phi.shape[0]}")
    if tokens is not None:
        idx = torch.as_tensor(tokens, dtype=torch.long, device=E.device)
        E, phi = E[..., idx, :], phi[idx]
    phi = phi.reshape(phi.shape[0], -1)  # matrix-valued rows are flattened
    if subtract_mean_row:
        # Both sides centred the same way: a row shared by every token (the embedding's common
        # move, the signature's unigram part) would otherwise set the cosines on one side only.
        E = E - E.mean(-2, keepdim=True)
        phi = phi - phi.mean(-2, keepdim=True)
    return upper_triangle(cosine_similarity_matrix(E)), upper_triangle(
        cosine_similarity_matrix(phi)
    )


def r_cos(W, phi, tokens=None, W0=None, subtract_mean_row=True):
    r""":math:`R_{\cos}(W,\phi)`: Pearson correlation of :math:`\{\cos(E_s,E_t)\}_{s<t}` with
    :math:`\{\cos(\phi_s,\phi_t)\}_{s<t}` over the tokens ``tokens`` (default all).

    ``E = W - W0`` if ``W0`` is given, else ``W``; with ``subtract_mean_row`` the mean
    row over the chosen tokens is removed from ``E`` *and* from ``phi`` before the
    cosines, so that both sides are centred alike (a row common to every signature leaves
    R unchanged). Returns a float,
    or a ``(K,)`` tensor when ``W`` is ``(K, V, d)``.
    """
    se, sp = _cos_pairs(W, phi, tokens, W0, subtract_mean_row)
    return _out(_pearson(se, sp))


def spearman_cos(W, phi, tokens=None, W0=None, subtract_mean_row=True):
    """As :func:`r_cos` with the Spearman rank correlation (average ranks for ties).

    Cosines are rounded to 12 decimals before ranking, so that pairs of identical
    rows, whose cosines differ only by float round-off, rank as ties.
    """
    se, sp = _cos_pairs(W, phi, tokens, W0, subtract_mean_row)
    rank = lambda x: torch.as_tensor(
        scipy.stats.rankdata(np.round(x.cpu().numpy(), 12), axis=-1), device=x.device
    )
    return _out(_pearson(rank(se).to(F64), rank(sp).to(F64)))


def linear_cka(A, B):
    r"""Linear CKA (Kornblith et al. 2019) between feature matrices with the same rows:

    .. math:: {\rm CKA}(A,B) = \frac{\|B_c^\top A_c\|_F^2}{\|A_c^\top A_c\|_F \|B_c^\top B_c\|_F},

    with column-centred :math:`A_c, B_c`. ``A`` is ``(..., n, p)``, ``B`` is ``(..., n, q)``
    (flatten matrix-valued rows first). Invariant to rotations and isotropic scaling.
    """
    A, B = as_f64(A), as_f64(B)
    B = B.to(A.device)
    A = A - A.mean(-2, keepdim=True)
    B = B - B.mean(-2, keepdim=True)
    fro2 = lambda M: (M * M).sum((-2, -1))
    mT = lambda M: M.transpose(-1, -2)
    return _out(fro2(mT(B) @ A) / (fro2(mT(A) @ A) * fro2(mT(B) @ B)).sqrt())


def strong_pair_recall(S_emb, S_sig, top: float = 0.01):
    """Fraction of the top-``top`` fraction of pairs ``s < t`` by ``S_sig`` that are also
    in the top-``top`` fraction by ``S_emb``.

    ``S_emb`` is a ``(..., V, V)`` similarity matrix (e.g. a batch of K), ``S_sig`` a
    ``(V, V)`` one; ``max(1, round(top * P))`` of the ``P`` pairs count as strong.
    Ties at the cut are broken arbitrarily (``torch.topk``).
    """
    se, ss = upper_triangle(S_emb), upper_triangle(S_sig).to(as_f64(S_emb).device)
    m = max(1, round(top * ss.shape[-1]))
    in_top_emb = torch.zeros_like(se, dtype=torch.bool).scatter_(-1, se.topk(m, -1).indices, True)
    idx_sig = ss.topk(m, -1).indices.expand(*se.shape[:-1], m)
    return _out(in_top_emb.gather(-1, idx_sig).to(F64).mean(-1))


def partial_corr(x, y, z):
    r"""Partial Pearson correlation :math:`r_{xy\cdot z}`: the correlation of the residuals of
    ``x`` and ``y`` after least-squares regression on ``[1, z]``.

    ``x`` is ``(..., m)`` (batched), ``y`` is ``(m,)``, ``z`` is ``(m,)`` or ``(m, c)``
    for several controls.
    """
    x = as_f64(x)
    y, z = as_f64(y, x.device), as_f64(z, x.device)
    Z = torch.cat([torch.ones(len(z), 1, dtype=F64, device=x.device), z.reshape(len(z), -1)], 1)
    # An orthonormal basis of span([1, z]) via SVD, robust to collinear controls.
    U, s, _ = torch.linalg.svd(Z, full_matrices=False)
    U = U[:, s > s.max() * Z.shape[0] * torch.finfo(F64).eps]
    resid = lambda v: v - (v @ U) @ U.T
    return _out(_pearson(resid(x), resid(y)))


def partial_from_correlations(r_xy, r_xz, r_yz):
    r"""The first-order partial correlation from the three pairwise correlations,
    :math:`r_{xy\cdot z}=\frac{r_{xy}-r_{xz}r_{yz}}{\sqrt{(1-r_{xz}^2)(1-r_{yz}^2)}}`.

    The same number as :func:`partial_corr` with one control (tested), for callers that
    already hold the correlations, e.g. of many permutations at once (:mod:`lib.measure.lm`).
    Tensors in, tensors out, elementwise.
    """
    return (r_xy - r_xz * r_yz) / ((1 - r_xz**2) * (1 - r_yz**2)).sqrt()


def r_cos_partial(W, phi, phi_control, tokens=None, W0=None, subtract_mean_row=True):
    r"""Partial :math:`R_{\cos}`: correlation of the embedding cosines with ``phi``'s cosines,
    controlling for the cosines of ``phi_control`` (one signature, or a list of them).

    Arguments as in :func:`r_cos`. E.g. :math:`R_{0\cdot1}` = ``r_cos_partial(W, phi0, phi1)``.
    """
    controls = list(phi_control) if isinstance(phi_control, list | tuple) else [phi_control]
    se, sp = _cos_pairs(W, phi, tokens, W0, subtract_mean_row)
    zs = [_cos_pairs(W, c, tokens, W0, subtract_mean_row)[1] for c in controls]
    return partial_corr(se, sp, torch.stack(zs, -1))


def effective_rank(A):
    r"""Entropy effective rank (Roy & Vetterli 2007) :math:`\exp H(p)`, with
    :math:`p_i = \sigma_i / \sum_j \sigma_j` the normalised singular values and
    :math:`0 \log 0 = 0`. Batched over leading dims of ``A`` (``(..., m, n)``).
    """
    s = torch.linalg.svdvals(as_f64(A))
    p = s / s.sum(-1, keepdim=True)
    H = -torch.where(p > 0, p * p.log(), 0.0).sum(-1)
    return _out(H.exp())


def attention_entropy(a: torch.Tensor) -> torch.Tensor:
    r"""Entropy (nats) of attention distributions over the last axis, :math:`-\sum_t a_t\log
    a_t` with :math:`0\log 0=0`: ``(..., T) -> (...)``, in ``a``'s dtype and device."""
    return -(a * a.clamp_min(1e-30).log()).sum(-1)


@torch.no_grad()
def faithfulness(model, params, X, y, rationale_pos, pad: int) -> dict[str, np.ndarray]:
    """How faithful a classifier's attention is to a known rationale token, per instance.

    For a batched model read out at the last position (``lib.training.models.Transformer`` with
    ``readout="last"``), from the first layer's attention row of that position: the
    ``accuracy``; the ``rationale mass`` (the attention on position ``rationale_pos``);
    the ``comprehensiveness``, how much the predicted class's probability falls when the
    top-1 attended token is replaced by ``pad``; and the ``sufficiency``, how much it falls
    when every other token is (lower is better). Padding positions are never the top-1
    token, and replacing rather than dropping keeps every position where it was (the
    ERASER scores of DeYoung et al. 2020, with the top-1 token as the rationale).

    ``X`` is (B, L) tokens shared by the K instances or (K, B, L) per instance; ``y`` and
    ``rationale_pos`` are (B,) or (K, B). Returns a (K,) array per score: means over B.
    """
    z, att = model.forward(params, X, return_attention=True)
    a = att[0][:, :, -1, :].masked_fill(X == pad, -1.0)  # the readout row, (K, B, L)
    K, B = a.shape[:2]
    pred = torch.softmax(z, -1).argmax(-1)

    def p_pred(Z):
        return torch.gather(torch.softmax(Z, -1), -1, pred[..., None])[..., 0]

    top = a.argmax(-1, keepdim=True)  # (K, B, 1)
    Xk = X if X.dim() == 3 else X.expand(K, *X.shape)
    X_wo = Xk.scatter(-1, top, pad)
    X_only = torch.full_like(Xk, pad).scatter(-1, top, torch.gather(Xk, -1, top))
    base = p_pred(z)
    pos = torch.as_tensor(rationale_pos, device=a.device).expand(K, B)
    out = {
        "accuracy": (pred == y).float().mean(-1),
        "rationale mass": torch.gather(a, -1, pos[..., None])[..., 0].mean(-1),
        "comprehensiveness": (base - p_pred(model.forward(params, X_wo))).mean(-1),
        "sufficiency": (base - p_pred(model.forward(params, X_only))).mean(-1),
    }
    return {k: v.cpu().numpy() for k, v in out.items()}


def onset_step(steps, values, threshold: float):
    """The first logged step at which ``values >= threshold``.

    ``steps`` is ``(n_logs,)``; ``values`` is ``(n_logs,)`` (returns a float) or
    ``(n_logs, K)`` (returns a ``(K,)`` tensor, one onset per instance). An instance
    that never reaches the threshold gets NaN; NaN values count as not reached.
    """
    steps = as_f64(_np(steps))
    v = as_f64(_np(values))  # lists with None become NaN
    if v.shape[0] != steps.shape[0]:
        raise ValueError(f"{steps.shape[0]} steps but values has {v.shape[0]} rows")
    hit = v >= threshold
    first = hit.to(torch.int64).argmax(0)  # index of the first True (0 if none)
    onset = torch.where(hit.any(0), steps[first], torch.nan)
    return _out(onset)


def relative_onset(steps, curves, frac: float = 0.5, floor: float = 0.0):
    """Onset of a stair, per instance: the first logged step at which the curve reaches
    ``max(frac * (its own maximum over the run), floor)``.

    ``curves`` is ``(n_logs, K)``; NaN entries (e.g. step 0) are ignored. The threshold is
    relative to what each instance's curve measures, so it needs no constant tuned to a
    run; ``floor`` (e.g. from :func:`lib.measure.staircase.order_noise_floor`) keeps a curve that never rises above noise
    from getting an onset at all. Returns ``(onset (K,), threshold (K,))`` as numpy arrays;
    onset is NaN where the curve never reaches the threshold.
    """
    if not 0 < frac <= 1:
        raise ValueError(f"frac must be in (0, 1], got {frac}")
    curves = np.asarray(curves, dtype=float)
    if curves.ndim == 1:
        curves = curves[:, None]
    peak = np.nanmax(np.where(np.isnan(curves), -np.inf, curves), axis=0)
    thr = np.maximum(frac * peak, floor)
    onset = np.full(curves.shape[1], np.nan)
    for k in range(curves.shape[1]):  # K is a handful of instances
        if peak[k] > floor:
            onset[k] = float(onset_step(steps, curves[:, k], float(thr[k])))
    return onset, thr


def rise_onset(
    steps, curves, start, frac: float = 0.5, min_rise: float = 0.0, floor: float = -np.inf
):
    """Onset of a *later* stair, per instance: where the curve's largest climb after
    ``start`` is half done.

    A target that shares geometry with an earlier one moves with it at first (up, and back
    down); what marks a stair of its own is a climb *after* the earlier stair set in. For
    instance ``k``, over the logged steps ``t >= start[k]``, the climb to ``t`` is the curve
    at ``t`` minus its lowest value since ``start[k]``; ``rise`` is the largest climb,
    ``base`` the trough it starts from, and the onset the first step after that trough at
    which the curve reaches ``base + frac * rise``. A rise of at most ``min_rise`` (e.g. the
    half-width of the curve's null band), a peak of at most ``floor`` (e.g. clearly above
    the null), or a ``start`` of NaN, gives no onset (NaN).

    ``curves`` is ``(n_logs, K)``, ``start`` ``(K,)``. Returns ``(onset (K,), rise (K,),
    base (K,))`` as numpy arrays; ``rise`` is NaN where ``start`` is.
    """
    if not 0 < frac <= 1:
        raise ValueError(f"frac must be in (0, 1], got {frac}")
    steps = np.asarray(steps, dtype=float)
    curves = np.asarray(curves, dtype=float)
    if curves.ndim == 1:
        curves = curves[:, None]
    start = np.broadcast_to(np.asarray(start, dtype=float), curves.shape[1:])
    if curves.shape[0] != steps.shape[0]:
        raise ValueError(f"{steps.shape[0]} steps but curves has {curves.shape[0]} rows")
    onset, rise, base = (np.full(curves.shape[1], np.nan) for _ in range(3))
    for k in range(curves.shape[1]):  # K is a handful of instances
        if not np.isfinite(start[k]) or not (steps >= start[k]).any():
            continue
        i0 = int(np.argmax(steps >= start[k]))
        c = np.nan_to_num(curves[i0:, k], nan=-np.inf)
        trough = np.minimum.accumulate(np.where(np.isfinite(c), c, np.inf))
        climb = c - trough
        top = int(np.argmax(climb))
        rise[k] = climb[top]
        low = int(np.argmax(c[: top + 1] == trough[top]))  # where that trough was
        base[k] = trough[top]
        if rise[k] > min_rise and c[top] > floor:
            onset[k] = steps[i0 + low + int(np.argmax(c[low:] >= base[k] + frac * rise[k]))]
    return onset, rise, base


def field_cosine(a, b):
    r"""Cosine between two fields over all their entries, :math:`\langle a,b\rangle/(\|a\|\|b\|)`.

    ``a`` and ``b`` are ``(V, d)`` (a float) or carry a leading instance dimension,
    ``(K, V, d)`` (a ``(K,)`` tensor on their device): the two last dimensions are the
    field. Chapters 3 and 4 compare an expansion of the embedding gradient with autograd
    this way.
    """
    a, b = as_f64(a), as_f64(b)
    dims = (-2, -1)
    return _out((a * b).sum(dims) / (a.norm(dim=dims) * b.norm(dim=dims)))


def field_norm_ratio(a, b):
    r"""Relative size of two fields, :math:`\|a\|/\|b\|` over all entries of the two last
    dimensions: ``(V, d)`` gives a float, ``(K, V, d)`` a ``(K,)`` tensor (see
    :func:`field_cosine`)."""
    a, b = as_f64(a), as_f64(b)
    dims = (-2, -1)
    return _out(a.norm(dim=dims) / b.norm(dim=dims))


__all__ = [
    "as_f64",
    "rise_onset",
    "cosine_similarity_matrix",
    "upper_triangle",
    "r_cos",
    "spearman_cos",
    "linear_cka",
    "strong_pair_recall",
    "partial_corr",
    "r_cos_partial",
    "effective_rank",
    "onset_step",
    "relative_onset",
    "attention_entropy",
    "faithfulness",
    "partial_from_correlations",
    "field_cosine",
    "field_norm_ratio",
    "at_matched_loss",
    "first_log_below",
    "SharperCheck",
    "sharper_at_matched_loss",
]


def at_matched_loss(loss: np.ndarray, values: np.ndarray, target: float) -> np.ndarray:
    """Each instance's ``values`` where its (logged) loss first falls to ``target``,
    interpolated linearly in log-loss between the two logging steps around that crossing.

    ``loss`` and ``values`` are (n_logs, K); instances that never reach ``target`` give NaN.
    """
    out = np.full(loss.shape[1], np.nan)
    for k in range(loss.shape[1]):
        below = np.nonzero(loss[:, k] <= target)[0]
        if len(below) == 0:
            continue
        j = below[0]
        if j == 0:
            out[k] = values[0, k]
            continue
        l0, l1 = np.log(loss[j - 1, k]), np.log(loss[j, k])
        w = (l0 - np.log(target)) / (l0 - l1)
        out[k] = (1 - w) * values[j - 1, k] + w * values[j, k]
    return out


def first_log_below(loss: np.ndarray, target: float) -> np.ndarray:
    """Index of the first logging step at which each instance's loss is <= target (or -1)."""
    idx = np.full(loss.shape[1], -1)
    for k in range(loss.shape[1]):
        below = np.nonzero(loss[:, k] <= target)[0]
        idx[k] = below[0] if len(below) else -1
    return idx


class SharperCheck(NamedTuple):
    """The result of :func:`sharper_at_matched_loss`."""

    holds: bool
    loss: float  # the matched loss both arms were read at
    test: np.ndarray  # (S,) distinct mass of the test arm there, per seed
    ref: np.ndarray  # (S,) the same for the reference arm


def sharper_at_matched_loss(loss_test, a_test, loss_ref, a_ref) -> SharperCheck:
    """The headline check of Chapter 7 (Section 6): at one loss that both arms reach, does
    the test arm put more attention on the distinct tokens than the reference arm, in every
    seed?

    ``loss_*`` and ``a_*`` are (n_logs, S) held-out losses and distinct-token masses of the
    two arms, column ``s`` of each from the same seed. The matched loss is the largest of
    the instances' lowest logged losses, so every instance reaches it; each instance is
    read there by :func:`at_matched_loss`. Applied to faster QK (r > 1) against equal
    rates it should hold; to slower QK (r < 1) it should not (the negative control).
    """
    loss_test, loss_ref = np.asarray(loss_test), np.asarray(loss_ref)
    if loss_test.shape[1] != loss_ref.shape[1]:
        raise ValueError("the two arms must have the same seeds (columns)")
    loss = float(max(loss_test.min(0).max(), loss_ref.min(0).max()))
    t = at_matched_loss(loss_test, np.asarray(a_test), loss)
    r = at_matched_loss(loss_ref, np.asarray(a_ref), loss)
    return SharperCheck(bool(np.all(t > r)), loss, t, r)


# ---------------------------------------------------------------------------
# Inference over seeds (Chapter 9): exponents and trends with intervals
# ---------------------------------------------------------------------------


class Interval(NamedTuple):
    """A statistic with its percentile interval over resampled seeds."""

    value: float  # on all seeds
    lo: float
    hi: float


def seed_bootstrap(stat, n_seeds: int, n_boot: int = 2000, seed: int = 0, level: float = 0.95):
    """Percentile bootstrap over seeds: ``stat(idx)`` on all seeds (``idx = 0..n_seeds-1``)
    and on ``n_boot`` resamples of the seed indices drawn with replacement.

    ``stat`` takes an int array of seed indices (with repeats) and returns a float (NaN
    where the resample cannot be read; those are left out of the interval). Returns an
    :class:`Interval`; its ends are NaN when fewer than half the resamples can be read.
    """
    if n_seeds < 1 or n_boot < 1 or not 0 < level < 1:
        raise ValueError(
            f"need n_seeds >= 1, n_boot >= 1, 0 < level < 1; got {n_seeds}, {n_boot}, {level}"
        )
    gen = np.random.default_rng(seed)
    draws = gen.integers(0, n_seeds, size=(n_boot, n_seeds))
    boot = np.array([stat(idx) for idx in draws], dtype=float)
    value = float(stat(np.arange(n_seeds)))
    ok = boot[np.isfinite(boot)]
    if len(ok) < n_boot / 2:
        return Interval(value, np.nan, np.nan)
    q = 100 * (1 - level) / 2
    lo, hi = np.percentile(ok, [q, 100 - q])
    return Interval(value, float(lo), float(hi))


def _loglog_fit(x: np.ndarray, y: np.ndarray, min_levels: int) -> float:
    ok = np.isfinite(y) & (y > 0)
    if ok.sum() < min_levels:
        return np.nan
    return float(np.polyfit(np.log(x[ok]), np.log(y[ok]), 1)[0])


def loglog_exponent(x, Y, min_levels: int = 2, n_boot: int = 2000, seed: int = 0, level=0.95):
    r"""The exponent :math:`a` of :math:`y\propto x^a`, with a bootstrap interval over seeds.

    ``x`` is ``(n,)`` positive levels (e.g. rates); ``Y`` is ``(n, S)``, one value per level
    and seed, NaN where an instance does not count (excluded, or its event never came).
    At each level the median over the seeds that count is taken, and the exponent is the
    least-squares slope of log median against log x over the levels that have one; with
    fewer than ``min_levels`` such levels it is NaN. The interval resamples the seeds
    (columns) with replacement (:func:`seed_bootstrap`).
    """
    x = np.asarray(x, dtype=float)
    Y = np.asarray(Y, dtype=float)
    if Y.ndim != 2 or Y.shape[0] != x.shape[0]:
        raise ValueError(f"Y must be (len(x), n_seeds) = ({x.shape[0]}, S), got {Y.shape}")
    if np.any(x <= 0):
        raise ValueError("the levels x must be positive for a log-log fit")

    def stat(idx):
        cols = Y[:, idx]
        with np.errstate(all="ignore"):
            counted = np.isfinite(cols).any(1)
            med = np.full(len(x), np.nan)
            med[counted] = np.nanmedian(cols[counted], axis=1)
        return _loglog_fit(x, med, min_levels)

    return seed_bootstrap(stat, Y.shape[1], n_boot, seed, level)


class TrendTest(NamedTuple):
    """The result of :func:`trend_test`."""

    rho: float  # Spearman's rank correlation of y with x over the instances that count
    p: float  # permutation p-value (x shuffled within each group), for ``alternative``
    lo: float  # bootstrap interval of rho over groups (resampled with replacement)
    hi: float
    n: int  # instances that count


def _spearman_rows(rx: np.ndarray, ry: np.ndarray) -> np.ndarray:
    """Pearson correlation of each row of ``rx`` (m, n) with ``ry`` (n,): ranks in, rho out."""
    a = rx - rx.mean(-1, keepdims=True)
    b = ry - ry.mean()
    with np.errstate(all="ignore"):
        return (a @ b) / (np.sqrt((a * a).sum(-1)) * np.sqrt((b * b).sum()))


def trend_test(
    x,
    y,
    groups,
    alternative: str = "less",
    n_perm: int = 2000,
    n_boot: int = 2000,
    seed: int = 0,
    level: float = 0.95,
) -> TrendTest:
    """Does ``y`` fall (``alternative="less"``) or rise (``"greater"``) with ``x``?

    Spearman's rho between ``x`` and ``y`` over the instances where ``y`` is finite (NaN
    marks an instance that does not count). The p-value is a permutation test that keeps
    the design: ``x`` is shuffled *within* each group (e.g. the rates of one seed among
    that seed's instances), ``n_perm`` times; ``"two-sided"`` compares |rho|. The interval
    resamples whole groups with replacement (:func:`seed_bootstrap`). One value per
    instance: ``x``, ``y`` and ``groups`` are ``(n,)``.
    """
    if alternative not in ("less", "greater", "two-sided"):
        raise ValueError(
            f"alternative must be 'less', 'greater' or 'two-sided', got {alternative!r}"
        )
    x, y = np.asarray(x, dtype=float).ravel(), np.asarray(y, dtype=float).ravel()
    groups = np.asarray(groups).ravel()
    if not (x.shape == y.shape == groups.shape):
        raise ValueError(
            f"x, y and groups must have one value per instance: {x.shape}, {y.shape}, {groups.shape}"
        )
    ok = np.isfinite(y) & np.isfinite(x)
    x, y, groups = x[ok], y[ok], groups[ok]
    if len(y) < 3:
        return TrendTest(np.nan, np.nan, np.nan, np.nan, len(y))
    rx, ry = scipy.stats.rankdata(x), scipy.stats.rankdata(y)
    rho = float(_spearman_rows(rx[None], ry)[0])
    if not np.isfinite(rho):  # y or x constant: there is nothing to rank
        return TrendTest(rho, np.nan, np.nan, np.nan, len(y))
    gen = np.random.default_rng(seed)
    perm = np.tile(np.arange(len(x)), (n_perm, 1))
    labels = np.unique(groups)
    members = [np.nonzero(groups == label)[0] for label in labels]
    for where in members:  # shuffle x among the instances of one group only
        perm[:, where] = where[gen.permuted(np.tile(np.arange(len(where)), (n_perm, 1)), axis=1)]
    null = _spearman_rows(rx[perm], ry)
    if alternative == "less":
        p = (1 + np.sum(null <= rho + 1e-12)) / (n_perm + 1)
    elif alternative == "greater":
        p = (1 + np.sum(null >= rho - 1e-12)) / (n_perm + 1)
    else:
        p = (1 + np.sum(np.abs(null) >= abs(rho) - 1e-12)) / (n_perm + 1)

    def stat(idx):
        rows = np.concatenate([members[i] for i in idx])
        rxb, ryb = scipy.stats.rankdata(x[rows]), scipy.stats.rankdata(y[rows])
        return float(_spearman_rows(rxb[None], ryb)[0])  # NaN where a resample is constant

    iv = seed_bootstrap(stat, len(labels), n_boot, seed, level)
    return TrendTest(rho, float(p), iv.lo, iv.hi, len(y))


__all__ += ["Interval", "seed_bootstrap", "loglog_exponent", "TrendTest", "trend_test"]

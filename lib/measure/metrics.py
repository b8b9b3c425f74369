r"""Alignment metrics between embeddings and probability signatures (Chapters 1-6).

:math:`R_{\cos}` is the measure of Yao & Xu, *Probability Signature* (arXiv:2509.20124);
the partial :math:`R_{\cos}` is the book's (Chapters 2 and 5). When a metric's curve
crosses a level is :mod:`lib.measure.onsets`; reading it at a matched loss,
:mod:`lib.measure.matched_loss`; intervals over seeds, :mod:`lib.measure.statistics`.

Everything runs in float64 and accepts torch tensors or numpy arrays. Embeddings
may carry a leading instance dimension ``K`` (``W`` of shape ``(V, d)`` or
``(K, V, d)``); a metric then returns a ``(K,)`` tensor instead of a float.
Signatures are used as given: centre them first (:func:`lib.data.signatures.centre`).
"""

from __future__ import annotations

import numpy as np
import scipy.stats
import torch

F64 = torch.float64


def as_f64(x, device=None) -> torch.Tensor:
    """``x`` as a float64 tensor on ``device``, detached: metrics are measurements."""
    if torch.is_tensor(x):
        x = x.detach()  # metrics are measurements, never part of a graph
    return torch.as_tensor(x).to(device=device, dtype=F64)


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
    "cosine_similarity_matrix",
    "upper_triangle",
    "r_cos",
    "spearman_cos",
    "linear_cka",
    "strong_pair_recall",
    "partial_corr",
    "partial_from_correlations",
    "r_cos_partial",
    "effective_rank",
    "field_cosine",
    "field_norm_ratio",
]

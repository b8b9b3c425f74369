r"""Escape from a symmetric saddle (Chapter 3): the antisymmetric mode of a pair of tokens.

On a state symmetric under the exchange of paired tokens, gradient descent moves the
antisymmetric embedding mode :math:`A=(E_{first}-E_{second})/2` by
:math:`A\leftarrow(I-\tfrac\eta2H_A)A` to first order, with :math:`H_A` the Hessian of the
mean loss in that mode (:func:`antisymmetric_hessian`, built from the per-sequence Hessian
in the bag :func:`emb_mlp_input_hessian`). :func:`propagate_linear` runs that map along a
trajectory and :func:`growth_rate` gives its fastest rate; the chapter checks the predicted
escape steps against measured ones (:func:`escape_prediction_holds`).
"""

from __future__ import annotations

import numpy as np
import torch

from ..training.layers import ACTIVATIONS, embed_sum
from ..training.models import EmbMLP
from .flow import F64, _w

__all__ = [
    "emb_mlp_input_hessian",
    "antisymmetric_hessian",
    "antisymmetric_part",
    "propagate_linear",
    "growth_rate",
    "escape_prediction_holds",
]


def _bag_derivatives(model: EmbMLP, params, X, y):
    r"""The pieces of :func:`emb_mlp_input_hessian`, per instance and sequence: ``J``
    ``(K, N, d, n)``, ``p`` ``(K, N, n)``, the curvature weights
    :math:`w=\sigma''(a)\odot W_2(p-e_y)` ``(K, N, m)`` and ``W1`` (float64)."""
    E, W1, W2 = _w(params, "E"), _w(params, "W1"), _w(params, "W2")
    X = torch.as_tensor(X, device=E.device)
    act = ACTIVATIONS[model.activation]
    with torch.enable_grad():
        a = (embed_sum(E, X) @ W1).detach().requires_grad_(True)
        (d1,) = torch.autograd.grad(act(a).sum(), [a], create_graph=True)
        (d2,) = torch.autograd.grad(d1.sum(), [a])
    a, d1 = a.detach(), d1.detach()
    p = torch.softmax(act(a) @ W2, -1)  # (K, N, n)
    Y = torch.nn.functional.one_hot(torch.as_tensor(y, device=E.device), W2.shape[-1]).to(F64)
    K, N = a.shape[:2]
    d, n = W1.shape[1], W2.shape[-1]
    # J is a sum over the hidden units m: one matrix product of the (K, N, m) per-sequence
    # weights with a (K, m, d n) table of products of weights, rather than N small products.
    J = (d1 @ torch.einsum("kdm,kmc->kmdc", W1, W2).reshape(K, -1, d * n)).view(K, N, d, n)
    return J, p, d2 * ((p - Y) @ W2.mT), W1


def emb_mlp_input_hessian(model: EmbMLP, params, X, y) -> torch.Tensor:
    r"""Per-sequence Hessian of the cross-entropy with respect to the bag :math:`h=\sum_iE_{x_i}`.

    With :math:`a=hW_1`, :math:`f=\sigma(a)W_2`, :math:`p=\mathrm{softmax}(f)` and
    :math:`J=W_1\,\mathrm{diag}(\sigma'(a))\,W_2` (:math:`d\times n`),

    .. math:: \nabla^2_h\ell = J(\mathrm{diag}\,p-pp^\top)J^\top
              + W_1\,\mathrm{diag}\big(\sigma''(a)\odot W_2(p-e_y)\big)\,W_1^\top .

    ``X`` is ``(N, L)`` shared by all instances; returns ``(K, N, d, d)`` in float64.
    """
    J, p, w, W1 = _bag_derivatives(model, params, X, y)
    K, N, d, _ = J.shape
    Jp = (J @ p[..., None])[..., 0]  # (K, N, d)
    gauss = (J * p[:, :, None, :]) @ J.mT - Jp[..., :, None] * Jp[..., None, :]
    # The curvature term, like J, is one product with a (K, m, d d) table.
    curv = (w @ torch.einsum("kdm,kem->kmde", W1, W1).reshape(K, -1, d * d)).view(K, N, d, d)
    return gauss + curv


def antisymmetric_hessian(model: EmbMLP, params, X, y, first, second) -> torch.Tensor:
    r"""Hessian of the mean loss in the antisymmetric embedding mode, ``(K, P d, P d)``
    (Chapter 3, ``eq-escape-linear``).

    For token pairs ``(first[p], second[p])`` write :math:`E_{first}=S+A`,
    :math:`E_{second}=S-A`. The bag of sequence :math:`n` moves by
    :math:`\delta h_n=\sum_p M_{np}A_p` with :math:`M_{np}=c_{first_p}(X_n)-c_{second_p}(X_n)`,
    so :math:`H_A=\frac1N\sum_n (M_n\otimes M_n)\otimes\nabla^2_h\ell_n`
    (:func:`emb_mlp_input_hessian`). On a state symmetric under the exchange of each pair,
    gradient descent at rate :math:`\eta` moves :math:`A` by
    :math:`A\leftarrow(I-\tfrac\eta2H_A)A` to first order: the linearized escape.

    The sequences that share a row :math:`M_n` are summed first, each group's Gauss-Newton
    term as one matrix product over its sequences and labels (rows of zeros dropped).
    """
    J, p, w, W1 = _bag_derivatives(model, params, X, y)
    K, N, d, n = J.shape
    X = torch.as_tensor(X, device=J.device)
    V = params["E"].shape[1]
    C = torch.zeros(X.shape[0], V, dtype=F64, device=J.device).scatter_add_(
        1, X, torch.ones(X.shape, dtype=F64, device=J.device)
    )
    M = C[:, list(first)] - C[:, list(second)]  # (N, P)
    rows, row_of = torch.unique(M, dim=0, return_inverse=True)
    groups = [r for r in range(len(rows)) if bool(rows[r].any())]  # M_n = 0 adds nothing
    P = M.shape[1]
    if not groups:
        return torch.zeros(K, P * d, P * d, dtype=F64, device=J.device)
    S = []
    for r in groups:
        idx = torch.nonzero(row_of == r)[:, 0]
        Jr, pr = J[:, idx], p[:, idx]  # (K, n_r, d, n), (K, n_r, n)
        B = (Jr * pr[:, :, None, :].sqrt()).permute(0, 2, 1, 3).reshape(K, d, -1)
        Jp = (Jr @ pr[..., None])[..., 0]  # (K, n_r, d)
        curv = (W1 * w[:, idx].sum(1)[:, None, :]) @ W1.mT
        S.append(B @ B.mT - Jp.mT @ Jp + curv)
    rows = rows[groups]
    H = torch.einsum("rp,rq,krij->kpiqj", rows, rows, torch.stack(S, 1)) / N
    return H.reshape(K, P * d, P * d)


def antisymmetric_part(E, first, second) -> torch.Tensor:
    """:math:`A=(E_{first}-E_{second})/2`, shape ``(K, P, d)``."""
    E = torch.as_tensor(E)
    return (E[:, list(first)] - E[:, list(second)]) / 2


def propagate_linear(steps, H, eta, a0, total: int) -> np.ndarray:
    r"""Norm of the antisymmetric mode under the linearized GD map (Chapter 3,
    ``eq-escape-linear``), at every step 0..``total``.

    ``H`` is ``(n_logs, Pd, Pd)`` (:func:`antisymmetric_hessian` along the symmetric
    trajectory, at logged ``steps``), ``eta`` ``(n_logs,)`` the effective step size there
    (the learning rate times the clip factor), ``a0`` the initial mode ``(Pd,)``; between
    logged steps the last logged map is used: :math:`A_{t+1}=(I-\tfrac{\eta_i}{2}H_i)A_t`.
    """
    steps = np.asarray(steps)
    H = torch.as_tensor(H, dtype=F64).cpu()
    eta = torch.as_tensor(eta, dtype=F64).cpu()
    a = torch.as_tensor(a0, dtype=F64).cpu().flatten().clone()
    norms = np.empty(total + 1)
    norms[0] = float(a.norm())
    i = 0
    for t in range(total):
        while i + 1 < len(steps) and steps[i + 1] <= t:
            i += 1
        a = a - 0.5 * eta[i] * (H[i] @ a)
        norms[t + 1] = float(a.norm())
    return norms


def growth_rate(H, eta) -> np.ndarray:
    r"""Per-step growth rate of the fastest antisymmetric mode, :math:`\lambda=\tfrac\eta2\,
    \max\mathrm{eig}(-H_A)`, for ``H`` ``(..., Pd, Pd)`` and ``eta`` ``(...)``."""
    H = torch.as_tensor(H, dtype=F64).cpu()
    lam = -torch.linalg.eigvalsh(H)[..., 0]
    return (0.5 * torch.as_tensor(eta, dtype=F64) * lam).numpy()


def escape_prediction_holds(predicted, measured, tol: float) -> bool:
    """Whether every predicted escape step (Chapter 3, ``eq-escape-time``) is within a ratio
    ``1 +- tol`` of the measured one."""
    r = np.asarray(predicted, dtype=float) / np.asarray(measured, dtype=float)
    return bool(np.all(np.abs(r - 1) <= tol))

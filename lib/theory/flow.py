r"""Embedding gradient flow by orders of the init scale (Chapter 3; attention: Chapter 4).

Every weight starts at size :math:`O(\varepsilon)` (``std = fan_in^-gamma``). Expanding
the activation, :math:`\sigma(x)=c_1x+\tfrac{c_2}{2}x^2+\dots`, and the softmax at zero
logits, :math:`p=c+\tfrac1n\Pi f+O(f^2)` (:math:`\Pi=I-\tfrac1n\mathbf 1\mathbf 1^\top`),
splits the embedding gradient into terms, each a *counted signature*
(:mod:`lib.data.signatures`) times a product of the current weights.

**Emb-MLP** (:class:`lib.training.models.EmbMLP`, :math:`h=\sum_iE_{x_i}`, :math:`f=\sigma(hW_1)W_2`,
mean cross-entropy), with :math:`r_s` the token rate and :math:`c` the centring
(uniform :math:`u` at init):

.. math::
    -\frac{\partial L}{\partial E_s} =
    \underbrace{c_1 r_s(\phi^y_s-c)W_2^\top W_1^\top}_{O(\varepsilon^2)}
    + \underbrace{c_2 r_s\Big[\sum_{\mu}\big(E_\mu W_1\big)\odot
      \big(\tilde\phi^{X|y}_s(\mu,\cdot)W_2^\top\big)\Big]W_1^\top}_{O(\varepsilon^4)}
    \underbrace{-\frac{c_1^2}{n} r_s\Big(\sum_\mu\phi^X_s(\mu)E_\mu\Big)W_1W_2\Pi W_2^\top W_1^\top}_{O(\varepsilon^5)}
    + O(\varepsilon^6).

**One-layer attention**: the same expansion for
:class:`lib.training.models.Transformer` is :mod:`lib.theory.attention_flow`; the escape of
a pair of tokens from a symmetric saddle, :mod:`lib.theory.saddle`.

All functions take the batched weights ``params`` (``(K, ...)`` tensors) and return
``(K, V, d)`` tensors; rows of tokens that never occur are zero.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ..data import signatures as sig
from ..measure import metrics as M
from ..training.engine import cross_entropy
from ..training.layers import ACTIVATION_TAYLOR, ACTIVATIONS, embed_sum
from ..training.models import EmbMLP

F64 = torch.float64


@dataclass
class CountedSignatures:
    """The signatures the expansion needs, counted once on the training set (float64).

    ``r`` (V,), ``phi_y`` (V, n), ``phi_X`` (V, V), ``joint`` (V, V, n) (the uncentred
    :math:`\\phi^{X|y}`), ``pbar`` (n,), and for the attention model the rate ``r_last``
    (V,) and label signature ``phi_last`` (V, n) of the last token. Absent tokens have
    rate 0 and zero (not NaN) signature rows, so they contribute nothing.
    """

    r: torch.Tensor
    phi_y: torch.Tensor
    phi_X: torch.Tensor
    joint: torch.Tensor | None
    pbar: torch.Tensor
    r_last: torch.Tensor
    phi_last: torch.Tensor
    seq_len: int

    @property
    def n_labels(self) -> int:
        return self.phi_y.shape[1]


def counted_signatures(X, y, V: int, n_labels: int, joint: bool = True) -> CountedSignatures:
    """Count every signature of the expansion on ``(X, y)``; ``joint=False`` skips the (V, V, n) one."""
    X, y = torch.as_tensor(X), torch.as_tensor(y)
    nz = lambda t: torch.nan_to_num(t, nan=0.0)
    last = X[:, -1:]
    return CountedSignatures(
        r=sig.token_rate(X, V),
        phi_y=nz(sig.label_signature(X, y, V, n_labels)),
        phi_X=nz(sig.contextual_signature(X, V)),
        joint=nz(sig.joint_signature(X, y, V, n_labels)) if joint else None,
        pbar=sig.label_marginal(X, y, V, n_labels),
        r_last=sig.token_rate(last, V),
        phi_last=nz(sig.label_signature(last, y, V, n_labels)),
        seq_len=X.shape[1],
    )


def centring(how, n: int, S: CountedSignatures, K: int) -> torch.Tensor:
    """The centring vector c, shape (K, n): ``"uniform"`` (u), ``"marginal"`` (p̄) or a tensor."""
    if isinstance(how, str):
        if how == "uniform":
            c = torch.full((n,), 1.0 / n, dtype=F64, device=S.pbar.device)
        elif how == "marginal":
            c = S.pbar.to(F64)
        else:
            raise ValueError(f'centre must be "uniform", "marginal" or a tensor, got {how!r}')
    else:
        c = torch.as_tensor(how).to(device=S.pbar.device, dtype=F64)
    if c.shape[-1] != n:
        raise ValueError(f"centring vector has {c.shape[-1]} entries, expected n={n}")
    return c.expand(K, n) if c.dim() == 1 else c


def _w(params, name):
    return params[name].detach().to(F64)


def _taylor(activation: str) -> tuple[float, float]:
    if activation not in ACTIVATION_TAYLOR:
        raise ValueError(
            f"no Taylor coefficients for {activation!r}; known: {sorted(ACTIVATION_TAYLOR)}"
        )
    return ACTIVATION_TAYLOR[activation]


# ----------------------------------------------------------------------------- Emb-MLP


def emb_mlp_order0(model: EmbMLP, params, S: CountedSignatures, centre="uniform"):
    r"""Leading :math:`O(\varepsilon^2)` term :math:`c_1 r_s(\phi^y_s-c)W_2^\top W_1^\top`, (K, V, d)
    (Chapter 3, ``eq-ffn-expansion``; Chapter 2, ``eq-stair-order0``)."""
    c1, _ = _taylor(model.activation)
    W1, W2 = _w(params, "W1"), _w(params, "W2")
    c = centring(centre, S.n_labels, S, W1.shape[0])
    drive = S.r[None, :, None] * (S.phi_y[None] - c[:, None, :])  # (K, V, n) = rows of R(Phi - C)
    return c1 * drive @ W2.transpose(1, 2) @ W1.transpose(1, 2)


def emb_mlp_order1(model: EmbMLP, params, S: CountedSignatures, centre="uniform"):
    r"""Order-1 joint :math:`O(\varepsilon^4)` term, (K, V, d):

    :math:`c_2 r_s\big[\sum_{\mu,\nu}\tilde\phi^{X|y}_s(\mu,\nu)\,(E_\mu W_1)\odot(W_2)_{:\nu}\big]W_1^\top`
    with :math:`\tilde\phi^{X|y}_s(\mu,\nu)=\phi^{X|y}_s(\mu,\nu)-\phi^X_s(\mu)c_\nu`.
    """
    if S.joint is None:
        raise ValueError(
            "the order-1 term needs the joint signature: counted_signatures(joint=True)"
        )
    _, c2 = _taylor(model.activation)
    E, W1, W2 = _w(params, "E"), _w(params, "W1"), _w(params, "W2")
    K, V, n = E.shape[0], S.r.shape[0], S.n_labels
    c = centring(centre, n, S, K)
    A = E @ W1  # (K, V, m): E_mu W1, the first-layer pre-activation of a lone token
    # sum_{mu,nu} phi(s, mu, nu) A[mu, j] W2[j, nu] = J_(s, mu nu) @ B_(mu nu, j), one
    # instance at a time so that memory stays O(V n m), not O(K V^2 m)
    J = S.joint.reshape(V, V * n)
    joint_part = torch.stack(
        [J @ (A[k][:, None, :] * W2[k].T[None, :, :]).reshape(V * n, -1) for k in range(K)]
    )  # (K, V, m)
    centre_part = (S.phi_X[None] @ A) * (c[:, None, :] @ W2.transpose(1, 2))
    return c2 * S.r[None, :, None] * (joint_part - centre_part) @ W1.transpose(1, 2)


def emb_mlp_contextual(model: EmbMLP, params, S: CountedSignatures):
    r"""Contextual :math:`O(\varepsilon^5)` term
    :math:`-\frac{c_1^2}{n}r_s(\sum_\mu\phi^X_s(\mu)E_\mu)W_1W_2\Pi W_2^\top W_1^\top`, (K, V, d)."""
    c1, _ = _taylor(model.activation)
    E, W1, W2 = _w(params, "E"), _w(params, "W1"), _w(params, "W2")
    n = W2.shape[-1]
    W2c = W2 - W2.mean(-1, keepdim=True)  # W2 Pi (Pi is symmetric and idempotent)
    ctx = S.phi_X[None] @ E  # (K, V, d): sum_mu phi^X_s(mu) E_mu
    T = ctx @ W1 @ W2c @ W2c.transpose(1, 2) @ W1.transpose(1, 2)
    return -(c1**2 / n) * S.r[None, :, None] * T


def emb_mlp_terms(model: EmbMLP, params, S: CountedSignatures, centre="uniform") -> dict:
    """The three expansion terms ``order0``, ``order1``, ``contextual`` (each (K, V, d)) of
    Chapter 3, ``eq-ffn-expansion``."""
    return {
        "order0": emb_mlp_order0(model, params, S, centre),
        "order1": emb_mlp_order1(model, params, S, centre),
        "contextual": emb_mlp_contextual(model, params, S),
    }


def neg_grad_E(model, params, X, y) -> torch.Tensor:
    """The true embedding gradient flow :math:`-\\partial L/\\partial E` by autograd, (K, V, d),
    float64 (Chapter 3, ``eq-ffn-gradient``)."""
    with torch.enable_grad():  # also inside the engine's no_grad callbacks
        p64 = {k: v.detach().to(F64).requires_grad_(k == "E") for k, v in params.items()}
        loss = cross_entropy(model.forward(p64, X), y).sum()
        (grad,) = torch.autograd.grad(loss, [p64["E"]])
    return -grad


def mean_prediction(model, params, X) -> torch.Tensor:
    r"""The model's mean predicted distribution over ``X``, :math:`\bar p_{\rm model}=\tfrac1N\sum_np_n`, (K, n), float64.

    The centring of the order-0 term under training: :math:`u` at initialization,
    :math:`\bar p` once the label marginal is fitted (Chapter 3).
    """
    p64 = {k: v.detach().double() for k, v in params.items()}
    return torch.softmax(model.forward(p64, X), -1).mean(1)


def emb_mlp_paths(model: EmbMLP, params, X, y) -> dict:
    r"""Exact split of :math:`-\partial L/\partial E` into a linear and a nonlinear path, (K, V, d).

    With :math:`G_n=(e_{y_n}-p_n)/N` and counts :math:`C`:
    ``linear`` :math:`=c_1C^\top GW_2^\top W_1^\top` (whose expansion starts with the order-0
    term) and ``nonlinear`` :math:`=C^\top[(\sigma'(a)-c_1)\odot GW_2^\top]W_1^\top` (whose
    expansion starts with the order-1 term). Their sum is the exact gradient flow.
    """
    c1, _ = _taylor(model.activation)
    E, W1, W2 = _w(params, "E"), _w(params, "W1"), _w(params, "W2")
    X = torch.as_tensor(X)
    h = embed_sum(E, X)  # (K, N, d)
    a = (h @ W1).requires_grad_(True)
    with torch.enable_grad():
        (dsig,) = torch.autograd.grad(ACTIVATIONS[model.activation](a).sum(), [a])
    a = a.detach()
    p = torch.softmax(ACTIVATIONS[model.activation](a) @ W2, -1)
    N = X.shape[-2]
    G = (
        torch.nn.functional.one_hot(torch.as_tensor(y, device=E.device), W2.shape[-1]).to(F64) - p
    ) / N
    GW = G @ W2.transpose(1, 2)  # (K, N, m)
    X = X.to(E.device)
    C = torch.zeros(X.shape[0], E.shape[1], dtype=F64, device=E.device).scatter_add_(
        1, X, torch.ones(X.shape, dtype=F64, device=E.device)
    )  # (N, V)
    lin = c1 * (C.T @ GW) @ W1.transpose(1, 2)
    nonlin = (C.T @ ((dsig - c1) * GW)) @ W1.transpose(1, 2)
    return {"linear": lin, "nonlinear": nonlin}


# ----------------------------------------------------------------------------- attention


# ----------------------------------------------------------------------------- linear model


def signature_matrix(S: CountedSignatures, centre="uniform") -> torch.Tensor:
    r"""The signature matrix :math:`M=R(\Phi^y-\mathbf 1c^\top)` that drives the linear model, (V, n)."""
    c = centring(centre, S.n_labels, S, 1)[0]
    return S.r[:, None] * (S.phi_y - c[None])


def linear_mode_strength_early(s: np.ndarray, a0: np.ndarray, b0: np.ndarray, t) -> np.ndarray:
    r"""Mode strength :math:`u_k(t)=a_k(t)\cdot b_k(t)` of the linearised flow
    :math:`\dot a_k=s_kb_k,\ \dot b_k=s_ka_k` (valid while the mode is small):

    .. math:: u_k(t)=\tfrac12(\|a_0\|^2+\|b_0\|^2)\sinh 2s_kt+a_0\cdot b_0\cosh 2s_kt

    (Chapter 3, ``eq-linear-mode``).

    ``s`` (k,), ``a0``/``b0`` (k, d) the projections of E(0) on u_k and of W(0) on v_k;
    ``t`` (T,) continuous time (learning rate x steps). Returns (T, k).
    """
    t = np.asarray(t, dtype=float)[:, None]
    A = 0.5 * ((a0**2).sum(-1) + (b0**2).sum(-1))
    B = (a0 * b0).sum(-1)
    return A * np.sinh(2 * s * t) + B * np.cosh(2 * s * t)


def linear_mode_onset(s: np.ndarray, a0: np.ndarray, b0: np.ndarray, theta: float) -> np.ndarray:
    r"""Time at which the early-phase mode strength reaches ``theta`` (exact for the linearised
    flow; Chapter 3, ``eq-linear-time``):

    solves :math:`A\sinh 2st+B\cosh 2st=\theta`, i.e.
    :math:`t_k=\frac{1}{2s_k}\ln\frac{\theta+\sqrt{\theta^2+A^2-B^2}}{A+B}`
    :math:`\approx\frac{1}{2s_k}\ln\frac{4\theta}{\|a_0+b_0\|^2}` for small init: of order
    :math:`\frac1{s_k}\ln\frac1{\varepsilon^2}`.
    """
    A = 0.5 * ((a0**2).sum(-1) + (b0**2).sum(-1))
    B = (a0 * b0).sum(-1)
    return np.log((theta + np.sqrt(theta**2 + A**2 - B**2)) / (A + B)) / (2 * s)


def psd_sqrt(A: torch.Tensor) -> torch.Tensor:
    r"""Square root :math:`A^{1/2}` of symmetric positive semi-definite matrices, (..., m, m).

    Negative eigenvalues from rounding are clamped to 0. The linear model's conservation
    law reads :math:`EE^\top=(QQ^\top)^{1/2}+O(\varepsilon^2)` with :math:`Q=EW`.
    """
    w, Q = torch.linalg.eigh(A)
    return (Q * w.clamp_min(0).sqrt()[..., None, :]) @ Q.transpose(-1, -2)


def gram_cos_pairs(G: torch.Tensor, tokens) -> torch.Tensor:
    r"""The cosines between ``tokens`` that a Gram matrix ``G`` (..., V, V) implies,
    :math:`G_{st}/\sqrt{G_{ss}G_{tt}}`, as the upper triangle over those tokens (..., P)."""
    d = G.diagonal(dim1=-2, dim2=-1).clamp_min(1e-300).sqrt()
    C = G / (d[..., :, None] * d[..., None, :])
    return M.upper_triangle(C[..., tokens, :][..., :, tokens])


# ------------------------------------------------------------- escape from a symmetric saddle


__all__ = [
    "CountedSignatures",
    "counted_signatures",
    "centring",
    "emb_mlp_order0",
    "emb_mlp_order1",
    "emb_mlp_contextual",
    "emb_mlp_terms",
    "neg_grad_E",
    "mean_prediction",
    "emb_mlp_paths",
    "signature_matrix",
    "linear_mode_strength_early",
    "linear_mode_onset",
    "psd_sqrt",
    "gram_cos_pairs",
    "residual_path_gradient",
]


# ----------------------------------------------------------------------------- decoder


def residual_path_gradient(
    E: torch.Tensor, U: torch.Tensor, X: torch.Tensor, y: torch.Tensor, eps: float = 1e-6
) -> torch.Tensor:
    r"""The order-0 (residual-path) term of the embedding gradient of a pre-RMSNorm decoder.

    With every block's output dropped (what small initialization makes of them at first),
    the decoder is :math:`\ell_t = n(E_{x_t})\,U` with :math:`n(h)=h/r(h)`,
    :math:`r(h)=\sqrt{\overline{h^2}+\epsilon}`, and the gradient of its mean
    cross-entropy over the :math:`N` predicted positions is, row by row,

    .. math:: G^{(0)}_s = \frac{1}{N\,r_s}\Big(g_s - \frac{n_s\,(n_s\cdot g_s)}{d}\Big),
              \qquad g_s = U\big(c_s\,p_s - C_{s\cdot}\big),

    with :math:`n_s = n(E_s)`, :math:`p_s=\mathrm{softmax}(n_sU)`, :math:`c_s` the count of
    token :math:`s` among the inputs and :math:`C_{s\nu}` the count of the pair
    (input :math:`s`, target :math:`\nu`): the batch's next-token signature of :math:`s`
    times :math:`c_s`, pushed through :math:`U` and the norm's projection. It moves every
    embedding along its next-token signature through one shared matrix.

    ``E`` is ``(K, V, d)``, ``U`` ``(K, d, V_out)``; ``X`` and ``y`` (targets) are
    ``(B, L)`` or ``(K, B, L)``. Returns ``(K, V, d)`` in ``E``'s dtype (tested against
    autograd of that model).
    """
    K, V, d = E.shape
    if X.shape != y.shape or X.dim() not in (2, 3):
        raise ValueError(
            f"X and y must both be (B, L) or (K, B, L); got {tuple(X.shape)} and {tuple(y.shape)}"
        )
    Xk = X.expand(K, *X.shape) if X.dim() == 2 else X
    yk = y.expand(K, *y.shape) if y.dim() == 2 else y
    Vo = U.shape[-1]
    N = Xk[0].numel()
    pair = Xk.reshape(K, -1) * Vo + yk.reshape(K, -1)
    C = torch.zeros(K, V * Vo, dtype=E.dtype, device=E.device)
    C.scatter_add_(1, pair, torch.ones(pair.shape, dtype=E.dtype, device=E.device))
    C = C.view(K, V, Vo)
    r = torch.sqrt((E * E).mean(-1, keepdim=True) + eps)
    n = E / r
    p = torch.softmax(torch.bmm(n, U), -1)
    drive = torch.bmm(C.sum(-1, keepdim=True) * p - C, U.transpose(1, 2))  # (K, V, d)
    return (drive - n * (n * drive).sum(-1, keepdim=True) / d) / (N * r)

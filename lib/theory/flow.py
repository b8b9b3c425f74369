r"""Embedding gradient flow by orders of the init scale (Chapters 3 and 4).

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

**One-layer attention** (:class:`lib.training.models.Transformer`, ``n_layers=1``, readout at the
last position ``L``, no LayerNorm, no MLP), with :math:`r^{\rm last}_s,\phi^{\rm last}_s`
the rate and label signature of the *last* token and :math:`W_{VO}=W_VW_O`:

.. math::
    -\frac{\partial L}{\partial E_s} =
    \underbrace{r^{\rm last}_s(\phi^{\rm last}_s-c)U^\top}_{O(\varepsilon)\ \text{residual}}
    + \underbrace{\tfrac1L r_s(\phi^y_s-c)U^\top W_{VO}^\top}_{O(\varepsilon^3)\ \text{value, uniform attention}}
    \underbrace{-\tfrac1n r^{\rm last}_s(E_s+P_L)U\Pi U^\top}_{O(\varepsilon^3)\ \text{softmax self-term}}
    + O(\varepsilon^5) + \underbrace{O(\varepsilon^7)}_{\text{QK path}}.

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
from ..training.models import ACTIVATION_TAYLOR, ACTIVATIONS, EmbMLP, Transformer, embed_sum

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
    r"""Leading :math:`O(\varepsilon^2)` term :math:`c_1 r_s(\phi^y_s-c)W_2^\top W_1^\top`, (K, V, d)."""
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
    """The three expansion terms ``order0``, ``order1``, ``contextual`` (each (K, V, d))."""
    return {
        "order0": emb_mlp_order0(model, params, S, centre),
        "order1": emb_mlp_order1(model, params, S, centre),
        "contextual": emb_mlp_contextual(model, params, S),
    }


def neg_grad_E(model, params, X, y) -> torch.Tensor:
    """The true embedding gradient flow :math:`-\\partial L/\\partial E` by autograd, (K, V, d), float64."""
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


def _check_attention_model(model: Transformer):
    if (
        model.n_layers != 1
        or model.d_mlp
        or model.norm != "none"
        or model.positions != "learned"
        or model.readout != "last"
        or model.ov != "learned"
    ):
        raise ValueError(
            "the attention expansion is derived for Transformer(n_layers=1, d_mlp=0, "
            "norm='none', positions='learned', readout='last', ov='learned')"
        )


def attention_terms(model: Transformer, params, S: CountedSignatures, centre="uniform") -> dict:
    """Residual (O(ε)), value (O(ε³)) and softmax self (O(ε³)) terms of the 1-layer model, (K, V, d)."""
    _check_attention_model(model)
    E, U = _w(params, "E"), _w(params, "U")
    WVO = _w(params, "V0") @ _w(params, "O0")  # (K, d, d)
    K, n, L = E.shape[0], U.shape[-1], S.seq_len
    c = centring(centre, n, S, K)
    UT = U.transpose(1, 2)
    resid = (S.r_last[None, :, None] * (S.phi_last[None] - c[:, None, :])) @ UT
    value = (S.r[None, :, None] * (S.phi_y[None] - c[:, None, :])) @ UT @ WVO.transpose(1, 2) / L
    h_last = E + _w(params, "P")[:, L - 1][:, None, :]  # E_s + P_L: the last position's input
    Uc = U - U.mean(-1, keepdim=True)  # U Pi
    self_term = -(1.0 / n) * S.r_last[None, :, None] * (h_last @ Uc @ Uc.transpose(1, 2))
    return {"residual": resid, "value": value, "self": self_term}


class _DetachedAttention(Transformer):
    """The same 1-layer model with the attention weights detached (no QK-path gradient)."""

    @classmethod
    def example(cls, K: int = 3):
        """A tiny 1-layer attention-only instance (the only shape this class computes)."""
        return cls(vocab_size=11, d_model=8, context_len=5, n_out=7)

    def forward(self, params, X, return_attention=False):
        from ..training.models import _lin, embed

        L = X.shape[-1]
        h = embed(params["E"], X) + params["P"][:, None, :L]
        mask = torch.ones(L, L, dtype=torch.bool, device=h.device).tril()
        q, k, v = _lin(h, params["Q0"]), _lin(h, params["K0"]), _lin(h, params["V0"])
        scores = torch.matmul(q, k.transpose(-1, -2)) / self.dh**0.5
        A = torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1).detach()
        h = (h + _lin(torch.matmul(A, v), params["O0"]))[:, :, -1]
        return _lin(h, params["U"])


def attention_qk_path(model: Transformer, params, X, y) -> torch.Tensor:
    """The exact QK-path part of -dL/dE: full gradient minus the one with attention detached."""
    _check_attention_model(model)
    det = _DetachedAttention(**{f: getattr(model, f) for f in model.__dataclass_fields__})
    return neg_grad_E(model, params, X, y) - neg_grad_E(det, params, X, y)


def attention_distance(A: torch.Tensor) -> torch.Tensor:
    r"""Mean total-variation distance of causal attention rows from uniform averaging.

    ``A`` is (K, B, L, L); returns (K,): :math:`\frac12\sum_j|A_{ij}-1/i|`, averaged over
    rows i and the batch (row i = 1 is always uniform and is included).
    """
    L = A.shape[-1]
    unif = torch.ones(L, L, dtype=A.dtype, device=A.device).tril()
    unif = unif / unif.sum(-1, keepdim=True)
    return 0.5 * (A - unif).abs().sum(-1).mean((-1, -2))


def attention_scores(model: Transformer, params, X) -> torch.Tensor:
    r"""Pre-softmax causal scores :math:`s_{ij}=h_iW_QW_K^\top h_j^\top/\sqrt{d_h}` of the
    single layer, (K, B, L, L) in float64, with the masked entries (j > i) NaN."""
    from ..training.models import embed

    _check_attention_model(model)
    L = X.shape[-1]
    h = embed(params["E"].detach().double(), X) + params["P"].detach().double()[:, None, :L]
    s = (h @ params["Q0"].detach().double()[:, None]) @ (
        h @ params["K0"].detach().double()[:, None]
    ).transpose(-1, -2)
    mask = torch.ones(L, L, dtype=torch.bool, device=s.device).tril()
    return (s / model.dh**0.5).masked_fill(~mask, float("nan"))


def first_order_attention_distance(s: torch.Tensor) -> torch.Tensor:
    r"""The distance from uniform attention to first order in the scores, (K, B, L, L) -> (K,).

    A causal softmax row is :math:`A_{ij}=\frac1i(1+s_{ij}-\bar s_i)+O(s^2)`, so
    :math:`D\approx\frac1{2i}\sum_{j\le i}|s_{ij}-\bar s_i|`, averaged over rows and the batch
    as in :func:`attention_distance`; ``s`` as :func:`attention_scores` returns it.
    """
    L = s.shape[-1]
    i = torch.arange(1, L + 1, dtype=torch.float64, device=s.device)[:, None]
    dev = (s - s.nanmean(-1, keepdim=True)).abs()
    return (torch.nansum(dev, -1) / (2 * i[:, 0])).mean((-1, -2))


def attention_entropy(A: torch.Tensor) -> torch.Tensor:
    """Mean entropy (nats) of the last row of causal attention, (K, B, L, L) -> (K,)."""
    return M.attention_entropy(A[..., -1, :]).mean(-1)


# ----------------------------------------------------------------------------- linear model


def signature_matrix(S: CountedSignatures, centre="uniform") -> torch.Tensor:
    r"""The signature matrix :math:`M=R(\Phi^y-\mathbf 1c^\top)` that drives the linear model, (V, n)."""
    c = centring(centre, S.n_labels, S, 1)[0]
    return S.r[:, None] * (S.phi_y - c[None])


def linear_mode_strength_early(s: np.ndarray, a0: np.ndarray, b0: np.ndarray, t) -> np.ndarray:
    r"""Mode strength :math:`u_k(t)=a_k(t)\cdot b_k(t)` of the linearised flow
    :math:`\dot a_k=s_kb_k,\ \dot b_k=s_ka_k` (valid while the mode is small):

    .. math:: u_k(t)=\tfrac12(\|a_0\|^2+\|b_0\|^2)\sinh 2s_kt+a_0\cdot b_0\cosh 2s_kt.

    ``s`` (k,), ``a0``/``b0`` (k, d) the projections of E(0) on u_k and of W(0) on v_k;
    ``t`` (T,) continuous time (learning rate x steps). Returns (T, k).
    """
    t = np.asarray(t, dtype=float)[:, None]
    A = 0.5 * ((a0**2).sum(-1) + (b0**2).sum(-1))
    B = (a0 * b0).sum(-1)
    return A * np.sinh(2 * s * t) + B * np.cosh(2 * s * t)


def linear_mode_onset(s: np.ndarray, a0: np.ndarray, b0: np.ndarray, theta: float) -> np.ndarray:
    r"""Time at which the early-phase mode strength reaches ``theta`` (exact for the linearised flow):

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


def emb_mlp_input_hessian(model: EmbMLP, params, X, y) -> torch.Tensor:
    r"""Per-sequence Hessian of the cross-entropy with respect to the bag :math:`h=\sum_iE_{x_i}`.

    With :math:`a=hW_1`, :math:`f=\sigma(a)W_2`, :math:`p=\mathrm{softmax}(f)` and
    :math:`J=W_1\,\mathrm{diag}(\sigma'(a))\,W_2` (:math:`d\times n`),

    .. math:: \nabla^2_h\ell = J(\mathrm{diag}\,p-pp^\top)J^\top
              + W_1\,\mathrm{diag}\big(\sigma''(a)\odot W_2(p-e_y)\big)\,W_1^\top .

    ``X`` is ``(N, L)`` shared by all instances; returns ``(K, N, d, d)`` in float64.
    """
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
    J = torch.einsum("kdm,knm,kmc->kndc", W1, d1, W2)  # (K, N, d, n)
    Jp = torch.einsum("kndc,knc->knd", J, p)
    gauss = torch.einsum("kndc,knc,knec->knde", J, p, J) - Jp[..., :, None] * Jp[..., None, :]
    w = d2 * torch.einsum("kmc,knc->knm", W2, p - Y)  # (K, N, m)
    curv = torch.einsum("kdm,knm,kem->knde", W1, w, W1)
    return gauss + curv


def antisymmetric_hessian(model: EmbMLP, params, X, y, first, second) -> torch.Tensor:
    r"""Hessian of the mean loss in the antisymmetric embedding mode, ``(K, P d, P d)``.

    For token pairs ``(first[p], second[p])`` write :math:`E_{first}=S+A`,
    :math:`E_{second}=S-A`. The bag of sequence :math:`n` moves by
    :math:`\delta h_n=\sum_p M_{np}A_p` with :math:`M_{np}=c_{first_p}(X_n)-c_{second_p}(X_n)`,
    so :math:`H_A=\frac1N\sum_n (M_n\otimes M_n)\otimes\nabla^2_h\ell_n`
    (:func:`emb_mlp_input_hessian`). On a state symmetric under the exchange of each pair,
    gradient descent at rate :math:`\eta` moves :math:`A` by
    :math:`A\leftarrow(I-\tfrac\eta2H_A)A` to first order: the linearized escape.
    """
    Hn = emb_mlp_input_hessian(model, params, X, y)
    X = torch.as_tensor(X, device=Hn.device)
    V = params["E"].shape[1]
    C = torch.zeros(X.shape[0], V, dtype=F64, device=Hn.device).scatter_add_(
        1, X, torch.ones(X.shape, dtype=F64, device=Hn.device)
    )
    M = C[:, list(first)] - C[:, list(second)]  # (N, P)
    K, N, d, _ = Hn.shape
    P = M.shape[1]
    H = torch.einsum("np,nq,knij->kpiqj", M, M, Hn) / N
    return H.reshape(K, P * d, P * d)


def antisymmetric_part(E, first, second) -> torch.Tensor:
    """:math:`A=(E_{first}-E_{second})/2`, shape ``(K, P, d)``."""
    E = torch.as_tensor(E)
    return (E[:, list(first)] - E[:, list(second)]) / 2


def propagate_linear(steps, H, eta, a0, total: int) -> np.ndarray:
    r"""Norm of the antisymmetric mode under the linearized GD map, at every step 0..``total``.

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
    """Whether every predicted escape step is within a ratio ``1 +- tol`` of the measured one."""
    r = np.asarray(predicted, dtype=float) / np.asarray(measured, dtype=float)
    return bool(np.all(np.abs(r - 1) <= tol))


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
    "attention_terms",
    "attention_qk_path",
    "attention_distance",
    "attention_scores",
    "first_order_attention_distance",
    "attention_entropy",
    "signature_matrix",
    "linear_mode_strength_early",
    "linear_mode_onset",
    "psd_sqrt",
    "gram_cos_pairs",
    "emb_mlp_input_hessian",
    "antisymmetric_hessian",
    "antisymmetric_part",
    "propagate_linear",
    "growth_rate",
    "escape_prediction_holds",
]

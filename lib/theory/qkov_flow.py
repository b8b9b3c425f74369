"""The gradient flow of factorized QK/OV circuits, and the reduced theory's two scalars.

For the single-query attention of :mod:`lib.training.qkov` (Chapter 7, ``eq-qkov-factor-flow``, and Chapter 8,
``sec-qkov-bridge``):
gradient flow on factors conserves their balancedness (:func:`balancedness`), and moves the
collapsed matrix they form at a rate its own factors set (:func:`collapsed_flow`);
:func:`symmetric_projection` reads collapsed weights as the two scalars
``(mu_qk, mu_ov)`` of the reduced theory (:mod:`lib.theory.reduced`).
"""

from __future__ import annotations

import torch

from ..data.tasks import ScanSnap
from ..training.qkov import SingleQueryAttention

__all__ = ["balancedness", "collapsed_flow", "symmetric_projection"]


def balancedness(model: SingleQueryAttention, params) -> dict[str, torch.Tensor]:
    """The conserved matrices of gradient flow (Chapter 7, ``eq-qkov-factor-flow``; Arora et al.
    2018):
    W_Q W_Q^T - W_K W_K^T for W_QK = W_Q^T W_K
    and W_O^T W_O - W_V W_V^T for W_OV = W_O W_V, each (K, d, d), with the Grams' scale."""
    out = {}
    if model.qk == "factorized":
        W_Q, W_K = params["W_Q"], params["W_K"]
        gq, gk = W_Q @ W_Q.transpose(-1, -2), W_K @ W_K.transpose(-1, -2)
        out["qk"], out["qk_scale"] = gq - gk, gq.flatten(1).norm(dim=1) + gk.flatten(1).norm(dim=1)
    if model.ov == "factorized":
        W_O, W_V = params["W_O"], params["W_V"]
        go, gv = W_O.transpose(-1, -2) @ W_O, W_V @ W_V.transpose(-1, -2)
        out["ov"], out["ov_scale"] = go - gv, go.flatten(1).norm(dim=1) + gv.flatten(1).norm(dim=1)
    return out


def collapsed_flow(model: SingleQueryAttention, params, grad_qk, grad_ov):
    """The collapsed-matrix velocity induced by gradient descent on the factors
    (Chapter 7, ``eq-qkov-factor-flow``).

    With G = dL/dW for the collapsed matrix, a unit-rate step on the factors moves
    W_QK = W_Q^T W_K by -(W_Q^T W_Q G + G W_K^T W_K) and W_OV = W_O W_V by
    -(W_O W_O^T G + G W_V^T W_V) (first order); a collapsed circuit moves by -G.
    """
    if model.qk == "factorized":
        W_Q, W_K = params["W_Q"], params["W_K"]
        v_qk = -(W_Q.transpose(-1, -2) @ W_Q @ grad_qk + grad_qk @ W_K.transpose(-1, -2) @ W_K)
    else:
        v_qk = -grad_qk
    if model.ov == "factorized":
        W_O, W_V = params["W_O"], params["W_V"]
        v_ov = -(W_O @ W_O.transpose(-1, -2) @ grad_ov + grad_ov @ W_V.transpose(-1, -2) @ W_V)
    else:
        v_ov = -grad_ov
    return v_qk, v_ov


def symmetric_projection(W_QK: torch.Tensor, W_OV: torch.Tensor, scale: float):
    """Project collapsed weights (..., V, V) onto (mu_qk, mu_ov) of the symmetric ansatz
    (Chapter 8, ``sec-qkov-bridge``).

    mu_qk: for each class c, mean score of q_c on its distinct block minus the mean on the
    common tokens 0-9, times the score scale, averaged over classes. mu_ov: for each
    distinct token of class c, W_OV[y_c, v] minus the mean over the other classes' next
    tokens, averaged. Weights of tokens that never meet query q_c are not used.
    """

    qk, ov = [], []
    common = list(ScanSnap.COMMON)
    for c in range(ScanSnap.N_CLASSES):
        blk = ScanSnap.block(c)
        q, y = ScanSnap.QUERY[c], ScanSnap.NEXT[c]
        others = [ScanSnap.NEXT[d] for d in range(ScanSnap.N_CLASSES) if d != c]
        qk.append(W_QK[..., q, blk].mean(-1) - W_QK[..., q, common].mean(-1))
        ov.append((W_OV[..., y, blk] - W_OV[..., others, :][..., blk].mean(-2)).mean(-1))
    return (torch.stack(qk).mean(0) * scale).cpu().numpy(), torch.stack(ov).mean(0).cpu().numpy()

r"""Where attention goes: entropies, distances from uniform, faithfulness to a rationale.

Attention matrices are ``(K, B, L, L)`` (causal) or ``(K, B, L)`` (one readout row), per
instance. :func:`attention_entropy` is the entropy of any distribution over the last axis;
:func:`readout_attention_entropy` its mean over the readout (last) rows of causal
attention; :func:`attention_distance` is the total-variation distance of causal attention
from uniform averaging, and :func:`attention_spread_callbacks` logs the readout's distance
from uniform during training; :func:`faithfulness` scores a classifier's attention
against a known rationale token.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import torch

from ..training.engine import cached_callbacks
from ..training.qkov import SingleQueryAttention
from ..training.transformer import qk_product

__all__ = [
    "attention_entropy",
    "readout_attention_entropy",
    "attention_distance",
    "attention_spread_callbacks",
    "faithfulness",
    "attention_stats",
    "readout_attention_callbacks",
]


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


def attention_distance(A: torch.Tensor) -> torch.Tensor:
    r"""Mean total-variation distance of causal attention rows from uniform averaging.

    ``A`` is (K, B, L, L); returns (K,): :math:`\frac12\sum_j|A_{ij}-1/i|`, averaged over
    rows i and the batch (row i = 1 is always uniform and is included).
    """
    L = A.shape[-1]
    unif = torch.ones(L, L, dtype=A.dtype, device=A.device).tril()
    unif = unif / unif.sum(-1, keepdim=True)
    return 0.5 * (A - unif).abs().sum(-1).mean((-1, -2))


def readout_attention_entropy(A: torch.Tensor) -> torch.Tensor:
    """Mean entropy (nats) of the readout's attention, the last row of causal attention
    matrices: (K, B, L, L) -> (K,), the mean over the batch of :func:`attention_entropy`."""
    return attention_entropy(A[..., -1, :]).mean(-1)


def attention_spread_callbacks(model, X) -> dict:
    r"""Callback ``attn_tv``, per instance ``(K,)``: how far attention is from uniform on ``X``.

    The total-variation distance :math:`\tfrac12\sum_j |A_j - 1/L|` of the readout's
    attention row from the uniform one, averaged over the sequences of ``X``: 0 at uniform
    attention (the small-init limit), 1 - 1/L at most. ``model.forward(params, X,
    return_attention=True)`` must return ``(logits, A)`` with ``A`` of shape ``(K, B, L)``.
    """

    def tv(step, params):
        _, A = model.forward(params, X, return_attention=True)
        return 0.5 * (A - 1.0 / A.shape[-1]).abs().sum(-1).mean(-1)

    return {"attn_tv": tv}


@torch.no_grad()
def attention_stats(model: SingleQueryAttention, params, X, y, distinct_mask) -> dict:
    """Per-sample attention metrics on a held-out batch (Chapter 8, ``sec-qkov-similar-loss``), each (K, B)
    (loss (K,)); ``distinct`` and ``separability`` are the official code's metrics.

    ``distinct``: attention mass on distinct tokens; ``p_true``: softmax probability of the
    right next token; ``entropy``: -sum_t a_t log a_t over positions; ``separability``:
    max over distinct positions of a_t minus min over the other positions; ``query_copy``:
    attention mass on the positions that hold the query token.
    """
    z, a = model.forward(params, X, return_attention=True)
    logp = torch.log_softmax(z, -1)
    yk = y.expand(z.shape[0], *y.shape)
    lp_true = torch.gather(logp, -1, yk[..., None])[..., 0]
    dm = distinct_mask.expand_as(a)
    distinct = (a * dm).sum(-1)
    ent = attention_entropy(a)
    sep = a.masked_fill(~dm, -1.0).amax(-1) - a.masked_fill(dm, 2.0).amin(-1)
    # Attention on copies of the query token (itself included): a shortcut, since the
    # query's identity alone gives the class (attending to "my own token" is class-specific).
    copy = (a * (X == X[..., -1:]).expand_as(a)).sum(-1)
    return {
        "loss": -lp_true.mean(-1),
        "distinct": distinct,
        "p_true": lp_true.exp(),
        "entropy": ent,
        "separability": sep,
        "query_copy": copy,
    }


def readout_attention_callbacks(model, X, params0) -> dict:
    """Callbacks, per instance, on the readout row of layer 0 of a one-layer
    :class:`lib.training.transformer.Transformer` on ``X``: its mean attention on each
    position ``attn`` (K, L), its total-variation distance from uniform ``attn_dist`` (K,),
    its largest weight ``attn_max`` (K,; mean over sequences: 1 is a saturated softmax), the
    Frobenius norm of W_QK ``qk_norm`` (K,), and its relative change ``qk_drift`` =
    |W_QK - W_QK(0)| / |W_QK(0)| (K,), from the initial weights ``params0``."""
    QK0 = qk_product(model, params0).detach().clone()
    unif = 1.0 / X.shape[-1]
    # Layer 0's attention depends only on E, P and the QK weights: a view of the model
    # without its value path and MLP computes the same scores with a third of the work.
    scores_only = dataclasses.replace(model, ov="identity", d_mlp=0)

    def measure(step, p):
        _, A = scores_only.forward(p, X, return_attention=True)
        row = A[0][..., -1, :].double()  # (K, N, L): the readout (gate) position's row
        W = qk_product(model, p)
        return dict(
            attn=row.mean(1),
            attn_dist=0.5 * (row - unif).abs().sum(-1).mean(1),
            attn_max=row.max(-1).values.mean(1),
            qk_norm=W.flatten(1).norm(dim=1),
            qk_drift=(W - QK0).flatten(1).norm(dim=1) / QK0.flatten(1).norm(dim=1),
        )

    return cached_callbacks(measure, ("attn", "attn_dist", "attn_max", "qk_norm", "qk_drift"))

"""Single-query attention with collapsed or factorized QK/OV circuits (Chapter 7).

The network is the one of the official code of Vashisht and Ramaswamy (ICML 2026,
``vashisht2026faster``; repository ``vashishtrahul/Faster-Query-Key-Learning-Sharpens-
Attention-in-Self-Attention-Models``, folder ``Fig2-Heatmaps``), Chapter 7, "The model and
the task": one-hot tokens over a vocabulary of ``V = 50``, only the last position queries,
scores scaled by ``1/sqrt(50)``, no positional encoding, residual, LayerNorm or bias::

    s_t = e_q^T W_QK e_{x_t} / sqrt(V),   a = softmax(s),   z = W_OV sum_t a_t e_{x_t}

with ``W_QK`` collapsed or ``W_Q^T W_K`` (factorized) and ``W_OV`` collapsed or ``W_O W_V``.
The paper's names: FA/CA = factorized/collapsed **A**ttention (QK), FO/CO = factorized /
collapsed **O**utput (OV), so FAFO, FACO, CAFO, CACO.

Here: the model, the official code's inits, the fixed-attention OV model (the paper's Fig
3; Chapter 8, ``sec-qkov-fixed``) and the init rate of PyTorch's default init. The official code's attention
metrics are :func:`lib.measure.attention.attention_stats`; the conserved (balancedness)
matrices, the collapsed-matrix flow of factorized circuits (Chapter 7, ``eq-qkov-factor-flow``) and the projection
of collapsed weights onto the reduced theory's two scalars (Chapter 8, ``sec-qkov-bridge``) are
:mod:`lib.theory.qkov_flow`. The reduced theory itself is :mod:`lib.theory.reduced`; the Scan-and-Snap
data and the agreement grammar are :mod:`lib.data.tasks`; the chapter's runs, what it reads
from them and the official code's saved outputs are :mod:`lib.experiments.qkov_training`,
:mod:`lib.experiments.qkov_readings` and :mod:`lib.experiments.qkov_official`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from .init import ParamSpec
from .layers import token_counts

PARAMETERIZATIONS = {
    "FAFO": ("factorized", "factorized"),
    "FACO": ("factorized", "collapsed"),
    "CAFO": ("collapsed", "factorized"),
    "CACO": ("collapsed", "collapsed"),
}
_KINDS = ("collapsed", "factorized")


# ---------------------------------------------------------------------------
# The network
# ---------------------------------------------------------------------------


@dataclass
class SingleQueryAttention:
    """One attention layer read out at the last position, batched over K instances.

    ``qk`` and ``ov`` are ``"collapsed"`` or ``"factorized"``; ``d_head`` is the inner
    dimension of the factors (the code uses 50). Weights (without the instance dim):
    ``W_QK (V, V)`` or ``W_Q, W_K (d, V)``; ``W_OV (V, V)`` or ``W_V (d, V), W_O (V, d)``.
    """

    qk: str = "collapsed"
    ov: str = "collapsed"
    vocab_size: int = 50
    d_head: int = 50
    score_scale: float | None = None  # default 1/sqrt(vocab_size), as in the code

    def __post_init__(self):
        for name, kind in (("qk", self.qk), ("ov", self.ov)):
            if kind not in _KINDS:
                raise ValueError(f"{name} must be one of {_KINDS}, got {kind!r}")
        if self.vocab_size < 2 or self.d_head < 1:
            raise ValueError("vocab_size must be >= 2 and d_head >= 1")

    @classmethod
    def example(cls, K: int = 3) -> SingleQueryAttention:
        """A tiny factorized instance (FAFO) for the library-wide tests."""
        return cls(qk="factorized", ov="factorized", vocab_size=12, d_head=6)

    @classmethod
    def named(cls, name: str, **kw) -> SingleQueryAttention:
        """The model for one of the paper's names FAFO, FACO, CAFO, CACO."""
        if name not in PARAMETERIZATIONS:
            raise ValueError(
                f"unknown parameterization {name!r}; choose from {list(PARAMETERIZATIONS)}"
            )
        qk, ov = PARAMETERIZATIONS[name]
        return cls(qk=qk, ov=ov, **kw)

    @property
    def name(self) -> str:
        return ("FA" if self.qk == "factorized" else "CA") + (
            "FO" if self.ov == "factorized" else "CO"
        )

    @property
    def scale(self) -> float:
        return self.score_scale if self.score_scale is not None else self.vocab_size**-0.5

    def specs(self) -> dict[str, ParamSpec]:
        V, d = self.vocab_size, self.d_head
        s = {}
        if self.qk == "collapsed":
            s["W_QK"] = ParamSpec((V, V), V, "qk")
        else:
            s["W_Q"] = ParamSpec((d, V), V, "qk")
            s["W_K"] = ParamSpec((d, V), V, "qk")
        if self.ov == "collapsed":
            s["W_OV"] = ParamSpec((V, V), V, "ov")
        else:
            s["W_V"] = ParamSpec((d, V), V, "ov")
            s["W_O"] = ParamSpec((V, d), d, "ov")
        return s

    def qk_matrix(self, params) -> torch.Tensor:
        """The collapsed (K, V, V) matrix W_QK (= W_Q^T W_K when factorized)."""
        if self.qk == "collapsed":
            return params["W_QK"]
        return torch.matmul(params["W_Q"].transpose(-1, -2), params["W_K"])

    def ov_matrix(self, params) -> torch.Tensor:
        """The collapsed (K, V, V) matrix W_OV (= W_O W_V when factorized)."""
        if self.ov == "collapsed":
            return params["W_OV"]
        return torch.matmul(params["W_O"], params["W_V"])

    def token_attention(self, params, X: torch.Tensor):
        """Per-token attention: (p, c) with p (K, B, V) the weight of ONE position holding
        token v and c the token counts; the attended vector is h = c * p."""
        V = self.vocab_size
        q = F.one_hot(X[..., -1], V).to(self.qk_matrix(params).dtype)
        scores = torch.matmul(q, self.qk_matrix(params)) * self.scale  # (K, B, V)
        c = token_counts(X, V, scores.dtype)
        # Every position holding token v has the same score, so softmax over positions is a
        # softmax over tokens with log-count offsets (absent tokens get -inf).
        logits = scores + torch.log(c)
        h = torch.softmax(logits, dim=-1)
        return h / c.clamp(min=1.0), c.expand_as(h)

    def forward(self, params, X: torch.Tensor, return_attention: bool = False):
        """Logits (K, B, V) over the next token; with ``return_attention`` also a (K, B, T)."""
        if X.dim() not in (2, 3):
            raise ValueError(f"tokens must be (B, T) or (K, B, T); got {tuple(X.shape)}")
        p, c = self.token_attention(params, X)
        h = p * c
        z = torch.matmul(h, self.ov_matrix(params).transpose(-1, -2))
        if not return_attention:
            return z
        idx = X if X.dim() == 3 else X.expand(p.shape[0], *X.shape)
        return z, torch.gather(p, -1, idx)


def identity_init_(params: dict[str, torch.Tensor], names, scale: float = 1e-6) -> None:
    """Set the named square weights to ``scale * I`` in every instance (the code's small init).

    Applied after :func:`lib.training.init.init_params`, which draws every weight first.
    """
    with torch.no_grad():
        for n in names:
            W = params[n]
            if W.shape[-1] != W.shape[-2]:
                raise ValueError(
                    f"identity init needs a square weight; {n} is {tuple(W.shape[1:])}"
                )
            W.zero_()
            W.add_(scale * torch.eye(W.shape[-1], dtype=W.dtype, device=W.device))


def code_init_(model: SingleQueryAttention, params) -> None:
    """The official notebooks' inits (``Fig2-Heatmaps``; Chapter 7, ``sec-qkov-rescaling``): FAFO keeps its
    random QK and sets W_V = W_O = 1e-6 I; FACO and CAFO set every weight to 1e-6 I; CACO
    stays random."""
    name = model.name
    if name == "FAFO":
        identity_init_(params, ["W_V", "W_O"])
    elif name in ("FACO", "CAFO"):
        identity_init_(params, list(params))


@dataclass
class FixedAttentionOV:
    """Only the OV circuit, on fixed attention (the paper's Fig 3; Chapter 8, ``sec-qkov-fixed``).

    Attention puts mass ``alpha_k`` (one per instance, a (K,) tensor) uniformly on the
    distinct positions (token >= ``distinct_start``) and ``1 - alpha_k`` uniformly on the
    others; ``z = W_OV h (+ b_OV)``. ``bias=True`` adds the output bias of the official
    code's collapsed variant (an ``nn.Linear(50, 50)``); its factorized variant has none.
    """

    alpha: torch.Tensor
    ov: str = "collapsed"
    vocab_size: int = 50
    d_head: int = 50
    distinct_start: int = 10
    bias: bool = False

    def __post_init__(self):
        if self.ov not in _KINDS:
            raise ValueError(f"ov must be one of {_KINDS}, got {self.ov!r}")
        a = torch.as_tensor(self.alpha)
        if a.dim() != 1 or ((a < 0) | (a > 1)).any():
            raise ValueError("alpha must be a (K,) tensor of masses in [0, 1]")

    @classmethod
    def example(cls, K: int = 3) -> FixedAttentionOV:
        """A tiny factorized-OV instance with K distinct masses, for the library-wide tests."""
        return cls(
            torch.linspace(0.1, 0.9, K), ov="factorized", vocab_size=12, d_head=6, distinct_start=6
        )

    def specs(self) -> dict[str, ParamSpec]:
        full = SingleQueryAttention(ov=self.ov, vocab_size=self.vocab_size, d_head=self.d_head)
        s = {n: sp for n, sp in full.specs().items() if sp.group == "ov"}
        if self.bias:
            s["b_OV"] = ParamSpec((self.vocab_size,), self.vocab_size, "ov")
        return s

    def ov_matrix(self, params):
        return SingleQueryAttention(ov=self.ov, vocab_size=self.vocab_size).ov_matrix(params)

    def forward(self, params, X: torch.Tensor, alpha: torch.Tensor | None = None):
        """Logits (K, B, V) for tokens (B, T) shared by all instances or (K, B, T) per instance.

        Every distinct position gets ``alpha / n_d`` and every other ``(1 - alpha) / n_o``, so
        ``h = sum_t a_t e_{x_t}`` is the token counts times a per-token weight: no (B, T, V)
        one-hot tensor is built.
        """
        W_OV = self.ov_matrix(params)
        alpha = torch.as_tensor(self.alpha if alpha is None else alpha)
        alpha = alpha.to(device=W_OV.device, dtype=W_OV.dtype)  # the model may hold a CPU alpha
        K = alpha.shape[0]
        if X.dim() not in (2, 3) or (X.dim() == 3 and X.shape[0] != K):
            raise ValueError(f"tokens must be (B, T) or (K={K}, B, T); got {tuple(X.shape)}")
        c = token_counts(X, self.vocab_size, alpha.dtype)  # (B, V) or (K, B, V)
        d = (torch.arange(self.vocab_size, device=c.device) >= self.distinct_start).to(c.dtype)
        n_d = (c * d).sum(-1, keepdim=True).clamp(min=1.0)
        n_o = (c * (1 - d)).sum(-1, keepdim=True).clamp(min=1.0)
        # One mass per instance, broadcast over (B, V) only: instance k's attention is built
        # from instance k's tokens and alpha_k, never from another instance's.
        a_k = alpha.view(K, 1, 1)
        h = c * (a_k * d / n_d + (1 - a_k) * (1 - d) / n_o)  # (K, B, V)
        z = torch.matmul(h, W_OV.transpose(-1, -2))
        return z + params["b_OV"][:, None, :] if self.bias else z


# ---------------------------------------------------------------------------
# The default init's rate, and the projection onto the reduced theory
# ---------------------------------------------------------------------------


def torch_default_gamma(fan_in: int) -> float:
    """The init rate gamma at which ``N(0, fan_in^(-2 gamma))`` has the standard deviation
    ``(3 fan_in)^(-1/2)`` of PyTorch's default ``nn.Linear`` init, ``U(+-fan_in^(-1/2))``
    (the init of the official Fig 3 code; Chapter 8, ``sec-qkov-fixed``)."""
    return float(np.log(3 * fan_in) / (2 * np.log(fan_in)))

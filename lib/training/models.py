"""The book's models, batched over a leading instance dimension K.

A model is a small object that knows its weights' shapes (``specs``) and maps
weights + tokens to logits (``forward``). Weights live outside it, as a dict of
tensors of shape ``(K, ...)`` made by :func:`lib.training.init.init_params`, so one model
object serves a whole sweep of seeds and hyperparameters, and the training engine
(:mod:`lib.training.engine`) can give every instance its own learning rates.

Tokens ``X`` are ``(B, L)`` (one batch shared by all instances) or ``(K, B, L)``
(a batch per instance). Logits are ``(K, B, n_out)``.

The batched-model protocol, which every model in ``lib`` follows (and
``tests/test_isolation.py`` checks for every class that has ``specs`` and ``forward``):
``specs()``, ``forward(params, X)`` for both token layouts, an attribute ``vocab_size``,
and a classmethod ``example(K)`` that returns a tiny instance for the tests. Instance k's
output depends on instance k's weights and tokens alone.

Here: the bag-of-tokens models (:class:`EmbMLP`, :class:`LinearEmb`, :class:`AttnEmbMLP`)
and :func:`build`, the one way weights are made. The transformer is
:mod:`lib.training.transformer` and the pieces the models share (embeddings, norms,
activations) :mod:`lib.training.layers`; :class:`Transformer` is named here too, so that
``models`` is the one namespace of every model the chapters train.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .init import ParamSpec, init_params
from .layers import ACTIVATIONS, embed_sum, per_instance_tokens
from .transformer import Transformer

__all__ = ["EmbMLP", "LinearEmb", "AttnEmbMLP", "Transformer", "build"]


@dataclass
class EmbMLP:
    """Emb-MLP of Yao et al. (2025): f(X) = sigma((sum_{s in X} E_s) W1) W2, no biases
    (Chapter 3, ``eq-embmlp``)."""

    vocab_size: int
    d_model: int
    d_hidden: int
    n_out: int
    activation: str = "silu"
    emb_fan_in: int | None = None  # default: vocab_size, the group's convention (d_in of E)

    def __post_init__(self):
        if self.activation not in ACTIVATIONS:
            raise ValueError(
                f"unknown activation {self.activation!r}; choose from {sorted(ACTIVATIONS)}"
            )

    @classmethod
    def example(cls, K: int = 3) -> EmbMLP:
        """A tiny instance for the library-wide tests."""
        return cls(vocab_size=11, d_model=6, d_hidden=8, n_out=7)

    def specs(self) -> dict[str, ParamSpec]:
        return {
            "E": ParamSpec(
                (self.vocab_size, self.d_model), self.emb_fan_in or self.vocab_size, "embedding"
            ),
            "W1": ParamSpec((self.d_model, self.d_hidden), self.d_model, "mlp"),
            "W2": ParamSpec((self.d_hidden, self.n_out), self.d_hidden, "unembedding"),
        }

    def forward(self, params: dict[str, torch.Tensor], X: torch.Tensor) -> torch.Tensor:
        h = embed_sum(params["E"], X)
        return torch.matmul(
            ACTIVATIONS[self.activation](torch.matmul(h, params["W1"])), params["W2"]
        )


@dataclass
class LinearEmb:
    """Two-layer linear embedding model: f(X) = (sum_{s in X} E_s) W. Driven by M = R(Phi^y - U)."""

    vocab_size: int
    d_model: int
    n_out: int
    emb_fan_in: int | None = None

    @classmethod
    def example(cls, K: int = 3) -> LinearEmb:
        """A tiny instance for the library-wide tests."""
        return cls(vocab_size=11, d_model=6, n_out=7)

    def specs(self) -> dict[str, ParamSpec]:
        return {
            "E": ParamSpec(
                (self.vocab_size, self.d_model), self.emb_fan_in or self.vocab_size, "embedding"
            ),
            "W": ParamSpec((self.d_model, self.n_out), self.d_model, "unembedding"),
        }

    def forward(self, params: dict[str, torch.Tensor], X: torch.Tensor) -> torch.Tensor:
        return torch.matmul(embed_sum(params["E"], X), params["W"])


@dataclass
class AttnEmbMLP:
    r"""The Emb-MLP with its bag of embeddings pooled by attention (Chapter 2's three stairs).

    .. math:: f(X)=\sigma(hW_1)W_2,\qquad h=L\sum_{j=1}^{L}A_j E_{x_j},\qquad
              A=\mathrm{softmax}_j\big((E_{x_L}W_Q)\cdot(E_{x_j}W_K)/\sqrt{d_{\rm head}}\big):

    the last token queries every token of the sequence (itself included); one head, no
    biases, no positions, no value or output weights. At uniform attention (:math:`A_j=1/L`,
    the small-init limit, where the scores are :math:`O(\varepsilon^4)`) ``h`` is the bag
    :math:`\sum_j E_{x_j}` and ``f`` is :class:`EmbMLP`; the context reaches the readout only
    through the attention weights. ``E``, ``W1``, ``W2`` are drawn first, with
    :class:`EmbMLP`'s shapes and fan-ins, so a seed gives both models the same three;
    ``Q``, ``K`` (group ``"qk"``) come after. A token that occurs twice is pooled twice.

    The scores are read off a per-instance table of every (query, key) token pair,
    ``(E W_Q)(E W_K)^T``, and the pooling is a product with per-sequence token weights (as
    :func:`embed_sum`): no ``(K, B, L, d)`` tensor is formed.
    """

    vocab_size: int
    d_model: int
    d_hidden: int
    n_out: int
    d_head: int | None = None
    activation: str = "silu"
    emb_fan_in: int | None = None  # default: vocab_size, as EmbMLP

    def __post_init__(self):
        if self.activation not in ACTIVATIONS:
            raise ValueError(
                f"unknown activation {self.activation!r}; choose from {sorted(ACTIVATIONS)}"
            )

    @classmethod
    def example(cls, K: int = 3) -> AttnEmbMLP:
        """A tiny instance for the library-wide tests."""
        return cls(vocab_size=11, d_model=6, d_hidden=8, n_out=7, d_head=4)

    @property
    def dh(self) -> int:
        return self.d_head or self.d_model

    def specs(self) -> dict[str, ParamSpec]:
        d = self.d_model
        return {
            "E": ParamSpec((self.vocab_size, d), self.emb_fan_in or self.vocab_size, "embedding"),
            "W1": ParamSpec((d, self.d_hidden), d, "mlp"),
            "W2": ParamSpec((self.d_hidden, self.n_out), self.d_hidden, "unembedding"),
            "Q": ParamSpec((d, self.dh), d, "qk"),
            "K": ParamSpec((d, self.dh), d, "qk"),
        }

    def forward(self, params, X, return_attention: bool = False, return_hidden: bool = False):
        """Logits ``(K, B, n_out)``. With ``return_attention``, also ``A`` ``(K, B, L)``;
        with ``return_hidden``, also ``{"pooled": h (K, B, d), "mlp": sigma(h W1) (K, B, d_hidden)}``.
        """
        E = params["E"]
        K, V, _ = E.shape
        Xk = per_instance_tokens(X, K)
        L = Xk.shape[-1]
        table = torch.matmul(torch.matmul(E, params["Q"]), torch.matmul(E, params["K"]).mT)
        rows = torch.gather(table / self.dh**0.5, 1, Xk[..., -1:].expand(-1, -1, V))
        A = torch.softmax(torch.gather(rows, 2, Xk), dim=-1)  # (K, B, L)
        weights = torch.zeros(*Xk.shape[:-1], V, dtype=E.dtype, device=E.device)
        h = torch.matmul(weights.scatter_add(2, Xk, L * A), E)  # (K, B, d)
        act = ACTIVATIONS[self.activation](torch.matmul(h, params["W1"]))
        logits = torch.matmul(act, params["W2"])
        out = (logits,) + ((A,) if return_attention else ())
        out += ({"pooled": h, "mlp": act},) if return_hidden else ()
        return out if len(out) > 1 else logits


def build(model, seeds, gamma=1.0, group_gamma=None, device="cpu"):
    """Initialize ``model``'s weights for the given seeds through the one init function."""
    return init_params(model.specs(), seeds, gamma=gamma, group_gamma=group_gamma, device=device)

r"""The embedding gradient of one-layer attention by orders of the init scale (Chapter 4).

For :class:`lib.training.models.Transformer` with ``n_layers=1``, readout at the last
position ``L``, no norm and no MLP (:mod:`lib.theory.flow` has the derivation and the
Emb-MLP's terms), with :math:`r^{\rm last}_s,\phi^{\rm last}_s` the rate and label signature
of the *last* token and :math:`W_{VO}=W_VW_O`:

.. math::
    -\frac{\partial L}{\partial E_s} =
    \underbrace{r^{\rm last}_s(\phi^{\rm last}_s-c)U^\top}_{O(\varepsilon)\ \text{residual}}
    + \underbrace{\tfrac1L r_s(\phi^y_s-c)U^\top W_{VO}^\top}_{O(\varepsilon^3)\ \text{value, uniform attention}}
    \underbrace{-\tfrac1n r^{\rm last}_s(E_s+P_L)U\Pi U^\top}_{O(\varepsilon^3)\ \text{softmax self-term}}
    + O(\varepsilon^5) + \underbrace{O(\varepsilon^7)}_{\text{QK path}}.

:func:`attention_terms` computes the three terms; :func:`attention_qk_path` the exact QK
path (the gradient minus the one with attention detached); :func:`attention_scores` and
:func:`first_order_attention_distance` the scores and what they predict, to first order,
for the distance from uniform attention (:func:`lib.measure.attention.attention_distance`).
"""

from __future__ import annotations

import torch

from ..training.models import Transformer
from .flow import CountedSignatures, _w, centring, neg_grad_E

__all__ = [
    "attention_terms",
    "attention_qk_path",
    "attention_scores",
    "first_order_attention_distance",
]


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
    """Residual (O(ε)), value (O(ε³)) and softmax self (O(ε³)) terms of the 1-layer model,
    (K, V, d) (Chapter 4, ``eq-attn-expansion``)."""
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
        from ..training.layers import embed, lin

        L = X.shape[-1]
        h = embed(params["E"], X) + params["P"][:, None, :L]
        mask = torch.ones(L, L, dtype=torch.bool, device=h.device).tril()
        q, k, v = lin(h, params["Q0"]), lin(h, params["K0"]), lin(h, params["V0"])
        scores = torch.matmul(q, k.transpose(-1, -2)) / self.d_model**0.5
        A = torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1).detach()
        h = (h + lin(torch.matmul(A, v), params["O0"]))[:, :, -1]
        return lin(h, params["U"])


def attention_qk_path(model: Transformer, params, X, y) -> torch.Tensor:
    """The exact QK-path part of -dL/dE: full gradient minus the one with attention detached."""
    _check_attention_model(model)
    det = _DetachedAttention(**{f: getattr(model, f) for f in model.__dataclass_fields__})
    return neg_grad_E(model, params, X, y) - neg_grad_E(det, params, X, y)


def attention_scores(model: Transformer, params, X) -> torch.Tensor:
    r"""Pre-softmax causal scores :math:`s_{ij}=h_iW_QW_K^\top h_j^\top/\sqrt{d_h}` of the
    single layer, (K, B, L, L) in float64, with the masked entries (j > i) NaN."""
    from ..training.layers import embed

    _check_attention_model(model)
    L = X.shape[-1]
    h = embed(params["E"].detach().double(), X) + params["P"].detach().double()[:, None, :L]
    s = (h @ params["Q0"].detach().double()[:, None]) @ (
        h @ params["K0"].detach().double()[:, None]
    ).transpose(-1, -2)
    mask = torch.ones(L, L, dtype=torch.bool, device=s.device).tril()
    return (s / model.d_model**0.5).masked_fill(~mask, float("nan"))


def first_order_attention_distance(s: torch.Tensor) -> torch.Tensor:
    r"""The distance from uniform attention to first order in the scores, (K, B, L, L) -> (K,).

    A causal softmax row is :math:`A_{ij}=\frac1i(1+s_{ij}-\bar s_i)+O(s^2)`, so
    :math:`D\approx\frac1{2i}\sum_{j\le i}|s_{ij}-\bar s_i|`, averaged over rows and the batch
    as in :func:`lib.measure.attention.attention_distance`; ``s`` as :func:`attention_scores` returns it.
    """
    L = s.shape[-1]
    i = torch.arange(1, L + 1, dtype=torch.float64, device=s.device)[:, None]
    dev = (s - s.nanmean(-1, keepdim=True)).abs()
    return (torch.nansum(dev, -1) / (2 * i[:, 0])).mean((-1, -2))

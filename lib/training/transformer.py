"""The decoder-only transformer of the staircase and language-model chapters, batched.

:class:`Transformer` follows the batched-model protocol of :mod:`lib.training.models`.
Its forward pass is written in named parts: the general path embeds the input
(:meth:`Transformer._embed_input`) and runs :meth:`Transformer._layer` per block
(:meth:`Transformer._attention`, then :meth:`Transformer._mlp_hidden`); a one-layer,
norm-free model read out at its last position takes the fast path
:meth:`Transformer._one_layer_readout`, which computes the same function from tables over
the vocabulary (:meth:`Transformer._readout_attention`, :meth:`Transformer._readout_mix`).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from .init import ParamSpec
from .layers import (
    ACTIVATIONS,
    NORMS,
    apply_rope,
    embed,
    lin,
    per_instance_tokens,
    rope_tables,
)

# Every string option and the values it takes.
CHOICES = {
    "readout": ("last", "all"),
    "qk": ("factorized", "collapsed"),
    "ov": ("learned", "identity"),
    "norm": ("none", "rms"),
    "mlp": ("plain", "swiglu"),
    "positions": ("learned", "rotary"),
    "activation": tuple(ACTIVATIONS),
}

__all__ = ["Transformer", "qk_product"]


@dataclass
class Transformer:
    """A decoder-only transformer, batched over instances, for the staircase chapters.

    h_0 = E[x] + P; per layer: h += softmax(mask(h W_Q (h W_K)^T / sqrt(d))) h W_V W_O,
    then, with ``d_mlp > 0``, h += sigma(h W_1) W_2; logits = h U. Single head, no biases.
    ``readout="last"`` predicts a label from the last position (the synthetic tasks);
    ``readout="all"`` predicts the next token at every position (language models).
    ``qk="collapsed"`` replaces the factorized query-key circuit by one (d, d) matrix per
    layer, ``QK{layer}``: scores = h W_QK h^T / sqrt(d) (Chapter 9).

    Three options make it a small decoder shaped like Qwen2.5 (Chapter 5), whose choices are
    ``norm="rms"``, ``mlp="swiglu"``, ``positions="rotary"``; the defaults are the model of
    the synthetic chapters:

    - ``norm``: ``"none"`` (default) or ``"rms"``, a parameter-free pre-RMSNorm,
      h / sqrt(mean(h^2) + 1e-6), on the input of attention, of the MLP and of the
      unembedding (off by default: a norm breaks the small-init expansion).
    - ``mlp``: ``"plain"`` (default), sigma(h W_1) W_2 with sigma = ``activation``; or
      ``"swiglu"``, (silu(h W_1) * (h W_3)) W_2 with an extra weight ``W3_{layer}``.
    - ``positions``: ``"learned"`` (default), a position table ``P`` added to E[x]; or
      ``"rotary"``, RoPE (base 10000, rotate-half) on q and k of every layer, with no ``P``.

    ``ov="identity"`` drops the value and output weights: h += softmax(...) norm(h), so a
    context token reaches the readout only through the attention weights and its own
    embedding (Chapter 4's attention staircase: a learned W_V W_O can store a feature of the
    anchors that their embeddings then need not carry).
    """

    vocab_size: int
    d_model: int
    context_len: int
    n_layers: int = 1
    n_out: int | None = None
    d_mlp: int = 0
    activation: str = "relu"
    readout: str = "last"
    emb_fan_in: int | None = None  # default: vocab_size (the group's convention)
    qk: str = "factorized"  # or "collapsed": one W_QK per layer instead of W_Q, W_K
    norm: str = "none"  # or "rms": parameter-free pre-RMSNorm
    mlp: str = "plain"  # or "swiglu" (adds W3_{layer})
    positions: str = "learned"  # or "rotary" (RoPE on q and k, no P)
    ov: str = "learned"  # or "identity": no W_V, W_O; attention mixes the residual stream itself
    # False: under readout 'last' the readout row attends to the context only, not itself
    # (the selective task: its anchor reaches the readout through the residual stream).
    readout_sees_self: bool = True

    def __post_init__(self):
        for name, allowed in CHOICES.items():
            if getattr(self, name) not in allowed:
                raise ValueError(
                    f"{name} must be one of {list(allowed)}, got {getattr(self, name)!r}"
                )
        rotary = self.positions == "rotary"
        for broken, message in (
            (
                self.mlp == "swiglu" and not self.d_mlp,
                f"mlp='swiglu' needs d_mlp > 0, got {self.d_mlp}",
            ),
            (
                rotary and self.qk == "collapsed",
                "positions='rotary' needs qk='factorized' (no one W_QK)",
            ),
            (
                rotary and self.d_model % 2,
                f"positions='rotary' needs an even d_model, got {self.d_model}",
            ),
            (
                not self.readout_sees_self and (self.readout != "last" or self.n_layers != 1),
                "readout_sees_self=False needs readout='last' and one layer",
            ),
            (self.n_layers < 1, f"n_layers must be >= 1, got {self.n_layers}"),
        ):
            if broken:
                raise ValueError(message)

    @classmethod
    def example(cls, K: int = 3):
        """A tiny 2-layer instance with an MLP for the library-wide tests."""
        return cls(vocab_size=11, d_model=8, context_len=5, n_layers=2, n_out=7, d_mlp=8)

    def specs(self) -> dict[str, ParamSpec]:
        d = self.d_model
        s = {
            "E": ParamSpec((self.vocab_size, d), self.emb_fan_in or self.vocab_size, "embedding"),
        }
        if self.positions == "learned":
            s["P"] = ParamSpec((self.context_len, d), self.context_len, "position")
        for layer in range(self.n_layers):
            if self.qk == "collapsed":
                s[f"QK{layer}"] = ParamSpec((d, d), d, "qk")
            else:
                s[f"Q{layer}"] = ParamSpec((d, d), d, "qk")
                s[f"K{layer}"] = ParamSpec((d, d), d, "qk")
            if self.ov == "learned":
                s[f"V{layer}"] = ParamSpec((d, d), d, "ov")
                s[f"O{layer}"] = ParamSpec((d, d), d, "ov")
            if self.d_mlp:
                s[f"W1_{layer}"] = ParamSpec((d, self.d_mlp), d, "mlp")
                s[f"W2_{layer}"] = ParamSpec((self.d_mlp, d), self.d_mlp, "mlp")
                if self.mlp == "swiglu":
                    s[f"W3_{layer}"] = ParamSpec((d, self.d_mlp), d, "mlp")
        s["U"] = ParamSpec((d, self.n_out or self.vocab_size), d, "unembedding")
        return s

    def forward(self, params, X, return_attention: bool = False, return_hidden: bool = False):
        """Logits (K, B, n_out) for readout 'last', (K, B, L, n_out) for 'all'.

        With ``return_attention``, also the list of attention matrices (K, B, L, L). With
        ``return_hidden``, also a dict of what each layer adds or computes, for probes:
        ``attention{layer}`` (the attention's contribution to the residual stream) and
        ``mlp{layer}`` (the MLP's hidden activations), each (K, B, L', .), where L' is 1 for
        the last layer under readout 'last' (only the readout position is computed there:
        the other positions of the last layer cannot reach the output) and L otherwise.

        A one-layer model without norm, read out at the last position, takes the fast path
        :meth:`_one_layer_readout` (the same function, summed over the vocabulary); every
        other model runs :meth:`_layer` on the whole residual stream, layer by layer.
        """
        L = X.shape[-1]
        if L > self.context_len:
            raise ValueError(f"sequence length {L} exceeds context_len {self.context_len}")
        if self._token_table_path() and not return_attention:
            return self._one_layer_readout(params, X, return_hidden)
        h, rope = self._embed_input(params, X)
        mask = self._causal_mask(L, h.device)
        attn, hidden = [], {}
        for layer in range(self.n_layers):
            h, A = self._layer(params, layer, h, mask, rope, return_attention, hidden)
            attn.append(A)
        if self.readout == "last":
            h = h[:, :, -1]
        logits = lin(NORMS[self.norm](h), params["U"])
        out = (
            (logits,) + ((attn,) if return_attention else ()) + ((hidden,) if return_hidden else ())
        )
        return out if len(out) > 1 else logits

    # --- the general path: every position, layer by layer ------------------------------

    def _embed_input(self, params, X):
        """The residual stream's input, h_0 = E[x] (+ P with learned positions), and the
        rotary tables ``(cos, sin)`` with rotary positions (else None)."""
        L = X.shape[-1]
        h = embed(params["E"], X)
        if self.positions == "learned":
            return h + params["P"][:, None, :L], None
        return h, rope_tables(L, self.d_model, dtype=h.dtype, device=h.device)

    def _causal_mask(self, L: int, device) -> torch.Tensor:
        """(L, L) booleans: which positions each position attends to (itself and before; the
        readout row not itself when ``readout_sees_self`` is False)."""
        mask = torch.ones(L, L, dtype=torch.bool, device=device).tril()
        if not self.readout_sees_self:
            mask[L - 1, L - 1] = False
        return mask

    def _query_rows(self, layer: int, L: int, return_attention: bool) -> slice:
        """The positions whose output layer ``layer`` computes: under readout 'last' the last
        layer is needed at the readout position only (unless its attention is returned)."""
        if self.readout == "last" and layer == self.n_layers - 1 and not return_attention:
            return slice(L - 1, L)
        return slice(None)

    def _layer(self, params, layer: int, h, mask, rope, return_attention: bool, hidden: dict):
        """One block on the residual stream h (K, B, L, d): attention, then (with ``d_mlp``)
        the MLP, each on the pre-normed stream. Returns the new stream (only the rows of
        :meth:`_query_rows`) and the attention (K, B, L', L); records into ``hidden``."""
        norm = NORMS[self.norm]
        rows = self._query_rows(layer, h.shape[2], return_attention)
        A, added = self._attention(params, layer, norm(h), rows, mask, rope)
        hidden[f"attention{layer}"] = added
        h = h[:, :, rows] + added
        if self.d_mlp:
            act = self._mlp_hidden(params, layer, norm(h))
            hidden[f"mlp{layer}"] = act
            h = h + lin(act, params[f"W2_{layer}"])
        return h, A

    def _attention(self, params, layer: int, x, rows: slice, mask, rope):
        """Layer ``layer``'s attention on the normed stream x, for the query positions
        ``rows``: the attention A (K, B, L', L) and what it adds to the stream (K, B, L', d)."""
        xq = x[:, :, rows]
        one_row = rows.start is not None
        if self.qk == "collapsed":
            q, k = lin(xq, params[f"QK{layer}"]), x
        elif one_row and self.positions != "rotary":
            # one query row: (x_q W_Q) W_K^T against x costs less than projecting every key
            q, k = lin(lin(xq, params[f"Q{layer}"]), params[f"K{layer}"].transpose(-1, -2)), x
        else:
            q, k = lin(xq, params[f"Q{layer}"]), lin(x, params[f"K{layer}"])
        if self.positions == "rotary":
            cos, sin = rope
            q, k = apply_rope(q, cos[rows], sin[rows]), apply_rope(k, cos, sin)
        v = x if self.ov == "identity" else lin(x, params[f"V{layer}"])
        if one_row:
            # One query row: products and sums, not matmuls. A batched matmul with an
            # inner dimension of 1 (the backward of q k^T and A v here, one outer
            # product per sequence) ran 30x slower on the CPU (profiled in Chapter 2).
            scores = (q * k).sum(-1).unsqueeze(-2) / self.d_model**0.5
        else:
            scores = torch.matmul(q, k.transpose(-1, -2)) / self.d_model**0.5
        A = torch.softmax(scores.masked_fill(~mask[rows], float("-inf")), dim=-1)
        mixed = (A.mT * v).sum(-2, keepdim=True) if one_row else torch.matmul(A, v)
        added = mixed if self.ov == "identity" else lin(mixed, params[f"O{layer}"])
        return A, added

    def _mlp_hidden(self, params, layer: int, x) -> torch.Tensor:
        """The MLP's hidden activations on x: sigma(x W_1), or silu(x W_1) * (x W_3)."""
        if self.mlp == "swiglu":
            return F.silu(lin(x, params[f"W1_{layer}"])) * lin(x, params[f"W3_{layer}"])
        return ACTIVATIONS[self.activation](lin(x, params[f"W1_{layer}"]))

    # --- the fast path: one layer read out at the last position, over the vocabulary ----

    def _token_table_path(self) -> bool:
        """One layer, readout 'last', no norm, learned positions: the readout row's
        attention can be computed from tables over the vocabulary (:meth:`_one_layer_readout`)."""
        return (
            self.n_layers == 1
            and self.readout == "last"
            and self.norm == "none"
            and self.positions == "learned"
        )

    def _one_layer_readout(self, params, X, return_hidden: bool):
        """:meth:`forward` of a one-layer, norm-free model with readout 'last', from tables
        over the vocabulary instead of the (K, B, L, d) embeddings of every position.

        With h_j = E[x_j] + P_j, the readout's query q = h_L W_Q and keys k_j = h_j W_K,
        the score q . k_j is a sum of table entries: (E W_Q)(E W_K)^T at (x_L, x_j),
        (E W_Q)(P W_K)^T at (x_L, j), (P_L W_Q)(E W_K)^T at x_j and (P_L W_Q)(P W_K)^T at
        j (W_QK for W_Q W_K^T when collapsed); and sum_j A_j h_j = (sum_j A_j e_{x_j}) E + A P.
        The same function summed in another order; profiling Chapter 2's attention model at
        book scale showed the every-position version memory-bound and its query and key
        projections of every sequence the largest matmuls of a step.
        """
        E, P = params["E"], params["P"]
        Xk = per_instance_tokens(X, E.shape[0])
        P_L = P[:, : Xk.shape[-1]]  # (K, L, d)
        last = Xk[..., -1:]  # (K, B, 1)
        A = self._readout_attention(params, Xk, P_L, last)
        mixed = self._readout_mix(params, Xk, P_L, A)
        h = embed(E, last)[:, :, 0] + P_L[:, None, -1]  # the readout row, (K, B, d)
        h = h + mixed
        hidden = {"attention0": mixed[:, :, None]}
        if self.d_mlp:
            act = self._mlp_hidden(params, 0, h)
            hidden["mlp0"] = act[:, :, None]
            h = h + lin(act, params["W2_0"])
        logits = lin(h, params["U"])
        return (logits, hidden) if return_hidden else logits

    def _readout_attention(self, params, Xk, P_L, last) -> torch.Tensor:
        """The readout row's attention (K, B, L), from the score tables over tokens and
        positions (see :meth:`_one_layer_readout`)."""
        E = params["E"]
        V = E.shape[1]
        if self.qk == "collapsed":
            W_Q, keys_E, keys_P = params["QK0"], E, P_L
        else:
            W_Q = params["Q0"]
            keys_E, keys_P = lin(E, params["K0"]), lin(P_L, params["K0"])
        query_E, query_P = lin(E, W_Q), lin(P_L[:, -1:], W_Q)  # (K, V, .), (K, 1, .)
        keys = torch.cat([keys_E, keys_P], 1)  # (K, V + L, .): tokens, then positions
        by_token = embed(lin(query_E, keys.mT), last)[:, :, 0] + lin(query_P, keys.mT)
        scores = torch.gather(by_token[..., :V], 2, Xk) + by_token[..., V:]  # (K, B, L)
        if not self.readout_sees_self:
            scores = scores.clone()
            scores[..., -1] = float("-inf")
        return torch.softmax(scores / self.d_model**0.5, dim=-1)

    def _readout_mix(self, params, Xk, P_L, A) -> torch.Tensor:
        """What the attention adds to the readout row, (K, B, d): sum_j A_j h_j through the
        value and output weights (when learned), without forming h_j. A learned value path
        maps the tables, E W_V W_O and P W_V W_O (V + L rows), not the B mixed rows: the
        same function with far fewer products (profiled in Chapter 4: the value path's two
        (B, d) x (d, d) products were a quarter of a step)."""
        E = params["E"]
        if self.ov == "learned":
            E, P_L = (lin(lin(t, params["V0"]), params["O0"]) for t in (E, P_L))
        weights = torch.zeros(*Xk.shape[:-1], E.shape[1], dtype=E.dtype, device=E.device)
        return lin(weights.scatter_add(2, Xk, A), E) + lin(A, P_L)  # sum_j A_j h_j


def qk_product(model: Transformer, params, layer: int = 0) -> torch.Tensor:
    """W_QK of layer ``layer``, (K, d, d): the collapsed matrix, or W_Q W_K^T."""
    if model.qk == "collapsed":
        return params[f"QK{layer}"]
    return params[f"Q{layer}"] @ params[f"K{layer}"].transpose(1, 2)

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
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from .init import ParamSpec, init_params

ACTIVATIONS = {
    "silu": F.silu,
    "gelu": F.gelu,
    "tanh": torch.tanh,
    "relu": F.relu,
    "linear": lambda x: x,
}
# Taylor coefficients at 0, sigma(x) = c1 x + c2/2 x^2 + ..., used by the flow chapters.
ACTIVATION_TAYLOR = {
    "silu": (0.5, 0.5),
    "gelu": (0.5, (2 / torch.pi) ** 0.5),
    "tanh": (1.0, 0.0),
    "linear": (1.0, 0.0),
}


def token_counts(X: torch.Tensor, V: int, dtype=torch.float32) -> torch.Tensor:
    """Counts c_s(X) of every token in every sequence: (..., L) ids -> (..., V)."""
    C = torch.zeros((*X.shape[:-1], V), dtype=dtype, device=X.device)
    return C.scatter_add_(-1, X, torch.ones(X.shape, dtype=dtype, device=X.device))


def embed_sum(E: torch.Tensor, X: torch.Tensor) -> torch.Tensor:
    """h = sum_i E[x_i] = c(X) E: the bag-of-tokens input of the Emb-MLP, shape (K, B, d).

    Written as a product with the count matrix rather than a gather: the backward
    of a gather is a scatter-add, which profiling showed to be the slowest op of a
    batched step; the backward of a matmul is another matmul.
    """
    if X.dim() not in (2, 3):
        raise ValueError(f"tokens must be (B, L) or (K, B, L); got shape {tuple(X.shape)}")
    return torch.matmul(token_counts(X, E.shape[1], E.dtype), E)


def embed(E: torch.Tensor, X: torch.Tensor) -> torch.Tensor:
    """Rows of the (K, V, d) table for tokens (B, L) or (K, B, L): shape (K, B, L, d)."""
    K, V, d = E.shape
    if X.dim() == 2:
        return E[:, X.reshape(-1)].view(K, *X.shape, d)
    if X.dim() == 3 and X.shape[0] == K:
        idx = X.reshape(K, -1, 1).expand(-1, -1, d)
        return torch.gather(E, 1, idx).view(K, *X.shape[1:], d)
    raise ValueError(f"tokens must be (B, L) or (K={K}, B, L); got shape {tuple(X.shape)}")


def per_instance_tokens(X: torch.Tensor, K: int) -> torch.Tensor:
    """Tokens (B, L), shared by the K instances, or (K, B, L), one batch each, as (K, B, L)."""
    if X.dim() == 2:
        return X.expand(K, *X.shape)
    if X.dim() == 3 and X.shape[0] == K:
        return X
    raise ValueError(f"tokens must be (B, L) or (K={K}, B, L); got shape {tuple(X.shape)}")


@dataclass
class EmbMLP:
    """Emb-MLP of Yao et al. (2025): f(X) = sigma((sum_{s in X} E_s) W1) W2, no biases."""

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


def _lin(x: torch.Tensor, W: torch.Tensor) -> torch.Tensor:
    """Per-instance linear map: x (K, ..., d_in) @ W (K, d_in, d_out) as one bmm over K.

    Broadcasting W over the batch dimensions would expand it and run K*B tiny
    matmuls; profiling showed that to dominate a batched transformer step.
    """
    K = x.shape[0]
    return torch.bmm(x.reshape(K, -1, x.shape[-1]), W).view(*x.shape[:-1], W.shape[-1])


def _layernorm(h: torch.Tensor) -> torch.Tensor:
    """Parameter-free LayerNorm (the book's models have no biases or gains)."""
    return F.layer_norm(h, h.shape[-1:])


RMS_EPS = 1e-6  # Qwen2.5's rms_norm_eps


def _rmsnorm(h: torch.Tensor, eps: float = RMS_EPS) -> torch.Tensor:
    """Parameter-free RMSNorm: h / sqrt(mean(h^2) + eps) over the last dimension."""
    return h * torch.rsqrt(h.square().mean(-1, keepdim=True) + eps)


def _identity(h: torch.Tensor) -> torch.Tensor:
    return h


NORMS = {"none": _identity, "layer": _layernorm, "rms": _rmsnorm}
MLPS = ("plain", "swiglu")
POSITIONS = ("learned", "rotary")
OVS = ("learned", "identity")
ROPE_BASE = 10000.0


def rope_tables(L: int, dim: int, base: float = ROPE_BASE, dtype=torch.float32, device=None):
    """cos and sin, each (L, dim), of rotary position embedding at positions 0..L-1.

    Frequencies theta_j = base^(-2j/dim) for j < dim/2, repeated for the two halves
    (the rotate-half layout of Llama and Qwen).
    """
    inv_freq = base ** -(torch.arange(0, dim, 2, dtype=torch.float64, device=device) / dim)
    angles = torch.arange(L, dtype=torch.float64, device=device)[:, None] * inv_freq[None]
    angles = torch.cat([angles, angles], dim=-1)
    return angles.cos().to(dtype), angles.sin().to(dtype)


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat([-x2, x1], dim=-1)


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate x (..., L, dim) position by position: x cos + rotate_half(x) sin."""
    return x * cos + _rotate_half(x) * sin


@dataclass
class Transformer:
    """A decoder-only transformer, batched over instances, for the staircase chapters.

    h_0 = E[x] + P; per layer: h += softmax(mask(h W_Q (h W_K)^T / sqrt(d_head))) h W_V W_O,
    then, with ``d_mlp > 0``, h += sigma(h W_1) W_2; logits = h U. Single head, no biases.
    ``readout="last"`` predicts a label from the last position (the synthetic tasks);
    ``readout="all"`` predicts the next token at every position (language models).
    ``qk="collapsed"`` replaces the factorized query-key circuit by one (d, d) matrix per
    layer, ``QK{layer}``: scores = h W_QK h^T / sqrt(d_head) (Chapter 9).

    Three options make it a small decoder shaped like Qwen2.5 (whose choices are
    ``norm="rms"``, ``mlp="swiglu"``, ``positions="rotary"``); the defaults are the book's
    model and give exactly the outputs they always did:

    - ``norm``: ``"none"`` (default), ``"layer"`` or ``"rms"``, a parameter-free pre-norm
      (no gains or biases) applied to the input of attention, of the MLP and of the
      unembedding. RMSNorm is h / sqrt(mean(h^2) + 1e-6). Norms are off by default because
      they break the small-init expansion. ``layernorm=True`` is the older spelling of
      ``norm="layer"``; after construction the two fields agree.
    - ``mlp``: ``"plain"`` (default), sigma(h W_1) W_2 with sigma = ``activation``; or
      ``"swiglu"``, (silu(h W_1) * (h W_3)) W_2 with an extra weight ``W3_{layer}`` (d, d_mlp)
      in group "mlp" (``activation`` is then unused; needs ``d_mlp > 0``).
    - ``positions``: ``"learned"`` (default), a position table ``P`` added to E[x]; or
      ``"rotary"``, RoPE (base 10000, rotate-half convention) applied to q and k of every
      layer, with no ``P`` (h_0 = E[x]). Rotary needs an even ``d_head`` and
      ``qk="factorized"``: the rotation sits between W_Q and W_K^T, so there is no single
      W_QK to collapse to.

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
    d_head: int | None = None
    d_mlp: int = 0
    activation: str = "relu"
    layernorm: bool = False
    readout: str = "last"
    emb_fan_in: int | None = None  # default: vocab_size (the group's convention)
    qk: str = "factorized"  # or "collapsed": one W_QK per layer instead of W_Q, W_K
    norm: str = "none"  # or "layer", "rms": parameter-free pre-norm
    mlp: str = "plain"  # or "swiglu" (adds W3_{layer})
    positions: str = "learned"  # or "rotary" (RoPE on q and k, no P)
    ov: str = "learned"  # or "identity": no W_V, W_O; attention mixes the residual stream itself
    # False: under readout 'last' the readout row attends to the context only, not itself
    # (the selective task: its anchor reaches the readout through the residual stream).
    readout_sees_self: bool = True

    def __post_init__(self):
        if self.ov not in OVS:
            raise ValueError(f"ov must be one of {list(OVS)}, got {self.ov!r}")
        if self.norm not in NORMS:
            raise ValueError(f"norm must be one of {sorted(NORMS)}, got {self.norm!r}")
        if self.layernorm and self.norm not in ("none", "layer"):
            raise ValueError(
                f"layernorm=True contradicts norm={self.norm!r}; pass norm={self.norm!r} alone"
            )
        if self.layernorm or self.norm == "layer":
            self.norm, self.layernorm = "layer", True
        if self.mlp not in MLPS:
            raise ValueError(f"mlp must be one of {list(MLPS)}, got {self.mlp!r}")
        if self.mlp == "swiglu" and not self.d_mlp:
            raise ValueError(f"mlp='swiglu' needs d_mlp > 0, got d_mlp={self.d_mlp}")
        if self.positions not in POSITIONS:
            raise ValueError(f"positions must be one of {list(POSITIONS)}, got {self.positions!r}")
        if self.positions == "rotary" and self.qk == "collapsed":
            raise ValueError("positions='rotary' needs qk='factorized' (no single W_QK under RoPE)")
        if self.positions == "rotary" and self.dh % 2:
            raise ValueError(f"positions='rotary' needs an even d_head, got {self.dh}")
        if self.qk not in ("factorized", "collapsed"):
            raise ValueError(f"qk must be 'factorized' or 'collapsed', got {self.qk!r}")
        if not self.readout_sees_self and (self.readout != "last" or self.n_layers != 1):
            raise ValueError("readout_sees_self=False needs readout='last' and one layer")
        if self.readout not in ("last", "all"):
            raise ValueError(f"readout must be 'last' or 'all', got {self.readout!r}")
        if self.activation not in ACTIVATIONS:
            raise ValueError(
                f"unknown activation {self.activation!r}; choose from {sorted(ACTIVATIONS)}"
            )
        if self.n_layers < 1:
            raise ValueError(f"n_layers must be >= 1, got {self.n_layers}")

    @classmethod
    def example(cls, K: int = 3):
        """A tiny 2-layer instance with an MLP for the library-wide tests."""
        return cls(vocab_size=11, d_model=8, context_len=5, n_layers=2, n_out=7, d_mlp=8)

    @property
    def dh(self) -> int:
        return self.d_head or self.d_model

    def specs(self) -> dict[str, ParamSpec]:
        d, dh = self.d_model, self.dh
        s = {
            "E": ParamSpec((self.vocab_size, d), self.emb_fan_in or self.vocab_size, "embedding"),
        }
        if self.positions == "learned":
            s["P"] = ParamSpec((self.context_len, d), self.context_len, "position")
        for layer in range(self.n_layers):
            if self.qk == "collapsed":
                s[f"QK{layer}"] = ParamSpec((d, d), d, "qk")
            else:
                s[f"Q{layer}"] = ParamSpec((d, dh), d, "qk")
                s[f"K{layer}"] = ParamSpec((d, dh), d, "qk")
            if self.ov == "learned":
                s[f"V{layer}"] = ParamSpec((d, dh), d, "ov")
                s[f"O{layer}"] = ParamSpec((dh, d), dh, "ov")
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
        """
        L = X.shape[-1]
        if L > self.context_len:
            raise ValueError(f"sequence length {L} exceeds context_len {self.context_len}")
        if self._token_table_path() and not return_attention:
            return self._one_layer_readout(params, X, return_hidden)
        h = embed(params["E"], X)
        if self.positions == "learned":
            h = h + params["P"][:, None, :L]
        else:
            cos, sin = rope_tables(L, self.dh, dtype=h.dtype, device=h.device)
        mask = torch.ones(L, L, dtype=torch.bool, device=h.device).tril()
        if not self.readout_sees_self:
            mask[L - 1, L - 1] = False
        norm = NORMS[self.norm]
        attn, hidden = [], {}
        for layer in range(self.n_layers):
            x = norm(h)
            # Under readout 'last' the last layer is needed at the readout position only.
            rows = (
                slice(L - 1, L)
                if self.readout == "last" and layer == self.n_layers - 1
                else slice(None)
            )
            if return_attention:
                rows = slice(None)
            xq = x[:, :, rows]
            if self.qk == "collapsed":
                q, k = _lin(xq, params[f"QK{layer}"]), x
            elif rows.start is not None and self.positions != "rotary":
                # one query row: (x_q W_Q) W_K^T against x costs less than projecting every key
                q, k = _lin(_lin(xq, params[f"Q{layer}"]), params[f"K{layer}"].transpose(-1, -2)), x
            else:
                q, k = _lin(xq, params[f"Q{layer}"]), _lin(x, params[f"K{layer}"])
            if self.positions == "rotary":
                q, k = apply_rope(q, cos[rows], sin[rows]), apply_rope(k, cos, sin)
            v = x if self.ov == "identity" else _lin(x, params[f"V{layer}"])
            one_row = rows.start is not None
            if one_row:
                # One query row: products and sums, not matmuls. A batched matmul with an
                # inner dimension of 1 (the backward of q k^T and A v here, one outer
                # product per sequence) ran 30x slower on the CPU (profiled in Chapter 2).
                scores = (q * k).sum(-1).unsqueeze(-2) / self.dh**0.5
            else:
                scores = torch.matmul(q, k.transpose(-1, -2)) / self.dh**0.5
            A = torch.softmax(scores.masked_fill(~mask[rows], float("-inf")), dim=-1)
            attn.append(A)
            mixed = (A.mT * v).sum(-2, keepdim=True) if one_row else torch.matmul(A, v)
            added = mixed if self.ov == "identity" else _lin(mixed, params[f"O{layer}"])
            hidden[f"attention{layer}"] = added
            h = h[:, :, rows] + added
            if self.d_mlp:
                x = norm(h)
                if self.mlp == "swiglu":
                    act = F.silu(_lin(x, params[f"W1_{layer}"])) * _lin(x, params[f"W3_{layer}"])
                else:
                    act = ACTIVATIONS[self.activation](_lin(x, params[f"W1_{layer}"]))
                hidden[f"mlp{layer}"] = act
                h = h + _lin(act, params[f"W2_{layer}"])
        if self.readout == "last":
            h = h[:, :, -1]
        logits = _lin(norm(h), params["U"])
        out = (
            (logits,) + ((attn,) if return_attention else ()) + ((hidden,) if return_hidden else ())
        )
        return out if len(out) > 1 else logits

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
        K, V, _ = E.shape
        Xk = per_instance_tokens(X, K)
        L = Xk.shape[-1]
        P_L = P[:, :L]  # (K, L, d)
        last = Xk[..., -1:]  # (K, B, 1)
        if self.qk == "collapsed":
            W_Q, keys_E, keys_P = params["QK0"], E, P_L
        else:
            W_Q = params["Q0"]
            keys_E, keys_P = _lin(E, params["K0"]), _lin(P_L, params["K0"])
        query_E, query_P = _lin(E, W_Q), _lin(P_L[:, -1:], W_Q)  # (K, V, .), (K, 1, .)
        keys = torch.cat([keys_E, keys_P], 1)  # (K, V + L, .): tokens, then positions
        by_token = embed(_lin(query_E, keys.mT), last)[:, :, 0] + _lin(query_P, keys.mT)
        scores = torch.gather(by_token[..., :V], 2, Xk) + by_token[..., V:]  # (K, B, L)
        if not self.readout_sees_self:
            scores = scores.clone()
            scores[..., -1] = float("-inf")
        A = torch.softmax(scores / self.dh**0.5, dim=-1)
        weights = torch.zeros(*Xk.shape[:-1], V, dtype=E.dtype, device=E.device)
        mixed = _lin(weights.scatter_add(2, Xk, A), E) + _lin(A, P_L)  # sum_j A_j h_j
        if self.ov == "learned":
            mixed = _lin(_lin(mixed, params["V0"]), params["O0"])
        h = embed(E, last)[:, :, 0] + P_L[:, None, -1]  # the readout row, (K, B, d)
        h = h + mixed
        hidden = {"attention0": mixed[:, :, None]}
        if self.d_mlp:
            if self.mlp == "swiglu":
                act = F.silu(_lin(h, params["W1_0"])) * _lin(h, params["W3_0"])
            else:
                act = ACTIVATIONS[self.activation](_lin(h, params["W1_0"]))
            hidden["mlp0"] = act[:, :, None]
            h = h + _lin(act, params["W2_0"])
        logits = _lin(h, params["U"])
        return (logits, hidden) if return_hidden else logits

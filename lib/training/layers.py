"""The pieces every batched model is built of: token counts, embeddings, per-instance
linear maps, parameter-free norms, rotary positions and activations.

Weights carry a leading instance dimension ``K``; tokens are ``(B, L)`` (one batch shared
by all instances) or ``(K, B, L)`` (a batch per instance). Each function here computes the
same thing for every instance at once, in a form chosen for a batched CPU step (the
docstrings say why, where profiling chose it).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

__all__ = [
    "ACTIVATIONS",
    "ACTIVATION_TAYLOR",
    "token_counts",
    "embed_sum",
    "embed",
    "per_instance_tokens",
    "lin",
    "NORMS",
    "RMS_EPS",
    "rmsnorm",
    "rope_tables",
    "apply_rope",
]


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
        # One lookup in the stacked (K V, d) table: its backward is an embedding backward,
        # 2-3x faster on the CPU than the scatter-add of a gather, and gives the same sums.
        offset = torch.arange(K, device=X.device).view(K, 1, 1) * V
        return F.embedding(X + offset, E.reshape(K * V, d))
    raise ValueError(f"tokens must be (B, L) or (K={K}, B, L); got shape {tuple(X.shape)}")


def per_instance_tokens(X: torch.Tensor, K: int) -> torch.Tensor:
    """Tokens (B, L), shared by the K instances, or (K, B, L), one batch each, as (K, B, L)."""
    if X.dim() == 2:
        return X.expand(K, *X.shape)
    if X.dim() == 3 and X.shape[0] == K:
        return X
    raise ValueError(f"tokens must be (B, L) or (K={K}, B, L); got shape {tuple(X.shape)}")


def lin(x: torch.Tensor, W: torch.Tensor) -> torch.Tensor:
    """Per-instance linear map: x (K, ..., d_in) @ W (K, d_in, d_out) as one bmm over K.

    Broadcasting W over the batch dimensions would expand it and run K*B tiny
    matmuls; profiling showed that to dominate a batched transformer step.
    """
    K = x.shape[0]
    return torch.bmm(x.reshape(K, -1, x.shape[-1]), W).view(*x.shape[:-1], W.shape[-1])


RMS_EPS = 1e-6  # Qwen2.5's rms_norm_eps


def rmsnorm(h: torch.Tensor, eps: float = RMS_EPS) -> torch.Tensor:
    """Parameter-free RMSNorm: h / sqrt(mean(h^2) + eps) over the last dimension."""
    return h * torch.rsqrt(h.square().mean(-1, keepdim=True) + eps)


def _identity(h: torch.Tensor) -> torch.Tensor:
    return h


NORMS = {"none": _identity, "rms": rmsnorm}


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

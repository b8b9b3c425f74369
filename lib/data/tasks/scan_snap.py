"""The Scan-and-Snap sequence-class task (Tian et al. 2023, ``tian2023scan``; Chapter 7):
its constants, its class-conditional token distribution and a batch sampler.
"""

from __future__ import annotations

from typing import NamedTuple

import torch


class _ScanSnapConstants:
    """Constants of the Scan-and-Snap task (Tian et al. 2023, ``tian2023scan``; Chapter 7)."""

    VOCAB = 50
    COMMON = tuple(range(10))  # tokens 0..9, same weight 1 in every class
    N_CLASSES = 4
    NEXT = (1, 2, 3, 4)  # y_c: the next token of class c
    QUERY = (5, 6, 7, 8)  # q_c: the query token of class c
    DISTINCT_START = 10  # distinct tokens 10..49, block c = 10(c+1) .. 10(c+1)+9
    BLOCK = 10
    # Total unnormalized context mass: 10 * 1 + 0.1 * (1 + ... + 10) = 15.5.
    TOTAL_MASS = 15.5
    DISTINCT_MASS = 5.5

    def block(self, c: int) -> list[int]:
        """The distinct tokens of class ``c``."""
        start = self.DISTINCT_START + self.BLOCK * c
        return list(range(start, start + self.BLOCK))

    def __setattr__(self, name, value):  # constants stay constant
        raise AttributeError("ScanSnap constants are read-only")


ScanSnap = _ScanSnapConstants()


class ScanSnapBatch(NamedTuple):
    """A Scan-and-Snap batch; unpacks as ``X, y, cls, distinct_mask``."""

    X: torch.Tensor  # (n, seq_len - 1) int64: context tokens then the query
    y: torch.Tensor  # (n,) int64 next token y_c
    cls: torch.Tensor  # (n,) int64 class c
    distinct_mask: torch.Tensor  # (n, seq_len - 1) bool: X >= 10


def scan_snap_probs(dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """The (4, 50) matrix ``p(l | c)``: 1 on 0..9, ``0.1 k`` on ``10(c+1)+k-1``, normalized."""
    w = torch.zeros(ScanSnap.N_CLASSES, ScanSnap.VOCAB, dtype=dtype)
    w[:, : len(ScanSnap.COMMON)] = 1.0
    ramp = 0.1 * torch.arange(1, ScanSnap.BLOCK + 1, dtype=dtype)
    for c in range(ScanSnap.N_CLASSES):
        start = ScanSnap.DISTINCT_START + ScanSnap.BLOCK * c
        w[c, start : start + ScanSnap.BLOCK] = ramp
    return w / w.sum(dim=1, keepdim=True)


def scan_snap_batch(
    n: int,
    seq_len: int = 64,
    generator: torch.Generator | None = None,
    device: str | torch.device = "cpu",
) -> ScanSnapBatch:
    """Sample ``n`` Scan-and-Snap sequences (``tian2023scan``, as used by ``vashisht2026faster``;
    Chapter 7).

    Class ``c`` is uniform on {0,1,2,3}; the sequence is ``seq_len - 2`` i.i.d. context tokens
    from ``p(l | c)`` (see :func:`scan_snap_probs`), then the query ``q_c = c + 5``, then the
    next token ``y_c = c + 1``. Returns the input ``X`` (all but the last token, shape
    ``(n, seq_len - 1)``), ``y`` (the last token), ``cls`` and ``distinct_mask = X >= 10``.

    Sampling happens on the generator's device (CPU when no generator is given) and the
    result is moved to ``device``, so a CPU generator gives the same data on any device.
    """
    if seq_len < 3:
        raise ValueError(f"seq_len must be >= 3 (one context token, query, next), got {seq_len}")
    gen_device = generator.device if generator is not None else torch.device("cpu")
    cls = torch.randint(0, ScanSnap.N_CLASSES, (n,), generator=generator, device=gen_device)
    probs = scan_snap_probs(torch.float32).to(gen_device)
    context = torch.multinomial(probs[cls], seq_len - 2, replacement=True, generator=generator)
    query = (cls + ScanSnap.QUERY[0])[:, None]
    X = torch.cat([context, query], dim=1).to(device)
    y = (cls + ScanSnap.NEXT[0]).to(device)
    cls = cls.to(device)
    return ScanSnapBatch(X, y, cls, X >= ScanSnap.DISTINCT_START)


def scan_snap_uniform_distinct_mass(seq_len: int | None = None) -> float:
    """Expected attention mass on distinct tokens under uniform attention.

    Each context token is distinct with probability ``5.5 / 15.5`` (≈ 0.355). Without
    ``seq_len`` this per-token value is returned. With ``seq_len``, uniform attention over the
    ``T = seq_len - 1`` input positions (``seq_len - 2`` context tokens and the query, which
    is never distinct) has expected distinct mass ``((seq_len - 2) / (seq_len - 1)) * 5.5/15.5``.
    """
    per_token = ScanSnap.DISTINCT_MASS / ScanSnap.TOTAL_MASS
    if seq_len is None:
        return per_token
    return (seq_len - 2) / (seq_len - 1) * per_token

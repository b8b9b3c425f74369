"""The containers every task returns (:class:`TaskData`, :class:`Task`), the seeded helpers
the generators share, and :func:`with_marker`, which pads any task's sequences.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class TaskData:
    """One split of a task: token ids, labels (in the token id space) and named token sets."""

    X: torch.Tensor  # (N, L) int64 token ids
    y: torch.Tensor  # (N,) int64 labels
    vocab_size: int
    n_labels: int
    groups: dict[str, list[int]]
    name: str

    def __len__(self) -> int:
        return self.X.shape[0]


@dataclass
class Task:
    """A task: train split, optional test split, and which signature order is informative."""

    train: TaskData
    test: TaskData | None
    info_order: int
    description: str


def _generator(seed: int) -> torch.Generator:
    gen = torch.Generator()
    gen.manual_seed(int(seed))
    return gen


def _shuffle(gen: torch.Generator, *tensors: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """Apply one seeded row permutation to all tensors (the design is enumerated in order)."""
    perm = torch.randperm(tensors[0].shape[0], generator=gen)
    return tuple(t[perm] for t in tensors)


def _subset(
    gen: torch.Generator, X, y, mask, vocab: int, groups: dict, name: str, tag: str
) -> TaskData | None:
    """The rows of ``(X, y)`` under ``mask``, shuffled with ``g``, as a :class:`TaskData`
    named ``"name (tag)"``; None when ``mask`` selects nothing."""
    if not bool(mask.any()):
        return None
    Xs, ys = _shuffle(gen, X[mask], y[mask])
    return TaskData(
        Xs, ys, vocab, vocab, {k: list(v) for k, v in groups.items()}, f"{name} ({tag})"
    )


def _random_keys(gen: torch.Generator, shape: tuple[int, ...], lo, hi) -> torch.Tensor:
    """Uniform integers in [lo, hi] (inclusive); ``lo``/``hi`` may be per-row tensors."""
    u = torch.rand(shape, generator=gen, dtype=torch.float64)
    lo = torch.as_tensor(lo, dtype=torch.int64)
    hi = torch.as_tensor(hi, dtype=torch.int64)
    if lo.ndim == 1:  # per-row bounds broadcast over the trailing positions
        lo, hi = lo[:, None], hi[:, None]
    return lo + (u * (hi - lo + 1).to(torch.float64)).long().clamp(max=hi - lo)


def label_distributions(d: TaskData) -> tuple[torch.Tensor, torch.Tensor]:
    """The distinct sequences of ``d`` and, for each, the distribution of its labels.

    Returns ``(X, P)``: ``X`` (M, L) the distinct rows of ``d.X``, and ``P`` (M, n_labels)
    float64, row i the counts of each label over the copies of sequence i, times M / N
    (rows sum to 1 when every sequence occurs equally often). The mean cross-entropy of
    ``d`` is then ``-(P * log_softmax(f(X))).sum(-1).mean()``
    (:func:`lib.training.engine.soft_cross_entropy`), with the same gradient: a task whose labels
    carry noise that no token names (the selective task's offset) trains on M sequences
    instead of N.
    """
    X, inverse = torch.unique(d.X, dim=0, return_inverse=True)
    P = torch.zeros(X.shape[0], d.n_labels, dtype=torch.float64)
    P.index_put_((inverse, d.y), torch.ones(len(d.y), dtype=torch.float64), accumulate=True)
    return X, P * (X.shape[0] / len(d.y))


def with_marker(d: TaskData, token: int, length: int) -> TaskData:
    """``d`` with its sequences right-padded by a constant ``token`` to ``length`` positions.

    Lets tasks of different lengths share one batched run. For a bag-of-tokens model the
    marker adds the same vector to every input, i.e. a learned bias: it carries no
    information and leaves every other token's signature unchanged.
    """
    pad = length - d.X.shape[1]
    if pad < 0:
        raise ValueError(f"sequences of length {d.X.shape[1]} do not fit in length {length}")
    if token < d.vocab_size:
        raise ValueError(
            f"marker token {token} collides with the task's tokens 0..{d.vocab_size - 1}"
        )
    X = torch.cat([d.X, torch.full((d.X.shape[0], pad), token, dtype=d.X.dtype)], 1)
    V = max(d.vocab_size, token + 1)
    return TaskData(X, d.y, V, d.n_labels, dict(d.groups), d.name)

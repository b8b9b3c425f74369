"""Modular addition (information at order 1) and its order-0 twins, plain and halved
addition on the same pairs and split (Chapter 6).
"""

from __future__ import annotations

import torch

from .base import Task, TaskData, _generator


def modular_addition(seed: int, p: int = 23, test_fraction: float = 0.3) -> Task:
    """Modular addition: input ``[a, b]`` with tokens ``0..p-1``, label ``(a + b) mod p``.

    All ``p**2`` pairs are enumerated and split at random (seeded): ``round(test_fraction *
    p**2)`` pairs go to the test set.

    ``info_order = 1``. On the full enumeration every token's order-0 label signature is
    uniform on ``Z_p`` (for fixed ``a``, ``b -> a + b`` is a bijection), so order 0 carries no
    information; only the joint (other token, label) signature — ``(b, a+b)`` lies on a shifted
    diagonal — identifies a token. On a random train split the order-0 signatures are uniform
    only up to sampling noise.
    """
    if not 0.0 <= test_fraction < 1.0:
        raise ValueError(f"test_fraction must be in [0, 1), got {test_fraction}")
    gen = _generator(seed)
    a, b = (t.reshape(-1) for t in torch.meshgrid(torch.arange(p), torch.arange(p), indexing="ij"))
    X = torch.stack([a, b], dim=1)
    y = (a + b) % p
    perm = torch.randperm(p * p, generator=gen)
    n_test = int(round(test_fraction * p * p))
    test_idx, train_idx = perm[:n_test], perm[n_test:]
    groups = {"tokens": list(range(p))}
    name = f"modular addition mod {p}"
    train = TaskData(X[train_idx], y[train_idx], p, p, dict(groups), f"{name} (train)")
    test = (
        TaskData(X[test_idx], y[test_idx], p, p, dict(groups), f"{name} (test)") if n_test else None
    )
    return Task(
        train=train,
        test=test,
        info_order=1,
        description=f"{name}: all {p * p} pairs, test_fraction={test_fraction}.",
    )


def plain_addition(seed: int, p: int = 23, test_fraction: float = 0.3, halve: bool = False) -> Task:
    """Modular addition's order-0 twin: the same pairs and split, label ``a + b`` (no wrap).

    Token ``a``'s order-0 signature is uniform on ``{a, ..., a + p - 1}``: it shifts with
    ``a``, so order 0 tells the tokens apart (``info_order = 0``), whereas modulo ``p`` every
    signature is uniform on ``Z_p``. Labels lie in ``0 .. 2p - 2``. With ``halve`` the label
    is ``(a + b) // 2``: still order 0, with the ``p`` labels of modular addition.
    """
    t = modular_addition(seed, p, test_fraction)
    n = p if halve else 2 * p - 1

    def relabel(d: TaskData | None) -> TaskData | None:
        if d is None:
            return None
        y = d.X.sum(1) // 2 if halve else d.X.sum(1)
        what = "halved sum" if halve else "plain addition"
        name = d.name.replace("modular addition mod", f"{what} of tokens <")
        return TaskData(d.X, y, n, n, dict(d.groups), name)

    label = "(a + b) // 2" if halve else "a + b"
    return Task(
        train=relabel(t.train),
        test=relabel(t.test),
        info_order=0,
        description=f"{label} of tokens 0..{p - 1}; the pairs and split of mod {p}.",
    )

"""T1 and T2: composite addition with memory and reasoning anchors (Chapter 1; the
anchor-function task of Yao et al., ``yao2025reasoning``).
"""

from __future__ import annotations

import torch

from .base import Task, _generator, _random_keys, _subset

T1_KEYS = list(range(21, 121))
T1_MEMORY = list(range(1, 11))
T1_REASONING = list(range(11, 21))


def _place(
    gen: torch.Generator,
    z: torch.Tensor,
    a1: torch.Tensor,
    a2: torch.Tensor,
    seq_len: int,
    klo,
    khi,
) -> torch.Tensor:
    """Sequences of noise keys in [klo, khi] with ``z, a1, a2`` written at a random position p."""
    n = z.shape[0]
    X = _random_keys(gen, (n, seq_len), klo, khi)
    p = torch.randint(0, seq_len - 2, (n,), generator=gen)
    rows = torch.arange(n)
    X[rows, p] = z
    X[rows, p + 1] = a1
    X[rows, p + 2] = a2
    return X


def composite_addition(
    seed: int,
    reps: int = 1,
    seq_len: int = 9,
    noise_keys: bool = True,
    intervals: bool = False,
    held_out: tuple[tuple[int, int], ...] = ((11, 13), (13, 11)),
) -> Task:
    """T1 (and T2 with ``intervals=True``): the anchor-function composite-addition task.

    Definition: the anchor-function task of Yao et al., ICML 2025 (``yao2025reasoning``),
    as reconstructed in Chapter 1 of the book. Keys ``z ∈ {21..120}``, memory anchors
    ``{1..10}``, reasoning anchors ``{11..20}``. A sequence holds the key ``z`` at a random
    position ``p`` followed by an anchor pair ``(a1, a2)``, both from the same group; with
    ``noise_keys`` the other ``seq_len - 3`` positions are uniform random keys, otherwise the
    sequence is just ``[z, a1, a2]`` (``seq_len`` is then 3).

    * reasoning pair: ``y = z + a1 + a2`` (43..160);
    * memory pair: ``y = pi_{a1,a2}(z)``, with ``pi_{a1,a2}`` a seeded random *permutation* of
      the key set, one per memory pair.

    Design: every ``(z, a1, a2)`` with ``a1, a2`` from one group (``a1 == a2`` included)
    appears exactly ``reps`` times in train, except the ``held_out`` pairs, whose sequences
    (also ``reps`` each) form the test set. Positions and noise keys are random; rows are
    shuffled.

    Information is at **order 0**. A reasoning anchor's label signature is the key/anchor
    label distribution *shifted by the anchor's value*, so the signatures of 11..20 are
    ordered (nearby anchors overlap most). A memory anchor's signature is **exactly uniform
    on the key set and identical for all memory anchors**: each memory pair maps the
    enumerated keys through a permutation, so each pair contributes every key label exactly
    ``reps`` times, whatever the anchor's count in the sequence. (Held-out memory pairs would
    remove whole uniform blocks, so the identity survives any ``held_out``.)

    T2 (``intervals=True``): reasoning anchors 11..15 occur only with keys 21..70 and
    16..20 only with keys 71..120 (pairs within a sub-group; noise keys drawn from the same
    key interval), so the anchors' *contextual* signatures (which keys they co-occur with)
    split into two blocks and their label signatures move with them. Memory pairs are
    unchanged (all keys), so the memory identity still holds.
    """
    if not noise_keys:
        seq_len = 3
    if seq_len < 3:
        raise ValueError(f"seq_len must be >= 3 to hold a key and two anchors, got {seq_len}")
    gen = _generator(seed)
    keys = torch.tensor(T1_KEYS)
    n_keys = len(T1_KEYS)

    # Enumerate (z, a1, a2) blocks: one tensor triple per (pair-group, key-interval).
    blocks = []  # (z, a1, a2, key_lo, key_hi)

    def pairs_of(anchors: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
        a = torch.tensor(anchors)
        a1, a2 = torch.meshgrid(a, a, indexing="ij")
        return a1.reshape(-1), a2.reshape(-1)

    def cross(z: torch.Tensor, a1: torch.Tensor, a2: torch.Tensor):
        # Every key with every pair: (len(z) * len(pairs),), keys varying fastest.
        return (
            z.repeat(a1.numel()),
            a1.repeat_interleave(z.numel()),
            a2.repeat_interleave(z.numel()),
        )

    if intervals:
        for anchors, (lo, hi) in ((T1_REASONING[:5], (21, 70)), (T1_REASONING[5:], (71, 120))):
            z, a1, a2 = cross(torch.arange(lo, hi + 1), *pairs_of(anchors))
            blocks.append((z, a1, a2, lo, hi))
    else:
        z, a1, a2 = cross(keys, *pairs_of(T1_REASONING))
        blocks.append((z, a1, a2, 21, 120))
    z, a1, a2 = cross(keys, *pairs_of(T1_MEMORY))
    blocks.append((z, a1, a2, 21, 120))

    z = torch.cat([b[0] for b in blocks]).repeat(reps)
    a1 = torch.cat([b[1] for b in blocks]).repeat(reps)
    a2 = torch.cat([b[2] for b in blocks]).repeat(reps)
    klo = torch.cat([torch.full_like(b[0], b[3]) for b in blocks]).repeat(reps)
    khi = torch.cat([torch.full_like(b[0], b[4]) for b in blocks]).repeat(reps)

    # Memory labels: one permutation of the key set per memory pair (a1, a2), indexed by
    # pair id (a1-1)*10 + (a2-1); pi[pair, z-21] is the label.
    perms = torch.stack([torch.randperm(n_keys, generator=gen) for _ in range(len(T1_MEMORY) ** 2)])
    memory_table = keys[perms]  # (100, 100)
    is_mem = a1 <= T1_MEMORY[-1]
    pair_id = ((a1 - 1) * len(T1_MEMORY) + (a2 - 1)).clamp(0, len(T1_MEMORY) ** 2 - 1)
    y_mem = memory_table[pair_id, (z - keys[0]).clamp(0, n_keys - 1)]
    y = torch.where(is_mem, y_mem, z + a1 + a2)

    if noise_keys:
        X = _place(gen, z, a1, a2, seq_len, klo, khi)
    else:
        X = torch.stack([z, a1, a2], dim=1)

    test_mask = torch.zeros_like(z, dtype=torch.bool)
    for h1, h2 in held_out:
        test_mask |= (a1 == h1) & (a2 == h2)

    vocab = T1_KEYS[-1] + 2 * T1_REASONING[-1] + 1  # 161: labels reach 120 + 20 + 20 = 160
    groups = {
        "keys": list(T1_KEYS),
        "memory_anchors": list(T1_MEMORY),
        "reasoning_anchors": list(T1_REASONING),
        "anchors": T1_MEMORY + T1_REASONING,
    }
    name = "T2 interval composite addition" if intervals else "T1 composite addition"

    train = _subset(gen, X, y, ~test_mask, vocab, groups, name, "train")
    assert train is not None
    return Task(
        train=train,
        test=_subset(gen, X, y, test_mask, vocab, groups, name, "test"),
        info_order=0,
        description=(
            f"{name}: y = z + a1 + a2 for reasoning pairs, a per-pair key permutation for memory "
            f"pairs; exactly balanced, reps={reps}, held out {list(held_out)}."
        ),
    )

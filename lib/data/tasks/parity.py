"""Gated parity bits: a task whose staircase has one stair per signature order (Chapter 2)."""

from __future__ import annotations

from typing import NamedTuple

import torch

from .base import TaskData, _generator


class ParityBits(NamedTuple):
    """Token ids and label layout of :func:`gated_parity_bits`."""

    anchors: list[int]
    keys: list[int]
    gates: list[int]  # [g+, g-]: the order-1 bit's gate
    h: list[int]  # [h+, h-]: first gate of the order-2 bit (empty without it)
    k: list[int]  # [k+, k-]: second gate of the order-2 bit (empty without it)
    block: int  # labels of bit j = -1 are shifted by block * 2**(j-1)
    bit1: torch.Tensor  # (N,) the order-1 bit s1 in {+1, -1}
    bit2: torch.Tensor | None  # (N,) the order-2 bit s2, or None


def gated_parity_bits(
    n_keys: int = 12,
    n_anchors: int = 12,
    order2: bool = False,
    h_weights: tuple[int, int] = (3, 2),
    shuffle_seed: int | None = None,
) -> tuple[TaskData, ParityBits]:
    r"""The gated-parity-bit task: one stair per signature order (Chapter 2).

    Tokens: anchors ``a = 1..n_anchors``, keys ``z`` (index ``i_z = 0..n_keys-1``), gates
    ``g+, g-``, and with ``order2`` two further gate families ``h+, h-`` and ``k+, k-``.
    The sequence is ``[z, a, g]`` (or ``[z, a, h, k, g]``), the gate ``g`` last (the
    attention model reads out there). With the block size ``B = n_keys + n_anchors + 1``,

    .. math:: y = i_z + a + B\,[s_1=-1] + 2B\,[s_2=-1],

    * ``s1 = +1`` iff (``g = g+``) XNOR (``a`` odd): the **order-1 bit**, the parity of the
      anchor read through one context token. It is one feature shared by all anchors.
    * ``s2 = +1`` iff (``h k = +1``) XNOR (``ceil(a/2)`` odd), with ``h k = +1`` when both
      gates carry the same sign: the **order-2 bit**, a second anchor feature read
      through the product of two context tokens from different families.

    Order 0 (an anchor's label distribution) sees ``i_z + a`` in every block with equal
    weight: it orders the anchors and carries neither bit. The gates ``g+`` and ``g-``
    differ at order 0 (``g+`` puts odd anchors in block 0), so unlike T3 the task has no
    exact ``g+ <-> g-`` symmetry. Every combination appears, the ``h+`` ones
    ``h_weights[0]`` times and the ``h-`` ones ``h_weights[1]`` times: an exactly balanced
    ``h`` would make the third stair an escape from a symmetric saddle (the product
    ``h k`` has no order-1 trace); the imbalance gives the ``k`` gate a weak order-1 link
    to the second bit. ``shuffle_seed`` permutes the labels across sequences (a negative
    control with no rule). Returns ``(data, layout)``; ``data.groups`` names every family.
    """
    if n_keys < 1 or n_anchors < 2 or n_anchors % 4:
        raise ValueError(
            f"need n_keys >= 1 and n_anchors a multiple of 4, got {n_keys}, {n_anchors}"
        )
    anchors = torch.arange(1, n_anchors + 1)
    key_ids = torch.arange(n_anchors + 1, n_anchors + 1 + n_keys)
    nxt = n_anchors + 1 + n_keys
    gp, gm = nxt, nxt + 1
    hp, hm, kp, km = nxt + 2, nxt + 3, nxt + 4, nxt + 5
    B = n_keys + n_anchors + 1
    if order2:
        z, a, h, k, gen = (
            t.reshape(-1)
            for t in torch.meshgrid(
                key_ids,
                anchors,
                torch.tensor([hp, hm]),
                torch.tensor([kp, km]),
                torch.tensor([gp, gm]),
                indexing="ij",
            )
        )
        reps = torch.where(h == hp, h_weights[0], h_weights[1])
        z, a, h, k, gen = (t.repeat_interleave(reps) for t in (z, a, h, k, gen))
        X = torch.stack([z, a, h, k, gen], 1)
        same = (h == hp) == (k == kp)
        s2 = torch.where(same == (((a + 1) // 2) % 2 == 1), 1, -1)
        vocab = nxt + 6
    else:
        z, a, gen = (
            t.reshape(-1)
            for t in torch.meshgrid(key_ids, anchors, torch.tensor([gp, gm]), indexing="ij")
        )
        X = torch.stack([z, a, gen], 1)
        s2 = None
        vocab = nxt + 2
    s1 = torch.where((gen == gp) == (a % 2 == 1), 1, -1)
    y = (z - key_ids[0]) + a + B * (s1 == -1)
    if s2 is not None:
        y = y + 2 * B * (s2 == -1)
    n_labels = (4 if order2 else 2) * B
    if shuffle_seed is not None:
        y = y[torch.randperm(len(y), generator=_generator(shuffle_seed))]
    groups = {
        "anchors": anchors.tolist(),
        "keys": key_ids.tolist(),
        "gates": [gp, gm],
        "h": [hp, hm] if order2 else [],
        "k": [kp, km] if order2 else [],
    }
    name = "gated parity bits" + (" (orders 0, 1, 2)" if order2 else " (orders 0, 1)")
    if shuffle_seed is not None:
        name += ", labels shuffled"
    data = TaskData(X, y, vocab, n_labels, groups, name)
    layout = ParityBits(
        groups["anchors"], groups["keys"], groups["gates"], groups["h"], groups["k"], B, s1, s2
    )
    return data, layout


def shuffled_bit1(data: TaskData, layout: ParityBits, seed: int) -> tuple[TaskData, ParityBits]:
    """The staircase's negative control: ``data`` with the bit-1 signs permuted across
    sequences (by a generator seeded with ``seed``), so that neither the gate nor the anchor
    (nor both together) carries information about bit 1. Order 0 (``i_z + a``) is
    untouched. Returns the shuffled data and its layout (``bit1``: the shuffled signs)."""
    perm = torch.randperm(len(data.y), generator=torch.Generator().manual_seed(seed))
    s1 = layout.bit1[perm]
    y = data.y - layout.block * (layout.bit1 == -1) + layout.block * (s1 == -1)
    blind = TaskData(
        data.X.clone(), y, data.vocab_size, data.n_labels, dict(data.groups), data.name
    )
    blind.name = data.name + ", bit-1 signs shuffled"
    lay = ParityBits(
        layout.anchors, layout.keys, layout.gates, layout.h, layout.k, layout.block, s1, None
    )
    return blind, lay

r"""Selective parity bits: a staircase task that attention must learn to read.

In the gated-parity-bit task (:mod:`lib.data.tasks.parity`) every sequence holds one gate, so a
uniform average over the context already hands the gate to the readout, and attention
never has to learn where to look. Here every sequence holds *both* gates, and which one
counts is set by its position: the gate just before the anchor. The bag of tokens is then
the same for both values of the bit, and a model whose attention is uniform cannot read it.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from .base import TaskData, _generator


class SelectiveBits(NamedTuple):
    """Token ids, positions and label layout of :func:`selective_parity_bits`."""

    anchors: list[int]
    keys: list[int]
    gates: list[int]  # [g+, g-]
    block: int  # labels of bit = -1 are shifted by block
    gate_pos: int  # the position of the gate that counts (just before the anchor)
    other_pos: int  # the position of the gate that does not
    anchor_pos: int  # the anchor, last: the readout position
    bit1: torch.Tensor  # (N,) the bit s1 in {+1, -1}
    bit2: None = None  # no second bit (the staircase readers ask)


def selective_parity_bits(
    n_keys: int = 12, n_anchors: int = 12, width: int = 4, shuffle_seed: int | None = None
) -> tuple[TaskData, SelectiveBits]:
    r"""Sequences ``[z, g, g', a]``: a distractor key, both gates in either order, the anchor.

    Tokens: anchors ``a = 1..n_anchors``, keys ``z``, gates ``g+, g-``. ``(g, g')`` is
    ``(g+, g-)`` or ``(g-, g+)``; the gate that counts is ``g'``, the one just before the
    anchor (position 2). With an offset ``u = 0..width-1`` that no token names (label noise,
    enumerated) and the block size ``B = n_anchors + width - 1``,

    .. math:: y = a - 1 + u + B\,[s_1=-1],\qquad
              s_1=+1 \iff (g'=g_+)\ \mathrm{XNOR}\ (a\ \text{odd}).

    The key is in no label: it is a distractor that attention must learn to ignore. (A key
    in the label would have to be read through attention, which then locks onto it and
    starves the gates; the offset ``u`` gives the anchors' label signatures the overlap
    that a key gives them in :func:`lib.data.tasks.gated_parity_bits`.) Every ``(z, a, order,
    u)`` appears once. Order 0 (an anchor's label distribution) is a box of ``width``
    labels in each block, half its mass in each: it orders the anchors and carries no bit.
    The bag
    ``{z, g+, g-, a}`` of a sequence is the same for both values of ``s1``: the bit is a
    function of *which position* holds ``g+``, an order-1 signature of the anchor with the
    token at position 2 (:func:`lib.measure.staircase.order_targets` with ``gate_pos = 2``). Both
    gates are in every sequence, so they share one order-0 signature (the label marginal)
    and the plain, position-blind order-1 signature of an anchor with either gate is flat.
    ``shuffle_seed`` permutes the labels across sequences (a control with no rule).
    """
    if n_keys < 1 or n_anchors < 2 or n_anchors % 2:
        raise ValueError(f"need n_keys >= 1 and an even n_anchors >= 2, got {n_keys}, {n_anchors}")
    anchors = torch.arange(1, n_anchors + 1)
    key_ids = torch.arange(n_anchors + 1, n_anchors + 1 + n_keys)
    gp = n_anchors + 1 + n_keys
    gm = gp + 1
    if width < 1:
        raise ValueError(f"width must be >= 1, got {width}")
    B = n_anchors + width - 1
    z, a, first, u = (
        t.reshape(-1)
        for t in torch.meshgrid(
            key_ids, anchors, torch.tensor([gp, gm]), torch.arange(width), indexing="ij"
        )
    )
    second = torch.where(first == gp, gm, gp)
    X = torch.stack([z, first, second, a], 1)
    s1 = torch.where((second == gp) == (a % 2 == 1), 1, -1)
    y = (a - 1) + u + B * (s1 == -1)
    if shuffle_seed is not None:
        y = y[torch.randperm(len(y), generator=_generator(shuffle_seed))]
    groups = {"anchors": anchors.tolist(), "keys": key_ids.tolist(), "gates": [gp, gm]}
    name = "selective parity bits" + (", labels shuffled" if shuffle_seed is not None else "")
    data = TaskData(X, y, gp + 2, 2 * B, groups, name)
    layout = SelectiveBits(groups["anchors"], groups["keys"], [gp, gm], B, 2, 1, 3, s1)
    return data, layout

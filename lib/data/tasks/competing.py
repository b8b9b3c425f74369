"""Competing orders: two families of sequences whose labels are read at different context
orders, and its control with both at order 0 (Chapter 10).
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from .base import TaskData


class CompetingOrders(NamedTuple):
    """Token ids and families of :func:`competing_orders`."""

    low: list[int]  # anchors of the family whose label is read at order 0
    high: list[int]  # anchors of the family whose label is read at ``order`` (1, or 0)
    gates: list[int]  # [g+, g-]
    family: torch.Tensor  # (N,) 0 for a sequence of the low family, 1 for the high family
    order: int  # context order of the high family's label: 1, or 0 in the control


def competing_orders(
    n_anchors: int = 8, same_order: bool = False
) -> tuple[TaskData, CompetingOrders]:
    r"""Two families of sequences whose labels are read at different context orders
    (Chapter 10: which stair comes first, context order or signal strength?).

    Tokens: the *low* family's anchors ``a = 0..n-1``, the *high* family's anchors
    ``b = n..2n-1``, and two gates ``g+, g-``. Every sequence is ``[anchor, gate]``, every
    anchor with both gates, and the label is one binary bit:

    * low family, **order 0**: :math:`y = [a \ge n/2]`, the anchor alone sets it;
    * high family, **order 1**: :math:`y = [(b\ \mathrm{odd}) = (g = g_+)]`, the anchor's
      parity read through the gate. Each of its anchors sees both labels equally often,
      so its label signature is uniform: no order-0 trace;
    * with ``same_order`` (the control), the high family is read at order 0 too:
      :math:`y = [b\ \mathrm{odd}]`.

    The two families share the gates, the label pair and every weight but their anchors'
    rows. How strongly each family drives training is set by per-sequence loss weights
    (:func:`lib.theory.order.strength_weights`), not by the data. Returns ``(data, layout)``.
    """
    if n_anchors < 2 or n_anchors % 2:
        raise ValueError(f"n_anchors must be an even number >= 2, got {n_anchors}")
    n = n_anchors
    gp, gm = 2 * n, 2 * n + 1
    anchor, gate = (
        t.reshape(-1)
        for t in torch.meshgrid(torch.arange(2 * n), torch.tensor([gp, gm]), indexing="ij")
    )
    high = anchor >= n
    odd = anchor % 2 == 1
    y_high = odd if same_order else odd == (gate == gp)
    y = torch.where(high, y_high, anchor >= n // 2).long()
    X = torch.stack([anchor, gate], 1)
    groups = {"low": list(range(n)), "high": list(range(n, 2 * n)), "gates": [gp, gm]}
    name = "competing orders" + (" (control: both order 0)" if same_order else "")
    data = TaskData(X, y, 2 * n + 2, 2, groups, name)
    layout = CompetingOrders(
        groups["low"], groups["high"], groups["gates"], high.long(), 0 if same_order else 1
    )
    return data, layout

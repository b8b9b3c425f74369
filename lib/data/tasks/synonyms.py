"""Synonym groups: auxiliary data that gives chosen tokens a target geometry, and a
downstream task that needs it (Chapter 6).
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from .base import _generator


class SynonymGroups(NamedTuple):
    """The downstream task and auxiliary data of :func:`synonym_groups` (all int64)."""

    train: tuple[torch.Tensor, torch.Tensor]  # downstream pairs seen in training
    unseen: tuple[torch.Tensor, torch.Tensor]  # (key, trained member) pairs never seen
    held_out: tuple[torch.Tensor, torch.Tensor]  # pairs with a held-out member
    aux_X: torch.Tensor  # (n_members, 2): [member, AUX]
    aux_y: torch.Tensor  # (n_members,): the member's group class token
    aux_y_shuffled: torch.Tensor  # classes of a random grouping (same class sizes)
    members: list[int]
    group: torch.Tensor  # (n_members,) group of each member
    held_members: list[int]
    vocab_size: int


def synonym_groups(
    seed: int,
    n_keys: int = 40,
    n_groups: int = 4,
    group_size: int = 4,
    keep: float = 0.5,
) -> SynonymGroups:
    """Groups of interchangeable tokens, a downstream task that needs them, and aux data.

    Tokens: keys ``10 .. 10+n_keys-1``; members ``60 ..`` in ``n_groups`` groups of
    ``group_size`` (member ``60 + group_size*g + j`` is in group ``g``); class tokens
    ``80 + g``; the auxiliary marker ``AUX = 79``. Vocabulary ``80 + n_groups``.

    * downstream: ``[z, s] -> z + g(s) + 1``: the label needs the key and the *group* of the
      member. The last member of every group is held out of the downstream data; of the
      other (key, member) pairs a random fraction ``keep`` is trained on and the rest is the
      ``unseen`` test set.
    * auxiliary: ``[s, AUX] -> 80 + g(s)`` for every member, held-out ones included, so the
      members of a group get identical order-0 signatures (the target geometry). The
      shuffled control keeps the class sizes but draws the grouping at random.
    """
    if not (n_keys >= 2 and n_groups >= 2 and group_size >= 2 and 0 < keep < 1):
        raise ValueError("need n_keys, n_groups, group_size >= 2 and 0 < keep < 1")
    if n_keys > 50 or n_groups * group_size > 19:
        raise ValueError("keys must fit in 10..59 and members in 60..78")
    gen = _generator(seed)
    keys = torch.arange(10, 10 + n_keys)
    members = torch.arange(60, 60 + n_groups * group_size)
    group = (members - 60) // group_size
    aux = 79
    z, s = (t.reshape(-1) for t in torch.meshgrid(keys, members, indexing="ij"))
    X = torch.stack([z, s], 1)
    y = z + (s - 60) // group_size + 1
    held = (s - 60) % group_size == group_size - 1
    kept = torch.rand(z.shape[0], generator=gen) < keep
    tr, un = ~held & kept, ~held & ~kept
    shuffled = group[torch.randperm(group.numel(), generator=gen)]
    return SynonymGroups(
        train=(X[tr], y[tr]),
        unseen=(X[un], y[un]),
        held_out=(X[held], y[held]),
        aux_X=torch.stack([members, torch.full_like(members, aux)], 1),
        aux_y=80 + group,
        aux_y_shuffled=80 + shuffled,
        members=members.tolist(),
        group=group,
        held_members=members[(members - 60) % group_size == group_size - 1].tolist(),
        vocab_size=80 + n_groups,
    )

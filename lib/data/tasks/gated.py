"""T3: gated composite addition, whose anchors and gates differ only at order 1; its naive
first version and its order-0 control twin (Chapters 1 and 6).
"""

from __future__ import annotations

import torch

from .base import Task, TaskData, _generator, _random_keys, _subset

T3_KEYS = list(range(40, 88))  # 48 keys
T3_ANCHORS = list(range(1, 13))
T3_GATE_PLUS = 100
T3_GATE_MINUS = 101
T3_VOCAB = 102


def _gated(
    seed: int, reps: int, noise_keys: int, test_fraction: float, naive: bool
) -> tuple[TaskData, TaskData | None]:
    gen = _generator(seed)
    keys = torch.tensor(T3_KEYS)
    anchors = torch.tensor(T3_ANCHORS)
    gates = torch.tensor([T3_GATE_PLUS, T3_GATE_MINUS])
    # Full enumeration keys x anchors x gates (48 * 12 * 2), gates varying fastest.
    z, a, gate = (t.reshape(-1) for t in torch.meshgrid(keys, anchors, gates, indexing="ij"))
    odd = a % 2 == 1
    plus = gate == T3_GATE_PLUS
    s = torch.where(plus == odd, 1, -1)  # XNOR
    magnitude = a if naive else (a + 1) // 2  # ceil(a / 2)
    y = z + s * magnitude

    # Held-out blocks: a (z, m) pair takes all its anchors (2m-1, 2m; or just m when naive)
    # and both gates with it, so the train-set identities hold exactly (see docstring).
    m = (a + 1) // 2 if not naive else a
    n_m = int(m.max())
    block = (z - keys[0]) * n_m + (m - 1)
    n_blocks = len(T3_KEYS) * n_m
    n_test = int(round(test_fraction * n_blocks))
    test_blocks = torch.zeros(n_blocks, dtype=torch.bool)
    test_blocks[torch.randperm(n_blocks, generator=gen)[:n_test]] = True
    test_mask = test_blocks[block]

    z, a, gate, y, test_mask = (t.repeat(reps) for t in (z, a, gate, y, test_mask))
    cols = [z[:, None], a[:, None], gate[:, None]]
    if noise_keys > 0:
        cols.append(_random_keys(gen, (z.shape[0], noise_keys), T3_KEYS[0], T3_KEYS[-1]))
    X = torch.cat(cols, dim=1)

    name = "T3 naive gated addition" if naive else "T3 gated addition"
    groups = {
        "keys": list(T3_KEYS),
        "anchors": list(T3_ANCHORS),
        "odd_anchors": [x for x in T3_ANCHORS if x % 2 == 1],
        "even_anchors": [x for x in T3_ANCHORS if x % 2 == 0],
        "gates": [T3_GATE_PLUS, T3_GATE_MINUS],
    }

    train = _subset(gen, X, y, ~test_mask, T3_VOCAB, groups, name, "train")
    if train is None:
        raise ValueError(f"test_fraction={test_fraction} leaves no training data")
    return train, _subset(gen, X, y, test_mask, T3_VOCAB, groups, name, "test")


def gated_addition(
    seed: int, reps: int = 1, noise_keys: int = 0, test_fraction: float = 0.0
) -> Task:
    """T3: gated composite addition, built so that order 0 and order 1 carry different things.

    Definition. Keys ``z ∈ {40..87}`` (48), anchors ``a ∈ {1..12}`` with magnitude
    ``m(a) = ceil(a/2)`` (anchors ``2m-1`` and ``2m`` share magnitude ``m``), gates
    ``g+ = 100`` and ``g- = 101``; vocabulary and label space 0..101. The sequence is
    ``[z, a, g]`` followed by ``noise_keys`` uniform random keys. The label is

        y = z + s * m(a),   s = +1 iff (g = g+) XNOR (a odd),

    so labels lie in 34..93. Design: all 48 x 12 x 2 combinations, each ``reps`` times.

    Identities (exact on the train set; the tests check them by counting):

    1. **g+ and g- have the same order-0 signature.** With ``g+`` the offsets ``s*m(a)`` are
       ``+m`` for the odd anchor ``2m-1`` and ``-m`` for the even anchor ``2m``; with ``g-`` they
       are ``-m`` and ``+m``. Both gates see the offset multiset ``{±1, ..., ±6}`` once per key,
       so their label distributions ``{z + d}`` coincide.
    2. **Anchors 2m-1 and 2m have the same order-0 signature.** Each sees ``+m`` with one gate
       and ``-m`` with the other, for every key: labels ``{z ± m}`` with equal weight.
    3. **Only order 1 separates them.** The joint (gate, label | anchor) signature of ``2m-1``
       puts ``(g+, z+m), (g-, z-m)`` where ``2m`` puts ``(g+, z-m), (g-, z+m)``; all odd anchors
       share the pattern "g+ ↔ +", all even anchors "g+ ↔ -" (the parity groups), and the
       (anchor, label | gate) signature of ``g+`` differs from that of ``g-``.

    So ``info_order = 1``: order 0 only orders anchors by magnitude and merges the gates.
    Noise keys do not change any count involving anchors or gates.

    Held-out split: a random ``test_fraction`` of the 48 x 6 ``(z, m)`` blocks go to the test
    set with all four of their sequences ``(a ∈ {2m-1, 2m}) x (g±)`` (times ``reps``). A block
    removes labels ``{z+m, z-m}`` from both gates and from both anchors of the pair, so
    identities 1 and 2 still hold exactly on the train set.
    """
    return Task(
        *_gated(seed, reps, noise_keys, test_fraction, naive=False),
        info_order=1,
        description=(
            "T3 gated addition: y = z + s*ceil(a/2), s = +1 iff (g = g+) XNOR (a odd); "
            f"reps={reps}, noise_keys={noise_keys}, test_fraction={test_fraction}."
        ),
    )


def gated_addition_naive(
    seed: int, reps: int = 1, noise_keys: int = 0, test_fraction: float = 0.0
) -> Task:
    """T3 as first written for the book (Chapter 1): ``y = z + s * a`` (no magnitude pairing).

    Same keys, anchors, gates, sign rule and design as :func:`gated_addition`, but the offset
    is the anchor itself. Then the gate signatures are **not** identical: ``g+`` sees offsets
    ``{+1, -2, +3, -4, ..., +11, -12}`` and ``g-`` the mirror image ``{-1, +2, ..., -11, +12}``,
    which are different multisets (e.g. only ``g-`` reaches ``z + 12``). Order 0 alone already
    tells the gates apart, so the naive task does not isolate order 1; the book shows this as
    the reason for the magnitude pairing. Each anchor still sees ``{z ± a}`` (symmetric), so
    anchors differ at order 0 by magnitude only. The held-out split takes ``(z, a)`` blocks with
    both gates. Labels lie in 28..99.
    """
    return Task(
        *_gated(seed, reps, noise_keys, test_fraction, naive=True),
        info_order=0,
        description=(
            "T3 naive gated addition: y = z + s*a, s = +1 iff (g = g+) XNOR (a odd); the gate "
            "order-0 signatures differ."
        ),
    )


def gated_addition_control(
    seed: int, reps: int = 1, noise_keys: int = 0, test_fraction: float = 0.0
) -> Task:
    """T3's order-0 twin: the same sequences ``[z, a, g]``, label ``y = z + s0(a) * m(a)``.

    The sign no longer depends on the gate: ``s0 = +1`` iff ``a`` is odd. Keys, anchors,
    gates, design, held-out blocks and label range are those of :func:`gated_addition`
    (same seed, same rows), so the two tasks differ only in *where* the information sits.
    Here anchor ``2m-1`` sees labels ``z + m`` and ``2m`` sees ``z - m``: their order-0
    signatures differ, and each anchor's signature alone fixes its offset (``info_order =
    0``); the gates are irrelevant and keep identical signatures.
    """
    t = gated_addition(seed, reps, noise_keys, test_fraction)

    def relabel(d: TaskData | None) -> TaskData | None:
        if d is None:
            return None
        z, a = d.X[:, 0], d.X[:, 1]
        y = z + torch.where(a % 2 == 1, 1, -1) * ((a + 1) // 2)
        name = d.name.replace("T3 gated addition", "T3 order-0 control")
        return TaskData(d.X, y, d.vocab_size, d.n_labels, dict(d.groups), name)

    return Task(
        train=relabel(t.train),
        test=relabel(t.test),
        info_order=0,
        description=(
            "T3 order-0 control: the sequences of T3, y = z + s0*ceil(a/2) with s0 = +1 iff a "
            f"odd (the gate is irrelevant); reps={reps}, test_fraction={test_fraction}."
        ),
    )

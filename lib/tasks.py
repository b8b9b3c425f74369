"""Synthetic tasks of the book: one seeded, vectorized generator per task.

Every generator returns plain ``torch.int64`` tensors and never loops over samples in
Python. Where a task is meant to show a property of the *signatures* (the label
statistics of a token, Chapter 1 of the book), the data are an **exactly
balanced enumerated design**: every combination of the task's factors appears the same
number of times. Then the identities the chapters rely on (e.g. "all memory anchors have
the same order-0 label signature") hold exactly on the training set, by construction,
rather than only in expectation.

Notation used in the docstrings (Chapter 1, after Yao et al., arXiv 2509.20124,
``yao2025probsig`` in ``references.bib``):

* order-0 (label) signature of token ``s``: ``phi_s(nu) ∝ sum_n c_s(X_n) 1[y_n = nu]``,
  the label distribution over sequences containing ``s``, weighted by its count;
* order-1 (joint) signature: ``phi_s(mu, nu) ∝ sum_n c_s(X_n) c_mu(X_n) 1[y_n = nu]``,
  the joint distribution of (another token in the context, label).

A task's ``info_order`` says which of the two carries the information that tells the
task-relevant tokens apart.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import torch

__all__ = [
    "TaskData",
    "Task",
    "composite_addition",
    "gated_addition",
    "gated_addition_naive",
    "modular_addition",
    "gated_addition_control",
    "plain_addition",
    "with_marker",
    "SynonymGroups",
    "synonym_groups",
    "ScanSnap",
    "ScanSnapBatch",
    "scan_snap_probs",
    "scan_snap_batch",
    "scan_snap_uniform_distinct_mass",
    "ParityBits",
    "gated_parity_bits",
    "CompetingOrders",
    "competing_orders",
]


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


# ---------------------------------------------------------------------------
# T1 / T2: composite addition with memory and reasoning anchors
# ---------------------------------------------------------------------------

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


# ---------------------------------------------------------------------------
# T3: gated composite addition
# ---------------------------------------------------------------------------

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


# ---------------------------------------------------------------------------
# Modular addition
# ---------------------------------------------------------------------------


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


# ---------------------------------------------------------------------------
# Synonym groups: auxiliary data that gives chosen tokens a target geometry (Chapter 6)
# ---------------------------------------------------------------------------


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


# ---------------------------------------------------------------------------
# Scan-and-Snap sequence-class task (Tian et al. 2023, ``tian2023scan``; Chapter 7)
# ---------------------------------------------------------------------------


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


# ---------------------------------------------------------------------------
# Gated parity bits: a task whose staircase has one stair per signature order
# ---------------------------------------------------------------------------


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
    (Chapter 9: which stair comes first, context order or signal strength?).

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
    (:func:`lib.order.strength_weights`), not by the data. Returns ``(data, layout)``.
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


# ---------------------------------------------------------------------------
# Subject-verb agreement with attractors: an offline stand-in for the SVA data of
# Vashisht and Ramaswamy (Chapter 7, Section 7)
# ---------------------------------------------------------------------------


class Agreement:
    """Vocabulary of the agreement grammar (ids), see :func:`agreement_batch`."""

    PAD, THE = 0, 1
    ADJ = tuple(range(2, 10))
    SING = tuple(range(10, 30))  # singular nouns; SING[i] and PLUR[i] are one lemma
    PLUR = tuple(range(30, 50))
    PREP = tuple(range(50, 55))
    VOCAB = 55

    @staticmethod
    def max_len(max_adj: int, max_attractors: int) -> int:
        """Longest sentence plus the final PAD at which the model reads out."""
        return (2 + max_adj) + max_attractors * (3 + max_adj) + 1


class AgreementBatch(NamedTuple):
    """Unpacks as ``X, y, subject_pos, n_attractors, n_mismatched``."""

    X: torch.Tensor  # (n, L) int64, right-padded with PAD; the last position is always PAD
    y: torch.Tensor  # (n,) the number of the subject (0 singular, 1 plural) = the verb's
    subject_pos: torch.Tensor  # (n,) position of the subject noun (the rationale)
    n_attractors: torch.Tensor  # (n,) nouns after the subject
    n_mismatched: torch.Tensor  # (n,) attractors whose number differs from the subject's


def agreement_batch(
    n: int,
    max_adj: int = 2,
    max_attractors: int = 3,
    p_mismatch: float = 0.5,
    generator: torch.Generator | None = None,
) -> AgreementBatch:
    """Sentences ``the ADJ* N_subj (PREP the ADJ* N_attr)^k`` from a small grammar.

    The label is the number of the subject, i.e. of the verb that would follow. The
    numbers of the ``k`` attractor nouns (k uniform in 0..max_attractors) differ from the
    subject's independently with probability ``p_mismatch``, so counting nouns does not
    work: the model must find the subject. Sentences are right-padded with PAD to
    ``Agreement.max_len(...)``; the last position is PAD and is where the model reads out.
    """
    if max_adj < 0 or max_attractors < 0 or not 0 <= p_mismatch <= 1:
        raise ValueError("need max_adj >= 0, max_attractors >= 0 and p_mismatch in [0, 1]")
    A = Agreement
    L = A.max_len(max_adj, max_attractors)
    gen = generator

    def ri(hi, size):
        return torch.randint(0, hi, size, generator=gen)

    X = torch.full((n, L), A.PAD, dtype=torch.int64)
    y = ri(2, (n,))
    subj = torch.zeros(n, dtype=torch.int64)
    k = ri(max_attractors + 1, (n,))
    mism = torch.zeros(n, dtype=torch.int64)
    adj, nouns, preps = torch.tensor(A.ADJ), torch.tensor(A.SING + A.PLUR), torch.tensor(A.PREP)
    n_lemma = len(A.SING)
    for i in range(n):  # sentences are short; a loop keeps the grammar readable
        toks = [A.THE] + adj[ri(len(A.ADJ), (int(ri(max_adj + 1, (1,))),))].tolist()
        subj[i] = len(toks)
        toks.append(int(nouns[int(ri(n_lemma, (1,))) + n_lemma * int(y[i])]))
        for _ in range(int(k[i])):
            flip = bool(torch.rand(1, generator=gen) < p_mismatch)
            num = int(y[i]) ^ int(flip)
            mism[i] += int(flip)
            toks += [int(preps[int(ri(len(A.PREP), (1,)))]), A.THE]
            toks += adj[ri(len(A.ADJ), (int(ri(max_adj + 1, (1,))),))].tolist()
            toks.append(int(nouns[int(ri(n_lemma, (1,))) + n_lemma * num]))
        X[i, : len(toks)] = torch.tensor(toks)
    return AgreementBatch(X, y, subj, k, mism)


__all__ += ["Agreement", "AgreementBatch", "agreement_batch"]

"""Each task generator obeys its definition (lib/data/tasks.py).

Labels are recomputed independently with plain Python loops, and the by-construction
signature identities are checked by direct counting here (not through lib/data/signatures.py),
exactly: counts are integers, and "identical signatures" means proportional count rows.
"""

from __future__ import annotations

import random
from collections import Counter

import pytest
import torch

from lib.data import tasks as T

# ---------------------------------------------------------------------------
# Direct counting helpers
# ---------------------------------------------------------------------------


def order0_counts(data: T.TaskData) -> torch.Tensor:
    """(V, n_labels) int64: entry (s, nu) = sum_n c_s(X_n) 1[y_n = nu]."""
    S = torch.zeros(data.vocab_size, data.n_labels, dtype=torch.int64)
    ones = torch.ones_like(data.y)
    for j in range(data.X.shape[1]):
        S.index_put_((data.X[:, j], data.y), ones, accumulate=True)
    return S


def order1_counts(data: T.TaskData, s: int) -> torch.Tensor:
    """(V, n_labels) int64: entry (mu, nu) = sum_n c_s(X_n) c_mu(X_n) 1[y_n = nu]."""
    c_s = (data.X == s).sum(1)
    J = torch.zeros(data.vocab_size, data.n_labels, dtype=torch.int64)
    for j in range(data.X.shape[1]):
        J.index_put_((data.X[:, j], data.y), c_s, accumulate=True)
    return J


def same_distribution(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Two nonzero count arrays are proportional (identical normalized signatures), exactly."""
    return bool(a.sum() > 0 and b.sum() > 0 and torch.equal(a * b.sum(), b * a.sum()))


def max_normalized_gap(a: torch.Tensor, b: torch.Tensor) -> float:
    a, b = a.double(), b.double()
    return float((a / a.sum() - b / b.sum()).abs().max())


def anchor_triples(X: torch.Tensor) -> torch.Tensor:
    """(N, 3) rows (z, a1, a2) of T1/T2: the two adjacent anchors (< 21) and the key before."""
    is_anchor = X < 21
    assert bool((is_anchor.sum(1) == 2).all())
    p1 = is_anchor.long().argmax(1)  # first anchor position = p + 1
    rows = torch.arange(X.shape[0])
    assert bool((p1 >= 1).all()) and bool(is_anchor[rows, p1 + 1].all())
    return torch.stack([X[rows, p1 - 1], X[rows, p1], X[rows, p1 + 1]], dim=1)


def sample_rows(n: int, k: int = 400, seed: int = 0) -> list[int]:
    return random.Random(seed).sample(range(n), min(k, n))


# ---------------------------------------------------------------------------
# T1 / T2 composite addition
# ---------------------------------------------------------------------------

KEYS = range(21, 121)
MEM = range(1, 11)
RSN = range(11, 21)


@pytest.fixture(scope="module")
def t1():
    return T.composite_addition(seed=0, reps=2)


def test_t1_shapes_and_groups(t1):
    tr, te = t1.train, t1.test
    assert tr.X.dtype == torch.int64 and tr.y.dtype == torch.int64
    assert tr.X.shape == (2 * (100 * 200 - 200), 9) and te.X.shape == (2 * 200, 9)
    assert tr.vocab_size == tr.n_labels == 161
    assert tr.groups["memory_anchors"] == list(MEM) and tr.groups["reasoning_anchors"] == list(RSN)
    assert tr.groups["keys"] == list(KEYS)
    assert t1.info_order == 0
    # All non-anchor positions are keys (noise keys come from the key set).
    for data in (tr, te):
        others = data.X[data.X >= 21]
        assert int(others.min()) >= 21 and int(others.max()) <= 120


def test_t1_labels_recomputed(t1):
    tr = t1.train
    triples = anchor_triples(tr.X)
    memory_map: dict[tuple[int, int], dict[int, int]] = {}
    for n in range(tr.X.shape[0]):  # full Python pass: it is only 40k rows
        z, a1, a2 = (int(v) for v in triples[n])
        y = int(tr.y[n])
        if a1 in RSN:
            assert a2 in RSN and y == z + a1 + a2
        else:
            assert a1 in MEM and a2 in MEM
            prev = memory_map.setdefault((a1, a2), {}).setdefault(z, y)
            assert prev == y  # a fixed label per (key, pair)
    # Each memory pair's key -> label map is a permutation of the key set.
    assert len(memory_map) == 100
    for mapping in memory_map.values():
        assert sorted(mapping) == list(KEYS) and sorted(mapping.values()) == list(KEYS)
    # Different pairs use different permutations (the labels are pair-specific).
    assert len({tuple(sorted(m.items())) for m in memory_map.values()}) == 100


def test_t1_exactly_balanced(t1):
    reps = 2
    train = Counter(map(tuple, anchor_triples(t1.train.X).tolist()))
    test = Counter(map(tuple, anchor_triples(t1.test.X).tolist()))
    held = {(11, 13), (13, 11)}
    expected_train, expected_test = {}, {}
    for group in (MEM, RSN):
        for a1 in group:
            for a2 in group:
                for z in KEYS:
                    (expected_test if (a1, a2) in held else expected_train)[(z, a1, a2)] = reps
    assert train == Counter(expected_train)
    assert test == Counter(expected_test)


def test_t1_key_position_is_random(t1):
    p1 = (t1.train.X < 21).long().argmax(1)
    counts = torch.bincount(p1 - 1, minlength=7)
    assert counts.shape[0] == 7 and bool((counts > 0).all())  # p in 0..6 all used


def test_t1_memory_signatures_identical_and_uniform(t1):
    S = order0_counts(t1.train)
    mem = S[list(MEM)]
    for a in range(1, 10):
        assert same_distribution(mem[0], mem[a])
        assert max_normalized_gap(mem[0], mem[a]) == 0.0
    # Exactly uniform on the key set, zero elsewhere.
    row = mem[0]
    assert bool((row[list(KEYS)] == row[21]).all()) and int(row.sum()) == 100 * int(row[21])
    # Reasoning anchors are not identical to each other.
    assert not same_distribution(S[11], S[12])


def test_t1_reasoning_signatures_are_shifts():
    # Without held-out pairs, anchor a's label signature is the same distribution shifted by a:
    # each a2 contributes labels z + a + a2 with total weight 2 (pair (a,a) has count 2).
    S = order0_counts(T.composite_addition(seed=3, noise_keys=False, held_out=()).train)
    for a in range(11, 20):
        assert torch.equal(S[a, :-1], S[a + 1, 1:])


def test_t1_no_noise_keys():
    task = T.composite_addition(seed=1, noise_keys=False)
    assert task.train.X.shape == (19800, 3)
    z, a1, a2 = task.train.X.unbind(1)
    assert bool(((z >= 21) & (a1 < 21) & (a2 < 21)).all())


def test_t1_determinism():
    a, b = T.composite_addition(seed=5), T.composite_addition(seed=5)
    c = T.composite_addition(seed=6)
    assert torch.equal(a.train.X, b.train.X) and torch.equal(a.train.y, b.train.y)
    assert torch.equal(a.test.X, b.test.X)
    assert not torch.equal(a.train.X, c.train.X)


def test_t2_intervals():
    task = T.composite_addition(seed=0, intervals=True)
    tr = task.train
    triples = anchor_triples(tr.X)
    is_rsn = triples[:, 1] >= 11
    low = is_rsn & (triples[:, 1] <= 15)
    high = is_rsn & (triples[:, 1] >= 16)
    # Co-occurrence: every key in a low (high) reasoning sequence, noise included, is in 21..70 (71..120).
    low_keys, high_keys = tr.X[low][tr.X[low] >= 21], tr.X[high][tr.X[high] >= 21]
    assert int(low_keys.max()) <= 70 and int(low_keys.min()) >= 21
    assert int(high_keys.min()) >= 71 and int(high_keys.max()) <= 120
    # Pairs only within a sub-group, each (z, a1, a2) exactly once; memory part unchanged.
    counts = Counter(map(tuple, triples.tolist()))
    expected = {}
    for anchors, keys in ((range(11, 16), range(21, 71)), (range(16, 21), range(71, 121))):
        for a1 in anchors:
            for a2 in anchors:
                if (a1, a2) not in {(11, 13), (13, 11)}:
                    expected.update({(z, a1, a2): 1 for z in keys})
    expected.update({(z, a1, a2): 1 for a1 in MEM for a2 in MEM for z in KEYS})
    assert counts == Counter(expected)
    for n in sample_rows(tr.X.shape[0]):
        z, a1, a2 = (int(v) for v in triples[n])
        if a1 >= 11:
            assert int(tr.y[n]) == z + a1 + a2
    S = order0_counts(tr)
    for a in range(2, 11):
        assert same_distribution(S[1], S[a])


# ---------------------------------------------------------------------------
# T3 gated addition
# ---------------------------------------------------------------------------

GP, GM = 100, 101


def gated_label(z: int, a: int, g: int, naive: bool = False) -> int:
    s = 1 if ((g == GP) == (a % 2 == 1)) else -1
    m = a if naive else (a + 1) // 2
    return z + s * m


def test_t3_labels_and_enumeration():
    task = T.gated_addition(seed=0, reps=3, noise_keys=2)
    tr = task.train
    assert tr.X.shape == (48 * 12 * 2 * 3, 5) and task.test is None
    assert tr.vocab_size == tr.n_labels == 102 and task.info_order == 1
    for n in range(tr.X.shape[0]):
        z, a, g = (int(v) for v in tr.X[n, :3])
        assert int(tr.y[n]) == gated_label(z, a, g)
    counts = Counter(map(tuple, tr.X[:, :3].tolist()))
    assert counts == Counter(
        {(z, a, g): 3 for z in range(40, 88) for a in range(1, 13) for g in (GP, GM)}
    )
    noise = tr.X[:, 3:]
    assert int(noise.min()) >= 40 and int(noise.max()) <= 87
    assert 34 <= int(tr.y.min()) and int(tr.y.max()) <= 93


@pytest.mark.parametrize("test_fraction,noise_keys", [(0.0, 0), (0.0, 3), (0.25, 0), (0.4, 2)])
def test_t3_order0_identities_exact(test_fraction, noise_keys):
    task = T.gated_addition(seed=7, reps=2, noise_keys=noise_keys, test_fraction=test_fraction)
    S = order0_counts(task.train)
    assert same_distribution(S[GP], S[GM])
    assert max_normalized_gap(S[GP], S[GM]) == 0.0
    for m in range(1, 7):
        assert same_distribution(S[2 * m - 1], S[2 * m])
        assert max_normalized_gap(S[2 * m - 1], S[2 * m]) == 0.0
    # Different magnitudes do differ at order 0 (anchors are ordered by |offset|).
    assert not same_distribution(S[1], S[3])


@pytest.mark.parametrize("test_fraction", [0.0, 0.25])
def test_t3_order1_separates(test_fraction):
    tr = T.gated_addition(seed=7, test_fraction=test_fraction).train
    # (anchor, label | gate) separates the gates.
    assert not same_distribution(order1_counts(tr, GP), order1_counts(tr, GM))
    # (gate, label | anchor) separates 2m-1 from 2m.
    for m in range(1, 7):
        J_odd, J_even = order1_counts(tr, 2 * m - 1), order1_counts(tr, 2 * m)
        assert not same_distribution(J_odd[[GP, GM]], J_even[[GP, GM]])
    # Parity groups: with g+ the label is above the key exactly for odd anchors.
    z, a, g = tr.X[:, 0], tr.X[:, 1], tr.X[:, 2]
    up = tr.y > z
    assert torch.equal(up[g == GP], (a[g == GP] % 2 == 1))
    assert torch.equal(up[g == GM], (a[g == GM] % 2 == 0))


def test_t3_held_out_blocks():
    reps = 2
    task = T.gated_addition(seed=11, reps=reps, test_fraction=0.25)
    tr, te = task.train, task.test
    assert te is not None and te.X.shape[0] == round(0.25 * 288) * 4 * reps
    train = Counter(map(tuple, tr.X.tolist()))
    test = Counter(map(tuple, te.X.tolist()))
    assert not set(train) & set(test)
    assert sum(train.values()) + sum(test.values()) == 48 * 12 * 2 * reps
    # Whole (z, m) blocks: all 4 sequences (2m-1, 2m) x (g+, g-) of a block are on one side.
    blocks = Counter((z, (a + 1) // 2) for z, a, _ in test.elements())
    assert set(blocks.values()) == {4 * reps}
    for n in range(te.X.shape[0]):
        z, a, g = (int(v) for v in te.X[n])
        assert int(te.y[n]) == gated_label(z, a, g)
    # Determinism.
    again = T.gated_addition(seed=11, reps=reps, test_fraction=0.25)
    assert torch.equal(again.test.X, te.X) and torch.equal(again.train.y, tr.y)


def test_t3_naive_gates_differ():
    task = T.gated_addition_naive(seed=0, test_fraction=0.2)
    tr = task.train
    for n in sample_rows(tr.X.shape[0]):
        z, a, g = (int(v) for v in tr.X[n])
        assert int(tr.y[n]) == gated_label(z, a, g, naive=True)
    S = order0_counts(T.gated_addition_naive(seed=0).train)
    assert not same_distribution(S[GP], S[GM])
    assert max_normalized_gap(S[GP], S[GM]) > 0.0
    # Only g- reaches z + 12 (even anchor 12 with g- gives +12); e.g. label 99 = 87 + 12.
    assert int(S[GP, 99]) == 0 and int(S[GM, 99]) > 0


# ---------------------------------------------------------------------------
# Modular addition
# ---------------------------------------------------------------------------


def test_modular_addition():
    p = 23
    task = T.modular_addition(seed=0, p=p, test_fraction=0.3)
    tr, te = task.train, task.test
    assert task.info_order == 1 and tr.vocab_size == tr.n_labels == p
    assert te.X.shape[0] == round(0.3 * p * p) and tr.X.shape[0] + te.X.shape[0] == p * p
    pairs_tr = set(map(tuple, tr.X.tolist()))
    pairs_te = set(map(tuple, te.X.tolist()))
    assert not pairs_tr & pairs_te and len(pairs_tr | pairs_te) == p * p
    for data in (tr, te):
        for (a, b), y in zip(data.X.tolist(), data.y.tolist(), strict=True):
            assert y == (a + b) % p
    # On the full enumeration every token's order-0 signature is exactly uniform.
    full = T.TaskData(torch.cat([tr.X, te.X]), torch.cat([tr.y, te.y]), p, p, tr.groups, "full")
    S = order0_counts(full)
    assert bool((S == S[0, 0]).all())
    again = T.modular_addition(seed=0, p=p, test_fraction=0.3)
    assert torch.equal(again.train.X, tr.X)
    assert not torch.equal(T.modular_addition(seed=1, p=p).train.X, tr.X)


# ---------------------------------------------------------------------------
# Scan-and-Snap
# ---------------------------------------------------------------------------


def test_scan_snap_probs():
    P = T.scan_snap_probs()
    assert P.shape == (4, 50)
    assert torch.allclose(P.sum(1), torch.ones(4, dtype=torch.float64))
    for c in range(4):
        w = P[c] * 15.5
        assert torch.allclose(w[:10], torch.ones(10, dtype=torch.float64))
        for k in range(1, 11):
            assert abs(float(w[10 * (c + 1) + k - 1]) - 0.1 * k) < 1e-12
        others = [t for t in range(10, 50) if not 10 * (c + 1) <= t < 10 * (c + 2)]
        assert float(w[others].abs().max()) == 0.0


def test_scan_snap_structure_and_frequencies():
    n, seq_len = 20_000, 64
    X, y, cls, distinct = T.scan_snap_batch(n, seq_len, generator=torch.Generator().manual_seed(0))
    assert X.shape == (n, seq_len - 1) and X.dtype == torch.int64
    assert torch.equal(X[:, -1], cls + 5) and torch.equal(y, cls + 1)
    assert torch.equal(distinct, X >= 10)
    assert not bool(distinct[:, -1].any())  # the query is never distinct
    # Classes are equiprobable.
    freq = torch.bincount(cls, minlength=4).double() / n
    assert float((freq - 0.25).abs().max()) < 0.015
    # Context tokens of class c come from {0..9} and block c only, with the defined frequencies.
    P = T.scan_snap_probs()
    for c in range(4):
        ctx = X[cls == c, :-1]
        emp = torch.bincount(ctx.reshape(-1), minlength=50).double() / ctx.numel()
        assert float((emp - P[c]).abs().max()) < 0.004  # ~8 sigma at ~300k tokens per class
    # Uniform-attention distinct mass: per token 5.5/15.5, over all T = seq_len-1 positions
    # ((seq_len-2)/(seq_len-1)) * 5.5/15.5.
    assert T.scan_snap_uniform_distinct_mass() == pytest.approx(5.5 / 15.5)
    expected = (seq_len - 2) / (seq_len - 1) * 5.5 / 15.5
    assert T.scan_snap_uniform_distinct_mass(seq_len) == pytest.approx(expected)
    assert float(distinct.double().mean()) == pytest.approx(expected, abs=0.002)


def test_scan_snap_determinism():
    a = T.scan_snap_batch(64, 16, generator=torch.Generator().manual_seed(3))
    b = T.scan_snap_batch(64, 16, generator=torch.Generator().manual_seed(3))
    c = T.scan_snap_batch(64, 16, generator=torch.Generator().manual_seed(4))
    assert all(torch.equal(u, v) for u, v in zip(a, b, strict=True))
    assert not torch.equal(a.X, c.X)
    assert a.X.device.type == "cpu" and a.X.shape == (64, 15)


# ---------------------------------------------------------------- gated parity bits


def _label_dist(d, rows):
    return torch.bincount(d.y[rows], minlength=d.n_labels).double() / rows.sum()


def test_gated_parity_bits_two_stairs_identities():
    d, lay = T.gated_parity_bits(n_keys=5)
    assert d.X.shape == (5 * 12 * 2, 3) and d.n_labels == 2 * lay.block
    assert int(d.y.max()) < d.n_labels and int(d.y.min()) >= 0
    # Order 0 of an anchor: i_z + a in both blocks, with equal weight (no parity in it).
    for a in lay.anchors:
        p = _label_dist(d, d.X[:, 1] == a)
        base = torch.arange(5) + a
        assert torch.allclose(p[base], p[base + lay.block]) and abs(float(p.sum()) - 1) < 1e-12
    # The gates differ at order 0 (no exact g+/g- symmetry, unlike T3).
    gp, gm = lay.gates
    assert not torch.allclose(_label_dist(d, d.X[:, 2] == gp), _label_dist(d, d.X[:, 2] == gm))
    # The bit: shifted by a block iff (g = g+) XNOR (a odd) is false.
    shifted = d.y >= lay.block
    expect = (d.X[:, 2] == gp) != (d.X[:, 1] % 2 == 1)
    assert torch.equal(shifted, expect) and torch.equal(lay.bit1 == -1, expect)


def test_gated_parity_bits_order2_and_imbalance():
    d, lay = T.gated_parity_bits(n_keys=3, order2=True, h_weights=(3, 2))
    assert d.X.shape[1] == 5 and d.n_labels == 4 * lay.block
    hp = d.X[:, 2] == lay.h[0]
    assert int(hp.sum()) * 2 == int((~hp).sum()) * 3  # h+ three times for two h-
    bit2 = (d.y // (2 * lay.block)) % 2 == 1
    same = (d.X[:, 2] == lay.h[0]) == (d.X[:, 3] == lay.k[0])
    assert torch.equal(bit2, same != (((d.X[:, 1] + 1) // 2) % 2 == 1))
    # No single gate carries bit 2 when h is balanced; k carries a little when it is not.
    db, layb = T.gated_parity_bits(n_keys=3, order2=True, h_weights=(1, 1))
    b2 = ((db.y // (2 * layb.block)) % 2).double()
    for pos in (2, 3):
        for a in layb.anchors:
            rows = db.X[:, 1] == a
            g0 = rows & (db.X[:, pos] == db.X[rows, pos].min())
            assert abs(float(b2[g0].mean()) - float(b2[rows].mean())) < 1e-12
    rows = d.X[:, 1] == 1
    k0 = rows & (d.X[:, 3] == lay.k[0])
    b2d = bit2.double()
    assert abs(float(b2d[k0].mean()) - float(b2d[rows].mean())) > 0.05


def test_gated_parity_bits_shuffled_control():
    d, _ = T.gated_parity_bits(n_keys=4)
    s, _ = T.gated_parity_bits(n_keys=4, shuffle_seed=0)
    assert torch.equal(d.X, s.X) and not torch.equal(d.y, s.y)
    assert torch.equal(torch.sort(d.y).values, torch.sort(s.y).values)
    with pytest.raises(ValueError):
        T.gated_parity_bits(n_anchors=10)


def test_label_distributions_train_like_the_full_task():
    from lib.training import engine, models

    data, _ = T.selective_parity_bits(n_keys=2, n_anchors=4, width=3)
    X, P = T.label_distributions(data)
    assert X.shape[0] == 2 * 4 * 2 and torch.allclose(P.sum(1), torch.ones(len(X), dtype=P.dtype))
    mdl = models.Transformer(data.vocab_size, 8, 4, n_out=data.n_labels, d_mlp=8,
                             ov="identity", readout_sees_self=False)  # fmt: skip
    p = models.build(mdl, [0, 1], gamma=0.5)
    p = {k: v.detach().double().requires_grad_(True) for k, v in p.items()}
    full = engine.cross_entropy(mdl.forward(p, data.X), data.y).sum()
    soft = engine.soft_cross_entropy(mdl.forward(p, X), P).sum()
    torch.testing.assert_close(full, soft, rtol=1e-12, atol=0)
    g_full = torch.autograd.grad(full, list(p.values()))
    g_soft = torch.autograd.grad(soft, list(p.values()))
    for a, b in zip(g_full, g_soft, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-14)

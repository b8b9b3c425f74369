"""Chapter 6's tools (lib/training/embedstruct.py) and tasks (gated/plain/synonym twins in lib/data/tasks.py)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from lib.data import tasks as T
from lib.env import ConfigError
from lib.training import embedstruct as ES


def test_control_shares_t3_rows_and_moves_information_to_order_0():
    t3, c = T.gated_addition(3, test_fraction=0.2), T.gated_addition_control(3, test_fraction=0.2)
    assert torch.equal(t3.train.X, c.train.X) and torch.equal(t3.test.X, c.test.X)
    z, a = c.train.X[:, 0], c.train.X[:, 1]
    for zi, ai, yi in zip(z.tolist(), a.tolist(), c.train.y.tolist(), strict=True):
        assert yi == zi + (1 if ai % 2 else -1) * ((ai + 1) // 2)
    assert c.info_order == 0 and t3.info_order == 1


def test_plain_addition_is_the_twin_of_modular_addition():
    m, a = T.modular_addition(2, p=13), T.plain_addition(2, p=13)
    assert torch.equal(m.train.X, a.train.X) and torch.equal(m.test.X, a.test.X)
    assert torch.equal(a.train.y, a.train.X.sum(1)) and torch.equal(m.train.y, a.train.y % 13)
    h = T.plain_addition(2, p=13, halve=True)
    assert torch.equal(h.train.y, a.train.y // 2) and h.train.n_labels == 13


def test_with_marker_pads_with_a_constant():
    d = T.modular_addition(0, p=5).train
    m = T.with_marker(d, 20, 3)
    assert m.X.shape == (len(d), 3) and bool((m.X[:, 2] == 20).all()) and m.vocab_size == 21
    with pytest.raises(ValueError, match="do not fit"):
        T.with_marker(d, 20, 1)


def test_synonym_groups_labels_and_splits():
    g = T.synonym_groups(0)
    for X, y in (g.train, g.unseen, g.held_out):
        for (z, s), lab in zip(X.tolist(), y.tolist(), strict=True):
            assert lab == z + (s - 60) // 4 + 1
    held = set(g.held_members)
    assert not held & set(g.train[0][:, 1].tolist()) and not held & set(g.unseen[0][:, 1].tolist())
    assert set(g.held_out[0][:, 1].tolist()) == held
    seen = {tuple(r) for r in g.train[0].tolist()}
    assert not seen & {tuple(r) for r in g.unseen[0].tolist()}
    # Aux data: members of one group share their label, i.e. their order-0 signature.
    assert torch.equal(g.aux_y, 80 + g.group)
    assert sorted(g.aux_y_shuffled.tolist()) == sorted(g.aux_y.tolist())
    assert not torch.equal(g.aux_y_shuffled, g.aux_y)
    with pytest.raises(ValueError):
        T.synonym_groups(0, keep=1.5)


def test_signature_pcs_reconstruct_a_low_rank_matrix():
    torch.manual_seed(0)
    A = torch.randn(30, 3, dtype=torch.float64) @ torch.randn(3, 8, dtype=torch.float64)
    P = ES.signature_pcs(A, 5)
    Ac = A - A.mean(0)
    assert torch.allclose(P @ P.T, Ac @ Ac.T, atol=1e-10)  # same Gram matrix as the data
    assert torch.allclose(P[:, 3:], torch.zeros(30, 2, dtype=torch.float64), atol=1e-10)


def test_transplants_share_norm_and_permutation_keeps_the_spectrum():
    torch.manual_seed(1)
    pcs = ES.signature_pcs(torch.randn(20, 12, dtype=torch.float64), 6)
    arms = ES.transplant_embeddings(torch.randn(20, 6), pcs, norm=3.0, seed=0)
    for E in arms.values():
        assert float(E.norm()) == pytest.approx(3.0)
    sv = lambda E: torch.linalg.svdvals(E)
    assert torch.allclose(sv(arms["permuted"]), sv(arms["signature"]))
    assert not torch.allclose(arms["permuted"], arms["signature"])
    with pytest.raises(ValueError, match="zero"):
        ES.transplant_embeddings(torch.zeros(20, 6), pcs, 1.0, 0)


def test_mixture_stream_weights_the_aux_loss_per_instance():
    X = torch.randint(0, 5, (50, 2))
    y = torch.randint(0, 5, (50,))
    aX = torch.tensor([[5, 6], [7, 6]])
    ay = torch.tensor([[0, 1], [1, 0]])
    data, loss = ES.mixture_stream((X, y), aX, ay, [0.0, 2.0], main_batch=8, aux_batch=4)
    Xb, yb = data(0)
    assert Xb.shape == (2, 12, 2) and yb.shape == (2, 12)
    assert torch.equal(yb[0, :8], yb[1, :8])  # both arms see the same main rows
    logits = torch.randn(2, 12, 8)
    ce = torch.nn.functional.cross_entropy(logits.reshape(-1, 8), yb.reshape(-1), reduction="none")
    ce = ce.view(2, 12)
    want = ce[:, :8].mean(1) + torch.tensor([0.0, 2.0]) * ce[:, 8:].mean(1)
    assert torch.allclose(loss(logits, yb), want)
    with pytest.raises(ConfigError):
        ES.mixture_stream((X, y), aX, ay[:1, :1], [0.0], 8, 4)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_transplants_on_the_device_equal_the_cpu_ones():
    torch.manual_seed(2)
    phi, early = torch.randn(20, 12, dtype=torch.float64), torch.randn(20, 6)
    cpu = ES.transplant_embeddings(early, ES.signature_pcs(phi, 6), norm=3.0, seed=0)
    pcs = ES.signature_pcs(phi.cuda(), 6)
    assert pcs.device.type == "cuda"
    dev = ES.transplant_embeddings(early, pcs, norm=3.0, seed=0)
    for name, E in dev.items():
        assert E.device.type == "cuda"
        # the SVD's signs may differ between devices; the Gram matrix may not
        assert torch.allclose((E @ E.T).cpu(), cpu[name] @ cpu[name].T, atol=1e-8), name


# ------------------------------------------------- Chapter 6's bookkeeping (its experiment module)


def test_chapter6_tasks_share_one_vocabulary_and_length():
    from lib.experiments import ch06_embeddings_matter as ex

    raw, split, V = ex.e1_tasks(ex.Config())
    assert V == 162  # T1's 161 tokens and the marker
    for parts in split.values():
        for d in parts.values():
            assert d.X.shape[1] == ex.SEQ_LEN and int(d.X.max()) < V and int(d.y.max()) < V
    pairs = ex.critical_pairs(5)
    assert pairs["T3 gated"] == [(1, 2), (3, 4), (5, 6), (7, 8), (9, 10), (11, 12)]
    assert len(pairs["modular addition"]) == 10
    masks = ex.pair_masks(pairs, V, ["T3 gated", "T1 composite"])
    assert masks.shape == (2, V, V) and masks[0, 1, 2] and not masks[1].any()


def test_chapter6_counting_helpers():
    from lib.experiments import ch06_embeddings_matter as ex

    # Key 0 with anchor 1 has labels {5, 5, 6}: the best gate-blind guess is right 2 of 3.
    d = T.TaskData(
        torch.tensor([[0, 1, 9], [0, 1, 8], [0, 1, 9], [2, 3, 9]]),
        torch.tensor([5, 5, 6, 7]),
        10,
        10,
        {},
        "toy",
    )
    assert ex.best_accuracy_without_gate(d, 10) == pytest.approx(3 / 4)
    same = ex.signature_tv(d, [(0, 1)], 10)  # tokens 0 and 1 occur in the same rows
    assert same == pytest.approx(0.0)
    assert ex.signature_tv(d, [(1, 2)], 10) == pytest.approx(1.0)  # disjoint labels
    assert ex.per_seed([3.0, float("inf"), float("nan")]) == "3, — and —"
    assert ex.per_seed([3.0, 4.0]) == "3 and 4"
    assert ex.per_seed([0.25], "{:.3f}") == "0.250"
    steps = [0, 10, 20, 30]
    assert ex.stays_above_from(steps, np.array([False, True, False, True])) == 30
    assert ex.stays_above_from(steps, np.array([True, True, True, True])) == 0
    assert ex.stays_above_from(steps, np.array([True, True, True, False])) == 0
    assert ex.reach_steps(
        steps, np.array([[0.0, 0.1], [0.5, 0.2], [0.6, 0.3], [0.7, 0.3]]), [0.5, 0.3]
    ).tolist() == [10.0, 20.0]

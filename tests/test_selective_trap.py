"""The distractor-trap sweep: shapes, per-instance masking, the trapped flag."""

import dataclasses

import numpy as np
import pytest
import torch

from lib.data import tasks
from lib.experiments import ch12_attention_that_learns as ex
from lib.experiments import selective_trap as tr
from lib.training import engine, models

CFG = ex.Config(task=ex.Task(n_anchors=4, width=3), d_model=8, d_mlp=8)


def test_trapped_flag_is_a_bit_that_stopped_partway():
    ln2 = np.log(2)
    steps = np.array([0, 50, 100])
    # stopped at 0.4; still at chance (censored); still falling (slow); learned; stopped at 0.15
    bit = np.array(
        [[1.0, 1.0, 1.0, 1.0, 1.0], [0.4, 1.0, 0.9, 0.5, 0.15], [0.4, 1.0, 0.5, 0.0, 0.15]]
    )
    got = ex.trapped_flag(steps, bit * ln2, trap_frac=0.1)
    assert got.tolist() == [True, False, False, False, True]


def test_instance_targets_mean_over_own_sequences():
    data, layout = tasks.selective_parity_bits(3, 4, 3)
    X, P = tasks.label_distributions(data)
    Pk = tr.instance_targets(X, P, layout.keys, [1, 2, 3])
    assert Pk.shape == (3, *P.shape)
    logits = torch.randn(3, *P.shape, dtype=torch.float64)
    loss = engine.soft_cross_entropy(logits, Pk)
    for k, n in enumerate([1, 2, 3]):
        own = torch.isin(X[:, 0], torch.tensor(layout.keys[:n]))
        want = engine.soft_cross_entropy(logits[k : k + 1, own], P[own])
        assert torch.allclose(loss[k], want[0])
    with pytest.raises(ValueError):
        tr.instance_targets(X, P, layout.keys, [4])


def test_pair_and_bit_add_up_to_the_loss():
    data, layout = tasks.selective_parity_bits(1, 4, 3)
    X, P = tasks.label_distributions(data)
    logits = torch.randn(2, *P.shape, dtype=torch.float64)
    pair, bit = tr._pair_and_bit(logits, P, layout.block)
    assert torch.allclose((pair + bit).mean(-1), engine.soft_cross_entropy(logits, P))
    assert torch.allclose(tr._pair_and_bit(torch.zeros_like(logits), P, layout.block)[1],
                          torch.full_like(bit, np.log(2)))  # fmt: skip


def test_sweep_shapes_and_masking_equals_separate_runs():
    cells = [dict(r=1.0, gamma_qk=1.0, n_keys=1), dict(r=0.1, gamma_qk=0.75, n_keys=2)]
    steps = 6
    res = tr.trap_sweep(CFG, [0, 1], steps, cells, n_logs=3, snapshot_at=(3,))
    K = 4
    for name in ("cell", "seed", "bit", "key_mass", "escape", "trapped"):
        assert res[name].shape == (K,), name
    assert res["cell"].tolist() == [0, 0, 1, 1] and res["seed"].tolist() == [0, 1, 0, 1]
    assert res["history"]["bit1"].shape[1:] == (K,) and list(res["snapshots"]) == [3]
    # Each instance alone, on its own sequences only (same task, same init).
    data, layout, _ = ex.task(
        dataclasses.replace(CFG, task=dataclasses.replace(CFG.task, n_keys=2))
    )
    X, P = tasks.label_distributions(data)
    mdl = ex.model(CFG, data)
    for k in range(K):
        c = cells[res["cell"][k]]
        own = torch.isin(X[:, 0], torch.tensor(layout.keys[: c["n_keys"]]))
        p = models.build(mdl, [int(res["seed"][k])], gamma=CFG.gamma,
                         group_gamma={"qk": [c["gamma_qk"]]})  # fmt: skip
        engine.train(mdl, p, (X[own], P[own]), steps, lr=CFG.lr,
                     group_lr={"qk": CFG.lr * c["r"]}, log_at=[steps],
                     loss_fn=engine.soft_cross_entropy)  # fmt: skip
        for name, v in p.items():
            assert torch.allclose(v[0], res["params"][name][k], rtol=1e-4, atol=1e-6), (k, name)
    f = tr.trap_forces(res["model"], res["params"], res["X"], res["P"], res["layout"])
    assert f["force_total"].shape == (K, 3)
    assert np.allclose(f["force_total"].sum(1), 0, atol=1e-9)
    assert f["anchor_key"].shape == (K, CFG.task.n_anchors)

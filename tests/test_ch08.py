"""The plumbing of Chapter 8 (lib/experiments/ch08_qk_rate_and_the_staircase.py)."""

from __future__ import annotations

import dataclasses

import numpy as np
import torch

from lib import tasks
from lib.experiments import ch08_qk_rate_and_the_staircase as ex
from lib.experiments import config


def test_gate_blind_keeps_order0_and_removes_bit1_information():
    data, layout = tasks.gated_parity_bits(12, 12)
    blind, lay, targets = ex.gate_blind(data, layout, seed=0)
    B = layout.block
    # The order-0 part i_z + a of every label is kept; only the block (bit 1) changes.
    assert torch.equal(blind.y % B, data.y % B)
    assert torch.equal(blind.y // B, (lay.bit1 == -1).long())
    # Same multiset of bits, now independent of (gate, anchor parity): each of the four
    # cells has about half of each sign, while the real task is deterministic in them.
    g = (data.X[:, -1] == layout.gates[0]).long()
    odd = (data.X[:, 1] % 2).long()
    assert sorted(lay.bit1.tolist()) == sorted(layout.bit1.tolist())
    for cell in range(4):
        rows = (2 * g + odd) == cell
        assert abs(float((lay.bit1[rows] == 1).double().mean()) - 0.5) < 0.2
        assert float((layout.bit1[rows] == 1).double().mean()) in (0.0, 1.0)
    assert set(targets.phis) == {0, 1}


def test_loglog_slope():
    r = np.array([0.1, 1.0, 10.0])
    assert abs(ex.loglog_slope(r, 3 * r**2) - 2) < 1e-12
    assert np.isnan(ex.loglog_slope(r, [np.inf, np.inf, 1.0]))


def test_the_sweep_runs_and_is_summarized_per_instance():
    cfg = dataclasses.replace(
        config(ex, "ci"), d_model=16, d_hidden=16, steps=6, n_logs=4, floor_samples=50
    )
    data, layout, targets, floor = ex.parity_task(cfg)
    sw = ex.rate_sweep(cfg, r_grid=(0.1, 1.0), seeds=(0, 1))
    for qk in cfg.qk_kinds:
        model = ex.attention_model(cfg, data, qk)
        h = ex.train_rates(cfg, model, data, layout, targets, sw, "cpu")
        ds = ex.stair_summary(h, sw, floor, cfg.delta)
        assert ds["escape1"].dims == ("r", "seed") and ds["escape1"].shape == (2, 2)
        # Attention starts uniform over the three positions.
        np.testing.assert_allclose(h["attn"][0], 1 / 3, atol=1e-3)
        assert np.all(h["qk_drift"][0] == 0)

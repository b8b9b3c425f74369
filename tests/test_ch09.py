"""The plumbing of Chapter 9 (the package lib/experiments/ch09_qk_rate_and_the_staircase/)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from lib.env import ConfigError
from lib.experiments import ch09_qk_rate_and_the_staircase as ex
from lib.experiments import config
from lib.experiments.settings import apply_settings
from lib.measure import attention, nulls, statistics
from lib.measure import staircase as st


def test_staircase_config_is_chapter_2s_and_refuses_a_mismatch():
    cfg = config(ex, "ci")
    cfg2 = ex.staircase_config(cfg)
    assert cfg2.r in cfg.stair.r_grid
    with pytest.raises(ConfigError, match="lr="):
        ex.staircase_config(dataclasses.replace(cfg, lr=3e-3))
    with pytest.raises(ConfigError, match=r"stair\.r_grid"):
        ex.staircase_config(apply_settings(cfg, {"stair.r_grid": (1.0, 3.0)}))


def _small(cfg):
    small = {"ov.d_model": 16, "ov.d_hidden": 16, "n_logs": 4}
    return apply_settings(cfg, small | {"readings.null_perm": 5, "readings.n_boot": 50})


@pytest.mark.parametrize("ov", ["learned", "identity"])
def test_the_sweep_runs_and_is_summarized_per_instance(ov):
    cfg = _small(config(ex, "ci"))
    task = st.parity_task(4, 8, cfg.readings.null_perm)
    sw = ex.rate_sweep((0.1, 1.0), (0, 1))
    for qk in cfg.qk_kinds:
        model = ex.attention_model(task.data, cfg.ov.d_model, cfg.ov.d_hidden, qk, ov)
        h = ex.train_rates(cfg, model, task, sw, "cpu", steps=12, n_logs=4)
        floor = nulls.run_floors(h, cfg.readings.null_q)
        assert set(floor) == {0, 1} and h["null1"].shape[1:] == (4, 5)
        ds = ex.stair_summary(h, sw, floor, cfg)
        assert ds["escape1"].dims == ("r", "seed") and ds["escape1"].shape == (2, 2)
        # Attention starts uniform over the three positions, and W_QK has not moved.
        np.testing.assert_allclose(h["attn"][0], 1 / 3, atol=1e-3)
        np.testing.assert_allclose(h["attn_max"][0], 1 / 3, atol=1e-3)
        assert np.all(h["qk_drift"][0] == 0) and np.all(h["qk_norm"][0] > 0)
        # Twelve steps do not solve the task: nothing converges, so nothing counts.
        assert not ds["converged"].values.any() and not ds["counted"].values.any()
        assert np.isnan(ex.where_counted(ds, "R1")).all()
        table = ex.failed_instances({("m", qk): ds})
        assert len(table) == 4 and table["qk_norm_converged"].isna().all()


def test_counted_needs_convergence_and_a_majority_of_seeds_at_the_rate():
    cfg = config(ex, "ci")
    sw = ex.rate_sweep((0.1, 1.0, 10.0), (0, 1, 2))
    ok, bad = 0.01, 3.0
    final = np.array([[ok, ok, bad], [ok, bad, bad], [bad, bad, bad]]).ravel()

    class H:  # the few fields stair_summary reads, on a two-step grid
        steps = np.array([0, 10])
        metrics = {
            "R0": np.full((2, 9), 0.5),
            "R1": np.full((2, 9), 0.1),
            "bit1": np.full((2, 9), 0.01),
            "attn_dist": np.zeros((2, 9)),
            "loss_all": np.stack([np.full(9, 4.0), final]),
            "attn": np.full((2, 9, 3), 1 / 3),
            "attn_max": np.full((2, 9), 1 / 3),
            "qk_norm": np.ones((2, 9)),
        }

        def __getitem__(self, n):
            return self.metrics[n]

        def at(self, n, step):
            return self.metrics[n][-1]

    ds = ex.stair_summary(H(), sw, {0: 0.2, 1: 0.2}, cfg)
    conv = ds["converged"].values
    assert conv.tolist() == [[True, True, False], [True, False, False], [False] * 3]
    # r = 0.1: 2 of 3 seeds converged, so its converged seeds count; r = 1: only 1 of 3.
    assert ds["counted"].values.tolist() == [[True, True, False], [False] * 3, [False] * 3]
    np.testing.assert_array_equal(np.isfinite(ex.where_counted(ds, "R1")), ds["counted"].values)
    share = statistics.share_band(np.where(ds["counted"].values, 1.0, np.nan), 50, 0)
    assert share[0, 0] == 1.0 and np.isnan(share[1:]).all()


def test_exponent_reads_only_rates_where_the_premise_holds_in_every_counted_seed():
    import xarray as xr

    cfg = apply_settings(config(ex, "ci"), {"readings.min_fit_rates": 3, "readings.n_boot": 100})
    r = np.array([0.01, 0.1, 1.0, 10.0])
    seeds = np.arange(4)
    y = 100 * r[:, None] ** -0.5 * np.ones((1, 4))
    ds = xr.Dataset(
        {
            "y": (("r", "seed"), y),
            "counted": (("r", "seed"), np.ones((4, 4), dtype=bool)),
        },
        coords={"r": r, "seed": seeds},
    )
    fit, n = ex.exponent(ds, r, "y", np.ones((4, 4), dtype=bool), cfg)
    assert n == 4 and fit.value == pytest.approx(-0.5) and fit.lo == pytest.approx(-0.5)
    premise = np.ones((4, 4), dtype=bool)
    premise[3, 1] = False  # one seed of the fastest rate breaks the premise: the rate drops
    fit, n = ex.exponent(ds, r, "y", premise, cfg)
    assert n == 3 and fit.value == pytest.approx(-0.5)
    premise[2, 0] = False  # two rates left: fewer than min_fit_rates, so no exponent
    fit, n = ex.exponent(ds, r, "y", premise, cfg)
    assert n == 2 and np.isnan(fit.value)


def test_failed_table_is_empty_with_its_columns_when_everything_converged():
    table = ex.failed_instances({})
    assert len(table) == 0 and "qk_norm_converged" in table.columns


@pytest.mark.parametrize("ov", ["learned", "identity"])
@pytest.mark.parametrize("qk", ["factorized", "collapsed"])
def test_attention_callbacks_read_the_models_own_readout_attention(ov, qk):
    """The callbacks read layer 0's attention off a view of the model without its value
    path and MLP: the same numbers as the full forward's, shared (N, L) and (K, N, L) inputs."""
    from lib.training import models, transformer

    task = st.parity_task(4, 8, n_perm=5)
    model = ex.attention_model(task.data, 16, 16, qk, ov)
    params0 = models.build(model, [0, 1, 2], gamma=0.5)
    gen = torch.Generator().manual_seed(0)
    params = {n: v + 0.1 * torch.randn(v.shape, generator=gen) for n, v in params0.items()}
    X = task.data.X
    for X_in in (X, torch.stack([X, X.flip(0), X])):
        cb = attention.readout_attention_callbacks(model, X_in, params0)
        with torch.no_grad():
            row = model.forward(params, X_in, return_attention=True)[1][0][..., -1, :].double()
            W = transformer.qk_product(model, params)
        assert torch.equal(cb["attn"](5, params), row.mean(1))
        assert torch.equal(cb["attn_max"](5, params), row.max(-1).values.mean(1))
        assert torch.equal(cb["attn_dist"](5, params), 0.5 * (row - 1 / 3).abs().sum(-1).mean(1))
        torch.testing.assert_close(cb["qk_norm"](5, params), W.flatten(1).norm(dim=1))
        assert (cb["qk_drift"](5, params) > 0).all() and (cb["qk_drift"](0, params0) == 0).all()

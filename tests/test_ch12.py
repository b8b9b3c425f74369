"""Chapter 12's plumbing: the selective task's readings (lib/experiments/ch12_*)."""

import numpy as np
import pytest
import torch

from lib.data import tasks
from lib.experiments import ch12_attention_that_learns as ex
from lib.experiments import config
from lib.measure import staircase as st
from lib.training import models

pytestmark = pytest.mark.usefixtures("one_thread")


def _small():
    import dataclasses

    cfg = config(ex, "ci")
    return dataclasses.replace(cfg, n_anchors=4, width=3, d_model=8, d_mlp=8)


def test_settled_step_ignores_a_transient_crossing():
    steps = np.array([0, 1, 2, 4, 8, 16])
    v = np.array(
        [[0, 0, 0], [0.2, 0, 0], [0.05, 0.2, 0], [0.2, 0.3, 0], [0.3, 0.3, 0.2], [0.4, 0.3, 0]]
    )
    np.testing.assert_array_equal(ex.settled_step(steps, v, 0.1), [4, 2, np.inf])


def test_climbs_needs_both_stairs_in_order_and_the_escape():
    inf = np.inf
    s = st.Stairs({0: np.array([1, 1, 5, 1]), 1: np.array([9, inf, 3, 9])},
                  {1: np.array([8, 8, 8, inf])}, {}, {})  # fmt: skip
    np.testing.assert_array_equal(ex.climbs(s), [True, False, False, False])


def test_uniform_attention_gives_exactly_half_and_the_callbacks_read_the_readout_row():
    cfg = _small()
    data, layout, _ = ex.task(cfg)
    mdl = ex.model(cfg, data)
    p = models.build(mdl, [0, 1], gamma=0.5)
    with torch.no_grad():
        p["Q0"].zero_(), p["K0"].zero_()
    np.testing.assert_array_equal(ex.bit_accuracy(mdl, p, data, layout), [0.5, 0.5])
    cb = ex.attention_callbacks(mdl, data.X)
    with pytest.raises(ValueError, match="step 0"):
        ex.attention_callbacks(mdl, data.X)["D"](3, p)
    assert (cb["D"](0, p) < 1e-6).all()  # float32 softmax of equal scores
    assert (cb["contrast"](0, p) < 1e-6).all()
    q = models.build(mdl, [0, 1], gamma=0.3)  # QK far from zero: attention moves
    assert (cb["D"](5, q) > 0.1).all() and (cb["D_qs"](5, q) < 1e-6).all()  # QK held at zero
    row = ex.readout_row(mdl, q, data.X)
    torch.testing.assert_close(row.sum(-1), torch.ones_like(row[..., 0]))


def test_ratio_summary_counts_converged_instances_by_the_excess_loss():
    cfg = _small()
    data, layout, targets = ex.task(cfg)
    null = st.label_null(data, layout, 3, targets=st.selective_targets)
    fit = tasks.label_distributions(data)
    import dataclasses

    cfg = dataclasses.replace(
        cfg, ratio_grid=(0.1, 1.0), ratio_seeds=(0, 1), ratio_steps=6, n_logs=3
    )
    h, sw, floor = ex.train_ratios(
        cfg, ex.model(cfg, data), data, layout, targets, null, "cpu", fit, "t"
    )
    s = ex.ratio_summary(h, sw, floor, cfg)
    assert s["converged"].shape == (2, 2) and not s["counted"].any()  # six steps learn nothing
    assert set(floor) == {0, 1}

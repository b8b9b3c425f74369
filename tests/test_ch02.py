"""Chapter 2's staircase explorer: its curves are the run's own arms, one row per gamma."""

import math
from types import SimpleNamespace

import numpy as np
import pytest

from lib.book.interactive import slider_figure
from lib.experiments import ch02_context_staircase as ex


class FakeRun:
    """A run with two orders, three logged steps and two seeds per gamma."""

    targets = SimpleNamespace(orders=(0, 1))
    floor = {0: 0.1, 1: 0.2}
    history = SimpleNamespace(steps=np.array([0, 10, 100]))

    def arm(self, gamma):
        base = np.array([[0.0, 0.0], [0.5, 0.7], [0.9, 1.1]]) * gamma  # (steps, seeds)
        return self.history.steps, {"R0": base, "R1": base / 2, "bit1": math.log(2) - base / 4}


def test_explorer_reads_seed_medians_of_each_arm_and_leaves_step_0_out():
    out = ex.explorer(FakeRun(), [0.5, 1.0])
    assert out["x"].tolist() == [10.0, 100.0] and out["values"] == [0.5, 1.0]
    assert out["curves"]["R0"].shape == (2, 2)
    np.testing.assert_allclose(out["curves"]["R0"][1], [0.6, 1.0])  # medians of two seeds
    np.testing.assert_allclose(out["curves"]["R1"][0], [0.15, 0.25])
    np.testing.assert_allclose(
        out["curves"]["bit-1 loss / ln 2"][1], 1 - np.array([0.15, 0.25]) / math.log(2)
    )
    assert out["hlines"] == {"R0": [0.1, 0.1], "R1": [0.2, 0.2]}
    html = slider_figure(out["x"], out["values"], out["curves"], param="γ", xlabel="step",
                         ylabel="R", colors=out["colors"], hlines=out["hlines"])  # fmt: skip
    assert "<input" in html


def test_explorer_refuses_a_gamma_that_was_not_run():
    class Missing(FakeRun):
        def arm(self, gamma):
            raise KeyError(f"gamma={gamma} was not run")

    with pytest.raises(KeyError, match="not run"):
        ex.explorer(Missing(), [0.3])


def test_with_gammas_adds_only_the_rates_a_grid_lacks():
    grid = (1.0, 0.8, 0.5, 0.3)
    assert ex.with_gammas(grid, 1.0, 0.3) == grid  # the book's grid: unchanged
    assert ex.with_gammas(grid, 0.75, 0.3) == (*grid, 0.75)  # a try's gamma: one more arm
    assert ex.with_gammas((1.0,), 0.75, 0.75, -1) == (1.0, 0.75, -1)

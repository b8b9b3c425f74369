"""Plateaus and rises of logged curves (lib/measure/plateaus.py): the plateau test of a
residual stair against smooth rises that start at step 1."""

from __future__ import annotations

import numpy as np

from lib.measure import onsets, plateaus
from lib.training import engine

STEPS = engine.log_steps(3000, 40).astype(float)


def test_plateau_test_passes_a_stair_and_fails_smooth_rises_from_step_1():
    null_hi = np.full(len(STEPS), 0.03)
    # a plateau in linear time: flat, then a rise over a tenth of the onset's steps
    R = np.stack([0.15 / (1 + np.exp(-(STEPS - t) / (t / 10))) for t in (300, 600)], 1)
    R[0] = np.nan
    onset = onsets.half_onset(STEPS, R)
    wait, rise = plateaus.plateau_and_rise(STEPS, R, null_hi, [2, 2], onset)
    assert (wait / rise >= 1).all()
    for name, curve in plateaus.smooth_rises(STEPS, R[-1], onset).items():
        assert np.isnan(curve[0]).all()
        np.testing.assert_allclose(curve[-1], R[-1], rtol=0.05 if name == "exponential" else 1e-12)
        assert (np.diff(curve[1:], axis=0) >= 0).all()
        w, r = plateaus.plateau_and_rise(
            STEPS, curve, null_hi, [2, 2], onsets.half_onset(STEPS, curve)
        )
        assert not (w / r >= 1).any(), name
    # no onset, or never inside the null: no verdict (NaN)
    w, r = plateaus.plateau_and_rise(STEPS, np.full((len(STEPS), 1), 0.1), null_hi, [2], [np.nan])
    assert np.isnan(w).all() and np.isnan(r).all()

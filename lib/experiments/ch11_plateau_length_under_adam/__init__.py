"""Chapter 11, how long a plateau lasts under Adam: the gamma law of the bit-1 plateau.

The staircase task, its model, its seeds, its sweep of init rates and Adam's rate are
Chapter 2's (``config(ch02)`` at the same scale); this package holds the settings of the
law's readings (the calibration arm, the every-step probe, the tolerance, the learning-rate
arm and the linear-response arm) and the chapter's plumbing, one module per job:

- ``probe``: the probe run (:func:`run_probe`: one batched run with every step logged), its
  instances by init and seed, and the law's arms;
- ``readings``: the sigma symmetry and the pieces of the two-phase law read on the probe;
- ``prediction``: the predicted escapes against the measured ones, plain gradient descent,
  the linear-response arms and the learning-rate arm;
- ``figures``: the chapter's key figure;
- ``claims``: the chapter's ledger.

The analysis lives in :mod:`lib.theory.adam_plateau`.
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import ChapterConfig, exported, lazy_exports

EXPORTS = {
    "claims": ("ledger",),
    "figures": ("fig_gamma_law",),
    "prediction": (
        "escapes_on_grid",
        "gd_escapes",
        "initial_contrast",
        "linear_arms",
        "linear_numbers",
        "linear_readings",
        "linear_table",
        "lr_numbers",
        "lr_table",
        "measured_seed_law",
        "prediction_numbers",
        "prediction_table",
    ),
    "probe": (
        "Arms",
        "Probe",
        "run_probe",
    ),
    "readings": (
        "escape_speedup",
        "phase_numbers",
        "phase_readings",
        "phase_table",
        "sigma_symmetry",
    ),
}
__getattr__, __dir__ = lazy_exports(__name__, EXPORTS)

CHAPTER = "11_plateau_length_under_adam"


@dataclass(frozen=True)
class Config(ChapterConfig):
    """Chapter 11 at book scale (the task, model, seeds and sweep are Chapter 2's).

    gamma_cal, cal_seed: the gamma law's calibration arm (:mod:`lib.theory.adam_plateau`): the
        smallest init the law is about, on seeds cal_seed, cal_seed + 1, ... that the sweep
        never uses; its constants are read off quantities other than the escape step.
    probe_steps: steps of the every-step probe of Chapter 2's sweep (they cover every
        escape).
    law_tol: the relative agreement asked of the law's predicted median escape step (and
        of Adam's step against Adam's clock over the calibration arm's plateau).
    law_lr_factor: the learning-rate arm of the gamma law: the same probe and calibration
        at this multiple of Chapter 2's Adam rate (its every-step probe still covers every
        escape within probe_steps).
    linear_eps, linear_steps: the gamma law's linear-response arm: the probe's (gamma, seed)
        pairs with the antisymmetric part of each init scaled by linear_eps and by a tenth
        of it, in float64, under Adam and under plain GD, for linear_steps steps (past the
        knee t_p of the sign phase).
    """

    gamma_cal: float = 1.25
    cal_seed: int = 100
    probe_steps: int = 320
    law_tol: float = 0.25
    law_lr_factor: float = 3.0
    linear_eps: float = 1e-3
    linear_steps: int = 60


# Every setting that changes with the scale is Chapter 2's (its seeds and logged steps).
OVERRIDES: dict = {}

__all__ = [
    "CHAPTER",
    "Config",
    "OVERRIDES",
    *exported(EXPORTS),
]

"""Chapter 7, rescaling and the reduced dynamics: its settings, and its plumbing.

The package itself holds the chapter's :class:`Config` (every scientific choice named once)
and ``OVERRIDES``: the shared runs (:mod:`lib.experiments.qkov_training`) read them, and the
modules below read the shared runs, so the page imports each module by name:

- ``checks``: the forward pass against the model written out position by position, and the
  implicit-rescaling formula against autograd;
- ``drift``: the balancedness run, SGD's drift from the conservation law;
- ``reduced_ode``: the reduced ODE integrated (its invariant, the Lambert-W closed form, the
  official code's printed ends of run, the four parameterizations);
- ``figures``: the chapter's figures;
- ``ledger``: the chapter's claims, checked in the page's order.

The chapter shares its machinery with Chapter 8
(:mod:`lib.experiments.ch08_sharper_attention`), one module per job:

- :mod:`lib.experiments.qkov_official`: the official code's saved outputs, with where
  each was read;
- :mod:`lib.experiments.qkov_training`: the training runs and their data (Scan-and-Snap runs
  with weight snapshots);
- :mod:`lib.experiments.qkov_readings`: what is read from the runs (effective rates, the
  balancedness drift).

The model (single-query attention with collapsed or factorized circuits) is
:mod:`lib.training.qkov`, the reduced two-scalar theory :mod:`lib.theory.reduced`, the Scan-and-Snap data
:mod:`lib.data.tasks`.

The equal-rate Scan-and-Snap runs of this chapter (FAFO, FACO, CAFO) are those of Chapter
8, trained once for both (:func:`lib.experiments.qkov_training.equal_rate_runs`): both
chapters' ``Config`` hold the same group of settings,
:class:`lib.experiments.qkov_settings.ScanSnapRuns`, as ``runs``.
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import ChapterConfig
from ..qkov_settings import SCAN_SNAP_OVERRIDES, ScanSnapRuns

CHAPTER = "07_rescaling_and_reduced_dynamics"


@dataclass(frozen=True)
class Config(ChapterConfig):
    """Chapter 7 at book scale.

    runs: the equal-rate Scan-and-Snap runs (``sec-qkov-rescaling``), the group of settings
        Chapter 8 holds too (:class:`lib.experiments.qkov_settings.ScanSnapRuns`): the init
        rate, the SGD rate, the seeds, the lengths of the runs.
    ode_r_grid: the official README's ratios r = eta_QK/eta_OV of the reduced ODE
        (``sec-qkov-reduced``).
    ode_table_losses: the losses at which the ODE's table reads alpha.
    balance_lr_factors, balance_steps: the SGD rates of the balancedness run, as factors
        of ``runs.lr``, and its length; balance_n_logs: its logging steps.
    check_n: sequences of the forward check; flow_check_n: of the autograd check of the
        implicit-rescaling formula, whose SGD step is flow_check_step.

    Generator seeds of fixed data (the same at every scale): check_seed (forward check),
    flow_check_seed, balance_seed.
    """

    runs: ScanSnapRuns = ScanSnapRuns()
    ode_r_grid: tuple[float, ...] = (0.01, 0.1, 1.0, 10.0, 100.0)
    ode_table_losses: tuple[float, ...] = (1e-1, 1e-2, 1e-3, 1e-4)
    balance_lr_factors: tuple[float, ...] = (0.01, 0.1, 1.0)
    balance_steps: int = 1500
    balance_n_logs: int = 20
    check_n: int = 64
    flow_check_n: int = 256
    flow_check_step: float = 1e-6

    check_seed: int = 5
    flow_check_seed: int = 7
    balance_seed: int = 200


OVERRIDES = {
    "ci": dict(
        runs=SCAN_SNAP_OVERRIDES["ci"],
        balance_steps=300,
    ),
    "paper": dict(
        runs=SCAN_SNAP_OVERRIDES["paper"],
        balance_lr_factors=(0.001, 0.01, 0.1),
        balance_steps=20000,
    ),
}

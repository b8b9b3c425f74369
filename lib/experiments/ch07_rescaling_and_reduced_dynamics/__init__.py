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
8, trained once for both (:func:`lib.experiments.qkov_training.train_scan_snap` caches
them): :data:`SHARED_WITH_CH08` names the fields that must agree, and the unit tests check
that they do at every scale.
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import ChapterConfig

CHAPTER = "07_rescaling_and_reduced_dynamics"

# The fields of the Scan-and-Snap runs that this chapter shares with Chapter 8: equal in
# both configs at every scale, so that both chapters read the same runs.
SHARED_WITH_CH08 = (
    "gamma",
    "lr",
    "seeds",
    "seq_len",
    "batch_size",
    "steps",
    "faco_steps",
    "n_logs",
    "data_seed",
)


@dataclass(frozen=True)
class Config(ChapterConfig):
    """Chapter 7 at book scale.

    The init and the rates (scientific choices, named once):

    gamma: the init rate of every randomly drawn weight, ``N(0, fan_in^(-2 gamma))``. At
        ``gamma = 1/2`` a weight of the 50-token model has standard deviation ``50^(-1/2)``,
        the scale of PyTorch's default init (whose uniform draw has a standard deviation
        ``sqrt(3)`` smaller).
    lr: the SGD rate of the equal-rate Scan-and-Snap runs (``sec-qkov-rescaling``): eta_OV = eta_QK
        (the official code: 0.01, the paper scale; larger at the smaller scales to fit the
        time budget, see Chapter 8).
    ode_r_grid: the official README's ratios r = eta_QK/eta_OV of the reduced ODE
        (``sec-qkov-reduced``).
    ode_table_losses: the losses at which the ODE's table reads alpha.

    Scan-and-Snap runs (``sec-qkov-rescaling``):

    seeds: the init seeds (one instance per seed).
    seq_len, batch_size: sequence length and batch of the training runs.
    steps: SGD steps of FAFO and CAFO; faco_steps: of FACO, which needs longer to reach
        the official code's stopping loss.
    n_logs: logging steps of a run: ``n_logs`` log-spaced and ``n_logs + 1`` evenly spaced.
    balance_lr_factors, balance_steps: the SGD rates of the balancedness run, as factors
        of ``lr``, and its length; balance_n_logs: its logging steps.
    check_n: sequences of the forward check; flow_check_n: of the autograd check of the
        implicit-rescaling formula, whose SGD step is flow_check_step.

    Generator seeds of fixed data (the same at every scale): check_seed (forward check),
    data_seed (the Scan-and-Snap streams: ``data_seed + i`` for the i-th of FAFO, FACO,
    CAFO, CACO), flow_check_seed, balance_seed.
    """

    gamma: float = 0.5
    lr: float = 1.0
    ode_r_grid: tuple[float, ...] = (0.01, 0.1, 1.0, 10.0, 100.0)
    ode_table_losses: tuple[float, ...] = (1e-1, 1e-2, 1e-3, 1e-4)

    seeds: tuple[int, ...] = (0, 1, 2)
    seq_len: int = 128
    batch_size: int = 32
    steps: int = 5000
    faco_steps: int = 8000
    n_logs: int = 40
    balance_lr_factors: tuple[float, ...] = (0.01, 0.1, 1.0)
    balance_steps: int = 1500
    balance_n_logs: int = 20
    check_n: int = 64
    flow_check_n: int = 256
    flow_check_step: float = 1e-6

    check_seed: int = 5
    data_seed: int = 100
    flow_check_seed: int = 7
    balance_seed: int = 200


OVERRIDES = {
    "ci": dict(
        lr=2.0,
        seeds=(0, 1),
        steps=2500,
        faco_steps=4000,
        balance_steps=300,
    ),
    "paper": dict(
        lr=0.01,
        seeds=(1234, 1235, 1236, 1237, 1238),
        steps=625000,
        faco_steps=625000,
        balance_lr_factors=(0.001, 0.01, 0.1),
        balance_steps=20000,
    ),
}

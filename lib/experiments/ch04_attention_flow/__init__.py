"""Chapter 4, the attention flow: the one-layer expansion at init, and QK's quasi-static regime.

The model is a one-layer attention-only transformer (no LayerNorm, no MLP, readout at the
last token) on the gated task T3. Its embedding gradient is checked against autograd at
initialization across the init rate γ, with the default position embedding and with one
as small as the token embedding; then full-batch GD at two init rates follows, on one time
axis, how far attention is from uniform and when the QK weights move. On Chapter 2's
gated-parity-bit task, probes and ablations then show where the parity lives. The physics
is in :mod:`lib.theory.flow`; this package holds the constants and the bookkeeping:

- ``runs``: the computations on T3, in the page's order, each returning its results, and
  the logging callback of the GD run;
- ``readings``: the numbers the page glues from them, and its tables;
- ``where``: the section on where the parity lives: its runs, readings and tables;
- ``figures``: the chapter's figures (the init figure's layout is
  :mod:`lib.experiments.flow_figures`, shared with Chapter 3);
- ``claims``: the ledger of the chapter's claims.
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import SubConfig, exported, lazy_exports
from ..expansion import CI_OVERRIDES, ExpansionCheck

EXPORTS = {
    "claims": ("record_claims",),
    "figures": (
        "fig_attn_init",
        "fig_attn_time",
        "fig_attn_where",
    ),
    "readings": (
        "control_numbers",
        "init_numbers",
        "scaling_numbers",
        "time_numbers",
        "tolerances",
        "uniform_numbers",
        "uniform_table",
    ),
    "runs": (
        "DYNAMICS",
        "dynamics_callback",
        "init_check",
        "quasi_static",
        "run_gd",
        "scaling_test",
        "t3_task",
        "uniform_at_init",
        "uniform_until_qk_moves",
    ),
    "where": (
        "ABLATED",
        "FREEZE_ATTN",
        "FREEZE_E",
        "IDENTITY_12",
        "IDENTITY_24",
        "LEARNED_12",
        "LEARNED_24",
        "WHERE_MODELS",
        "chapter2_config",
        "margin_numbers",
        "race_numbers",
        "race_reading",
        "race_table",
        "run_where",
        "where_numbers",
        "where_reading",
        "where_row",
        "where_run",
        "where_settings",
        "where_table",
        "where_tasks",
    ),
}
__getattr__, __dir__ = lazy_exports(__name__, EXPORTS)

__all__ = [
    "CHAPTER",
    "Config",
    "GDRun",
    "WhereRuns",
    "OVERRIDES",
    *exported(EXPORTS),
]

CHAPTER = "04_attention_flow"


@dataclass(frozen=True)
class GDRun(SubConfig):
    """The GD run (full-batch, steps clipped in norm), instances γ_large and γ, each
    ``n_seeds`` times, and how its attention is read.

    n_seeds: instances per γ. seed0: the seed of the first instance (the others follow
        it), apart from the seeds of the init check.
    steps, lr, clip, n_logs: its length, learning rate, step-norm clip and number of
        (log-spaced) logging steps.
    delta: the stated distance δ from uniform attention (total variation).
    depart_factor: attention has departed from the quasi-static prediction once its
        distance from uniform is this many times D_qs.
    early_steps: the first steps over which the expansion must track the true gradient.
    """

    n_seeds: int = 2
    seed0: int = 100
    steps: int = 2000
    lr: float = 2.0
    clip: float = 0.01
    n_logs: int = 35
    delta: float = 0.1
    depart_factor: float = 2.0
    early_steps: int = 20


@dataclass(frozen=True)
class WhereRuns(SubConfig):
    """Where the attention staircase puts the parity (Chapter 2's gated-parity-bit task and
    its training settings, read from Chapter 2's Config at the same scale).

    anchors: the two task sizes, 12 anchors (Chapter 2's earlier attention model) and 24
        (its staircase model).
    steps: the Adam steps of every run of the section. Chapter 2 trains its attention model
        for fewer (it escapes early); the learned value path escapes later or not at all,
        and the ablations later still, so these runs get their own budget.
    freeze_step: the step from which the embedding is frozen in the ablation: after the
        order-0 stair, while bit 1 is still on its plateau (both checked in the chapter).
    null_perm: the label permutations of every run's floors (:mod:`lib.measure.nulls`;
        each run is read against its own permutation floor, as in Chapter 2).
    copies, copy_rel: the race is measured on an ensemble of the learned-OV 24-anchor
        model: every seed run as ``copies`` instances whose initial weights differ by a
        relative ``copy_rel`` (copy 0: the seed itself), and its rate of escaping per seed.
    """

    anchors: tuple[int, int] = (12, 24)
    steps: int = 800
    freeze_step: int = 40
    null_perm: int = 100
    copies: int = 8
    copy_rel: float = 1e-6


@dataclass(frozen=True)
class Config(ExpansionCheck):
    """Chapter 4 at book scale. The check at init (init_gammas, n_init_seeds,
    scale_factors, slope_tol, cos_target) is :class:`lib.experiments.expansion.ExpansionCheck`.

    Init rates (every weight is drawn with std fan_in^-γ; the position embedding has
    fan-in L, so its entries have std L^-γ):
    gamma: the small-init rate (γ = 0.8): the leading term should reach ``cos_target``
        from it on, and the GD run's instances that should stay near uniform attention
        until QK moves.
    gamma_large: the large-init comparator (γ = 0.5): the GD run's control instances,
        where attention starts far from uniform, and the rate at which the three terms
        must beat the leading one.

    The task and the model:
    t3_reps: repetitions of the gated-addition dataset T3.
    d_model: the model's width.
    first_order_tol: the relative error within which the first-order formula must give
        the distance from uniform attention.

    gd: the GD run and its readings (:class:`GDRun`).
    where: the runs of where the attention staircase puts the parity (:class:`WhereRuns`).
    """

    t3_reps: int = 1
    d_model: int = 32
    gamma: float = 0.8
    gamma_large: float = 0.5
    first_order_tol: float = 0.05
    gd: GDRun = GDRun()
    where: WhereRuns = WhereRuns()


OVERRIDES = {
    "ci": dict(
        **CI_OVERRIDES,
        gd=dict(n_seeds=1, steps=1200, n_logs=25),
        where=dict(
            null_perm=50,
            steps=500,
            copies=2,  # the race's ensemble: its cost grows with the copies
        ),
    ),
    "paper": dict(d_model=64, n_init_seeds=8, gd=dict(n_seeds=8, steps=10000, n_logs=60)),
}

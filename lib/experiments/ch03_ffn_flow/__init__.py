"""Chapter 3, the feed-forward flow: the Emb-MLP expansion, the hand-over, the escape, the linear model.

The Emb-MLP's embedding gradient is checked against autograd at initialization across the
init rate γ; full-batch GD at γ = 1 shows the hand-over of the centring; the T3 escape
from the symmetric saddle is one batched run (seeds × seeded asymmetry δ) of clipped
full-batch GD in float64; the linear model is trained by GD at γ = 1. The physics is in
:mod:`lib.theory.flow`; this package holds the constants and the bookkeeping around it:

- ``callbacks``: the training callbacks of the hand-over and escape runs, the exchange
  pairs of T3, the seeded asymmetry and the escape steps;
- ``runs``: the computations, in the page's order, each returning its results;
- ``readings``: the numbers the page glues, and its tables;
- ``figures``: the chapter's figures (the init figure's layout is
  :mod:`lib.experiments.flow_figures`, shared with Chapter 4);
- ``claims``: the ledger of the chapter's claims.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..expansion import CI_OVERRIDES, ExpansionCheck
from .callbacks import (
    escape_callback,
    escape_slopes,
    escape_steps,
    exchange_pairs,
    handover_callback,
    seed_asymmetry,
)
from .claims import record_claims
from .figures import fig_escape, fig_handover, fig_init_expansion, fig_linear_modes
from .readings import (
    escape_numbers,
    escape_settings,
    escape_table,
    gram_numbers,
    handover_numbers,
    init_numbers,
    init_table,
    linear_numbers,
    linear_table,
    scaling_numbers,
    task_numbers,
)
from .runs import (
    init_check,
    predict_escapes,
    run_escape,
    run_handover,
    run_linear,
    scaling_test,
    t3_task,
)

__all__ = [
    "CHAPTER",
    "Config",
    "OVERRIDES",
    "escape_callback",
    "escape_numbers",
    "escape_settings",
    "escape_slopes",
    "escape_steps",
    "escape_table",
    "exchange_pairs",
    "fig_escape",
    "fig_handover",
    "fig_init_expansion",
    "fig_linear_modes",
    "gram_numbers",
    "handover_callback",
    "handover_numbers",
    "init_check",
    "init_numbers",
    "init_table",
    "linear_numbers",
    "linear_table",
    "predict_escapes",
    "record_claims",
    "run_escape",
    "run_handover",
    "run_linear",
    "scaling_numbers",
    "scaling_test",
    "seed_asymmetry",
    "t3_task",
    "task_numbers",
]

CHAPTER = "03_ffn_flow"


@dataclass(frozen=True)
class Config(ExpansionCheck):
    """Chapter 3 at book scale. The check at init (init_gammas, n_init_seeds,
    scale_factors, slope_tol, cos_target) is :class:`lib.experiments.expansion.ExpansionCheck`.

    Init rates (every weight is drawn with std fan_in^-γ):
    gamma: the small-init rate from which the leading term alone must reach ``cos_target``
        (γ >= 0.8 in the text).
    gamma_mid: the intermediate rate where the three terms together beat the leading one
        (γ = 0.5), and from which the leading term's error must shrink as γ grows.
    gamma_large: the large-init control where the expansion fails (γ = 0.3).
    gamma_handover: the rate of the hand-over run (γ = 1: the expansion is exact at init).
    gamma_esc: the rate of the escape run (γ = 0.5: the second stair within the budget).
    gamma_lin: the rate of the linear model (γ = 1, small init).

    The task and the models:
    t3_reps: repetitions of the gated-addition dataset T3.
    activation: the Emb-MLP's activation (SiLU: c1 = 1/2, c2 = 1/2, no cubic term).
    d_model, d_hidden: embedding and hidden widths of the models checked at init.

    The hand-over (full-batch GD, steps clipped in norm):
    gd_hidden: the hidden width of the GD models (hand-over and escape).
    handover_seeds, handover_steps, handover_lr, handover_clip, handover_n_logs: its seeds,
        length, learning rate, step-norm clip and number of (log-spaced) logging steps.

    The escape from the symmetric saddle (clipped full-batch GD in float64):
    esc_seeds: the seeds of the random initializations (one symmetrized copy each).
    esc_deltas: the seeded asymmetries δ (0: the exactly symmetric copy, 1: the random init).
    esc_steps, esc_every: its length and the spacing of its logging steps (every seeded copy
        must escape within it; the growth rate at the end of the run, read by a claim, needs
        the longer run at book).
    esc_lr, esc_clip: its learning rate and step-norm clip.
    esc_acc: the training accuracy above which an instance has escaped (the second stair).
    first_stair_acc: the accuracy that marks the end of the first stair on a symmetric run
        (just under 1/2), where the escape size A* is read.
    esc_tol: the tolerance stated for the linearized prediction (predicted / measured
        within 1 +- esc_tol).
    balance_tol: the relative tolerance of the linear model's conservation law.

    The linear model (GD):
    lin_d: its width. lin_seeds: its seeds. lin_lr, lin_steps: GD rate and length.
    lin_log_every: the spacing of its logging steps.
    lin_modes: how many singular modes of the signature matrix are followed.
    lin_theta: the mode strength θ that defines a mode's onset.
    """

    t3_reps: int = 1
    activation: str = "silu"
    d_model: int = 32
    d_hidden: int = 128
    gamma: float = 0.8
    gamma_mid: float = 0.5
    gamma_large: float = 0.3
    gd_hidden: int = 64
    gamma_handover: float = 1.0
    handover_seeds: tuple[int, ...] = (0, 1, 2, 3)
    handover_steps: int = 1000
    handover_lr: float = 20.0
    handover_clip: float = 0.005
    handover_n_logs: int = 40
    gamma_esc: float = 0.5
    esc_seeds: tuple[int, ...] = (0, 1, 2)
    esc_deltas: tuple[float, ...] = (0.0, 0.001, 0.01, 0.1, 1.0)
    esc_steps: int = 2800
    esc_every: int = 25
    esc_lr: float = 100.0
    esc_clip: float = 0.01
    esc_acc: float = 0.75
    first_stair_acc: float = 0.49
    esc_tol: float = 0.25
    balance_tol: float = 0.05
    gamma_lin: float = 1.0
    lin_d: int = 32
    lin_seeds: tuple[int, ...] = (0, 1, 2, 3, 4, 5)
    lin_lr: float = 1.0
    lin_steps: int = 1500
    lin_log_every: int = 5
    lin_modes: int = 6
    lin_theta: float = 0.5


OVERRIDES = {
    "ci": dict(
        **CI_OVERRIDES,
        handover_seeds=(0, 1),
        handover_steps=800,
        handover_n_logs=30,
        esc_seeds=(0,),
        esc_deltas=(0.0, 0.01, 1.0),
        esc_steps=2100,
        lin_seeds=(0, 1, 2),
        lin_steps=1000,
    ),
    "paper": dict(
        d_model=64,
        d_hidden=256,
        n_init_seeds=8,
        gd_hidden=128,
        handover_seeds=tuple(range(8)),
        handover_steps=2000,
        handover_n_logs=60,
        esc_seeds=tuple(range(8)),
        esc_deltas=(0.0, 0.0001, 0.001, 0.01, 0.1, 1.0),
        esc_steps=6000,
        esc_every=10,
        lin_d=64,
        lin_seeds=tuple(range(16)),
        lin_steps=2000,
        lin_modes=8,
    ),
}

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
from typing import ClassVar

from .. import SubConfig, exported, lazy_exports
from ..expansion import CI_OVERRIDES, ExpansionCheck

EXPORTS = {
    "callbacks": (
        "escape_callback",
        "escape_slopes",
        "escape_steps",
        "exchange_pairs",
        "handover_callback",
        "seed_asymmetry",
    ),
    "claims": ("record_claims",),
    "figures": (
        "fig_escape",
        "fig_handover",
        "fig_init_expansion",
        "fig_linear_modes",
    ),
    "readings": (
        "escape_numbers",
        "escape_settings",
        "escape_table",
        "gram_numbers",
        "handover_numbers",
        "init_numbers",
        "init_table",
        "linear_numbers",
        "linear_table",
        "scaling_numbers",
        "task_numbers",
    ),
    "runs": (
        "init_check",
        "predict_escapes",
        "run_escape",
        "run_handover",
        "run_linear",
        "scaling_test",
        "t3_task",
    ),
}
__getattr__, __dir__ = lazy_exports(__name__, EXPORTS)

__all__ = [
    "CHAPTER",
    "Config",
    "OVERRIDES",
    *exported(EXPORTS),
]

CHAPTER = "03_ffn_flow"


@dataclass(frozen=True)
class Model(SubConfig):
    """The Emb-MLP, checked at init and trained by GD.

    activation: its activation (SiLU: c1 = 1/2, c2 = 1/2, no cubic term).
    d_model, d_hidden: embedding and hidden widths of the models checked at init.
    gd_hidden: the hidden width of the GD models (hand-over and escape).
    """

    activation: str = "silu"
    d_model: int = 32
    d_hidden: int = 128
    gd_hidden: int = 64


@dataclass(frozen=True)
class Handover(SubConfig):
    """The hand-over (full-batch GD, steps clipped in norm).

    gamma: its init rate (γ = 1: the expansion is exact at init).
    seeds, steps, lr, clip, n_logs: its seeds, length, learning rate, step-norm clip and
        number of (log-spaced) logging steps.
    """

    gamma: float = 1.0
    seeds: tuple[int, ...] = (0, 1, 2, 3)
    steps: int = 1000
    lr: float = 20.0
    clip: float = 0.005
    n_logs: int = 40


@dataclass(frozen=True)
class Escape(SubConfig):
    """The escape from the symmetric saddle (clipped full-batch GD in float64).

    gamma: its init rate (γ = 0.5: the second stair within the budget).
    seeds: the seeds of the random initializations (one symmetrized copy each).
    deltas: the seeded asymmetries δ (0: the exactly symmetric copy, 1: the random init).
    steps, every: its length and the spacing of its logging steps (every seeded copy must
        escape within it; the growth rate at the end of the run, read by a claim, needs the
        longer run at book).
    lr, clip: its learning rate and step-norm clip.
    acc: the training accuracy above which an instance has escaped (the second stair).
    first_stair_acc: the accuracy that marks the end of the first stair on a symmetric run
        (just under 1/2), where the escape size A* is read.
    tol: the tolerance stated for the linearized prediction (predicted / measured within
        1 +- tol).
    """

    RANGES: ClassVar[dict[str, str]] = {"acc": "in [0, 1]"}
    gamma: float = 0.5
    seeds: tuple[int, ...] = (0, 1, 2)
    deltas: tuple[float, ...] = (0.0, 0.001, 0.01, 0.1, 1.0)
    steps: int = 2800
    every: int = 25
    lr: float = 100.0
    clip: float = 0.01
    acc: float = 0.75
    first_stair_acc: float = 0.49
    tol: float = 0.25


@dataclass(frozen=True)
class Linear(SubConfig):
    """The linear model (GD).

    gamma: its init rate (γ = 1, small init).
    d: its width. seeds: its seeds. lr, steps: GD rate and length.
    every: the spacing of its logging steps.
    modes: how many singular modes of the signature matrix are followed.
    theta: the mode strength θ that defines a mode's onset.
    balance_tol: the relative tolerance of its conservation law.
    """

    RANGES: ClassVar[dict[str, str]] = {"theta": "in [0, 1]"}
    gamma: float = 1.0
    d: int = 32
    seeds: tuple[int, ...] = (0, 1, 2, 3, 4, 5)
    lr: float = 1.0
    steps: int = 1500
    every: int = 5
    modes: int = 6
    theta: float = 0.5
    balance_tol: float = 0.05


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

    t3_reps: repetitions of the gated-addition dataset T3.
    model, handover, esc, lin: the Emb-MLP (:class:`Model`), the hand-over run
        (:class:`Handover`), the escape from the symmetric saddle (:class:`Escape`) and the
        linear model (:class:`Linear`), each with its own init rate.
    """

    t3_reps: int = 1
    gamma: float = 0.8
    gamma_mid: float = 0.5
    gamma_large: float = 0.3
    model: Model = Model()
    handover: Handover = Handover()
    esc: Escape = Escape()
    lin: Linear = Linear()


OVERRIDES = {
    "ci": dict(
        **CI_OVERRIDES,
        handover=dict(seeds=(0, 1), steps=800, n_logs=30),
        esc=dict(seeds=(0,), deltas=(0.0, 0.01, 1.0), steps=2100),
        lin=dict(seeds=(0, 1, 2), steps=1000),
    ),
    "paper": dict(
        model=dict(d_model=64, d_hidden=256, gd_hidden=128),
        n_init_seeds=8,
        handover=dict(seeds=tuple(range(8)), steps=2000, n_logs=60),
        esc=dict(
            seeds=tuple(range(8)),
            deltas=(0.0, 0.0001, 0.001, 0.01, 0.1, 1.0),
            steps=6000,
            every=10,
        ),
        lin=dict(d=64, seeds=tuple(range(16)), steps=2000, modes=8),
    ),
}

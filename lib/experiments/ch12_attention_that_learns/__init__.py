"""Chapter 12, when attention has to learn where to look: config, task, model, readings.

The task is :func:`lib.data.tasks.selective_parity_bits`: both gates in every sequence, the one
just before the anchor counts, so the bag of tokens is the same for both values of the bit
and uniform attention cannot read it. The model is one layer of attention with no value or
output weights. The arms and their event times are in :mod:`..selective_escape`, the trap
sweep in :mod:`..selective_trap` (both import this package, so none of its modules imports
them). The package's modules:

- ``model``: the task, the model, the callbacks every arm logs, the bit's accuracy and trap,
  and the identities of the derivation;
- ``ratio``: the QK/OV rate-ratio sweep (Chapter 9's question on this task) and its readings;
- ``readings``: the glue numbers and table rows of the escape, the order of events, the
  probe and the lock;
- ``trap``: the trap sweep's cells and readings;
- ``figures``: the escape as survival;
- ``claims``: the chapter's ledger.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from .. import ChapterConfig, SubConfig, exported, lazy_exports

EXPORTS = {
    "claims": ("ledger",),
    "figures": ("fig_escape",),
    "model": (
        "GATE",
        "KEY",
        "OTHER",
        "arm_callbacks",
        "bit_accuracy",
        "contrast_formula",
        "derivation_checks",
        "excess_loss",
        "first_step",
        "init_params",
        "model",
        "readout_row",
        "task",
        "trapped_flag",
    ),
    "ratio": (
        "attention_before_gates",
        "ratio_indices",
        "ratio_numbers",
        "ratio_rows",
        "ratio_settings",
        "ratio_summary",
        "ratio_sweep",
        "run_ratios",
        "train_ratios",
    ),
    "readings": (
        "arm_settings",
        "escape_numbers",
        "escape_rows",
        "lock_numbers",
        "lock_rows",
        "order_numbers",
        "order_rows",
        "probe_groups",
        "probe_numbers",
        "probe_rows",
        "rate",
        "setup_numbers",
        "task_numbers",
        "words",
    ),
    "trap": (
        "base_cell",
        "trap_cells",
        "trap_numbers",
        "trap_rows",
    ),
}
__getattr__, __dir__ = lazy_exports(__name__, EXPORTS)

__all__ = [
    "CHAPTER",
    "Config",
    "OVERRIDES",
    *exported(EXPORTS),
]

CHAPTER = "12_attention_that_learns"


@dataclass(frozen=True)
class Task(SubConfig):
    """The task (:func:`lib.data.tasks.selective_parity_bits`).

    n_keys: distractor keys (in no label); one gives attention a position that carries
        nothing.
    n_anchors, width: the anchors and the enumerated label offset u = 0..width-1: wide
        enough that the anchors' label boxes overlap, so that a parity code in the
        embeddings can show in R1 at all.
    """

    n_keys: int = 1
    n_anchors: int = 24
    width: int = 24


@dataclass(frozen=True)
class Arms(SubConfig):
    """The arms (:mod:`lib.experiments.selective_escape`), one instance per (arm, seed).

    fast_steps: the horizon of the learned, order-blind, sham, standard-scale frozen and
        uniform arms; slow_steps: the horizon of the arm frozen at the small init.
    frozen_gammas: the query-key init rates of the frozen standard-scale arms.
    matched_gamma: the query-key init rate of a second learned arm, the same init as one
        frozen arm (learning against not learning at one init).
    n_sham, sham_seed: the sham tasks (order-blind, the bit flipped on a random half of the
        anchors) whose paired readings make the null of the attention event.
    """

    fast_steps: int = 1500
    slow_steps: int = 6000
    frozen_gammas: tuple[float, ...] = (0.5, 0.75)
    matched_gamma: float = 0.5
    n_sham: int = 4
    sham_seed: int = 1000


@dataclass(frozen=True)
class Readings(SubConfig):
    """The nulls, the event thresholds and the findings' thresholds.

    pair_q: the quantile of the sham arms' null of the attention event (one minus its
        family-wise level).
    n_perm, null_q: the label permutations of the order-1 floor and their quantile.
    delta: the gate contrast mean |A_2 - A_1| at which attention counts as having moved.
    escape_frac: the bit escapes when its sign-bit loss falls below escape_frac * ln 2.
    trap_frac: a seed is trapped when its sign-bit loss is still at least trap_frac * ln 2
        at the horizon.
    speedup_min: the finding's threshold: the whole bootstrap interval of the ratio of the
        median escapes, frozen at small init over learned, lies above it.
    escape_min: the finding's threshold: the whole exact interval of the share of seeds of
        the small-init frozen arm that escape by slow_steps lies above it.
    n_boot, boot_seed: the seed bootstrap of medians and ratios.
    """

    RANGES: ClassVar[dict[str, str]] = {"speedup_min": ">= 1"}
    pair_q: float = 0.99
    n_perm: int = 100
    null_q: float = 0.95
    delta: float = 0.1
    escape_frac: float = 0.5
    trap_frac: float = 0.1
    speedup_min: float = 3.0
    escape_min: float = 0.5
    n_boot: int = 999
    boot_seed: int = 0


@dataclass(frozen=True)
class Probe(SubConfig):
    """The held-out parity probe (:func:`lib.experiments.selective_escape.parity_probe`).

    n_folds: its folds; ridge_factor: its ridge; n_perm: the parity permutations of its null.
    """

    RANGES: ClassVar[dict[str, str]] = {"n_folds": ">= 2"}
    n_folds: int = 4
    ridge_factor: float = 10.0
    n_perm: int = 200


@dataclass(frozen=True)
class RatioSweep(SubConfig):
    """The QK/OV rate-ratio sweep (eta_QK = r * lr), factorized and collapsed QK, one
    batched run each, one instance per (r, seed).

    grid, seeds, steps: the ratios r, the seeds and the run's length.
    conv_frac: Chapter 9's convergence rule on this task: converged when the final loss
        exceeds the task's floor ln(width) by less than conv_frac * ln 2.
    """

    RANGES: ClassVar[dict[str, str]] = {"grid": "> 0"}
    grid: tuple[float, ...] = (0.1, 0.3, 1.0, 3.0)
    seeds: tuple[int, ...] = tuple(range(10))
    steps: int = 1200
    conv_frac: float = 0.1


@dataclass(frozen=True)
class TrapSweep(SubConfig):
    """The trap sweep (:func:`lib.experiments.selective_trap.trap_sweep`), one batched run.

    seeds, steps: its seeds and its length.
    gammas, keys: the query-key init rates and numbers of keys around the main arm's.
    lock_step: the step at which the anchors' lock on the key is read.
    """

    seeds: tuple[int, ...] = tuple(range(10))
    steps: int = 1000
    gammas: tuple[float, ...] = (0.5, 0.75, 1.25)
    keys: tuple[int, ...] = (2, 4)
    lock_step: int = 25


@dataclass(frozen=True)
class Config(ChapterConfig):
    """Chapter 12 at book scale.

    The model (``Transformer(ov="identity", readout_sees_self=False)``): one layer, one head,
    a ReLU MLP, learned positions, no value or output weights, the anchor's row attending to
    the three context positions only. d_model, d_mlp: its widths. gamma: the init rate (small
    init); lr: full-batch Adam's learning rate of every weight.

    seeds: the seeds of every arm.
    n_logs: log-spaced and evenly spaced logging steps (:func:`lib.training.engine.log_grid`)
        of every run.
    task: the task (:class:`Task`); arms: the arms and their horizons (:class:`Arms`);
    readings: the nulls and thresholds of the readings (:class:`Readings`); probe: the
    held-out parity probe (:class:`Probe`); ratio: the QK/OV rate-ratio sweep
    (:class:`RatioSweep`); trap: the trap sweep (:class:`TrapSweep`).
    """

    d_model: int = 32
    d_mlp: int = 32
    gamma: float = 1.0
    lr: float = 1e-2
    seeds: tuple[int, ...] = tuple(range(30))
    n_logs: int = 60
    task: Task = Task()
    arms: Arms = Arms()
    readings: Readings = Readings()
    probe: Probe = Probe()
    ratio: RatioSweep = RatioSweep()
    trap: TrapSweep = TrapSweep()


OVERRIDES = {
    "ci": dict(
        seeds=tuple(range(8)),
        readings=dict(n_perm=50, n_boot=499),
        probe=dict(n_perm=100),
        ratio=dict(seeds=(0, 1, 2)),
        trap=dict(seeds=(0, 1, 2)),
    ),
    "paper": dict(
        seeds=tuple(range(100)),
        arms=dict(slow_steps=10000),
        ratio=dict(seeds=tuple(range(30))),
        trap=dict(seeds=tuple(range(30))),
    ),
}

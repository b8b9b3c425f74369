"""Chapter 6, embedding structure matters: the four experiments' tasks, runs, readings,
figures and claims.

E1 and E2 are one batched run of the Emb-MLP over (task, init, seed); E3 (embedding
transplants) and E4 (injecting synonym groups) one batched run each. The embedding
constructions and the auxiliary-data stream are in :mod:`lib.training.embedstruct`. This
package holds the chapter's constants (``Config``, ``OVERRIDES``) and:

- ``design``: E1's matched twins and E2's T1 in one vocabulary, their critical pairs and
  evaluation sets, and the arms of E3 and E4;
- ``runs``: the batched training runs (E1+E2, E3's early run and transplants, E4);
- ``readings``: E1's and E2's numbers and tables;
- ``transplant``: E3's numbers and tables;
- ``injection``: E4's numbers, tables and the injection check;
- ``figures``: the chapter's four figures;
- ``claims``: the chapter's ledger.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from .. import ChapterConfig, SubConfig, exported, lazy_exports

EXPORTS = {
    "claims": ("ledger",),
    "design": (
        "A4",
        "ARMS",
        "ORDER",
        "SEQ_LEN",
        "SHORT",
        "TWIN_SHORT",
        "TWINS",
        "best_accuracy_without_gate",
        "critical_pairs",
        "e1_tasks",
        "eval_sets",
        "inits",
        "pair_masks",
        "reasoning_part",
        "signature_tv",
    ),
    "figures": (
        "fig_e1_curves",
        "fig_e2_geometry",
        "fig_e3_transplants",
        "fig_e4_injection",
    ),
    "injection": (
        "e4_numbers",
        "e4_rows",
        "every_seed",
        "injection_helps",
        "reach_steps",
        "read_e4",
        "signature_R",
        "stays_above_from",
    ),
    "readings": (
        "design_table",
        "e1_numbers",
        "e1_table",
        "e2_numbers",
        "e2_table",
        "early_pair_cosines",
        "pair_cosine_numbers",
        "pair_cosine_table",
        "per_seed",
        "plateau_numbers",
        "read_e2",
        "slowdown_table",
        "slowdowns",
        "t1_geometry",
        "t3_plateau",
        "twin_design",
    ),
    "runs": (
        "pair_cosine",
        "per_task_accuracy",
        "run_e1",
        "run_e3",
        "run_e4",
        "transplants",
    ),
    "transplant": (
        "e3_numbers",
        "e3_rows",
        "read_e3",
    ),
}
__getattr__, __dir__ = lazy_exports(__name__, EXPORTS)

CHAPTER = "06_embeddings_matter"


@dataclass(frozen=True)
class Model(SubConfig):
    """The Emb-MLP of every experiment and its Adam runs.

    d_model, d_hidden: the embedding and hidden widths.
    lr: Adam's learning rate (every run); smaller at paper scale, where the model is wider
        and the runs ten times longer.
    batch_size: rows per step per instance (E1, E3).
    """

    d_model: int = 64
    d_hidden: int = 128
    lr: float = 1e-2
    batch_size: int = 128


@dataclass(frozen=True)
class Twins(SubConfig):
    """The batched run of E1 and E2 (``sec-emb-e1``, ``sec-emb-e2``): the matched twins and T1.

    steps, log_every: steps of the run and its logging interval.
    eval_rows: rows of each training set on which E1's learning curves are measured;
        eval_seed: the seed of that fixed subsample.
    order0_tol: how close T3's accuracy must be to the order-0 solution's when its control
        is learned, for T3 to count as on the order-0 plateau.
    """

    RANGES: ClassVar[dict[str, str]] = {"log_every": ">= 1"}
    steps: int = 2000
    log_every: int = 25
    eval_rows: int = 1024
    eval_seed: int = 1
    order0_tol: float = 0.1


@dataclass(frozen=True)
class Transplants(SubConfig):
    """The embedding transplants of E3 (``sec-emb-e3``).

    early_step: the Adam steps of the small-init run whose embedding is E3's "early" arm;
        also the step at which E1's pair cosines are read.
    gamma_rest: the init rate of the rest of the network (the standard scale 0.5), so the
        arms differ in their embedding only.
    steps, log_every: steps of the E3 run and its logging interval.
    eval_rows: training rows on which the training accuracy is measured.
    final_points: the final accuracies are the mean of this many last logged points (the
        curves are noisy on 200 test rows).
    onset_acc: the training accuracy whose first step E3's table reports.
    transplant_seed: seed s draws its permutation and random rows with seed
        ``transplant_seed + s``.
    """

    RANGES: ClassVar[dict[str, str]] = {"log_every": ">= 1"}
    early_step: int = 100
    gamma_rest: float = 0.5
    steps: int = 2000
    log_every: int = 25
    eval_rows: int = 2048
    final_points: int = 5
    onset_acc: float = 0.5
    transplant_seed: int = 100


@dataclass(frozen=True)
class Injection(SubConfig):
    """Injecting synonym groups, E4 (``sec-emb-e4``).

    steps, log_every: steps of the E4 run and its logging interval.
    keep: the share of the (key, member) pairs of trained members that E4 trains on.
    main_batch, aux_batch: downstream and auxiliary rows per step.
    aux_weight: the weight of the auxiliary loss in the arms that have auxiliary data.
    exact_tol: a signature alignment within this of 1 counts as identical signatures.
    """

    RANGES: ClassVar[dict[str, str]] = {"log_every": ">= 1", "keep": "in (0, 1]"}
    steps: int = 800
    log_every: int = 10
    keep: float = 0.5
    main_batch: int = 64
    aux_batch: int = 16
    aux_weight: float = 1.0
    exact_tol: float = 1e-12


@dataclass(frozen=True)
class Config(ChapterConfig):
    """Chapter 6 at book scale.

    seeds: the seeds of the initial weights; the data are drawn once (``data_seed``).
    gamma: the small initialization rate (std = d_in^-gamma), 1: the regime in which the
        embeddings first move along their label signatures (Chapters 3-4).
    gamma_large: the large-init comparator, 0.3: weights above the standard scale
        d_in^-1/2, where the leading-order flow no longer describes the first steps
        (Chapter 2 checks the expansion at both rates).
    data_seed: the seed of every data draw (task splits, batch streams, synonym groups).
    p: the modulus of the arithmetic twins (operands 0..p-1).
    t3_test_fraction: the share of T3's (key, magnitude) blocks held out.
    fit_acc: the training accuracy at which a task counts as learned (E1, E4).
    model: the Emb-MLP and its Adam runs (:class:`Model`).
    e1, e3, e4: the run of E1 and E2 (:class:`Twins`), the transplants of E3
        (:class:`Transplants`) and the injection of E4 (:class:`Injection`).
    """

    seeds: tuple[int, ...] = (0, 1, 2)
    gamma: float = 1.0
    gamma_large: float = 0.3
    data_seed: int = 0
    p: int = 47
    t3_test_fraction: float = 0.2
    fit_acc: float = 0.95
    model: Model = Model()
    e1: Twins = Twins()
    e3: Transplants = Transplants()
    e4: Injection = Injection()


OVERRIDES = {
    "ci": dict(seeds=(0, 1), e1=dict(steps=1500), e3=dict(steps=1000), e4=dict(steps=400)),
    "paper": dict(
        model=dict(d_model=128, d_hidden=512, lr=3e-3, batch_size=512),
        seeds=(0, 1, 2, 3, 4),
        p=97,
        e1=dict(steps=20000, log_every=50),
        e3=dict(steps=10000, early_step=200),
        e4=dict(steps=4000, main_batch=256, aux_batch=64),
    ),
}

__all__ = [
    "CHAPTER",
    "Config",
    "OVERRIDES",
    *exported(EXPORTS),
]

"""Chapter 2, the context staircase: the gated-parity-bit task, its runs and their reading.

The measurements (targets, partial R, noise floors, onsets, escapes, plateaus) live in
:mod:`lib.measure.staircase`; this package holds the chapter's constants and the bookkeeping
that turns its runs (:class:`lib.measure.staircase.BitRun`, one per model) into the tables,
figures and checks of the page:

- ``names``: the chapter's runs by name, their glue names, the colours of the orders;
- ``runs``: the models, the settings of each batched run, the uniform-attention check and
  the stability reruns;
- ``readings``: the numbers read from the runs (dicts for glue, rows for tables);
- ``figures``: the staircase figures, the sweep and the explorer's sliders;
- ``claims``: the chapter's ledger.
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import ChapterConfig, SubConfig, exported, lazy_exports

EXPORTS = {
    "claims": ("ledger",),
    "figures": (
        "PANEL_HEIGHT",
        "draw_arm",
        "explorer",
        "explorers",
        "fig_key_staircase",
        "fig_staircase",
        "fig_staircase_attn",
        "fig_sweep",
        "staircase_figure",
    ),
    "names": (
        "ATTN",
        "ATTN_LARGE",
        "CONTROL",
        "MLP2",
        "MLP3",
        "ORDER_COLOR",
        "SHORT",
        "init_words",
        "with_gammas",
    ),
    "readings": (
        "attn_rate_table",
        "escape_summary",
        "large_init",
        "onset_table",
        "plateau_lengths",
        "plateau_numbers",
        "shown_onsets",
        "signature_geometry",
        "small_init",
        "stability_numbers",
        "sweep_escapes",
        "sweep_numbers",
    ),
    "runs": (
        "chapter_models",
        "run_specs",
        "stability_reruns",
        "uniform_attention_gaps",
    ),
}
__getattr__, __dir__ = lazy_exports(__name__, EXPORTS)

CHAPTER = "02_context_staircase"

__all__ = [
    "CHAPTER",
    "Config",
    "OVERRIDES",
    *exported(EXPORTS),
]


@dataclass(frozen=True)
class TwoStairs(SubConfig):
    """The two-stair Emb-MLP, its gamma sweep and its shuffled-label control.

    steps: Adam steps of the two-stair Emb-MLP and of its control.
    gammas: the gamma sweep of the two-stair Emb-MLP (gamma and gamma_large are added to it);
        a finer grid at larger scales.
    grad_gammas: the rates at which the leading-order gradient is checked against autograd,
        from small init to large (gamma and gamma_large are added where missing).
    shuffle_seed: the permutation of the labels in the shuffled-label control.
    """

    steps: int = 1000
    gammas: tuple[float, ...] = (0.3, 0.4, 0.5, 0.6, 0.75, 0.9, 1.0, 1.25)
    grad_gammas: tuple[float, ...] = (1.0, 0.8, 0.5, 0.3)
    shuffle_seed: int = 0


@dataclass(frozen=True)
class Attention(SubConfig):
    """The attention model with two stairs, read as a rate.

    anchors: anchors of its task, 24, not 12. The attention model has no value or output
        weights (``Transformer(ov="identity")``): with a learned W_V W_O the anchors reach
        the readout an O(eps^2) factor weaker than the gate, and with 12 anchors a seed can
        learn bit 1 by memorizing its 288 sequences before the embeddings take the parity
        geometry (Chapter 4 measures both). With 24 anchors the noise floor of R1 halves and
        memorizing takes longer.
    steps: Adam steps of the attention model.
    gamma_large: its large-init comparator, 0.5, not 0.3: without LayerNorm the attention
        model starts at gamma = 0.3 with losses in the tens, which measures a recovery, not a
        staircase.
    copies: its staircase is read as a rate: every seed at small init is an ensemble of
        ``copies`` instances whose initial weights are multiplied by 1 + copy_rel * z
        (``readings.copy_rel``; copy 0: the seed itself), and P(climb) is reported per seed
        with a Wilson interval (:mod:`lib.measure.rates`).
    climb_min: the threshold, fixed before the runs, that P(climb) must reach in every seed.
    """

    anchors: int = 24
    steps: int = 400
    gamma_large: float = 0.5
    copies: int = 8
    climb_min: float = 0.8


@dataclass(frozen=True)
class ThreeStairs(SubConfig):
    """The three-stair Emb-MLP and its task.

    n_keys: keys of the three-stair task (:func:`lib.data.tasks.gated_parity_bits`).
    h_weights: how often h+ and h- occur in the three-stair task (2:1): an exactly balanced
        h would make the third stair a saddle (a run can stay on it for thousands of
        steps), and at 3:2 it is still close enough to one that the order-2 geometry forms
        or not depending on a 1e-6 change of the init, while bit 2 is learned at the same
        step. At 2:1 every seed keeps its verdict under the perturbation (checked in the
        chapter).
    steps: Adam steps of the three-stair Emb-MLP.
    gammas: its rates (its large init only where it is affordable; gamma is added where
        missing).

    The attention model with three stairs (``models.AttnEmbMLP``): the Emb-MLP's bag of
        embeddings pooled by single-head attention from the last token. With W_Q = W_K = 0
        its attention is exactly uniform and it *is* the three-stair Emb-MLP (checked in the
        chapter). Its learned and frozen-QK runs are not run: as ensembles of copies they
        would cost more than the chapter's budget, on a task that uniform attention already
        reads; whether attention that must learn changes the staircase is Chapter 12's
        question, on a task built for it.
    """

    n_keys: int = 12
    h_weights: tuple[int, int] = (2, 1)
    steps: int = 900
    gammas: tuple[float, ...] = (1.0, 0.3)


@dataclass(frozen=True)
class Readings(SubConfig):
    """How the runs are read: floors, tolerances and thresholds.

    null_perm, null_q: label permutations of every run's floors and their quantile: each run
        is read against its own permutation floor (:mod:`lib.measure.nulls`, the floor of every
        staircase chapter).
    lead_tol: the leading-order term "is" the gradient where its cosine with it exceeds
        1 - lead_tol on every anchor.
    min_wait_over_fall: a plateau of bit j is a stretch on which its sign-bit loss sits at
        >= 0.9 ln 2 (after the previous stair's onset) at least this many times as long, in
        linear time, as the loss then takes to fall below 0.5 ln 2
        (:func:`lib.measure.plateaus.plateau_and_fall`); a smooth decay from ln 2 fails it.
    min_speedup: the factor by which large init must shorten the bit-1 plateau (median
        escape step), and by which the sweep's escape step must grow from the largest
        init to the smallest.
    copy_rel: the relative change of the initial weights (multiplied by 1 + copy_rel * z) of
        the attention model's copies and of the stability reruns.
    stability_tol: the Emb-MLP runs are rerun at small init from inits multiplied by
        1 + copy_rel * z; every onset and escape must move by at most stability_tol logged
        steps, and every per-seed verdict must stay the same. (A rerun on another number of
        CPU threads sums these runs in the same order on a CPU: it perturbs nothing and is
        not run.)
    """

    null_perm: int = 100
    null_q: float = 0.95
    lead_tol: float = 1e-3
    min_wait_over_fall: float = 1.0
    min_speedup: float = 5.0
    copy_rel: float = 1e-6
    stability_tol: int = 2


@dataclass(frozen=True)
class Config(ChapterConfig):
    """Chapter 2 at book scale.

    n_keys: keys of the two-stair task (:func:`lib.data.tasks.gated_parity_bits`), of the
        Emb-MLP and of the attention model.
    d_model, d_hidden: width of the embedding and of the MLP hidden layer (both models).
    seeds: the seeds of every run (one instance each, per gamma).
    n_logs: logged steps per run (log-spaced).
    gamma: the small initialization rate (weights ~ N(0, d_in^(-2 gamma))). At gamma = 1
        the leading-order term of the embedding gradient is the gradient (cosine > 0.9999
        on every anchor, checked in the chapter): the regime the staircase theory is about.
    gamma_large: the Emb-MLP's large-init comparator, 0.3: there the leading-order
        expansion fails (negative cosine on some anchor) and the plateaus are compressed.
    lr: Adam's learning rate, full batch, every run.
    r: the attention model's rate ratio eta_QK / eta_rest: its query-key weights train at
        r times the learning rate of the rest, so the embeddings move before attention
        sharpens. A choice, not a condition: Chapter 9 finds the order-1 stair at r = 3 too.
    two, attn, three: the runs, each budget ending well after its run's last stair, so every
        plateau and every fall is read whole: the two-stair Emb-MLP with its sweep and
        control (:class:`TwoStairs`), the attention model with two stairs
        (:class:`Attention`) and the three-stair Emb-MLP (:class:`ThreeStairs`).
    readings: the floors, tolerances and thresholds the runs are read with
        (:class:`Readings`).
    """

    n_keys: int = 12
    d_model: int = 128
    d_hidden: int = 128
    seeds: tuple[int, ...] = (0, 1, 2, 3, 4)
    n_logs: int = 48
    gamma: float = 1.0
    gamma_large: float = 0.3
    lr: float = 1e-2
    r: float = 0.1
    two: TwoStairs = TwoStairs()
    attn: Attention = Attention()
    three: ThreeStairs = ThreeStairs()
    readings: Readings = Readings()


OVERRIDES = {
    "ci": dict(
        seeds=(0, 1, 2),
        n_logs=36,
        two=dict(gammas=(0.3, 0.5, 0.75, 1.0), steps=600),
        attn=dict(steps=200, copies=3),
        three=dict(gammas=(1.0,)),
        readings=dict(null_perm=50),
    ),
    "paper": dict(
        n_keys=24,
        d_model=256,
        d_hidden=512,
        seeds=(0, 1, 2, 3, 4, 5, 6, 7),
        n_logs=60,
        two=dict(gammas=(0.3, 0.4, 0.5, 0.6, 0.75, 0.9, 1.0, 1.25, 1.5), steps=4000),
        attn=dict(steps=4000),
        three=dict(n_keys=24, steps=6000),
    ),
}

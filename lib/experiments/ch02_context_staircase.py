"""Chapter 2, the context staircase: the gated-parity-bit task, its runs and their reading.

The measurements (targets, partial R, noise floors, onsets, escapes, plateaus) live in
:mod:`lib.measure.staircase`; this module holds the chapter's constants and the bookkeeping that
turns its runs (:class:`lib.measure.staircase.BitRun`, one per model) into the tables of the
page.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from ..book.style import COLORS, band, figsize
from . import ChapterConfig

CHAPTER = "02_context_staircase"


@dataclass(frozen=True)
class Config(ChapterConfig):
    """Chapter 2 at book scale.

    n_keys, n_keys_three: keys of the two-stair and the three-stair task
        (:func:`lib.data.tasks.gated_parity_bits`).
    h_weights: how often h+ and h- occur in the three-stair task (2:1): an exactly balanced
        h would make the third stair a saddle (a run can stay on it for thousands of
        steps), and at 3:2 it is still close enough to one that the order-2 geometry forms
        or not depending on a 1e-6 change of the init (seed 0 at ci: R2 peaks at 0.63,
        perturbed at 0.20, both learning bit 2 at the same step). At 2:1 every seed keeps
        its verdict under the perturbation (checked in the chapter).
    shuffle_seed: the permutation of the labels in the shuffled-label control.
    d_model, d_hidden: width of the embedding and of the MLP hidden layer (both models).
    seeds: the seeds of every run (one instance each, per gamma).
    n_logs: logged steps per run (log-spaced).
    null_perm, null_q: label permutations of every run's floors and their quantile: each run
        is read against its own permutation floor (:mod:`lib.measure.nulls`, the floor of every
        staircase chapter).
    gamma: the small initialization rate (weights ~ N(0, d_in^(-2 gamma))). At gamma = 1
        the leading-order term of the embedding gradient is the gradient (cosine > 0.9999
        on every anchor, checked in the chapter): the regime the staircase theory is about.
    gamma_large: the Emb-MLP's large-init comparator, 0.3: there the leading-order
        expansion fails (negative cosine on some anchor) and the plateaus are compressed.
    gamma_large_attn: the attention model's large-init comparator, 0.5, not 0.3: without
        LayerNorm the attention model starts at gamma = 0.3 with losses in the tens, which
        measures a recovery, not a staircase.
    grad_gammas: the rates at which the leading-order gradient is checked against
        autograd, from small init to large (gamma and gamma_large are added where missing).
    sweep_gammas: the gamma sweep of the two-stair Emb-MLP (gamma and gamma_large are
        added to it); a finer grid at larger scales.
    three_gammas: the rates of the three-stair run (its large init only where it is
        affordable; gamma is added where missing).
    lr: Adam's learning rate, full batch, every run.
    r: the attention model's rate ratio eta_QK / eta_rest: its query-key weights train at
        r times the learning rate of the rest, so the embeddings move before attention
        sharpens. A choice, not a condition: Chapter 9 finds the order-1 stair at r = 3 too.
    attn_anchors: anchors of the attention model's task, 24, not 12. The attention model
        has no value or output weights (``Transformer(ov="identity")``): with a learned
        W_V W_O the anchors reach the readout an O(eps^2) factor weaker than the gate, and
        with 12 anchors a seed can learn bit 1 by memorizing its 288 sequences before the
        embeddings take the parity geometry (Chapter 4 measures both). With 24 anchors the
        noise floor of R1 halves and memorizing takes longer.
    The attention model with three stairs (``models.AttnEmbMLP``): the Emb-MLP's bag of
        embeddings pooled by single-head attention from the last token. With W_Q = W_K = 0
        its attention is exactly uniform and it *is* the three-stair Emb-MLP (checked in the
        chapter). Its learned and frozen-QK runs are not run: as ensembles of copies they
        would cost 163 s of CPU each with 3 seeds x 8 copies x 900 steps, more than the
        chapter's budget, on a task that uniform attention already reads; whether attention that must learn changes
        the staircase is Chapter 12's question, on a task built for it.
    copies, copy_rel: the attention model's staircase is read as a rate: every seed at small
        init is an ensemble of ``copies`` instances whose initial weights are multiplied by
        1 + copy_rel * z (copy 0: the seed itself), and P(climb) is reported per seed with a
        Wilson interval (:mod:`lib.measure.rates`). climb_min: the threshold, fixed before the runs,
        that P(climb) must reach in every seed.
    stability_tol: the Emb-MLP runs are rerun at small init from inits multiplied by
        1 + copy_rel * z; every onset and escape must move by at most stability_tol logged
        steps, and every per-seed verdict must stay the same. (A rerun on another number of
        CPU threads sums these runs in the same order on a CPU: it perturbs nothing and is
        not run.)
    two_steps, attn_steps, three_steps: Adam steps of the two-stair Emb-MLP (and its
        control), of the attention model and of the three-stair Emb-MLP. Each budget ends
        well after its run's last stair (the attention model escapes bit 1 by step 150, of
        200 at ci and 400 at book, and the three-stair Emb-MLP's order-2 onsets come
        by step 476 of 900), so every plateau and every fall is read whole.
    lead_tol: the leading-order term "is" the gradient where its cosine with it exceeds
        1 - lead_tol on every anchor.
    min_wait_over_fall: a plateau of bit j is a stretch on which its sign-bit loss sits at
        >= 0.9 ln 2 (after the previous stair's onset) at least this many times as long, in
        linear time, as the loss then takes to fall below 0.5 ln 2
        (:func:`lib.measure.plateaus.plateau_and_fall`); a smooth decay from ln 2 fails it.
    min_speedup: the factor by which large init must shorten the bit-1 plateau (median
        escape step), and by which the sweep's escape step must grow from the largest
        init to the smallest.
    """

    n_keys: int = 12
    n_keys_three: int = 12
    h_weights: tuple[int, int] = (2, 1)
    shuffle_seed: int = 0
    d_model: int = 128
    d_hidden: int = 128
    seeds: tuple[int, ...] = (0, 1, 2, 3, 4)
    n_logs: int = 48
    null_perm: int = 100
    null_q: float = 0.95
    gamma: float = 1.0
    gamma_large: float = 0.3
    gamma_large_attn: float = 0.5
    grad_gammas: tuple[float, ...] = (1.0, 0.8, 0.5, 0.3)
    sweep_gammas: tuple[float, ...] = (0.3, 0.4, 0.5, 0.6, 0.75, 0.9, 1.0, 1.25)
    three_gammas: tuple[float, ...] = (1.0, 0.3)
    lr: float = 1e-2
    r: float = 0.1
    attn_anchors: int = 24
    copies: int = 8
    copy_rel: float = 1e-6
    climb_min: float = 0.8
    stability_tol: int = 2
    two_steps: int = 1000
    attn_steps: int = 400
    three_steps: int = 900
    lead_tol: float = 1e-3
    min_speedup: float = 5.0
    min_wait_over_fall: float = 1.0


OVERRIDES = {
    "ci": dict(
        seeds=(0, 1, 2),
        n_logs=36,
        null_perm=50,
        sweep_gammas=(0.3, 0.5, 0.75, 1.0),
        two_steps=600,
        attn_steps=200,
        three_gammas=(1.0,),
        copies=3,
    ),
    "paper": dict(
        n_keys=24,
        n_keys_three=24,
        d_model=256,
        d_hidden=512,
        seeds=(0, 1, 2, 3, 4, 5, 6, 7),
        n_logs=60,
        sweep_gammas=(0.3, 0.4, 0.5, 0.6, 0.75, 0.9, 1.0, 1.25, 1.5),
        two_steps=4000,
        attn_steps=4000,
        three_steps=6000,
    ),
}

# The chapter's runs, by name, and the short names of their glue keys.
MLP2 = "Emb-MLP, two stairs"
CONTROL = "control: shuffled labels"
ATTN = "attention, two stairs"  # small init, an ensemble of copies per seed
ATTN_LARGE = "attention, two stairs, large init"
MLP3 = "Emb-MLP, three stairs"
SHORT = {MLP2: "mlp2", ATTN: "attn", ATTN_LARGE: "attn_large", MLP3: "mlp3"}
ORDER_COLOR = {0: COLORS["order0"], 1: COLORS["order1"], 2: COLORS["order2"]}
PANEL_HEIGHT = 2.9  # inches per row of panels: R_j above, the sign-bit losses below


def with_gammas(grid, *gammas) -> tuple:
    """``grid`` with each of ``gammas`` that it lacks appended, in order: the rates a run
    trains so that every arm the chapter reads is in it. A grid that holds them all comes
    back as it is (the book's runs do not change); a try that sets ``gamma`` off the grid
    gets that rate as one more instance of the same batched run."""
    grid = tuple(grid)
    return grid + tuple(rate for rate in dict.fromkeys(gammas) if rate not in grid)


def init_words(gamma: float, small: float) -> str:
    """A panel's title for an arm: ``small init (γ = 1)`` or ``large init (γ = 0.3)``; in
    this book a larger gamma is a smaller init."""
    return f"{'small' if gamma == small else 'large'} init (γ = {gamma:g})"


def draw_arm(top, bottom, run, gamma: float, title: str, legend: bool = True) -> None:
    """One arm of a staircase run, seeds as bands: the partial alignments R_j against their
    noise floors (dotted) on ``top``, the sign-bit losses against ln 2 (dashed) on
    ``bottom``. Step 0 is left out (it cannot sit on the log axis)."""
    steps, m = run.arm(gamma)
    for o in run.targets.orders:
        band(top, steps[1:], m[f"R{o}"][1:], ORDER_COLOR[o], label=f"$R_{o}$")
        top.axhline(run.floor[o], color=ORDER_COLOR[o], ls=":", lw=1)
        if o > 0:
            band(bottom, steps[1:], m[f"bit{o}"][1:], ORDER_COLOR[o], label=f"bit {o}")
    bottom.axhline(math.log(2), color=COLORS["null"], ls="--", lw=0.8)
    top.set(ylim=(-0.4, 1.05), title=title, ylabel="$R_j$")
    bottom.set(xlabel="Adam step", ylabel="bit loss", ylim=(0, 1.0))
    if legend:
        top.legend(loc="lower right", ncol=len(run.targets.orders), handlelength=1.2)
        bottom.legend(loc="lower left", ncol=2, handlelength=1.2)


def staircase_figure(rows):
    """A figure of staircase arms for the page's column: one row per run, titled by its
    name, with one panel (R_j above, the bit losses below) per arm that was run.

    ``rows``: a list of ``(row title, [(run, gamma, panel title), ...])``."""
    size = figsize(ncols=2, nrows=len(rows), row_height=PANEL_HEIGHT)  # the column's width
    fig = plt.figure(figsize=size, layout="constrained")
    subs = np.atleast_1d(fig.subfigures(len(rows), 1))
    for sub, (name, arms) in zip(subs, rows, strict=True):
        if name:
            sub.suptitle(name)
        cells = np.atleast_1d(sub.subfigures(1, len(arms)))
        for k, (cell, (run, gamma, title)) in enumerate(zip(cells, arms, strict=True)):
            top, bottom = cell.subplots(2, 1, sharex=True, height_ratios=(2, 1))
            draw_arm(top, bottom, run, gamma, title, legend=k == 0)
    return fig


def onset_table(runs: dict, seeds) -> pd.DataFrame:
    """One row per (run, gamma, seed): onsets, escapes and the next order's R on each plateau
    (copy 0, the seed itself, of a run with copies)."""
    rows = []
    for name, run in runs.items():
        for gamma in run.gammas:
            s = run.stairs(gamma)
            for i, seed in enumerate(seeds):
                k = i * run.copies
                row = {"run": name, "gamma": gamma, "seed": seed}
                row.update({f"onset {o}": s.onsets[o][k] for o in s.onsets})
                row.update({f"escape {o}": s.escapes[o][k] for o in s.escapes})
                row.update({f"R{o} on plateau {o}": s.plateau_R[o][k] for o in s.plateau_R})
                rows.append(row)
    return pd.DataFrame(rows)


def escape_summary(stairs) -> dict:
    """``{"escape b": "lowest-highest step over the seeds"}`` for each bit."""
    return {
        f"escape {b}": f"{np.min(v):.0f}-{np.max(v):.0f}"
        if np.isfinite(v).all()
        else "never (some seeds)"
        for b, v in stairs.escapes.items()
    }


def explorer(run, gammas) -> dict:
    """The staircase explorer's data, from a run's own arms: the steps (step 0 left out, for
    the log axis), ``curves[name]`` of shape ``(len(gammas), n_steps)`` (the seed medians of
    each ``R_j`` and of each bit's sign-bit loss over ln 2) and ``hlines`` (the run's floor
    of each ``R_j``, the same at every gamma)."""
    orders = run.targets.orders
    arms = [run.arm(gamma)[1] for gamma in gammas]
    curves = {f"R{o}": np.stack([np.median(m[f"R{o}"][1:], 1) for m in arms]) for o in orders}
    for o in orders[1:]:
        bits = [np.median(m[f"bit{o}"][1:], 1) / math.log(2) for m in arms]
        curves[f"bit-{o} loss / ln 2"] = np.stack(bits)
    colors = {f"R{o}": ORDER_COLOR[o] for o in orders}
    colors |= {f"bit-{o} loss / ln 2": COLORS["theory" if o == 1 else "traceback"]
               for o in orders[1:]}  # fmt: skip
    hlines = {f"R{o}": [float(run.floor[o])] * len(gammas) for o in orders}
    x = np.asarray(run.history.steps[1:], dtype=float)
    return dict(x=x, values=list(gammas), curves=curves, colors=colors, hlines=hlines)

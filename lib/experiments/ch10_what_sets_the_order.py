"""Chapter 10, what sets the order: order 0 in time, context order against signal strength,
and what large initialization does.

The staircase task, its model and Adam's rate are Chapter 2's (``config(ch02)`` at the same
scale); this module holds what is new here: the competing-orders runs
(:mod:`lib.theory.order`), the lazy arm, and the time-resolved arm. The length of the plateau
(the gamma law) is Chapter 11's.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ..theory import order
from ..training.engine import train
from ..training.models import build
from ..training.sweep import Sweep
from . import ChapterConfig

CHAPTER = "10_what_sets_the_order"


@dataclass(frozen=True)
class Config(ChapterConfig):
    """Chapter 10 at book scale (the staircase task and model are Chapter 2's).

    slow_lr, slow_steps, slow_every: the time-resolved arm: Chapter 2's two-stair Emb-MLP
        (and its shuffled control) under Adam at slow_lr, ten times below Chapter 2's rate,
        for slow_steps steps, logged at every step up to slow_every. At 1e-3 an Adam step
        moves an entry by a tenth of its init size (V^-1 = 1/40 at gamma = 1), so the rows
        of E outgrow their init over tens of steps instead of in one.
    min_ahead: order 0 comes first "in time" if the rows' R0 is above its floor for at
        least this many logged steps before their R1 leaves its floor.
    n_anchors: anchors per family of the competing-orders task
        (:func:`lib.data.tasks.competing_orders`; 2 n + 2 tokens in all).
    d_model, d_hidden: the competing-orders Emb-MLP's widths (smaller than Chapter 2's:
        a sweep of hundreds of instances must fit the budget).
    gammas: the init rates of the competing-orders runs, from large init (0.25, larger
        than PyTorch's default) to small (1.0).
    log2_ratios: the strength ratios rho = w_high / w_low of the runs, as powers of 2
        (a grid 4x apart, from the low family 16x stronger to the high family 256x
        stronger: far enough past the small-init boundary that it is bracketed).
    seeds: the seeds of every competing-orders run and of the lazy arm.
    gd_lr, gd_steps: plain gradient descent, the optimizer of the small-init expansion:
        the largest round rate at which every init from gamma = 0.5 on is stable (2.0
        diverges), and enough steps for both families to escape at the smallest init and
        the most lopsided ratios.
    gd_lr_large, large_below: below gamma = large_below, gradient descent runs at
        gd_lr_large instead: at gd_lr (or half of it) the largest init escapes within a
        few steps, too coarse to tell which family came first, and at twice gd_lr it
        diverges. Which family escapes first is read
        within an instance, so its rate sets the resolution of the clock, not the answer.
    adam_lr, adam_steps: the Adam arm, at Chapter 2's rate.
    n_logs: logged steps per competing-orders run (log-spaced, with every early step).
    strong_ratio: the corners of the diagram are read with the high family this many times
        stronger than the low one.
    agree_factor: the predicted boundary "agrees" with the measured one where they are
        within this factor, at the small inits (gamma >= small_from).
    small_from: the small-init regime of the prediction: gamma >= small_from.
    lazy_gamma, lazy_lr, lazy_steps: the lazy arm: Chapter 2's two-stair Emb-MLP under
        plain gradient descent from a large init.
    adam_large_gamma: Chapter 2's large init for the Emb-MLP, the Adam comparator of the
        lazy arm.
    """

    slow_lr: float = 1e-3
    slow_steps: int = 1200
    slow_every: int = 100
    min_ahead: int = 10
    n_anchors: int = 8
    d_model: int = 64
    d_hidden: int = 64
    gammas: tuple[float, ...] = (0.25, 0.5, 0.75, 1.0)
    log2_ratios: tuple[int, ...] = (-4, -2, 0, 2, 4, 6, 8)
    seeds: tuple[int, ...] = (0, 1, 2, 3, 4)
    gd_lr: float = 1.0
    gd_steps: int = 5000
    gd_lr_large: float = 0.05
    large_below: float = 0.5
    adam_lr: float = 1e-2
    adam_steps: int = 1000
    n_logs: int = 100
    strong_ratio: float = 16.0
    agree_factor: float = 2.0
    small_from: float = 0.75
    lazy_gamma: float = 0.25
    lazy_lr: float = 0.5
    lazy_steps: int = 1000
    adam_large_gamma: float = 0.3


OVERRIDES = {
    "ci": dict(seeds=(0, 1, 2), n_logs=80),
    "paper": dict(seeds=(0, 1, 2, 3, 4, 5, 6, 7), d_model=128, d_hidden=128),
}

ARMS = ("order 1", "control: order 0")  # the high family's context order


def competing_runs(model, tasks: dict, cfg: Config, optimizer: str, device) -> tuple[Sweep, dict]:
    """One batched run of the competing-orders task over arm x gamma x ratio x seed.

    ``tasks`` maps an arm name to ``(data, layout)``; every arm shares the sequences, so
    instance k trains on its arm's labels with its ratio's sequence weights
    (:func:`lib.theory.order.strength_weights`). Returns the sweep and ``{"low", "high"}``: each
    family's escape step (:func:`lib.theory.order.escapes`) per instance, plus the history.
    """
    arms = list(tasks)
    ratios = [2.0**e for e in cfg.log2_ratios]
    sw = Sweep(arm=arms, gamma=list(cfg.gammas), ratio=ratios, seed=list(cfg.seeds))
    X = tasks[arms[0]][0].X.to(device)
    family = tasks[arms[0]][1].family.to(device)
    Y = torch.stack([tasks[a][0].y for a in sw["arm"]]).to(device)  # (K, N) per-instance labels
    weights = order.strength_weights(family, sw["ratio"]).to(device)
    params = build(model, sw["seed"], gamma=sw["gamma"], device=device)
    lr = [
        cfg.adam_lr
        if optimizer != "gd"
        else cfg.gd_lr_large
        if rate < cfg.large_below
        else cfg.gd_lr
        for rate in sw["gamma"]
    ]
    steps = cfg.gd_steps if optimizer == "gd" else cfg.adam_steps
    log_at = np.union1d(
        np.arange(min(steps, 100) + 1), np.geomspace(1, steps, cfg.n_logs).astype(int)
    )
    history = train(
        model,
        params,
        (X, Y),
        steps,
        optimizer=optimizer,
        lr=lr,
        loss_fn=order.weighted_cross_entropy(weights),
        log_at=log_at,
        callbacks=order.family_loss_callbacks(model, X, Y, family),
        desc=f"competing orders, {optimizer}",
    )
    out = {f: order.escapes(history.steps, history[f"loss_{f}"]) for f in ("low", "high")}
    out["history"] = history
    return sw, out


def grid(sw: Sweep, values, arm: str) -> np.ndarray:
    """``values`` (K,) of one arm as ``(gamma, ratio, seed)``."""
    idx = sw.index(arm=arm)
    shape = (len(sw.axes["gamma"]), len(sw.axes["ratio"]), len(sw.axes["seed"]))
    return np.asarray(values, dtype=float)[idx].reshape(shape)


def boundaries(sw: Sweep, esc: dict, arm: str) -> np.ndarray:
    """ln rho* per (gamma, seed) of one arm (:func:`lib.theory.order.boundary`)."""
    low, high = grid(sw, esc["low"], arm), grid(sw, esc["high"], arm)
    x = np.log(np.asarray(sw.axes["ratio"], dtype=float))
    return np.stack([order.boundary(x, low[i], high[i]) for i in range(low.shape[0])])


def relative_change(params0: dict, names=("E", "W1", "W2")):
    """A callback per weight: ``|W(t) - W(0)| / |W(0)|`` per instance (how lazy a run is)."""
    ref = {n: params0[n].detach().clone() for n in names}

    def make(n):
        return lambda step, p: (
            (p[n] - ref[n]).flatten(1).norm(dim=1) / ref[n].flatten(1).norm(dim=1)
        )

    return {f"rel_{n}": make(n) for n in names}

"""The chapter's runs: Chapter 2's two-stair task and model at Chapter 2's settings, the
competing-orders runs (:mod:`lib.theory.order`) and the lazy arm."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import torch

from ...data import tasks
from ...measure import staircase as st
from ...theory import order
from ...training import layers, models
from ...training.engine import train
from ...training.sweep import Sweep
from .. import staircase_runs
from ..ch02_context_staircase import CONTROL, MLP2

ARMS = ("order 1", "control: order 0")  # the high family's context order


def chapter2_task(stair) -> SimpleNamespace:
    """Chapter 2's two-stair task and Emb-MLP at its settings ``stair``: the model
    (``mlp2``), its anchors and the activation's first Taylor coefficient (``c1``), and
    ``spec``: run name -> what :func:`lib.experiments.staircase_runs.run_bits` needs
    besides seeds, gammas, steps and the optimizer (the run and its shuffled control, each
    read against its own label-permutation null)."""
    two, lay2 = tasks.gated_parity_bits(n_keys=stair.n_keys)
    shuffled, _ = tasks.gated_parity_bits(n_keys=stair.n_keys, shuffle_seed=stair.two.shuffle_seed)
    tg2, tg_shuf = st.parity_targets(two, lay2), st.parity_targets(shuffled, lay2)
    nulls = {  # task -> its label-permutation null; each run's floor is read off its own run
        name: st.label_null(data, lay2, stair.readings.null_perm)
        for name, data in (("two", two), ("shuffled", shuffled))
    }
    mlp2 = models.EmbMLP(two.vocab_size, stair.d_model, stair.d_hidden, two.n_labels, "silu")
    anchors, c1 = lay2.anchors, layers.ACTIVATION_TAYLOR["silu"][0]
    spec = {
        MLP2: dict(model=mlp2, data=two, layout=lay2, targets=tg2, null=nulls["two"]),
        CONTROL: dict(
            model=mlp2, data=shuffled, layout=lay2, targets=tg_shuf, null=nulls["shuffled"]
        ),
    }
    return SimpleNamespace(mlp2=mlp2, anchors=anchors, c1=c1, spec=spec)


def competing_runs(model, tasks: dict, cfg, optimizer: str, device) -> tuple[Sweep, dict]:
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
    params = models.build(model, sw["seed"], gamma=sw["gamma"], device=device)
    lr = [
        cfg.adam_lr
        if optimizer != "gd"
        else cfg.gd.lr_large
        if rate < cfg.gd.large_below
        else cfg.gd.lr
        for rate in sw["gamma"]
    ]
    steps = cfg.gd.steps if optimizer == "gd" else cfg.adam_steps
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


def lazy_runs(lazy_arms: dict, task2, seeds, cfg, stair, device) -> dict:
    """Arm name -> the two-stair Emb-MLP's :class:`lib.measure.staircase.BitRun` under that
    arm's ``(optimizer, lr, gamma)``, logging how far each weight moved
    (:func:`relative_change`)."""
    lazy = {}
    for name, (opt, lr, rate) in lazy_arms.items():
        moved = relative_change(models.build(task2.mlp2, list(seeds), gamma=rate, device=device))
        lazy[name] = staircase_runs.run_bits(
            seeds=seeds,
            gammas=[rate],
            steps=cfg.lazy.steps,
            optimizer=opt,
            lr=lr,
            log_at=stair.n_logs,
            device=device,
            callbacks=moved,
            desc=name,
            **task2.spec[MLP2],
        )
    return lazy

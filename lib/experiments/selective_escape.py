"""Chapter 12's runs as event times: when the bit escapes its plateau, and when attention
moves *because of the rule*.

Two batched runs, one instance per (arm, seed), every arm of a seed from that seed's init:

* the **fast run** (``cfg.arms.fast_steps``): learned query-key weights on the task; the
  same on the *order-blind* task, where both gate orders of a sequence carry one label
  (the bit is a function of the anchor alone, so attention has nothing to find); the same
  on ``cfg.arms.n_sham`` *sham* tasks, each an order-blind task with the bit flipped on a
  random half of the anchors (the null of the paired reading); and query-key weights
  frozen at a standard-scale draw, ``gamma_qk`` in ``cfg.arms.frozen_gammas``, on the
  task; and query-key weights zero and frozen (exactly uniform attention), on the task;
* the **slow run** (``cfg.arms.slow_steps``): query-key weights frozen at the small init, on
  the task, to a horizon long enough for it to escape.

An arm is a learning rate and an init scale of the query-key group, and a target per
instance (:func:`lib.training.engine.soft_cross_entropy` takes ``(K, M, C)`` targets), so
each run is one model.
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import numpy as np
import torch

from ..data import tasks
from ..measure import onsets, probes, survival
from ..measure.nulls import floor_of
from ..training import engine, models
from . import ch12_attention_that_learns as ex

LEARNED, BLIND, UNIFORM = "learned", "blind", "uniform"


class Arm(NamedTuple):
    """One arm: its name, the query-key init rate (None: zero, exactly uniform attention),
    whether the query-key weights learn, and the labels it trains on (``task``, ``blind``
    or ``sham<j>``)."""

    name: str
    gamma_qk: float | None
    learns: bool
    labels: str


def fast_arms(cfg) -> list[Arm]:
    shams = [Arm(f"sham{j}", cfg.gamma, True, f"sham{j}") for j in range(cfg.arms.n_sham)]
    frozen = [Arm(f"frozen {gq:g}", gq, False, "task") for gq in cfg.arms.frozen_gammas]
    matched = Arm(f"learned {cfg.arms.matched_gamma:g}", cfg.arms.matched_gamma, True, "task")
    return [Arm(LEARNED, cfg.gamma, True, "task"), Arm(BLIND, cfg.gamma, True, "blind"),
            *shams, *frozen, matched, Arm(UNIFORM, None, False, "task")]  # fmt: skip


def slow_arms(cfg) -> list[Arm]:
    return [Arm("frozen", cfg.gamma, False, "task")]


def anchor_bit_labels(data, layout, sign: torch.Tensor) -> torch.Tensor:
    """The task's labels with the bit replaced by ``sign[a - 1]`` (+1 or -1 per anchor),
    whatever the gate order: an order-blind relabelling."""
    a = data.X[:, 3]
    y0 = data.y % layout.block  # a - 1 + u: the label's order-0 part
    return y0 + layout.block * (sign[a - 1] == -1)


def targets_of(cfg, data, layout, labels: str) -> torch.Tensor:
    """The label distributions (M, C) of the distinct sequences under ``labels``: the task,
    the order-blind task (the bit of the g+-first order for both orders: anchor parity), or
    sham ``j`` (that, with the bit flipped on a seeded random half of the anchors)."""
    if labels == "task":
        return tasks.label_distributions(data)[1]
    parity = torch.where(torch.arange(1, cfg.task.n_anchors + 1) % 2 == 1, 1, -1)
    if labels == BLIND:
        sign = parity
    elif labels.startswith("sham"):
        gen = torch.Generator().manual_seed(cfg.arms.sham_seed + int(labels[4:]))
        flip = torch.ones(cfg.task.n_anchors, dtype=torch.long)
        flip[torch.randperm(cfg.task.n_anchors, generator=gen)[: cfg.task.n_anchors // 2]] = -1
        sign = parity * flip
    else:
        raise ValueError(f"unknown labels {labels!r}: use task, blind or sham<j>")
    return tasks.label_distributions(
        dataclasses.replace(data, y=anchor_bit_labels(data, layout, sign))
    )[1]


class Run(NamedTuple):
    """A run's history, its arms and seeds (instances arm-major), and its order-1 floor."""

    history: engine.History
    arms: list[Arm]
    seeds: tuple[int, ...]
    floor: dict

    def of(self, name: str, metric: str) -> np.ndarray:
        """``metric`` of arm ``name``, (n_logs, seeds)."""
        i = [a.name for a in self.arms].index(name)
        S = len(self.seeds)
        return self.history[metric][:, i * S : (i + 1) * S]

    def params_of(self, name: str, params: dict) -> dict:
        i, S = [a.name for a in self.arms].index(name), len(self.seeds)
        return {k: v[i * S : (i + 1) * S] for k, v in params.items()}


def train_arms(cfg, arms, steps: int, device="cpu", null=None, desc="arms"):
    """One batched run of ``arms`` x ``cfg.seeds``, arm-major, logging
    :func:`lib.experiments.ch12_attention_that_learns.arm_callbacks` (the staircase readings
    on the first arm). An arm with ``gamma_qk`` None has its query-key weights zero: exactly
    uniform attention. Returns ``(Run, params)``."""
    data, layout, targets = ex.task(cfg)
    X, P_task = tasks.label_distributions(data)
    mdl = ex.model(cfg, data)
    S = len(cfg.seeds)
    rep = lambda v: torch.tensor(np.repeat(v, S), dtype=torch.float32, device=device)
    gq = [cfg.gamma if a.gamma_qk is None else a.gamma_qk for a in arms]
    params = models.build(mdl, list(cfg.seeds) * len(arms), gamma=cfg.gamma, device=device,
                          group_gamma={"qk": np.repeat(gq, S).tolist()})  # fmt: skip
    with torch.no_grad():
        for i, a in enumerate(arms):
            if a.gamma_qk is None:
                for name in ("Q0", "K0"):
                    params[name][i * S : (i + 1) * S] = 0.0
    P = {lab: targets_of(cfg, data, layout, lab) for lab in {a.labels for a in arms}}
    X = X.to(device)
    fit = (X, torch.stack([P[a.labels] for a in arms for _ in cfg.seeds]).to(device))
    callbacks = ex.arm_callbacks(
        mdl, X, P_task.to(device), layout, targets, params["E"][:S], null=null
    )
    h = engine.train(
        mdl, params, fit, steps, optimizer="adam", lr=cfg.lr,
        group_lr={"qk": cfg.lr * rep([float(a.learns) for a in arms])},
        log_at=engine.log_grid(steps, cfg.n_logs), callbacks=callbacks,
        loss_fn=engine.soft_cross_entropy, desc=desc,
    )  # fmt: skip
    floor = (
        {o: floor_of(h[f"null{o}"], cfg.readings.null_q) for o in (0, 1)}
        if null is not None
        else {}
    )
    return Run(h, list(arms), tuple(cfg.seeds), floor), params


def escapes(run: Run, name: str, frac: float) -> np.ndarray:
    """Per seed, the first logged step at which the arm's sign-bit loss falls below
    ``frac * ln 2`` (``inf``: censored at the run's horizon)."""
    return onsets.escape_steps(run.history.steps, run.of(name, "bit1"), frac)


def trapped(run: Run, name: str, frac: float) -> np.ndarray:
    """Per seed, whether the arm's bit stopped partway by the horizon
    (:func:`lib.experiments.ch12_attention_that_learns.trapped_flag`)."""
    return ex.trapped_flag(run.history.steps, run.of(name, "bit1"), frac)


def paired_event(run: Run, level: float):
    """The attention event specific to the rule, per seed.

    The paired reading is the learned arm's gate contrast minus the order-blind arm's,
    from the same init (0 at step 0). Its null: each sham arm's contrast minus the
    order-blind arm's. The floor is the ``1 - level`` quantile, over seeds and shams, of
    each null curve's largest ``|value|`` over all logged steps after step 0 (the max
    statistic over everything the reading scans). The event is the first logged step from
    step 1 on at which the paired reading exceeds the floor (``inf``: never).

    Returns ``(event (seeds,), floor, paired (n_logs, seeds), null (n_logs, shams, seeds))``.
    """
    c = lambda name: run.of(name, "contrast")
    paired = c(LEARNED) - c(BLIND)
    shams = [a.name for a in run.arms if a.labels.startswith("sham")]
    if not shams:
        raise ValueError("the paired reading needs sham arms for its null (cfg.arms.n_sham >= 1)")
    null = np.stack([c(s) - c(BLIND) for s in shams], 1)
    later = run.history.steps >= 1
    peaks = np.abs(null[later]).max(0).ravel()
    floor = float(np.quantile(peaks, 1 - level, method="higher"))
    event = ex.first_step(run.history.steps[later], paired[later], floor)
    return event, floor, paired, null


def held_out_fires(run: Run, shams: list, level: float) -> float:
    """The paired reading's control with nothing to find: each sham in turn is read as if
    it were the task, against the floor of the other shams; the share of (sham, seed) pairs
    whose reading clears that floor."""
    c = lambda name: run.of(name, "contrast")
    later = run.history.steps >= 1
    curves = {s: (c(s) - c(BLIND))[later] for s in shams}
    fires = []
    for s in shams:
        peaks = np.concatenate([np.abs(curves[o]).max(0) for o in shams if o != s])
        floor = float(np.quantile(peaks, 1 - level, method="higher"))
        fires.append(curves[s].max(0) > floor)
    return float(np.mean(fires))


def order1_onsets(run: Run, frac: float = 0.5) -> np.ndarray:
    """Per seed of the first arm, the order-1 stair's onset (Chapter 2's rule against the
    run's permutation floor), searched over every logged step from step 1."""
    later = run.history.steps >= 1
    return onsets.stair_onsets(run.history.steps[later], run.of(LEARNED, "R1")[later],
                               run.floor[1], frac)  # fmt: skip


def parity_probe(E_anchors, parity, folds: int, ridge: float, n_perm: int, seed: int = 0):
    """A held-out linear probe of the anchors' parity in their embeddings, per instance:
    :func:`lib.measure.probes.heldout_probe` over ``folds`` folds balanced by parity, with
    a strong ``ridge`` (times the mean eigenvalue; with fewer anchors than dimensions a weak
    ridge interpolates and its held-out score is mostly noise).

    ``E_anchors`` is ``(K, n_anchors, d)``, ``parity`` ``(n_anchors,)`` of +-1. Returns
    ``(accuracy (K,), null (n_perm, K))``: the null is the same probe of ``n_perm``
    permutations of the parity (one permutation for every instance at once).
    """
    y = np.asarray(parity, dtype=float)
    fold_of = np.empty(len(y), dtype=int)
    for sign in (-1, 1):
        idx = np.flatnonzero(y == sign)
        fold_of[idx] = np.arange(len(idx)) % folds
    Z = torch.as_tensor(np.asarray(E_anchors, dtype=float))
    score = lambda labels: probes.heldout_probe(Z, labels, fold_of, ridge).numpy()
    rng = np.random.default_rng(seed)
    return score(y), np.stack([score(y[rng.permutation(len(y))]) for _ in range(n_perm)])


def arm_medians(times: dict, horizons: dict, cfg) -> dict:
    """Per arm, the Kaplan-Meier median escape with its seed-bootstrap interval."""
    return {
        name: survival.median_interval(
            t, horizons[name], cfg.readings.n_boot, seed=cfg.readings.boot_seed
        )
        for name, t in times.items()
    }


def read_escape(cfg, fast: Run, slow: Run) -> dict:
    """The arms on the task as survival data.

    Returns ``times`` and ``horizons`` per arm (escape steps, ``inf``: censored at the
    horizon), ``median`` per arm (:class:`lib.measure.survival.Estimate`), ``speedup`` per
    frozen arm (its median over the learned arm's, paired over seeds), ``matched`` (the
    frozen arm over the learned arm at the same query-key init,
    ``cfg.arms.matched_gamma``), ``strict`` (the small-init speed-up with the escape read at
    ``cfg.readings.trap_frac`` instead of ``cfg.readings.escape_frac``), ``trapped`` per arm
    (per seed, :func:`trapped`) and ``escaped`` per arm (per seed, finite time)."""
    on_task = [a.name for a in fast.arms if a.labels == "task"]
    times = {n: escapes(fast, n, cfg.readings.escape_frac) for n in on_task}
    horizons = dict.fromkeys(on_task, float(cfg.arms.fast_steps))
    for a in slow.arms:
        times[a.name] = escapes(slow, a.name, cfg.readings.escape_frac)
        horizons[a.name] = float(cfg.arms.slow_steps)
    frozen = [n for n in times if n.startswith("frozen")]
    boot = dict(n_boot=cfg.readings.n_boot, seed=cfg.readings.boot_seed)
    runs = {**{n: fast for n in on_task}, **{a.name: slow for a in slow.arms}}
    ratio = lambda a, b, t=times: survival.ratio_interval(
        t[a], t[b], (horizons[a], horizons[b]), **boot
    )
    matched = f"learned {cfg.arms.matched_gamma:g}"
    strict = {n: escapes(runs[n], n, cfg.readings.trap_frac) for n in (LEARNED, "frozen")}
    return dict(
        times=times,
        horizons=horizons,
        median={n: survival.median_interval(t, horizons[n], **boot) for n, t in times.items()},
        speedup={n: ratio(n, LEARNED) for n in frozen},
        matched=ratio(f"frozen {cfg.arms.matched_gamma:g}", matched),
        strict=ratio("frozen", LEARNED, strict),
        trapped={n: trapped(runs[n], n, cfg.readings.trap_frac) for n in times},
        escaped={n: np.isfinite(t) for n, t in times.items()},
    )


def read_order(cfg, fast: Run) -> dict:
    """Which comes first, per seed of the learned arm: the rule-specific attention event
    (:func:`paired_event`), the order-1 onset (:func:`order1_onsets`), the escape; and the
    first step at which the gate contrast reaches ``cfg.readings.delta`` on the task and on
    the order-blind control (how soon attention leaves uniform with nothing to find). Each
    pair compared by :func:`lib.measure.survival.sign_test` over seeds."""
    event, floor, paired, null = paired_event(fast, 1 - cfg.readings.pair_q)
    later = fast.history.steps >= 1
    leave = lambda n: ex.first_step(
        fast.history.steps[later], fast.of(n, "contrast")[later], cfg.readings.delta
    )
    out = dict(
        event=event, floor=floor, paired=paired, null=null, onset1=order1_onsets(fast),
        escape=escapes(fast, LEARNED, cfg.readings.escape_frac), leave=leave(LEARNED),
        leave_blind=leave(BLIND),
    )  # fmt: skip
    shams = [a.name for a in fast.arms if a.labels.startswith("sham")]
    out["sham_fires"] = (
        held_out_fires(fast, shams, 1 - cfg.readings.pair_q) if len(shams) > 1 else np.nan
    )
    out["tests"] = {
        "event-onset1": survival.sign_test(out["event"], out["onset1"]),
        "event-escape": survival.sign_test(out["event"], out["escape"]),
        "onset1-escape": survival.sign_test(out["onset1"], out["escape"]),
        "leave-blind": survival.sign_test(out["leave"], out["leave_blind"]),
    }
    return out


def read_probe(cfg, layout, groups: dict) -> dict:
    """The held-out parity probe (:func:`parity_probe`) on the anchors' rows of each group
    of embeddings, ``{name: E (K, vocab, d)}`` (an empty group is left out), read per group by the median accuracy over
    its instances. The floor is family-wise: the 0.99 quantile, over parity permutations,
    of the largest group median of the permuted probe. Returns ``accuracy`` per group (per
    instance), ``median`` per group and the ``floor``."""
    anchors = list(layout.anchors)
    parity = np.where(np.asarray(anchors) % 2 == 1, 1.0, -1.0)
    rows = {n: np.asarray(E.detach().cpu(), dtype=float)[:, anchors] for n, E in groups.items()}
    rows = {n: r for n, r in rows.items() if len(r)}
    acc, null = parity_probe(
        np.concatenate(list(rows.values())),
        parity,
        cfg.probe.n_folds,
        cfg.probe.ridge_factor,
        cfg.probe.n_perm,
        seed=cfg.readings.boot_seed,
    )
    split = np.cumsum([len(r) for r in rows.values()])[:-1]
    per = dict(zip(rows, np.split(acc, split), strict=True))
    null_medians = np.stack([np.median(part, 1) for part in np.split(null, split, axis=1)], 1)
    return dict(
        accuracy=per,
        median={n: float(np.median(a)) for n, a in per.items()},
        floor=float(np.quantile(null_medians.max(1), 0.99, method="higher")),
    )


def grid_spacing(run: Run, step: float) -> float:
    """The run's largest relative gap between consecutive logged steps from half of
    ``step`` to twice it: how finely an event near ``step`` is placed (NaN where ``step`` is
    not finite)."""
    if not np.isfinite(step):
        return np.nan
    steps = np.asarray(run.history.steps, dtype=float)
    near = steps[(steps >= step / 2) & (steps <= 2 * step)]
    return float(np.max(np.diff(near) / near[1:])) if len(near) > 1 else np.nan

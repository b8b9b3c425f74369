"""Chapter 9's runs: Chapter 2's task and models, the (r, seed) sweeps and their negative
controls. Every (model, QK parameterization) pair is one batched run."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ...env import ConfigError
from ...measure import attention, nulls, staircase_callbacks
from ...measure import staircase as st
from ...measure.staircase import StairTask
from ...training import engine, models
from ...training.sweep import Sweep
from .. import ch02_context_staircase as ch02
from .. import config as chapter_config
from .summary import stair_summary

# The two models: the learned-OV model (dense sweep) and Chapter 2's staircase model.
ARMS = ("ov", "stair")
ARM_NAME = {"ov": "learned-OV model", "stair": "staircase model"}


def staircase_config(cfg):
    """Chapter 2's config at this chapter's scale: its staircase model (no OV, its anchors)
    must be trained as there, so its learning rate and init rate must be this chapter's."""
    cfg2 = chapter_config(ch02, cfg.scale)
    for name in ("lr", "gamma"):
        if getattr(cfg2, name) != getattr(cfg, name):
            raise ConfigError(
                f"chapter {cfg.chapter()}: {name}={getattr(cfg, name)} differs from Chapter 2's "
                f"{getattr(cfg2, name)}; set them equal so the staircase model trains as there"
            )
    if cfg2.r not in cfg.stair.r_grid:
        raise ConfigError(
            f"chapter {cfg.chapter()}: stair.r_grid {cfg.stair.r_grid} lacks Chapter 2's r={cfg2.r}"
        )
    return cfg2


# ---------------------------------------------------------------------------
# The models, the sweep and its callbacks
# ---------------------------------------------------------------------------


def attention_model(
    data, d_model: int, d_hidden: int, qk: str, ov: str = "learned"
) -> models.Transformer:
    """Chapter 2's attention model: one layer, one head, a ReLU MLP, readout at the gate;
    ``ov="identity"`` is Chapter 2's staircase model, ``"learned"`` the learned-OV one."""
    return models.Transformer(
        data.vocab_size,
        d_model,
        context_len=data.X.shape[1],
        n_layers=1,
        n_out=data.n_labels,
        d_mlp=d_hidden,
        qk=qk,
        ov=ov,
    )


def rate_sweep(r_grid, seeds) -> Sweep:
    """The (r, seed) grid of one run."""
    return Sweep(r=list(r_grid), seed=list(seeds))


def train_rates(
    cfg,
    model,
    task: StairTask,
    sw: Sweep,
    device,
    steps: int,
    n_logs: int,
    desc="train",
    also=None,
):
    """One batched full-batch Adam run of ``model`` over the (r, seed) grid ``sw``.

    Every weight trains at ``cfg.lr`` except the QK group, at ``r * cfg.lr``; the position
    embedding is zero and frozen (Chapter 2's model). Logs the staircase callbacks of
    :func:`lib.measure.staircase_callbacks.bit_callbacks` with the task's permutation null and
    :func:`lib.measure.attention.readout_attention_callbacks`, and for each ``prefix: task`` of
    ``also`` the :func:`lib.measure.staircase_callbacks.signature_callbacks` of that task's
    targets.
    """
    params = models.build(model, sw["seed"], gamma=cfg.gamma, device=device)
    with torch.no_grad():
        params["P"].zero_()
    X, y = task.data.X.to(device), task.data.y.to(device)
    callbacks = staircase_callbacks.bit_callbacks(
        model, task.data, task.layout, task.targets, params["E"], null=task.null
    )
    callbacks.update(attention.readout_attention_callbacks(model, X, params))
    for prefix, extra in (also or {}).items():
        callbacks.update(
            staircase_callbacks.signature_callbacks(extra.targets, extra.null, params["E"], prefix)
        )
    return engine.train(
        model,
        params,
        (X, y),
        steps,
        optimizer="adam",
        lr=cfg.lr,
        group_lr={"qk": cfg.lr * sw.tensor("r", device=device)},
        log_at=engine.log_grid(steps, n_logs, extra=[cfg.readings.t_early]),
        callbacks=callbacks,
        frozen=("P",),
        desc=desc,
    )


@dataclass
class Controls:
    """The negative controls (bit-1 signs shuffled), by model: per-instance ``summary``, the
    run's history ``hist``, its ``sweep``, its permutation ``floor`` against the rule and
    ``own_floor``, the order-1 floor against the shuffled labels' own signature."""

    summary: dict
    hist: dict
    sweep: dict
    floor: dict
    own_floor: dict


def run_controls(cfg, task: dict, model_kw: dict, run_kw: dict, device) -> Controls:
    """Both models' controls, factorized QK: the bit-1 signs shuffled across sequences, each
    run read against the rule's signatures (and, ``own_``, against the shuffled labels')."""
    ctl, ctl_hist, ctl_sw, own_floor, ctl_floor = {}, {}, {}, {}, {}
    for arm, grid in (("ov", cfg.control.r_grid), ("stair", cfg.control.stair_r_grid)):
        blind, own = st.gate_blind(task[arm], cfg.control.seed, cfg.readings.null_perm)
        ctl_sw[arm] = rate_sweep(grid, cfg.control.seeds)
        model = attention_model(blind.data, qk="factorized", **model_kw[arm])
        ctl_hist[arm] = train_rates(
            cfg,
            model,
            blind,
            ctl_sw[arm],
            device,
            cfg.control.steps,
            run_kw[arm]["n_logs"],
            f"control {arm}",
            also={"own_": own},
        )
        # its own permutation floor
        ctl_floor[arm] = nulls.run_floors(ctl_hist[arm], cfg.readings.null_q)
        own_floor[arm] = nulls.run_floors(ctl_hist[arm], cfg.readings.null_q, prefix="own_")[1]
        ctl[arm] = stair_summary(ctl_hist[arm], ctl_sw[arm], ctl_floor[arm], cfg)
    return Controls(ctl, ctl_hist, ctl_sw, ctl_floor, own_floor)


@dataclass
class Runs:
    """The real runs, by ``(model, qk)``: history ``hist``, per-instance ``summary`` and
    permutation ``floor``; and by model, its ``sweep``."""

    hist: dict
    summary: dict
    sweep: dict
    floor: dict


def run_rates(cfg, task: dict, model_kw: dict, run_kw: dict, device) -> Runs:
    """Every (model, QK parameterization) pair as one batched run over its rates and seeds,
    read against the run's own permutation floor."""
    hist, summary, sweep, floor = {}, {}, {}, {}
    for arm in ARMS:
        sweep[arm] = rate_sweep(run_kw[arm]["grid"], run_kw[arm]["seeds"])
        for qk in cfg.qk_kinds:
            model = attention_model(task[arm].data, qk=qk, **model_kw[arm])
            steps, n_logs = run_kw[arm]["steps"], run_kw[arm]["n_logs"]
            h = train_rates(cfg, model, task[arm], sweep[arm], device, steps, n_logs, f"{arm} {qk}")
            hist[arm, qk] = h
            floor[arm, qk] = nulls.run_floors(h, cfg.readings.null_q)
            summary[arm, qk] = stair_summary(h, sweep[arm], floor[arm, qk], cfg)
    return Runs(hist, summary, sweep, floor)

"""Chapter 11's predictions against the measured escapes: the sweep's escapes on its logged
steps, the law's diagnostic with each init's own seed, plain gradient descent at Adam's rate,
the linear-response arms, and the learning-rate arm; their glued numbers and tables."""

from __future__ import annotations

import math

import numpy as np
import torch

from ...book.page import count, listing, share, table
from ...measure import onsets
from ...theory import adam_plateau as ap
from .. import staircase_runs
from .probe import Arms, Probe, run_probe
from .readings import med


def pct(e):
    """A relative error as a signed percentage, or None ("—")."""
    return f"{e:+.0%}" if np.isfinite(e) else None


def listed(law_gammas, ok) -> str:
    """The inits where ``ok`` holds, in words ("γ = 0.75 and 1")."""
    return listing(
        [x for x, o in zip(law_gammas, ok, strict=True) if o],
        noun="γ =",
        plural_form="γ =",
        none="no γ of the sweep",
    )


def of(ok) -> str:
    """How many of ``ok`` hold, in words."""
    return share(np.sum(ok), np.size(ok))


def escapes_on_grid(probe: Probe, law_gammas, seeds, grid) -> np.ndarray:
    """``(n_gammas, n_seeds)``: each seed's bit-1 escape, read on the sweep's logged steps
    ``grid`` as Chapter 2 reads it."""
    tt = probe.history.steps
    return np.stack(
        [
            ap.on_grid(onsets.escape_steps(tt, probe.arm(x, "bit1", seeds=seeds)), grid)
            for x in law_gammas
        ]
    )


def initial_contrast(arms: Arms) -> list[float]:
    """The median |D| at step 0, per init."""
    return [med(np.abs(arms.arm(x, "D")[0])) for x in arms.gammas]


def measured_seed_law(arms: Arms, small_init, t_p: float, rate: float, d_star: float):
    """The law with each small init's own D(t_p) in place of the seed law (NaN at the larger
    inits)."""
    law_gammas = arms.gammas
    D_p = np.array([med(arms.arm(x, "D")[int(t_p)]) for x in law_gammas])
    T_seed = t_p + np.log(d_star / np.abs(D_p)) / rate
    return np.where(np.isin(law_gammas, small_init), T_seed, np.nan)


def prediction_table(law_gammas, meas, preds: dict, errs: dict, grid):
    """Per init: the measured median escape, the law's prediction on the grid, and the
    relative error of each prediction."""
    on_grid = {k: ap.on_grid(T, grid) for k, T in preds.items()}
    return table(
        [
            {"γ": x, "measured (median)": meas[i], "law": on_grid["law"][i]}
            | {f"error: {k.replace('gamma', 'γ')}": pct(e[i]) for k, e in errs.items()}
            for i, x in enumerate(law_gammas)
        ]
    )


def gd_escapes(model, data, layout, targets, null, gammas, stair, device) -> np.ndarray:
    """Every seed's bit-1 escape under plain gradient descent at Chapter 2's Adam rate
    (``stair``: Chapter 2's config), at each of ``gammas`` (NaN: no escape in the run)."""
    gd_run = staircase_runs.run_bits(
        model,
        data,
        layout,
        targets,
        stair.seeds,
        gammas,
        stair.two.steps,
        null=null,
        optimizer="gd",
        lr=stair.lr,
        log_at=stair.n_logs,
        device=device,
        desc="GD",
    )
    return np.concatenate([gd_run.stairs(x).escapes[1] for x in gammas])


def prediction_numbers(
    law_gammas,
    small_init,
    errs: dict,
    law_ok,
    gd_esc,
    sw_esc,
    gamma: float,
    tol: float,
    gd_steps: int,
) -> dict:
    """The glued numbers of the prediction, its controls and the gradient-descent arm."""
    miss_free = np.abs(errs["no gamma"]) > tol
    seed_ok = np.abs(errs["measured seed"][np.isin(law_gammas, small_init)]) <= tol
    esc_one = sw_esc[law_gammas.index(gamma)]
    return dict(
        pass_words=listed(law_gammas, law_ok),
        miss_words=listed(law_gammas, ~law_ok),
        err_free_max=float(np.max(np.abs(errs["no gamma"]))),
        err_flow_min=float(np.min(errs["gradient flow"])),
        gd_n=count(np.size(gd_esc), "instance"),
        gd_steps=gd_steps,
        free_miss=of(miss_free),
        seed_pass=of(seed_ok),
        spread=float(esc_one.max() / esc_one.min()),
    )


def linear_arms(
    model,
    data,
    layout,
    optimizer: str,
    pairs: dict,
    eps_lin,
    n_law: int,
    steps: int,
    lr: float,
    tol: float,
    device,
):
    """Per instance: where the two eps part (ap.parting; nan: never), their largest gap,
    and the relative gap between the two arms' |W1| at every step."""
    run = run_probe(
        model,
        data,
        layout,
        **pairs,
        steps=steps,
        anti_scale=np.repeat(eps_lin, n_law),
        dtype=torch.float64,
        optimizer=optimizer,
        lr=lr,
        device=device,
        desc=f"linear response, {optimizer}",
    )
    D, W1 = run.history["D"] / np.repeat(eps_lin, n_law) ** 2, run.history["W1"]
    part, gap = ap.parting(run.history.steps, D[:, :n_law], D[:, n_law:], tol)
    return part, gap, np.abs(W1[:, n_law:] / W1[:, :n_law] - 1)


def linear_readings(
    part_adam, w1_adam, part_gd, gap_gd, w1_gd, n_gammas: int, n_seeds: int
) -> dict:
    """The linear-response arms (:func:`linear_arms`) under Adam and under plain GD, and where
    the Adam arms part: the relative |W1| gap there, per instance (``w1_at``) and its median
    (``w1_part``), and the median parting step per init (``part_med``)."""
    n_law = n_gammas * n_seeds
    at = np.nan_to_num(part_adam, nan=0).astype(int)  # the |W1| gap where the Adam arms part
    w1_at = np.where(np.isfinite(part_adam), w1_adam[at, np.arange(n_law)], np.nan)
    w1_part = float(np.nanmedian(w1_at))
    part_med = np.nanmedian(np.reshape(part_adam, (n_gammas, n_seeds)), 1)
    return dict(
        part_adam=part_adam,
        w1_adam=w1_adam,
        part_gd=part_gd,
        gap_gd=gap_gd,
        w1_gd=w1_gd,
        w1_at=w1_at,
        w1_part=w1_part,
        part_med=part_med,
    )


def linear_numbers(lin: dict, linear_eps: float, linear_steps: int) -> dict:
    """The glued numbers of the linear-response arms (:func:`linear_readings`)."""
    part_med, gap_gd, w1_gd = lin["part_med"], lin["gap_gd"], lin["w1_gd"]
    return dict(
        lin_eps=linear_eps,
        part_lo=np.min(part_med),
        part_hi=np.max(part_med),
        gap_gd=float(np.max(gap_gd)),
        lin_steps=linear_steps,
        w1_part=lin["w1_part"],
        eps2=linear_eps**2,
        w1_gd=float(np.max(w1_gd)),
    )


def linear_table(law_gammas, lin: dict):
    """Per init: the median step at which the Adam arms part, and the largest gap of the
    gradient-descent arms."""
    part_med = lin["part_med"]
    gap_max = np.reshape(lin["gap_gd"], (len(law_gammas), -1)).max(1)
    return table(
        [
            {
                "γ": x,
                "Adam: the two arms part at step (median)": part_med[i],
                "GD: largest gap": gap_max[i],
            }
            for i, x in enumerate(law_gammas)
        ]
    )


def premise(n: int, lr: float) -> float:
    """The gamma above which an init of fan-in ``n``, ``n^-gamma``, lies below one step ``lr``."""
    return math.log(1 / lr) / math.log(n)


def lr_numbers(
    stair,
    vocab_size: int,
    lr_factor: float,
    tp_f: float,
    rate_f: float,
    law_gammas,
    law_ok_f,
    shrinks,
    errs_f: dict,
) -> dict:
    """The glued numbers of the learning-rate arm (``stair``: Chapter 2's config)."""
    lr_fast = stair.lr * lr_factor
    return dict(
        w2_small=premise(stair.d_hidden, stair.lr),
        e_small=premise(vocab_size, stair.lr),
        w2_small_f=premise(stair.d_hidden, lr_fast),
        e_small_f=premise(vocab_size, lr_fast),
        lr_factor=lr_factor,
        tp_f=tp_f,
        rate_f=rate_f,
        pass_f=listed(law_gammas, law_ok_f),
        shrinks=of(shrinks),
        worst_f=float(np.max(np.abs(errs_f["law"]))),
    )


def lr_table(law_gammas, lr_factor: float, meas, errs: dict, meas_f, errs_f: dict):
    """Per init: the measured median escape and the law's error at 1x and at ``lr_factor``
    times the learning rate, and the error without gamma there."""
    fx = f"{lr_factor:g}x"
    return table(
        [
            {
                "γ": x,
                "measured, 1x": meas[i],
                "error of the law, 1x": pct(errs["law"][i]),
                f"measured, {fx}": meas_f[i],
                f"error of the law, {fx}": pct(errs_f["law"][i]),
                f"error without γ, {fx}": pct(errs_f["no gamma"][i]),
            }
            for i, x in enumerate(law_gammas)
        ]
    )

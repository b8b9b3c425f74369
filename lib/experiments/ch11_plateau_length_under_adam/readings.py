"""What Chapter 11 reads from its probe: the sigma symmetry of the task and the loss, the
pieces of the two-phase law (phase 1's line and knee, the bilinear form, M, the seed's
exponent, phase 2's rate, Adam's clock) and the speed-up near escape; their glued numbers
and their table."""

from __future__ import annotations

import numpy as np
import torch

from ...book.page import share, table
from ...measure import onsets
from ...theory import adam_plateau as ap
from ...training import engine, models
from .probe import Arms


def med(v) -> float:
    """The median over seeds, NaN ignored."""
    return float(np.nanmedian(v))


def lo_hi(d: dict) -> tuple[float, float]:
    """The smallest and the largest median of the values of ``d``."""
    return (min(med(v) for v in d.values()), max(med(v) for v in d.values()))


def sigma_symmetry(model, data, layout, seeds, gamma: float, device) -> dict:
    """Whether sigma maps the data set to itself (``data_invariant``), and at the symmetric
    part of the init at ``gamma``: the antisymmetric share of the gradient (``anti_share``)
    and the largest contrast |D| (``D_sym``)."""
    two, lay2, mlp2 = data, layout, model
    # sigma = (g+ <-> g-) o (label block 0 <-> block 1): does it map the data set to itself?
    n_lab2, flip2 = two.n_labels, ap.label_flip(lay2, two.n_labels)
    swap2 = ap.gate_swap(lay2, two.vocab_size)
    rows = {tuple(r) for r in torch.cat([two.X, two.y[:, None]], 1).tolist()}
    rows_sigma = {tuple(r) for r in torch.cat([swap2[two.X], flip2[two.y][:, None]], 1).tolist()}
    data_invariant = rows == rows_sigma
    # At a sigma-symmetric point (the symmetric part of the chapter's small init) the gradient
    # has no antisymmetric part, and the model cannot tell the label blocks apart.
    p_sym, p_anti = ap.split_sigma(
        models.build(mlp2, list(seeds), gamma=gamma, device=device), lay2, n_lab2
    )
    p_sym = {k: v.detach().double().requires_grad_(True) for k, v in p_sym.items()}
    X2, y2 = two.X.to(device), two.y.to(device)
    loss_sym = engine.cross_entropy(mlp2.forward(p_sym, X2), y2)
    grad_sym = dict(
        zip(p_sym, torch.autograd.grad(loss_sym.sum(), list(p_sym.values())), strict=True)
    )
    _, grad_anti = ap.split_sigma(grad_sym, lay2, n_lab2)
    anti_share = max(float(grad_anti[k].norm() / grad_sym[k].norm()) for k in ("E", "W2"))
    D_sym = float(
        ap.xor_contrast(mlp2.forward(p_sym, X2).detach(), y2, flip2.to(device)[y2]).abs().max()
    )
    return dict(data_invariant=data_invariant, anti_share=anti_share, D_sym=D_sym)


def seed_fit(arms: Arms, small_init: list[float], step: int) -> float:
    """The exponent of |D| at ``step`` against gamma, over the small inits."""
    logs = [np.log(med(np.abs(arms.arm(x, "D")[step]))) for x in small_init]
    return -np.polyfit(small_init, logs, 1)[0]


def phase_readings(arms: Arms, small_init: list[float], t_p: float, sign_bound: float) -> dict:
    """The law's pieces on the probe: per init, |W1|'s knee (``knees``), its line up to the
    knee (``w1``: slope and R^2) as a share of ``sign_bound`` (``w1_share``, worst R^2
    ``w1_r2``); the bilinear form's miss (``bilin``); M on the plateau (``M_at``); the seed's
    exponent after step 1 and at ``t_p`` (``seed_x1``, ``seed_xp``); per small init, the
    plateau's rate (``rates``); on the calibration arm, the R^2 of u and of ln u
    (``r2_lin``, ``r2_exp``), Adam's step rise against its clock's (``step_rise``,
    ``clock_rise``), and the R^2 of ln D on the step count and on the clock (``r2_t``,
    ``r2_clock``)."""
    tt, arm, cal, probe = arms.steps, arms.arm, arms.cal, arms.probe
    law_gammas, cal_seeds = arms.gammas, arms.cal_seeds
    # Phase 1: |W1| grows linearly, at a share c of Adam's sign-step bound, up to a knee t_p.
    knees = {x: ap.knee(tt, arm(x, "W1")) for x in law_gammas}
    w1 = {x: ap.linear_fit(tt, arm(x, "W1"), 5, 0.8 * knees[x]) for x in law_gammas}
    w1_share = {x: w1[x][0] / sign_bound for x in law_gammas}
    w1_r2 = min(float(np.min(v[1])) for v in w1.values())
    # The bilinear form D_lin = 2 <u, M a_W> against D, where D is small but above rounding.
    D_all = probe.history["D"]
    small_D = (np.abs(D_all) > 1e-3) & (np.abs(D_all) < 0.1)
    bilin = float(np.quantile(np.abs(probe.history["D_lin"] / D_all - 1)[small_D], 0.95))
    # M on the plateau is fixed by the task: the same at every small init.
    M_at = {x: med(arm(x, "M")[int(t_p) : int(t_p) + 20]) for x in law_gammas}

    seed_x1, seed_xp = seed_fit(arms, small_init, 1), seed_fit(arms, small_init, int(t_p))
    # Phase 2: the rate of D at each small init; u = a_E W1, exponential or linear?
    rates = {x: med(ap.log_rate(tt, arm(x, "D"), t_p)) for x in small_init}
    passed = cal("D") > 0.1  # where the calibration arm's D passes 0.1 (else: the run's end)
    t_hi = np.where(passed.any(0), passed.argmax(0), len(tt) - 1)
    r2_lin = ap.linear_fit(tt, cal("u"), t_p, t_hi)[1]
    r2_exp = ap.linear_fit(tt, np.log(cal("u")), t_p, t_hi)[1]
    # Adam's step on the bit-1 coordinates over the calibration arm's plateau (from the knee
    # t_p to t_hi, per seed), against Adam's clock.
    step_cal = cal("step")
    step_rise = step_cal[t_hi, np.arange(len(cal_seeds))] / step_cal[int(t_p)]
    clock_rise = ap.adam_clock(t_hi) / ap.adam_clock(int(t_p))
    Phi = np.concatenate([[0.0], np.cumsum(ap.adam_clock(tt[1:]))])  # Adam's clock, integrated
    r2_t = ap.linear_fit(tt, np.log(np.abs(cal("D"))), t_p, t_hi)[1]
    r2_clock = ap.linear_fit(Phi, np.log(np.abs(cal("D"))), Phi[int(t_p)], Phi[t_hi])[1]
    return dict(
        knees=knees,
        w1=w1,
        w1_share=w1_share,
        w1_r2=w1_r2,
        bilin=bilin,
        M_at=M_at,
        seed_x1=seed_x1,
        seed_xp=seed_xp,
        rates=rates,
        r2_lin=r2_lin,
        r2_exp=r2_exp,
        step_rise=step_rise,
        clock_rise=clock_rise,
        r2_t=r2_t,
        r2_clock=r2_clock,
    )


def reach(tt, v, lev) -> np.ndarray:
    """Per seed, the first step at which ``v`` reaches ``lev`` (NaN: never)."""
    return np.asarray(onsets.onset_step(tt, v, lev))


def mid(a, b) -> np.ndarray:
    """The midpoint of two steps, at least 1; NaN where a stretch never ends."""
    return np.maximum((a + b) / 2, 1.0)


def escape_speedup(arms: Arms, small_init: list[float], t_p: float, d_star: float) -> dict:
    """Near escape: per init, the rate of ln D from 0.1 to ``d_star`` (``fast_rate``); per
    small init, its ratio to the plateau's rate below 0.1 (``speedup``) and the rise that
    Adam's clock alone gives between the two stretches' midpoints (``clock_gain``), their
    medians' ratio (``beats``); the fast rate at the largest init and at the small ones."""
    tt, arm, law_gammas = arms.steps, arms.arm, arms.gammas
    fast_rate = {x: ap.stretch_rate(tt, arm(x, "D"), 0.1, d_star) for x in law_gammas}
    speedup, clock_gain = {}, {}
    for x in small_init:
        speedup[x] = fast_rate[x] / ap.log_rate(tt, arm(x, "D"), t_p)
        t_01, t_esc = reach(tt, arm(x, "D"), 0.1), reach(tt, arm(x, "D"), d_star)
        clock_gain[x] = ap.adam_clock(mid(t_01, t_esc)) / ap.adam_clock(mid(t_p, t_01))
    beats = {x: med(speedup[x]) / med(clock_gain[x]) for x in small_init}
    fast_large = med(fast_rate[law_gammas[0]])
    fast_small = med(np.concatenate([fast_rate[x] for x in small_init]))
    return dict(
        fast_rate=fast_rate,
        speedup=speedup,
        clock_gain=clock_gain,
        beats=beats,
        fast_large=fast_large,
        fast_small=fast_small,
    )


def phase_numbers(ph: dict, esc: dict, small_init: list[float], law_gammas, n_cal: int) -> dict:
    """The glued numbers of :func:`phase_readings` and :func:`escape_speedup`."""
    w1_share, knees, M_at, rates = ph["w1_share"], ph["knees"], ph["M_at"], ph["rates"]
    step_rise, clock_rise = ph["step_rise"], ph["clock_rise"]
    speedup, clock_gain = esc["speedup"], esc["clock_gain"]
    glue_vals = dict(c_lo=lo_hi(w1_share)[0], c_hi=lo_hi(w1_share)[1], w1_r2=ph["w1_r2"])
    glue_vals |= dict(bilin=ph["bilin"], tp_lo=lo_hi(knees)[0], tp_hi=lo_hi(knees)[1])
    glue_vals |= dict(seed_x1=ph["seed_x1"], seed_xp=ph["seed_xp"])
    glue_vals |= dict(M_small=med([M_at[x] for x in small_init]), M_large=M_at[law_gammas[0]])
    glue_vals |= dict(rate_lo=min(rates.values()), rate_hi=max(rates.values()))
    glue_vals |= dict(u_r2_lin=med(ph["r2_lin"]), u_r2_exp=med(ph["r2_exp"]))
    glue_vals |= dict(step_rise=med(step_rise), clock_rise=med(clock_rise))
    glue_vals |= dict(step_miss=float(np.max(np.abs(step_rise / clock_rise - 1))))
    glue_vals |= dict(r2_t=med(ph["r2_t"]), r2_clock=med(ph["r2_clock"]))
    glue_vals |= dict(speed_lo=min(med(v) for v in speedup.values()), fast_large=esc["fast_large"])
    glue_vals |= dict(speed_hi=max(med(v) for v in speedup.values()), fast_small=esc["fast_small"])
    glue_vals |= dict(clock_hi=max(med(v) for v in clock_gain.values()))
    glue_vals |= dict(beats=min(esc["beats"].values()))
    n_speed = [np.sum(speedup[x] > clock_gain[x]) for x in small_init]
    glue_vals |= dict(n_speed=sum(n_speed), n_speed_of=sum(len(speedup[x]) for x in small_init))
    n_clock = share(np.sum(ph["r2_clock"] > ph["r2_t"]), n_cal)
    return {k: float(v) for k, v in glue_vals.items()} | dict(
        g_first=small_init[0], n_clock=n_clock
    )


def phase_table(ph: dict, esc: dict, law_gammas):
    """The law's pieces per init, medians over seeds ("—": no plateau to read at that
    init)."""
    w1_share, knees, M_at, rates = ph["w1_share"], ph["knees"], ph["M_at"], ph["rates"]
    fast_rate, speedup, clock_gain = esc["fast_rate"], esc["speedup"], esc["clock_gain"]
    return table(
        [
            {
                "γ": x,
                "c": med(w1_share[x]),
                "knee t_p": med(knees[x]),
                "M": M_at[x],
                "Λ": rates.get(x),
                "rate, D = 0.1 to D*": med(fast_rate[x]),
                "speed-up": med(speedup[x]) if x in speedup else None,
                "clock's speed-up": med(clock_gain[x]) if x in clock_gain else None,
            }
            for x in law_gammas
        ]
    )

"""Chapter 7's reduced dynamics, integrated: the README's ratios with their invariant and the
Lambert-W closed form, the official code's printed ends of run beside ours, and the four
parameterizations at equal rates."""

from __future__ import annotations

import numpy as np

from ...book.page import table
from .. import qkov_official as official


def solve_family(red, ode_rs, stop) -> tuple[dict, float, float]:
    """Per ratio r of ``ode_rs``: the ODE's solution (``sol``) and alpha at the stopping
    losses ``stop``, from the ODE (``a_ode``) and the closed form (``a_cf``); with the
    largest relative change of the invariant and the largest miss of the closed form (at the
    stops and along each whole trajectory)."""
    ode, inv_err, cf_err = {}, 0.0, 0.0
    for r in ode_rs:
        sol = red.solve(r, stop_losses=tuple(stop), t_max=1e13, rtol=1e-12, atol=1e-14)
        inv = red.invariant(sol.y[0], sol.y[1], r)
        inv_err = max(inv_err, float(np.max(np.abs(inv - inv[0])) / abs(inv[0])))
        a_ode = np.array([float(red.alpha(e[0][0])) for e in sol.y_events])
        a_cf = np.array([red.alpha_at_loss(s, r) for s in stop])
        # along the whole trajectory, alpha(mu_ov) from the Lambert-W form vs the ODE's alpha
        a_traj = red.alpha_closed_form(sol.y[1], r)
        cf_err = max(
            cf_err,
            float(np.max(np.abs(a_ode - a_cf))),
            float(np.max(np.abs(a_traj - red.alpha(sol.y[0])))),
        )
        ode[r] = dict(sol=sol, a_ode=a_ode, a_cf=a_cf)
    return ode, inv_err, cf_err


def alpha_at_losses(red, rs, losses) -> np.ndarray:
    """``(len(rs), len(losses))``: alpha where the loss first reaches each of ``losses``, by
    the closed form."""
    return np.array([[red.alpha_at_loss(lo, r) for lo in losses] for r in rs])


def code_ends(red, ode: dict) -> dict:
    """For each ratio the official code prints: ``(alpha, mu_ov, mu_qk)`` where the ODE's
    loss first reaches 1e-4 (the last stopping loss)."""
    at_end = {}  # r -> (alpha, mu_ov, mu_qk) where the ODE's loss first reaches 1e-4
    for r in official.FIG4_END:
        mq, mo = ode[r]["sol"].y_events[-1][0]  # the last stopping loss is 1e-4
        at_end[r] = (float(red.alpha(mq)), float(mo), float(mq))
    return at_end


def code_gap(at_end: dict) -> float:
    """The largest relative difference between :func:`code_ends` and the code's values."""
    return max(
        abs(at_end[r][i] / official.FIG4_END[r][key] - 1)
        for r in at_end
        for i, key in enumerate(("alpha", "mu_ov", "mu_qk"))
    )


def code_table(at_end: dict):
    """Ours beside the official code's printed ends of run, per ratio."""
    return table(
        [
            (
                r,
                a,
                official.FIG4_END[r]["alpha"],
                mo,
                official.FIG4_END[r]["mu_ov"],
                mq,
                official.FIG4_END[r]["mu_qk"],
            )
            for r, (a, mo, mq) in at_end.items()
        ],
        ["r", "α, ours", "α, code", "μ_OV, ours", "μ_OV, code", "μ_QK, ours", "μ_QK, code"],
        sig=4,
    )


def four_parameterizations(red, names, stop) -> dict:
    """Per parameterization, alpha at the stopping losses ``stop`` at equal rates, factorized
    circuits started at 1e-2 and collapsed ones at 0."""
    four = {}
    for name in names:
        y0 = (1e-2 if name[:2] == "FA" else 0.0, 1e-2 if name[2:] == "FO" else 0.0)
        sol = red.solve(
            1.0, kind=name, y0=y0, stop_losses=tuple(stop), t_max=1e14, rtol=1e-10, atol=1e-14
        )
        four[name] = np.array([float(red.alpha(e[0][0])) for e in sol.y_events])
    return four

"""What is read from the CACO sweep against the ratio r: attention at the matched loss per
ratio with the reduced model's closed form, and the headline check (every faster ratio
against equal rates, seed by seed) with its negative control."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from ...book.page import table
from ...data import tasks
from ...measure import matched_loss
from ...theory import reduced
from .. import qkov_readings as readings


def ratio_reading(syn, sim, br) -> SimpleNamespace:
    """Distinct mass, entropy and query-copy mass at the matched loss per instance
    (``a_r``, ``H_r``, ``q_r``) and their seed means per ratio, the ratios without shortcut
    instances (``clean``), the closed form with the fitted constant on a fine grid
    (``r_fine``, ``a_theory``) and on the sweep's (``a_theory_grid``), and the checks."""
    C, R_inst, r_grid, ok = syn.stats["CACO"], syn.R_inst, syn.r_grid, br.ok
    loss_star = sim.loss_star
    a_r = matched_loss.at_matched_loss(C["loss"], C["distinct"], loss_star)
    H_r = matched_loss.at_matched_loss(C["loss"], C["entropy"], loss_star)
    q_r = matched_loss.at_matched_loss(C["loss"], C["query_copy"], loss_star)
    # seed means per ratio of the sweep: group_by stacks (n_r, n_seeds)
    by_r = (readings.group_by(v, R_inst, r_grid).mean(1) for v in (a_r, H_r, q_r))
    a_r_mean, H_r_mean, q_r_mean = by_r
    clean = np.array([bool(ok[R_inst == r].all()) for r in r_grid])  # none on the shortcut
    # A fit with no positive b (runs too short to move, as in a try of a few steps) has no
    # curve.
    fitted = br.b_fit > 0
    net_b = reduced.ReducedModel(
        m=br.m_pos, n=br.n_pos, M=tasks.ScanSnap.N_CLASSES, b=br.b_fit if fitted else 1
    )
    r_fine = np.geomspace(r_grid.min() / 2, r_grid.max() * 2, 40)
    mu0 = (float(br.mu_qk[0].mean()), float(br.mu_ov[0].mean()))

    def closed(r):
        return net_b.alpha_at_loss(loss_star, r, *mu0) if fitted else np.nan

    a_theory, a_theory_grid = (np.array([closed(r) for r in rs]) for rs in (r_fine, r_grid))
    net_monotone = bool(np.all(np.diff(a_r_mean[clean]) > 0))
    entropy_monotone = bool(np.all(np.diff(H_r_mean) < 0))
    theory_gap = float(np.max(np.abs(a_theory_grid - a_r_mean)[clean]))
    return SimpleNamespace(
        a_r=a_r,
        H_r=H_r,
        q_r=q_r,
        a_r_mean=a_r_mean,
        H_r_mean=H_r_mean,
        q_r_mean=q_r_mean,
        clean=clean,
        r_fine=r_fine,
        a_theory=a_theory,
        a_theory_grid=a_theory_grid,
        net_monotone=net_monotone,
        entropy_monotone=entropy_monotone,
        theory_gap=theory_gap,
    )


def ratio_numbers(rat, syn) -> dict:
    """The sweep's numbers the text quotes, for glue."""
    r_grid, clean = syn.r_grid, rat.clean
    return dict(
        a_r0=float(rat.a_r_mean[0]),
        a_r_last=float(rat.a_r_mean[clean][-1]),
        r_min=float(r_grid.min()),
        r_max=float(r_grid[clean].max()),
        H_r0=float(rat.H_r_mean[0]),
        H_r_last=float(rat.H_r_mean[-1]),
        r_top=float(r_grid.max()),
        theory_gap=rat.theory_gap,
    )


def ratio_table(rat, syn):
    """Per ratio: distinct mass, query copies, entropy and the closed form (seed means)."""
    return table(
        list(
            zip(
                syn.r_grid, rat.a_r_mean, rat.q_r_mean, rat.H_r_mean, rat.a_theory_grid, strict=True
            )
        ),
        ["r", "distinct mass", "query copies", "entropy", "closed form (fitted b)"],
    )


def headline_check(syn) -> SimpleNamespace:
    """The sharper-at-matched-loss check of every ratio above 1 against r = 1
    (``headline``: ratio -> the check) and of the slower ratios (``control``)."""
    C, R_inst, r_grid = syn.stats["CACO"], syn.R_inst, syn.r_grid
    arms = {  # ratio -> held-out loss and distinct mass (n_logs, n_seeds) of its instances
        float(r): (C["loss"][:, R_inst == r], C["distinct"][:, R_inst == r])
        for r in np.unique(R_inst)
    }
    headline = {
        float(r): matched_loss.sharper_at_matched_loss(*arms[float(r)], *arms[1.0])
        for r in r_grid[r_grid > 1]
    }
    control = {
        float(r): matched_loss.sharper_at_matched_loss(*arms[float(r)], *arms[1.0])
        for r in syn.r_control
    }
    return SimpleNamespace(headline=headline, control=control)


def headline_numbers(hc, syn) -> dict:
    """The control's numbers the text quotes and the number of faster ratios, for glue."""
    c0 = hc.control[float(syn.r_control[0])]
    return dict(
        r_control=float(syn.r_control[0]),
        control_loss=c0.loss,
        control_test=float(c0.test.mean()),
        control_ref=float(c0.ref.mean()),
        n_headline=len(hc.headline),
    )


def headline_table(hc):
    """Every ratio's check: the loss compared, both distinct masses, and whether it held."""
    return table(
        [
            (arm, r, c.loss, float(c.test.mean()), float(c.ref.mean()), "yes" if c.holds else "no")
            for arm, res in (("sweep", hc.headline), ("control", hc.control))
            for r, c in res.items()
        ],
        ["arm", "r", "loss compared", "distinct mass at r", "at r = 1", "sharper in every seed"],
    )

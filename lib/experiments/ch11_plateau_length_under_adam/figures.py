"""Chapter 11's key figure: the contrast over the plateau, and the escape against the init."""

from __future__ import annotations

import numpy as np

from ...book.style import COLORS, band, ordered_colors, subplots
from .probe import Arms


def fig_gamma_law(
    arms: Arms,
    sw_esc,
    meas,
    preds: dict,
    t_p: float,
    D_entry: float,
    rate: float,
    d_star: float,
    probe_steps: int,
    tol: float,
):
    """Left: |D| per init and on the calibration arm, the law on it (linear to ``t_p``, where
    it is ``D_entry``, then growing at ``rate``) and the escape level ``d_star``; right: the
    measured escape against gamma (±``tol`` about the median), the law and its controls.
    Returns the figure."""
    tt, arm, cal, law_gammas = arms.steps, arms.arm, arms.cal, arms.gammas
    PROBE_STEPS, TOL = probe_steps, tol
    fig, (ax_D, ax_T) = subplots(1, 2, row_height=3.0, layout="constrained")
    shade, ink = ordered_colors(law_gammas, COLORS["order1"]), COLORS["theory"]
    for x in law_gammas:
        band(ax_D, tt[1:], np.abs(arm(x, "D"))[1:], shade[x], label=f"γ = {x:g}")
    band(ax_D, tt[1:], np.abs(cal("D"))[1:], COLORS["reference"], label="calibration")
    t_law = np.arange(1, PROBE_STEPS + 1)
    D_law = D_entry * np.where(t_law < t_p, t_law / t_p, np.exp(rate * (t_law - t_p)))
    ax_D.plot(t_law, np.minimum(D_law, 30), ls="--", color=ink, label="law")
    ax_D.axhline(d_star, ls=":", color=COLORS["null"])
    ax_D.set(xlabel="Adam step", ylabel="$|D|$", yscale="log", ylim=(1e-6, 30))
    ax_D.set_title("the contrast over the plateau")
    ax_D.legend(
        fontsize=8,
        ncol=2,
        title="larger γ: smaller init",
        title_fontsize=8,
        loc="upper center",
        bbox_to_anchor=(0.5, -0.26),
    )
    band(ax_T, law_gammas, sw_esc, COLORS["order1"], "measured", log_x=False, marker="o")
    lo, hi = (1 - TOL) * meas, (1 + TOL) * meas
    ax_T.fill_between(law_gammas, lo, hi, color=COLORS["null"], alpha=0.3)
    for name, style in {"law": "-", "no gamma": "--", "gradient flow": ":"}.items():
        label = name if name == "law" else f"control: {name.replace('gamma', 'γ')}"
        ax_T.plot(law_gammas, preds[name], ls=style, marker=".", label=label, color=ink)
    ax_T.set(xlabel="γ (larger: smaller init)", ylabel="escape step (bit 1)", yscale="log")
    ax_T.set_title("the escape against the init")
    ax_T.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.26), ncol=2)
    return fig

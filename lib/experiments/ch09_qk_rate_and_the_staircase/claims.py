"""Chapter 9's ledger: every claim of the chapter, in the order the page states them, on the
numbers its runs and readings measured."""

from __future__ import annotations

import numpy as np

from ...book.claims import Ledger, claims_table
from .exponents import PREDICTED, Theory, escape_flat, slopes_ordered
from .readings import (
    ControlReading,
    Failures,
    Matched,
    resolved,
    stair_climbs,
    trend_signs,
)
from .runs import ARM_NAME, ARMS, Runs
from .shakespeare import ShakespeareReading

MEASURED = "as measured"  # reported, not asserted: the finding is the outcome


def counted(holds):
    """A claim's per-instance verdicts; a claim over no counted instance fails."""
    return holds.tolist() or [False]


def ledger(
    cfg,
    runs: Runs,
    tests: dict,
    ctl_trend,
    ctl: ControlReading,
    fail: Failures,
    theory: Theory,
    matched: Matched,
    shk: ShakespeareReading,
) -> Ledger:
    """The chapter's ledger, every check made (the page asserts and finishes it)."""
    claims = Ledger(cfg.chapter())
    summary = runs.summary
    claims.section("sec-qkrate-suppression", label="new")
    claims.check(
        "staircase-model-climbs",
        "Chapter 2's staircase model (no OV): the order-1 stair "
        "comes in every instance that counts, at every QK rate and in both "
        "parameterizations (fails if none counts)",
        holds=counted(stair_climbs(runs, cfg).astype(bool)),
        tier="finding",
        values=np.concatenate([summary["stair", qk]["R1"].values.ravel() for qk in cfg.qk_kinds]),
        unit="final R1",
    )
    claims.section("sec-qkrate-converged")
    every = lambda field: np.concatenate([ds[field].values.ravel() for ds in summary.values()])
    claims.check(
        "converged",
        "every instance of both models converges (final loss below the stated "
        "threshold), at every QK rate and in both parameterizations",
        holds=every("converged"),
        values=every("loss"),
        unit="final loss",
        verdict=MEASURED,
    )
    fast = fail.fast
    claims.check(
        "failed-saturated",
        "every instance that fails to converge at the fastest rate "
        "with a failure ends with a saturated readout softmax (largest weight above "
        f"{cfg.readings.saturated:g}, mean over sequences)",
        holds=counted(fail.sat),
        verdict=MEASURED,
        values=fast["attn_max"].values if len(fast) else [np.nan],
    )

    claims.section("sec-qkrate-suppression")
    trend_resolved = resolved(tests, cfg)
    for qk in cfg.qk_kinds:
        claims.check(
            f"ov-suppression-{qk}",
            f"learned-OV model, {qk} QK: the final R1 falls with r "
            f"(Spearman over the instances that count, within-seed permutation p below "
            f"{cfg.readings.alpha:g})",
            holds=trend_resolved[qk],
            values=list(tests["ov", qk, "R1"][:4]),
            unit="rho, p, lo, hi",
            verdict=MEASURED,
        )
    claims.check(
        "trend-control",
        "negative control of the trend test: on the learned-OV control's final R1 (no rule, "
        f"so nothing to suppress) it finds no trend (p at least {cfg.readings.alpha:g}, "
        "one test at that level)",
        holds=ctl_trend.p >= cfg.readings.alpha,
        values=[ctl_trend.rho, ctl_trend.p],
        unit="rho, p",
    )
    claims.section("sec-qkrate-control")
    level = f"{1 - cfg.control.familywise_q:.0%}"
    for a in ARMS:
        claims.check(
            f"control-{a}",
            f"negative control, {ARM_NAME[a]}: with the bit-1 signs shuffled, "
            "the largest R1 against the rule's signature over every seed, r and logged step "
            f"stays below the family-wise {cfg.control.familywise_q:.0%} permutation floor "
            f"(family-wise level {level})",
            holds=ctl.peak[a] < ctl.fw[a],
            tier="finding" if a == "ov" else "measured",
            values=[ctl.peak[a], ctl.fw[a]],
            unit="largest R1, family-wise floor",
        )

    fits = theory.fits
    claims.section("sec-qkrate-theory")
    claims.check(
        "early-slopes-ordered",
        f"the attention's distance from uniform at step {cfg.readings.t_early} "
        "scales more steeply with r for factorized QK (predicted r^2) than for collapsed "
        "(predicted r): the bootstrap intervals of the two exponents do not overlap",
        holds=slopes_ordered(theory),
        values=[*fits["factorized", "D_early"], *fits["collapsed", "D_early"]],
        verdict=MEASURED,
    )
    what_of = {
        "D_early": f"distance from uniform at step {cfg.readings.t_early}",
        "leave": "step at which attention leaves uniform",
    }
    flat = escape_flat(theory, cfg)
    for qk in cfg.qk_kinds:
        for name, what in what_of.items():
            fit, pred = fits[qk, name], PREDICTED[qk, name]
            claims.check(
                f"exponent-{name.replace('_', '-').lower()}-{qk}",
                f"{qk} QK: the exponent "
                f"in r of the {what} has the predicted value {pred:.2g} inside its bootstrap "
                f"interval (at least {cfg.readings.min_fit_rates} rates)",
                holds=bool(fit.lo <= pred <= fit.hi),
                values=list(fit),
                verdict=MEASURED,
            )
        claims.check(
            f"escape-flat-{qk}",
            f"{qk} QK: the bit-1 escape step does not depend on r over "
            "the counted rates (the bootstrap interval of its exponent lies inside "
            f"+-{cfg.readings.escape_flat_tol:g}, the chapter's first tolerance; at least "
            f"{cfg.readings.min_fit_rates} rates)",
            holds=flat[qk],
            values=list(fits[qk, "escape1"]),
            verdict=MEASURED,
        )

    claims.section("sec-qkrate-tradeoff")
    sign_ok, corr, ends = trend_signs(matched), matched.corr, matched.ends
    for n, what in (
        ("gate", "readout's attention on the gate"),
        ("attn_dist", "attention's distance from uniform"),
    ):
        claims.check(
            "tradeoff-sign" if n == "gate" else "tradeoff-distance-sign",
            "at a matched "
            f"loss, the rank correlation of the {what} with R1 has a resolved sign (its "
            "bootstrap interval over seeds excludes 0)",
            holds=sign_ok[n],
            values=list(corr[n][:4]),
            unit="rho, p, lo, hi",
            verdict=MEASURED,
        )
    claims.check(
        "gate-to-anchor",
        "learned-OV model: faster QK moves the readout's final attention "
        "from the gate to the anchor (mean over counted seeds and parameterizations, "
        "slowest against fastest counted rate)",
        verdict=MEASURED,
        holds=ends["gate"][1] < ends["gate"][0] and ends["anchor"][1] > ends["anchor"][0],
        values=[*ends["gate"], *ends["anchor"]],
    )

    claims.section("sec-qkrate-shakespeare")
    claims.check(
        "shk-ordered",
        "Shakespeare: at every QK multiplier the skip-k onsets keep the order of k (median)",
        holds=shk.ordered,
        values=[shk.med[n][0] for n in shk.skips],
        unit="steps",
        verdict=MEASURED,
    )
    claims.check(
        "shk-still",
        "Shakespeare: the median skip-k onsets at the largest QK multiplier "
        f"are within a factor {cfg.shk.fold_tol:g} of those at the smallest",
        unit="x",
        holds=[1 / cfg.shk.fold_tol <= v <= cfg.shk.fold_tol for v in shk.moves.values()],
        values=list(shk.moves.values()),
        verdict=MEASURED,
    )
    claims.check(
        "shk-attention-moves",
        "Shakespeare: the final distance of attention from "
        "uniform rises with the QK multiplier (median over seeds)",
        holds=bool(np.all(np.diff(shk.D) > 0)),
        values=shk.D,
        verdict=MEASURED,
    )
    return claims


def findings_table(claims: Ledger):
    """The claims the chapter asserts (every tier but "measured"), as a displayed table."""
    from IPython.display import Markdown

    return Markdown(
        claims_table([c for c in claims.claims if c.tier != "measured"], chapter_column=False)
    )

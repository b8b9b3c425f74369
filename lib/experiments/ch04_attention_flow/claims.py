"""The chapter's ledger of claims, checked on the numbers the runs just measured."""

from __future__ import annotations

import numpy as np

from ...book.claims import Ledger
from .where import (
    FREEZE_ATTN,
    FREEZE_E,
    IDENTITY_24,
    LEARNED_12,
    LEARNED_24,
)


def record_claims(claims: Ledger, cfg, init, scaling, uni, gd, qs_holds, reading, race) -> None:
    """Record the chapter's claims in ``claims``, in the order of the page: the expansion at init,
    uniform attention at init, the time course under GD, and where the parity lives."""
    _expansion(claims, cfg, init, scaling)
    _uniform_and_time(claims, cfg, init, uni, gd, qs_holds)
    _where(claims, cfg, reading, race)


def _expansion(claims, cfg, init, scaling) -> None:
    """The orders of the expansion and the leading term against autograd."""
    idx, att_cos, att_size, cos_target = init.idx, init.att_cos, init.att_size, cfg.cos_target
    slopes, expected = scaling.slopes, scaling.expected
    i08, i05 = idx[cfg.gamma], idx[cfg.gamma_large]
    # Orders of the expansion: scaling powers 2, 4, 6 (residual, three terms, QK path).
    claims.section("sec-attn-init", label="recon", tier="check")
    for k, what in (
        ("residual", "the error of the residual term alone scales as t^2"),
        ("all three", "the error after all three terms scales as t^4"),
        ("QK path", "the QK path's share of the gradient scales as t^6"),
    ):
        claims.check(
            "order-" + k.replace(" ", "-").lower(),
            f"weights scaled by t: {what} (within {cfg.slope_tol}; measured: the power)",
            values=slopes[k],
            holds=abs(slopes[k] - expected[k]) < cfg.slope_tol,
        )
    # The criterion for the leading term holds at gamma >= 0.8 once P is as small as E; with
    # the default P it holds for the three-term expansion, and the leading term falls short
    # (reported above as not holding) because of P: the small-P variant is closer to the
    # gradient in every instance, and the self-term, which carries P, outweighs the value term.
    res, all3 = att_cos["residual"], att_cos["all three"]  # [default P, small P] x gamma x seed
    claims.check(
        "leading-term-small-p",
        f"with P as small as E, the residual term alone has cosine >= "
        f"{cos_target} with the gradient at every gamma >= 0.8",
        holds=(res[1, i08:] >= cos_target).all(0),
        values=res[1, i08:].min(0),
    )
    claims.check(
        "three-terms-default",
        f"with the default init, the three terms together have cosine "
        f">= {cos_target} at every gamma >= 0.8",
        holds=(all3[0, i08:] >= cos_target).all(0),
        values=all3[0, i08:].min(0),
    )
    claims.check(
        "leading-term-default",
        f"with the default init, the residual term alone has cosine >= {cos_target} at gamma = 0.8",
        holds=res[0, i08] >= cos_target,
        values=res[0, i08],
        verdict="not reproduced",
    )
    claims.check(
        "small-p-closer",
        "the residual term is closer to the gradient with small P than with "
        "the default, at every gamma >= 0.8 (measured: the gain at 0.8)",
        holds=(res[1, i08:] > res[0, i08:]).all(0),
        values=res[1, i08] - res[0, i08],
        tier="measured",
    )
    claims.check(
        "self-over-value",
        "with the default init, the self-term outweighs the value term at "
        "every gamma >= 0.8 (measured: self / residual at 0.8)",
        values=att_size["self"][0, i08],
        holds=(att_size["self"][0, i08:] > att_size["value"][0, i08:]).all(0),
        tier="measured",
    )
    claims.check(
        "three-terms-at-0.5",
        "at gamma = 0.5, the three terms are closer to the gradient than the residual term alone",
        holds=all3[0, i05] > res[0, i05],
        values=all3[0, i05],
        tier="measured",
    )


def _uniform_and_time(claims, cfg, init, uni, gd, qs_holds) -> None:
    """Uniform attention at init, and the quasi-static regime under GD."""
    i08 = init.idx[cfg.gamma]
    rel_first, D_slope, D_meas_g = uni.rel_first, uni.D_slope, uni.D_meas_g
    small, t_qk, t_leave, t_dep, dQK_at_dep = gd.small, gd.t_qk, gd.t_leave, gd.t_dep, gd.dQK_at_dep
    # Uniform attention at init: the first-order formula holds at gamma >= 0.8 and fails at
    # the largest init (control); the distance scales as eps^4 and grows with the init scale.
    claims.section("sec-attn-uniform", label="recon", tier="check")
    claims.check(
        "first-order-uniform",
        "at init, the first-order formula gives the distance from "
        f"uniform attention within {cfg.first_order_tol:.0%} at every gamma >= {cfg.gamma} "
        "(measured: largest relative error)",
        holds=(rel_first[i08:] < cfg.first_order_tol).all(0),
        values=rel_first[i08:].max(0),
    )
    claims.check(
        "first-order-control",
        "negative control: at the largest init the first-order formula "
        f"is off by {cfg.first_order_tol:.0%} or more",
        holds=rel_first[0] >= cfg.first_order_tol,
        values=rel_first[0],
        label="new",
        tier="measured",
    )
    claims.check(
        "distance-slope",
        "weights scaled by t: the distance from uniform attention scales as "
        f"t^4 (within {cfg.slope_tol})",
        holds=abs(D_slope - 4) < cfg.slope_tol,
        values=D_slope,
    )
    claims.check(
        "distance-grows",
        "at init, the distance from uniform attention, averaged over seeds, "
        "grows with the init scale at every step of gamma (measured: at gamma = 0.8)",
        holds=np.diff(D_meas_g.mean(1)) < 0,
        values=D_meas_g[i08],
        tier="measured",
    )
    # the same order seed by seed (independent draws at each gamma)
    claims.check(
        "distance-grows-per-seed",
        "at init, the distance from uniform attention grows with "
        "the init scale in each seed, at every step of gamma (measured: reversed steps per "
        "seed)",
        holds=(np.diff(D_meas_g, axis=0) < 0).ravel(),
        values=uni.reversed_steps,
        verdict="as measured",
    )
    # Attention stays within delta of uniform until QK leaves its quasi-static regime, then
    # leaves, in every small-init instance; not at the large init (control). The departure
    # from the quasi-static prediction comes before QK has moved by its initial size.
    claims.section("sec-attn-time", label="recon", tier="measured")
    claims.check(
        "quasi-static",
        "under GD at gamma = 0.8, attention stays within delta of uniform until "
        "W_Q W_K^T has moved by its initial size, then leaves (measured: that step)",
        holds=qs_holds[small],
        values=t_qk[small],
    )
    claims.check(
        "quasi-static-control",
        "negative control: at gamma = 0.5 the same check fails "
        "(measured: the step attention leaves)",
        holds=~qs_holds[~small],
        values=t_leave[~small],
        label="new",
    )
    claims.check(
        "early-departure",
        "under GD at gamma = 0.8, attention departs from the quasi-static "
        "prediction before W_Q W_K^T has moved by its initial size (measured: its change "
        "then)",
        holds=(t_dep[small] <= t_qk[small]) & (dQK_at_dep[small] < 1),
        values=dQK_at_dep[small],
        label="new",
    )
    # Reported above as not holding: the attention-only model never aligns its anchors with
    # the order-1 signature within the budget.
    R1_max = np.nanmax(np.asarray(gd.R1)[:, small], axis=0)
    claims.check(
        "order1-alignment",
        "the attention-only model aligns its anchors with the order-1 "
        "signature (R_1 > 0) within the budget (measured: largest R_1)",
        holds=R1_max > 0,
        values=R1_max,
        verdict="not reproduced",
    )


def _where(claims, cfg, reading, race) -> None:
    """Where the parity lives, on Chapter 2's task: the ablations and the race."""
    at_freeze, esc, climbs, end, margin = (
        reading.at_freeze,
        reading.esc,
        reading.climbs,
        reading.end,
        reading.margin,
    )
    L12, L24, I24 = LEARNED_12, LEARNED_24, IDENTITY_24
    tr, fE, fA = "trained", FREEZE_E, FREEZE_ATTN
    # Where the parity lives (Chapter 2's task). The freeze point is after order 0, on plateau 1.
    claims.section("sec-attn-where", label="new", tier="measured")
    claims.check(
        "where-freeze-point",
        f"at step {cfg.where.freeze_step} the order-0 stair has come (R0 above "
        "its floor) and bit 1 is on its plateau (sign-bit loss >= 0.9 ln 2), every seed of "
        "both ablated models",
        holds=np.concatenate(list(at_freeze.values())),
    )
    # The staircase model: freezing the embedding delays bit 1 (later escape, or none) and
    # leaves its final loss higher; freezing attention keeps the stair.
    claims.check(
        "where-embedding-is-the-route",
        "no OV, 24 anchors: with the embedding frozen after "
        "order 0, bit 1 is learned later (escape later or never, final sign-bit loss higher) "
        "in every seed (measured: escape)",
        values=esc[(I24, fE)],
        holds=(esc[(I24, fE)] > esc[(I24, tr)]) & (end[(I24, fE)]["bit1"] > end[(I24, tr)]["bit1"]),
    )
    claims.check(
        "where-no-sharpening-needed",
        "no OV, 24 anchors: with attention frozen (uniform), every stair still comes in order",
        holds=climbs[(I24, fA)],
        values=esc[(I24, fA)],
    )
    probe_E_gain = end[(I24, tr)]["probe_E"] - end[(I24, fE)]["probe_E"]
    claims.check(
        "where-probe-embedding",
        "no OV, 24 anchors: the held-out probe reads the parity from "
        "the embedding better when it trains than when it is frozen after order 0, every seed "
        "(measured: the gain)",
        holds=probe_E_gain > 0,
        values=probe_E_gain,
    )
    weakest = [margin[(I24, tr)].min(), margin[(L12, tr)].min()]  # no OV, learned OV
    claims.check(
        "where-margin",
        "the staircase model's weakest order-1 stair tops out further above "
        "its permutation floor than the learned-OV model's weakest (peak R1 over floor, smallest "
        "over seeds)",
        holds=weakest[0] > weakest[1],
        values=weakest,
    )
    # The contrast: a learned value path learns bit 1 without the embedding (E frozen), and at
    # 24 anchors not at all within the budget, where the model without OV learns it.
    # Verdicts: a seed may escape only at the budget's end; at book scale a learned-OV seed
    # escapes late.
    claims.check(
        "where-learned-bypasses",
        "learned OV, 12 anchors: with the embedding frozen after "
        "order 0, bit 1 is still learned (escape within the budget) in every seed",
        holds=np.isfinite(esc[(L12, fE)]),
        values=esc[(L12, fE)],
        verdict=("new result", "partly"),
    )
    # The learned value path at 24 anchors: reported, not asserted.
    claims.check(
        "where-learned-24-stalls",
        "24 anchors: the learned value path does not escape "
        "the bit-1 plateau within the budget, the model without OV escapes, in every "
        "seed (measured: learned-OV escape)",
        values=esc[(L24, tr)],
        verdict="as measured",
        holds=~np.isfinite(esc[(L24, tr)]) & np.isfinite(esc[(I24, tr)]),
    )
    p_escape = [r.p for r in race.race_rates["escape"]]
    claims.check(
        "where-race-rate",
        "learned OV, 24 anchors: per seed, the share of copies (inits "
        f"changed by a relative {cfg.where.copy_rel:g}) whose bit 1 escapes within the budget lies "
        "strictly between 0 and 1: the outcome is a draw within the seed (measured: the share)",
        holds=race.mixed,
        values=p_escape,
        verdict="as measured",
    )
    claims.check(
        "where-learned-12-stair",
        "learned OV, 12 anchors: the order-1 embedding stair comes in every seed",
        holds=climbs[(L12, tr)],
        values=end[(L12, tr)]["R1"],
        verdict="as measured",
    )

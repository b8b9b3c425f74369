"""The chapter's claims: the identities of the model as checks, the two findings of the
escape, and what is measured of the order of events, the probe, the trap and the rate
ratio."""

from __future__ import annotations

import numpy as np

from ...book.claims import Ledger
from .. import ChapterConfig
from .ratio import ratio_indices
from .readings import rate


def ledger(
    cfg: ChapterConfig, checks: dict, esc: dict, order: dict, probe: dict, lock: dict, ratio: dict
) -> Ledger:
    """The chapter's ledger, its claims in the page's order (not yet finished)."""
    sp = esc["speedup"]
    tests, fired = order["tests"], np.isfinite(order["event"])
    pfloor, pmed = probe["floor"], probe["median"]
    trap = esc["trapped"]["learned"]
    fac = ratio["factorized"]
    slow_i, base_i = ratio_indices(cfg)

    claims = Ledger(cfg.chapter())
    claims.section("sec-sel-escape", label="new", tier="check")  # identities of the model
    claims.check(
        "uniform-chance",
        "with W_Q and W_K zero (exactly uniform attention), the bit "
        "accuracy is exactly 1/2 at the end, every seed",
        holds=np.abs(checks["uniform_acc"] - 0.5) < 1e-12,
        values=checks["uniform_acc"],
    )
    claims.check(
        "uniform-swap",
        "at uniform attention, swapping the two gates changes no logit (float64 rounding)",
        holds=checks["order_gap"] < 1e-12,
        values=checks["order_gap"],
    )
    claims.check(
        "uniform-swap-control",
        "control: the same swap changes the learned models' logits",
        holds=checks["order_gap_learned"] > 1e-6,
        values=checks["order_gap_learned"],
    )
    claims.check(
        "contrast-formula",
        "the attention's contribution to the readout equals the "
        "formula with the gate contrast (relative error below 1e-10, float64)",
        holds=checks["formula_err"] < 1e-10,
        values=checks["formula_err"],
    )
    sf = sp["frozen"]
    claims.check(
        "sel-speedup",
        "learned QK escapes faster than QK frozen at the same small init: "
        "the ratio of median escapes (frozen over learned) has its whole seed-bootstrap "
        f"interval above {cfg.readings.speedup_min:g} (threshold fixed before the runs)",
        holds=bool(sf.lo >= cfg.readings.speedup_min),
        values=list(sf.interval()),
        unit="ratio, lo, hi",
        tier="finding",
    )
    claims.rate(
        "sel-frozen-escapes",
        f"QK frozen at the small init escapes by step "
        f"{cfg.arms.slow_steps}: the share of seeds that escape is at least "
        f"{cfg.readings.escape_min:g}",
        holds=esc["escaped"]["frozen"],
        threshold=cfg.readings.escape_min,
        tier="finding",
    )

    claims.section("sec-sel-escape", tier="measured")
    for n in ("frozen 0.5", "frozen 0.75"):
        e = sp[n]
        claims.check(
            f"sel-speedup-{n.split()[1]}",
            f"learned QK escapes faster than QK {n} "
            "(a standard-scale draw): the ratio's interval lies above 1 (measured: the ratio)",
            holds=bool(e.lo > 1),
            values=list(e.interval()),
            verdict="as measured",
        )
    claims.check(
        "sel-speedup-matched",
        "at one QK init (the matched scale), learned QK escapes "
        "faster than frozen: the ratio's interval lies above 1 (measured: the ratio)",
        holds=bool(esc["matched"].lo > 1),
        values=list(esc["matched"].interval()),
        verdict="as measured",
    )
    claims.check(
        "sel-speedup-strict",
        f"read at the strict level (bit loss below {cfg.readings.trap_frac:g} "
        f"ln 2), the small-init speed-up's interval still lies above {cfg.readings.speedup_min:g} "
        "(measured: the ratio)",
        holds=bool(esc["strict"].lo >= cfg.readings.speedup_min),
        values=list(esc["strict"].interval()),
        verdict="as measured",
    )
    claims.check(
        "sel-learned-traps",
        "learned QK traps some seeds: the bit stops partway "
        "by the horizon (measured: the share and its interval)",
        holds=bool(esc["trapped"]["learned"].any()),
        values=list(rate(esc["trapped"]["learned"])),
        verdict="as measured",
    )

    claims.section("sec-sel-order", tier="measured")
    claims.check(
        "sel-rule-event-null",
        "the rule-specific attention event fires in a larger share "
        "of seeds than a held-out sham does (measured: the two shares)",
        holds=bool(fired.mean() > order["sham_fires"]),
        values=[fired.mean(), order["sham_fires"]],
        verdict="as measured",
    )
    claims.check(
        "sel-rule-event-first",
        "the rule-specific attention event comes before the order-1 "
        "onset in more seeds than after it, sign test p < 0.05 (measured: before, after, "
        "tied, p)",
        holds=bool(
            tests["event-onset1"][0] > tests["event-onset1"][1] and tests["event-onset1"][3] < 0.05
        ),
        values=list(tests["event-onset1"]),
        verdict="as measured",
    )
    claims.check(
        "sel-leave-generic",
        "attention leaves uniform (contrast reaches delta) no later on "
        "the order-blind control than on the task: no sign test p < 0.05 with the task "
        "first (measured: before, after, tied, p)",
        holds=not (
            tests["leave-blind"][0] > tests["leave-blind"][1] and tests["leave-blind"][3] < 0.05
        ),
        values=list(tests["leave-blind"]),
        verdict="as measured",
    )
    claims.section("sec-sel-probe")
    claims.check(
        "sel-probe-controls",
        "the parity probe's median accuracy clears its floor on the "
        "order-blind embeddings and not at init (measured: the two medians and the floor)",
        holds=[pmed["order-blind"] > pfloor, pmed["at init"] <= pfloor],
        values=[pmed["order-blind"], pmed["at init"], pfloor],
        verdict="as measured",
    )
    claims.section("sec-sel-trap")
    claims.check(
        "sel-trap-lock",
        "in every trapped seed the bit loss / ln 2 equals the share of "
        "anchors locked on the key to within 0.1 (measured: the gaps)",
        holds=list(np.abs(lock["bit"] - lock["locked"])[trap] < 0.1) or [True],
        values=np.abs(lock["bit"] - lock["locked"])[trap],
        verdict="as measured",
    )
    claims.section("sec-sel-ratio")
    claims.check(
        "sel-slow-qk-frees",
        "the slowest query-key rate traps fewer seeds than r = 1 "
        "(factorized; measured: the two shares)",
        holds=bool(fac["trapped"][slow_i].mean() < fac["trapped"][base_i].mean()),
        values=[fac["trapped"][slow_i].mean(), fac["trapped"][base_i].mean()],
        verdict="as measured",
    )
    return claims

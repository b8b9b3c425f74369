"""Chapter 5's ledger: its claims, in the order the page states them, read on the run."""

from __future__ import annotations

from ...book.claims import Ledger
from .. import real_lm_stairs as rd
from .targets import TITLE

# The opening box's headline claims, asserted on every run.
HEADLINE = ("first-step-order0", "stair-main", "paired-main", "positive-k2")


def _controls(claims: Ledger, cfg, res) -> None:
    positive, negative, own = res.positive, res.negative, res.own
    claims.section("sec-lm-controls", label="new", tier="finding")
    claims.check(
        "positive-k2",
        "positive control: the order-2 chain's model climbs its own skip-2 "
        "residual stair (onset searched from step 1), every seed",
        holds=positive[2],
        values=own["markov2"]["res_skip2"],
        unit="steps",
    )
    claims.check(
        "negative-k2",
        "negative control: the order-1 chain's model, read against the real "
        "text's skip-2 and higher residuals, stays under the family-wise 99 % floor, every seed",
        holds=negative[2]["quiet"],
        values=negative[2]["top"],
        tier="measured",
        verdict="as measured",
    )
    claims.section("sec-lm-controls", tier="measured")
    for k in res.ks:
        if k != 2:
            claims.check(
                f"positive-k{k}",
                f"positive control: the order-{k} chain's model climbs its "
                f"own stair k = {k}, every seed",
                holds=positive[k],
                values=own[f"markov{k}"][res.names[res.ks.index(k)]],
                unit="steps",
                verdict="as measured",
            )
            claims.check(
                f"negative-k{k}",
                f"negative control: the order-{k - 1} chain's model stays "
                f"under the family-wise floor of stair k = {k} and above, every seed",
                holds=negative[k]["quiet"],
                values=negative[k]["top"],
                verdict="as measured",
            )
    claims.check(
        "onset-order",
        f"the onsets rise with k over the resolved stairs (seed-level test, p < {cfg.tests.order_alpha:g})",
        holds=res.order[cfg.gamma]["p"] < cfg.tests.order_alpha,
        values=res.order[cfg.gamma]["p"],
        verdict="as measured",
    )


def _paired_first_and_main(claims: Ledger, cfg, first: dict, res) -> None:
    pair2, st, small = res.pairs["res_skip2"], res.st, res.small
    claims.section("sec-lm-paired", label="new", tier="finding")
    claims.check(
        "paired-main",
        "Shakespeare, characters: real text beats the bigram-chain model on "
        "the skip-2 residual beyond the 99th percentile of the paired null, every seed",
        holds=pair2["margin"] > 0,
        values=pair2["margin"],
    )
    for n, p in res.pairs.items():
        if n != "res_skip2":
            claims.check(
                f"paired-{n}",
                f"real text beats the {TITLE[p['chain']]}'s model on the {rd.LABEL[n]}, every seed",
                holds=p["margin"] > 0,
                values=p["margin"],
                verdict="as measured",
            )
    cos0, small0, std0 = first["cos0"], first["small"], first["std"]
    claims.section("sec-lm-model", label="recon", tier="finding")
    claims.check(
        "first-step-order0",
        "the step-0 gradient of W^E is closer to the order-0 term "
        "under small than under standard init, every seed",
        holds=cos0[small0] > cos0[std0].max(),
        values=cos0[small0],
    )
    claims.section("sec-lm-controls", label="paper", tier="finding")
    claims.check(
        "stair-main",
        "Shakespeare, characters, small init: the skip-2 residual stair "
        "climbs (onset searched from step 1), every seed",
        holds=rd.climbs(st, small, "res_skip2"),
        values=st["res_skip2"][small],
        unit="steps",
    )


def _gamma(claims: Ledger, cfg, res) -> None:
    st, small, standard = res.st, res.small, res.standard
    sep, both = res.by_gamma["sep"], res.by_gamma["both"]
    claims.section("sec-lm-gamma", label="paper", tier="measured")
    claims.check(
        "skip3-main",
        "Shakespeare, characters, small init: the skip-3 residual stair "
        "climbs (onset from step 1), every seed",
        holds=rd.climbs(st, small, "res_skip3"),
        values=st["res_skip3"][small],
        unit="steps",
        verdict="as measured",
    )
    claims.rate(
        "small-init-skip3",
        "small init (γ = 1) creates the third stair: the share of seeds climbing skip-3",
        holds=rd.climbs(st, small, "res_skip3"),
        threshold=cfg.tests.rate_min,
        verdict="as measured",
    )
    claims.section("sec-lm-gamma", label="recon")
    claims.check(
        "next-earlier-small",
        "the next-token stair sets in earlier under small than under standard init, every seed",
        holds=st["next"][small] < st["next"][standard],
        values=st["next"][small],
        unit="steps",
        verdict="as measured",
    )
    claims.check(
        "small-init-distinct",
        "the next-token and skip-2 stairs are further apart (decades) "
        "under small than standard init, in the seeds with both stairs under both",
        holds=(sep[cfg.gamma] > sep[cfg.gamma_large])[both] if both.any() else [False],
        values=sep[cfg.gamma],
        verdict="as measured",
    )
    claims.check(
        "standard-init-climbs",
        "standard init: the skip-2 residual stair climbs, every seed",
        holds=rd.climbs(st, standard, "res_skip2"),
        values=st["res_skip2"][standard],
        unit="steps",
        verdict="as measured",
    )


def _ngram_specific_plateau(claims: Ledger, cfg, res) -> None:
    ng, sp, pl, st = res.ngram, res.specific, res.plateau, res.st
    claims.section("sec-lm-ngram", label="new")
    claims.check(
        "ngram-skip2-between",
        "the skip-2 stair sets in between the nearest passes to the bigram and the trigram "
        "predictors, every seed",
        holds=ng["between"],
        values=ng["on2"],
        unit="steps",
        verdict="as measured",
    )
    claims.check(
        "ngram-trigram-after-bigram",
        "the model passes nearest the trigram predictor after the bigram one, every seed",
        holds=ng["lag"] > 0,
        values=ng["lag"],
        unit="steps",
        verdict="as measured",
    )
    claims.section("sec-lm-specific", label="new", tier="measured")
    claims.check(
        "specific-previous",
        "the skip-2 stair climbs when read beyond the next- and the previous-token targets, every seed",
        holds=rd.climbs(sp["st_prev"], slice(None), "res_skip2"),
        values=sp["st_prev"]["res_skip2_end"],
        verdict="as measured",
    )
    claims.check(
        "specific-kjv",
        "on shared characters, Shakespeare's own skip-2 residual ends above KJV's, every seed",
        holds=sp["own"] > sp["kjv"],
        values=sp["own"] - sp["kjv"],
        verdict="as measured",
    )
    claims.section("sec-lm-plateau", label="new")
    claims.check(
        "plateau-skip2",
        "after the next-token onset the skip-2 part R sits inside its null "
        "band (both sides) at least as long as it then takes to rise, every seed",
        holds=pl["ok"],
        values=pl["ratio"],
        verdict="as measured",
    )
    claims.section("sec-lm-controls", label="recon")
    text_rows = res.inst.index(source="text")
    claims.check(
        "next-aligned",
        "every real-text instance: W^E aligns with the next-token signature above its null",
        holds=rd.climbs(st, text_rows, "next"),
        values=st["next"][text_rows],
        unit="steps",
    )
    claims.check(
        "unembedding-previous",
        "every real-text instance: W^U aligns with the "
        "previous-token signature above its null at the end",
        holds=res.unemb["R"][-1] > res.unemb["null_hi"][-1],
        values=res.unemb["R"][-1],
    )


def _smollm2(claims: Ledger, cfg, smol_R: dict) -> None:
    claims.section("sec-lm-smollm2", label="new", tier="measured")
    for n in ("next", "previous", "res_skip2"):
        claims.check(
            f"smollm2-{n}",
            f"SmolLM2-135M's embedding, token classes partialled out, aligns "
            f"with the {rd.LABEL[n]} target of every corpus beyond its null's 99th percentile",
            holds=[smol_R[c, n][2] > smol_R[c, n][3] for c in cfg.pretrained.corpora],
            values=[smol_R[c, n][2] for c in cfg.pretrained.corpora],
            verdict="as measured",
        )


def ledger(cfg, first: dict, res, smol_R: dict) -> Ledger:
    """The chapter's claims on its run: the chain controls and the onset order, the paired
    test, the first step and the main stair, what the init scale changes, the n-gram,
    specificity and plateau readings, the alignments, and SmolLM2's readout."""
    claims = Ledger(cfg.chapter())
    _controls(claims, cfg, res)
    _paired_first_and_main(claims, cfg, first, res)
    _gamma(claims, cfg, res)
    _ngram_specific_plateau(claims, cfg, res)
    _smollm2(claims, cfg, smol_R)
    return claims

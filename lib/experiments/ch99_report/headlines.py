"""The report's opening table: the book's headline claims (:data:`HEADLINES`) with the
papers' numbers beside ours, and the same numbers glued for the book's first page."""

from __future__ import annotations

import re
from dataclasses import dataclass

from ...book import claims
from ...book.page import MISSING, number, share
from .. import qkov_official as official

ABSTRACT = "abstract only"


@dataclass(frozen=True)
class Headline:
    """One row of the report's opening table: the claims it reads (ids in the chapters'
    ledgers; the first links to its section), a short title, what the paper gives, and how
    to write ours (:data:`OURS`; default: the first claim's measured number)."""

    claims: tuple[str, ...]
    title: str
    paper: str
    ours: str = ""


def _fig3_ratio(kind_a: str = "collapsed", kind_b: str = "factorized") -> str:
    a, b = official.FIG3_FINAL_LOSS[kind_a], official.FIG3_FINAL_LOSS[kind_b]
    al = official.FIG3_ALPHAS
    return (
        f"collapsed/factorized final-loss ratio {a[0] / b[0]:.3g} at α = {al[0]:g}, "
        f"{a[-1] / b[-1]:.3g} at α = {al[-1]:g}"
    )


def _fig2() -> str:
    bins = official.BIN_NAMES
    known = {k: bins[v] for k, v in official.FIG2_MODAL_BIN.items() if v is not None}
    return "modal distinct-token mass " + ", ".join(f"{k}: {b}" for k, b in known.items())


def _fig4() -> str:
    return f"α at loss {official.FIG4_TARGET_LOSS:g}: " + ", ".join(
        f"{v['alpha']:.3g} (r = {r:g})" for r, v in official.FIG4_END.items()
    )


FIG2_PANELS = ("FAFO", "FACO", "CACO, r=5")


def _ours_fig2(found) -> str:
    return "modal bin " + ", ".join(
        f"{name}: {number(c.values[0])}-{number(c.values[0] + 0.2)}"
        for name, c in zip(FIG2_PANELS, found, strict=True)
        if c.values and c.values[0] is not None
    )


def _ours_fig4(found) -> str:
    alphas = [v for v in found[0].values[: len(official.FIG4_END)]]
    return f"α at loss {official.FIG4_TARGET_LOSS:g}: " + ", ".join(
        f"{number(a)} (r = {r:g})" for a, r in zip(alphas, official.FIG4_END, strict=True)
    )


def _ours_fig3(found) -> str:
    v = found[0].values
    al = official.FIG3_ALPHAS
    return f"ratio {number(v[0])} at α = {al[0]:g}, {number(v[-1])} at α = {al[-1]:g}"


OURS = {"fig2": _ours_fig2, "fig4": _ours_fig4, "fig3": _ours_fig3}

HEADLINES: tuple[Headline, ...] = (
    Headline(
        ("climb-mlp3",),
        "the staircase: order 0, then 1, then 2 (Emb-MLP)",
        "order 0 first, then more and more context (" + ABSTRACT + ")",
    ),
    Headline(
        ("large-init-staircase",),
        "large init weakens the order",
        "ordering absent or weaker under large init (" + ABSTRACT + ")",
    ),
    Headline(
        ("init-leading",),
        "the feed-forward flow's leading term is the label signature",
        "explained by the embeddings' gradient flow (" + ABSTRACT + ")",
    ),
    Headline(
        ("first-order-uniform",),
        "attention is uniform at small init, to first order",
        "explained through self-attention's flow (" + ABSTRACT + ")",
    ),
    Headline(
        ("stair-main",),
        "real text: a second, residual stair (onset from step 1)",
        "staircase seen in real LM training (" + ABSTRACT + ")",
    ),
    Headline(
        ("paired-main",),
        "real text: the second stair beats a bigram-only model's",
        "new control (neither paper)",
    ),
    Headline(
        ("skip3-main",),
        "real text: a third stair, three tokens back (measured)",
        "signatures of more and more context tokens (" + ABSTRACT + ")",
    ),
    Headline(
        ("e3-signature-vs-permuted",),
        "a signature-structured embedding learns better",
        "embedding structure matters for learning (" + ABSTRACT + ")",
    ),
    Headline(
        ("effective-ratio",),
        "factorization rescales each circuit's learning rate",
        "implicit rescaling (" + ABSTRACT + ")",
    ),
    Headline(
        ("closed-form",),
        "the reduced dynamics move along a line (closed form)",
        "parameters move along a line (README)",
    ),
    Headline(
        ("ode-alpha-rises",),
        "reduced ODE: sharper attention at a fixed loss as r grows",
        "official Fig 4 notebook, {fig4}",
        "fig4",
    ),
    Headline(
        tuple(f"fig2-{p}-matched loss" for p in FIG2_PANELS),
        "Fig 2: attention at similar loss, three parameterizations",
        "official Fig 2, {fig2}",
        "fig2",
    ),
    Headline(
        ("fig3-ratio",),
        "Fig 3: fixed attention, collapsed against factorized OV",
        "official Fig 3, {fig3}",
        "fig3",
    ),
    Headline(
        ("headline",),
        "faster QK sharpens attention at a matched loss (ratio sweep)",
        "faster QK, sharper attention at similar loss (" + ABSTRACT + ")",
    ),
    Headline(
        ("shk-entropy",),
        "a character-level language model: the same with QK faster",
        "HateXplain, SVA, SQuAD (not run here)",
    ),
    Headline(
        ("staircase-model-climbs",),
        "faster QK and the staircase: the stair survives",
        "new question (neither paper)",
    ),
    Headline(
        ("boundary-moves",),
        "what sets the order: context order against signal strength",
        "new question (neither paper)",
    ),
    Headline(
        ("sel-speedup", "sel-frozen-escapes"),
        "attention that has to learn: learned QK escapes its plateau sooner than QK "
        "frozen at the same small init, which escapes too",
        "new question (neither paper)",
    ),
)


def headlines() -> list[Headline]:
    """:data:`HEADLINES` with the official code's numbers written in."""
    values = {"fig2": _fig2(), "fig3": _fig3_ratio(), "fig4": _fig4()}
    return [Headline(h.claims, h.title, h.paper.format(**values), h.ours) for h in HEADLINES]


def _held(found) -> tuple[int, int]:
    return sum(sum(c.holds) for c in found), sum(len(c.holds) for c in found)


NOT_RUN = "not run: its chapter failed"


def _found(records, h: Headline, missing_ok: bool):
    """The claims a headline reads; ``None`` when one is missing and ``missing_ok`` (a
    chapter that failed to execute recorded none)."""
    try:
        return [claims.find(records, i) for i in h.claims]
    except claims.ClaimError:
        if missing_ok:
            return None
        raise


def headline_rows(records, missing_ok: bool = False) -> list[tuple[str, str, str, str]]:
    """The opening table's rows: the claim (linked to its section), the paper's column,
    ours (the measured number, or the row's own reading, and in how many seeds or cases it
    held) and its category under the book's counting rule (several, where the row reads
    several claims). Raises when a headline names no claim, unless ``missing_ok`` (a
    chapter failed): then its row says so."""
    rows = []
    for h in headlines():
        found = _found(records, h, missing_ok)
        if found is None:
            rows.append((h.title, h.paper, NOT_RUN, NOT_RUN))
            continue
        ours = OURS[h.ours](found) if h.ours else (found[0].summary() or "—")
        k, n = _held(found)
        cats = list(dict.fromkeys(claims.category(c) for c in found))
        rows.append(
            (
                f"{{ref}}`{h.title} <{found[0].section}>`",
                h.paper,
                f"{ours} (held {k} of {n})",
                ", ".join(cats),
            )
        )
    return rows


def headline_glue(records, missing_ok: bool = False) -> dict[str, str]:
    """For the book's first page, per headline ``hl_<first claim id>``: ``_held`` ("5 of
    5", the seeds or cases in which its claims held), ``_value`` (the first claim's
    measured number) and ``_tier`` (its claims' tiers: finding, check or measured); with ``missing_ok``, a headline whose chapter failed reads
    :data:`NOT_RUN`."""
    out = {}
    for h in HEADLINES:
        found = _found(records, h, missing_ok)
        key = "hl_" + re.sub(r"\W+", "_", h.claims[0]).strip("_")
        out[key + "_held"] = share(*_held(found)) if found else NOT_RUN
        out[key + "_value"] = (found[0].summary() or MISSING) if found else NOT_RUN
        tiers = list(dict.fromkeys(c.tier for c in found)) if found else [NOT_RUN]
        out[key + "_tier"] = " and ".join(tiers)
    return out

"""The reproduction report's opening table, its folds and the book's opening figure."""

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

from lib.book import claims, report, style  # noqa: E402
from lib.experiments import ch99_report as ex  # noqa: E402


def _records():
    rows, i = [], 0
    for h in ex.HEADLINES:
        for cid in h.claims:
            led = claims.Ledger(f"0{i % 3 + 1}_x").section(
                f"sec-{i}", label="recon", tier="finding"
            )
            verdict = "as measured" if i == 0 else None
            rows.append(led.check(cid, "text", holds=[1, 1], values=[0.2, 0.4], verdict=verdict))
            i += 1
    return rows


def test_every_headline_row_sets_the_paper_beside_ours_and_links_its_section():
    rows = ex.headline_rows(_records())
    assert len(rows) == len(ex.HEADLINES)
    title, paper, ours, status = rows[0]
    assert title.startswith("{ref}`") and "<sec-0>" in title
    assert ours == "0.3 [0.2, 0.4] (held 2 of 2)" and status == claims.REPORTED
    assert rows[1][3] == "reproduced"
    official = dict(zip([h.claims[0] for h in ex.HEADLINES], [r[1] for r in rows], strict=True))
    assert "158" in official["fig3-ratio"] and "{" not in "".join(official.values())
    assert "0.287 (r = 0.1)" in official["ode-alpha-rises"]
    fig2 = [r for h, r in zip(ex.HEADLINES, rows, strict=True) if h.ours == "fig2"][0]
    assert "FACO: 0.2-0.4" in fig2[2] and "held 6 of 6" in fig2[2]


def test_a_headline_that_names_no_claim_fails():
    with pytest.raises(claims.ClaimError, match="0 claims with id"):
        ex.headline_rows(_records()[1:])
    glue = ex.headline_glue(_records())
    assert glue["hl_climb_mlp3_held"] == "2 of 2" and "hl_fig2_FAFO_matched_loss_held" in glue


def test_folds_hold_every_claim_once_under_its_chapter():
    recs = _records()
    md = report.chapter_folds(recs, ["01_x", "02_x", "03_x", "04_y"], {"01_x": "1 x"})
    assert md.count("::::{dropdown}") == 3 and "1 x:" in md
    assert sum(md.count(f"| text ({{ref}}`sec-{i}`)") for i in range(len(recs))) == len(recs)


def test_the_book_figure_draws_both_findings_from_kept_curves():
    n, s = 12, 3
    stair = {"stair_steps": np.geomspace(1, 1000, n), "stair_gamma": 1.0}
    for o in (0, 1, 2):
        stair[f"stair_R{o}"] = np.random.default_rng(o).random((n, s))
        stair[f"stair_floor{o}"] = 0.1
    sharp = {"sharp_r": np.array([0.5, 1, 2, 5]), "sharp_mass": np.random.default_rng(9).random((4, s)),
             "sharp_theory_r": np.geomspace(0.5, 5, 20), "sharp_theory_alpha": np.linspace(0.2, 0.8, 20),
             "sharp_loss": 0.01}  # fmt: skip
    fig = ex.book_figure(stair, sharp)
    a, b = fig.axes
    assert len(a.lines) >= 6 and b.get_xscale() == "log"
    assert fig.get_size_inches()[0] <= style.COLUMN
    assert (
        ex.chapter_title("07_rescaling_and_reduced_dynamics") == "7 rescaling and reduced dynamics"
    )


def test_a_failed_chapter_reads_as_not_run_and_the_first_page_says_which():
    recs = [c for c in _records() if c.id != "climb-mlp3"]  # its chapter failed
    with pytest.raises(claims.ClaimError, match="0 claims with id"):
        ex.headline_rows(recs)  # make test: a missing chapter fails the report
    rows = ex.headline_rows(recs, missing_ok=True)
    assert rows[0][2] == ex.NOT_RUN and rows[1][2] != ex.NOT_RUN
    glue = ex.headline_glue(recs, missing_ok=True)
    assert glue["hl_climb_mlp3_held"] == ex.NOT_RUN and glue["hl_climb_mlp3_tier"] == ex.NOT_RUN
    assert glue["hl_large_init_staircase_tier"] == "finding"
    line = ex.run_line(["02_context_staircase", "03_x"], {"02_context_staircase": "ClaimError: x"},
                       "book")  # fmt: skip
    assert line.startswith("1 of 2 chapters failed to run at BOOK_SCALE=book: 2 context "
                           "staircase (ClaimError)")  # fmt: skip
    assert ex.run_line(["a", "b"], {}, "ci") == "All 2 chapters ran to the end at BOOK_SCALE=ci."

"""The book's one formatter: what a reader sees of every glued value and table cell."""

import math

import numpy as np
import pandas as pd
import pytest

from lib.book import page


@pytest.mark.parametrize(
    "x, text",
    [
        (0.123456, "0.123"),
        (1.0, "1"),
        (12345.678, "12346"),
        (3.2e-5, "3.2e-5"),
        (2.5e6, "2.5e6"),
        (7, "7"),
        (np.float64(0.224), "0.224"),
        (np.int64(3), "3"),
        (0.0, "0"),
        (float("nan"), page.MISSING),
        (None, page.MISSING),
        (math.inf, page.INFINITE),
        (-math.inf, "-" + page.INFINITE),
    ],
)
def test_number_writes_a_few_significant_figures_and_never_nan(x, text):
    assert page.number(x) == text


def test_number_signs_units_and_refuses_what_is_not_a_number():
    assert page.number(0.5, signed=True) == "+0.5" and page.number(-0.5, signed=True) == "-0.5"
    assert page.number(12, unit="steps") == "12 steps"
    with pytest.raises(TypeError, match="real number"):
        page.number("0.5")


def test_counts_lists_and_intervals_read_as_words():
    assert page.count(1, "logged step") == "1 logged step"
    assert page.count(3, "logged step") == "3 logged steps"
    assert page.count(0, "seed") == "no seed"
    assert page.count(2, "copy", "copies") == "2 copies"
    assert page.listing([]) == "no seed" and page.listing([], none="none of them") == "none of them"
    assert page.listing([2]) == "seed 2" and page.listing(np.array([0, 2, 3])) == "seeds 0, 2 and 3"
    assert page.listing(["FAFO", "FACO"], noun="") == "FAFO and FACO"
    assert page.interval(0.38, 0.331, 0.44) == "0.38 [0.331, 0.44]"
    assert page.interval(float("nan"), 0, 1) == page.MISSING
    assert page.share(np.int64(3), 5) == "3 of 5"


def test_glue_keeps_numbers_for_format_specs_and_refuses_containers(monkeypatch):
    glued = {}
    monkeypatch.setattr("myst_nb.glue", lambda k, v, display=True: glued.__setitem__(k, v))
    page.glue_all({"a": np.float64(0.1234567891234), "b": float("nan"), "c": "seeds 0 and 2",
                   "d": np.int64(4), "e": math.inf})  # fmt: skip
    assert glued == {"a": 0.123457, "b": page.MISSING, "c": "seeds 0 and 2", "d": 4,
                     "e": page.INFINITE}  # fmt: skip
    for bad in ([1, 2], np.arange(3), {"two": 1}, (0.1, 0.2)):
        with pytest.raises(TypeError, match="glue key 'x'"):
            page.glue_all({"x": bad})
    with pytest.raises(ValueError, match="identifier"):
        page.glue_all({"not a name": 1})


@pytest.mark.parametrize(
    "text, spec, shown",
    [
        ("0.5", ".2f", "0.50"),
        ("nan", ".2f", page.MISSING),
        ("'—'", "+.3f", page.MISSING),
        ("None", "d", page.MISSING),
        ("inf", ".1f", page.INFINITE),
        ("'∞'", ".0f", page.INFINITE),
        ("0.123456789", "", "0.123"),
        ("3", "", "3"),
        ("3", "s", "3"),
        ("'seeds 0 and 2'", "", "seeds 0 and 2"),
        ("0.25", ".0%", "25%"),
    ],
)
def test_a_glued_value_renders_without_machine_output(text, spec, shown):
    assert page.render_glued(text, spec) == shown


def test_tables_have_no_index_a_dash_for_missing_and_intervals():
    df = pd.DataFrame({"seed": [0, 1], "onset": [12.0, np.nan], "rate": ["x", (0.3, 0.2, 0.4)]})
    md = page.table_markdown(df)
    lines = md.splitlines()
    assert lines[0] == "| seed | onset | rate |" and lines[1] == "|---:|---:|---|"
    assert lines[3] == "| 1 | — | 0.3 [0.2, 0.4] |"
    named = df.set_index("seed")
    assert page.table_markdown(named).splitlines()[0] == "| seed | onset | rate |"
    rows = [{"a": 1, "b": None}]
    assert page.table_markdown(rows).splitlines()[2] == "| 1 | — |"
    with pytest.raises(TypeError, match="table cell"):
        page.table_markdown([{"a": [1, 2]}])
    with pytest.raises(ValueError, match="column names"):
        page.table_markdown([[1, 2]])


def test_exponents_are_short_and_a_zero_has_none():
    assert page.render_glued("3.2e-05", ".1e") == "3.2e-5"
    assert page.render_glued("0.0", ".1e") == "0"
    assert page.render_glued("12000.0", ".2e") == "1.20e4"


def test_a_value_close_to_one_is_not_written_as_one():
    assert page.number(0.9999437) == "0.9999" and page.number(0.995) == "0.995"
    assert page.number(-0.99995) == "-0.99995" and page.number(0.99999999) == "1"

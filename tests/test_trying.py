"""``make try``: a reader's own settings, validated, in a run that asserts nothing."""

import pytest

from bookbuild import trying
from lib.book import claims
from lib.env import CHAPTER_ENV, SET_ENV, ConfigError
from lib.experiments import ch01_signatures, config
from lib.experiments.settings import apply_settings, differences, parse_settings


def test_settings_are_python_literals_and_lists_become_tuples():
    got = parse_settings("gammas=(0.5, 1.0) seeds=[0, 1]  lr=3e-3 name='adam'")
    assert got == {"gammas": (0.5, 1.0), "seeds": (0, 1), "lr": 0.003, "name": "adam"}
    for bad, says in [("", "empty"), ("(0, 1)", "key=value"), ("gammas=(0.5,", "not a Python")]:
        with pytest.raises(ConfigError, match=says):
            parse_settings(bad)


def test_a_bad_key_and_a_bad_type_each_get_one_line():
    cfg = config(ch01_signatures, "ci")
    with pytest.raises(ConfigError) as key:
        apply_settings(cfg, {"top_token": 20})
    assert str(key.value) == ("chapter 01_signatures has no setting 'top_token'; "
                              "did you mean 'top_tokens'?")  # fmt: skip
    with pytest.raises(ConfigError) as kind:
        apply_settings(cfg, {"top_tokens": 0.5})
    assert "\n" not in str(kind.value) and "top_tokens must be int" in str(kind.value)
    tried = apply_settings(cfg, {"top_tokens": 20})
    assert differences(cfg, tried) == [("top_tokens", 20, cfg.top_tokens)]


def test_the_settings_reach_only_the_chapter_they_are_for(monkeypatch):
    monkeypatch.setenv(SET_ENV, "top_tokens=7")
    monkeypatch.setenv(CHAPTER_ENV, "02_context_staircase")
    assert config(ch01_signatures, "ci").top_tokens != 7  # another chapter's try
    monkeypatch.setenv(CHAPTER_ENV, "01_signatures")
    assert config(ch01_signatures, "ci").top_tokens == 7


def test_each_setting_has_its_own_folder_and_the_banner_names_what_differs(tmp_path):
    a = trying.folder_for("02_x", "seeds=(0, 1)", "ci", "cpu", tmp_path)
    b = trying.folder_for("02_x", "seeds=(0,1)", "ci", "cpu", tmp_path)
    c = trying.folder_for("02_x", "seeds=(0, 2)", "ci", "cpu", tmp_path)
    assert a == b != c and a.parent == tmp_path / trying.TRY_DIR
    text = trying.banner([("seeds", (0, 1), (0, 1, 2))], "seeds=(0, 1)")
    assert "`seeds` = `(0, 1)` (the book's: `(0, 1, 2)`)" in text and "class: warning" in text


def test_a_try_run_records_what_no_longer_holds_instead_of_failing(monkeypatch, tmp_path):
    monkeypatch.setenv(SET_ENV, "seeds=(0,)")
    led = claims.Ledger("02_x").section("s", label="recon", tier="finding")
    c = led.check("climb", "every stair comes", holds=[True, False])
    assert (c.status, c.verdict, c.try_verdict) == ("partly", claims.AS_MEASURED, "reproduced")
    assert led.held("climb") and "try run; the chapter says reproduced" in led.markdown()
    led.save(tmp_path)
    assert trying.no_longer_holds(tmp_path / "02_x.json") == [("climb", "partly", "reproduced")]
    assert trying.no_longer_holds(tmp_path / "03_none.json") == []
    monkeypatch.delenv(SET_ENV)
    with pytest.raises(claims.ClaimError):
        claims.Ledger("02_x").section("s", label="recon", tier="check").check(
            "c", "c", holds=[True, False]
        )


def test_every_chapters_config_is_in_range_at_every_scale_and_each_rule_bites():
    import dataclasses

    from lib.experiments import ch02_context_staircase, modules
    from lib.experiments.ranges import rule_for

    for stem, module in modules().items():
        for scale in ("ci", "book", "paper"):
            cfg = config(module, scale)  # raises on a value out of its range
            groups = [cfg]
            while groups:  # every numeric setting has a rule, in groups of settings too
                group = groups.pop()
                for f in dataclasses.fields(group):
                    value = getattr(group, f.name)
                    groups += [value] if dataclasses.is_dataclass(value) else []
                    numeric = isinstance(value, int | float) and not isinstance(value, bool)
                    assert not numeric or rule_for(f.name, group.RANGES), (
                        f"{stem}: no rule: {f.name}"
                    )
    cfg = config(ch02_context_staircase, "ci")
    for bad, says in [
        ({"gamma": -1}, "gamma must be > 0, got -1"),
        ({"gamma": float("inf")}, "gamma must be finite"),
        ({"seeds": (0, 0)}, "distinct seeds"),
        ({"seeds": ()}, "seeds must not be empty"),
        ({"two.steps": 0}, "two.steps must be >= 1, got 0"),
        ({"readings.null_q": 1.0}, "readings.null_q must be in (0, 1), got 1.0"),
        ({"two.gammas": (0.3, -1.0)}, "gammas must be > 0, got (0.3, -1.0)"),
        ({"d_model": 0}, "d_model must be >= 1"),
    ]:
        with pytest.raises(ConfigError) as err:
            apply_settings(cfg, bad)
        line = str(err.value)
        assert line.startswith("chapter 02_context_staircase at scale 'ci': "), line
        assert says in line and "\n" not in line, line


def test_a_config_may_name_its_own_ranges():
    import dataclasses
    from typing import ClassVar

    from lib.experiments import ChapterConfig

    @dataclasses.dataclass(frozen=True)
    class Config(ChapterConfig):
        RANGES: ClassVar[dict[str, str]] = {"gamma": "in grid", "level": "in (0, 2]"}
        grid: tuple[float, ...] = (0.5, 1.0)
        gamma: float = 1.0
        level: float = 2.0

    assert Config(level=1.5).level == 1.5
    with pytest.raises(ConfigError, match=r"gamma must be one of grid \(0.5, 1.0\), got 0.75"):
        Config(gamma=0.75)
    with pytest.raises(ConfigError, match=r"level must be in \(0, 2\], got 3"):
        Config(level=3)


def test_a_key_given_twice_is_refused():
    with pytest.raises(ConfigError, match="SET names seeds twice: give each setting once"):
        parse_settings("seeds=(0,) seeds=(1,)")


def test_a_try_names_exactly_one_chapter_that_has_settings():
    from bookbuild.notebook import ROOT, BuildError

    with pytest.raises(ConfigError, match="make try runs one chapter, and CH='1 2' names 2: 01_"):
        trying.chapter_to_try("1 2", ROOT)
    with pytest.raises(BuildError, match="no chapter '13'.* the chapters are 01_signatures, "):
        trying.chapter_to_try("13", ROOT)
    with pytest.raises(ConfigError, match="99_report has no settings to try; try one of: 01_"):
        trying.prepare("99", "x=1", "ci", ROOT)


def test_a_try_says_its_estimate_and_refuses_one_above_an_hour(monkeypatch):
    from bookbuild.notebook import ROOT

    monkeypatch.delenv(trying.LONG_ENV, raising=False)
    with pytest.raises(ConfigError, match="^chapter 02_context_staircase at scale 'ci': gamma "):
        trying.prepare("02", "gamma=-1", "ci", ROOT)  # before anything runs
    *_, seconds, why = trying.prepare("02", "two.steps=1200 seeds=(0,)", "ci", ROOT)
    book = trying.estimate("02_context_staircase", "ci", [], ROOT)[0]
    assert seconds == pytest.approx(book * 2 / 3)  # twice the steps, a third of the seeds
    assert "x 2 for two.steps" in why and "x 0.333 for seeds" in why
    with pytest.raises(ConfigError) as err:
        trying.prepare("02", "two.steps=1000000000", "ci", ROOT)
    hours = book * 1000000000 / 600 / 3600  # the recorded ci run, at its two.steps of 600
    assert f"this try would take about {hours:,.1f} hours" in str(err.value)
    assert "set BOOK_TRY_LONG=1 to start it anyway" in str(err.value)
    monkeypatch.setenv(trying.LONG_ENV, "1")
    assert trying.prepare("02", "two.steps=1000000000", "ci", ROOT)[4] > 3600
    monkeypatch.setenv(trying.LONG_ENV, "yes")
    with pytest.raises(ConfigError, match="BOOK_TRY_LONG='yes': set BOOK_TRY_LONG=1"):
        trying.prepare("02", "two.steps=10", "ci", ROOT)


def test_the_rerun_command_quotes_the_settings(monkeypatch):
    monkeypatch.setenv("BOOK_SCALE", "ci")
    got = trying.rerun_command("02_context_staircase", "seeds=(0, 1) name='a'")
    assert got == "BOOK_SCALE=ci make try CH=02 SET='seeds=(0, 1) name='\"'\"'a'\"'\"''"


def test_the_estimate_at_paper_is_make_paper_smokes_and_none_in_the_smoke_mode(
    tmp_path, monkeypatch
):
    monkeypatch.delenv("BOOK_SMOKE", raising=False)
    (tmp_path / trying.SMOKE_SUMMARY).parent.mkdir(parents=True)
    (tmp_path / trying.SMOKE_SUMMARY).write_text('[{"chapter": "02_b", "estimate_s": 7200}]')
    seconds, why = trying.estimate("02_b", "paper", [("seeds", (0, 1), (0,))], tmp_path)
    assert seconds == 14400 and "make paper-smoke's estimate" in why
    monkeypatch.setenv("BOOK_SMOKE", "1")
    assert trying.estimate("02_b", "paper", [], tmp_path)[0] is None


def test_a_group_of_settings_is_checked_overridden_and_tried_by_its_dotted_name():
    """Settings two chapters share (the runs they both read) live in one group, a
    ``SubConfig``: checked like any field and named with a dot, overridden by a dict of
    what changes, and tried one value at a time (``SET="runs.lr=0.5"``)."""
    import dataclasses
    import types

    from lib.experiments import ChapterConfig, SubConfig

    @dataclasses.dataclass(frozen=True)
    class Runs(SubConfig):
        lr: float = 1.0
        seeds: tuple[int, ...] = (0, 1)
        rates: tuple[float, ...] = (1.0,)

    @dataclasses.dataclass(frozen=True)
    class Config(ChapterConfig):
        runs: Runs = Runs()
        width: int = 8

    def module(ci):
        toy = types.ModuleType("toy")
        toy.CHAPTER, toy.Config, toy.OVERRIDES = "98_toy", Config, {"ci": ci}
        return toy

    cfg = config(module(dict(runs=dict(lr=2.0))), "ci")
    assert (cfg.runs, cfg.width, cfg.scale) == (Runs(lr=2.0), 8, "ci")
    for ci, says in [
        (dict(runs=dict(lr=1.0)), "the override lr=1.0 equals the book default"),
        (dict(runs=dict(lrr=2.0)), "in runs: unknown config key 'lrr'; did you mean 'lr'?"),
        (dict(runs=dict(lr=-2.0)), "runs.lr must be > 0, got -2.0"),
        (dict(runs=dict(lr="fast")), "runs.lr='fast' is a str, but runs.lr must be float"),
        (dict(runs=dict(seeds=(1, 1))), "runs.seeds must be a tuple of distinct seeds"),
        (dict(runs=dict(rates=(1.0, -1.0))), "each of runs.rates must be >= 1"),
    ]:
        with pytest.raises(ConfigError, match="^[^\n]*$") as err:
            config(module(ci), "ci")
        assert says in str(err.value) and "scale 'ci'" in str(err.value), str(err.value)
    tried = apply_settings(cfg, parse_settings("runs.lr=0.5 width=4"))
    assert (tried.runs, tried.width) == (Runs(lr=0.5), 4)
    assert differences(cfg, tried) == [("runs.lr", 0.5, 2.0), ("width", 4, 8)]
    assert apply_settings(cfg, parse_settings("runs={'seeds': (3,)}")).runs == Runs(2.0, (3,))
    for text, says in [
        ("runs.lrr=1.0", "has no setting 'runs.lrr'; did you mean 'runs.lr'?"),
        ("lr=1.0", "has no setting 'lr'; did you mean 'runs.lr'?"),
        ("runs_lr=1.0", "has no setting 'runs_lr'; did you mean 'runs.lr'?"),
        ("runs.lr=0.5 runs={'lr': 1.0}", "SET names runs and runs.lr: give one of them"),
        ("runs.lr=0.5 runs.lr=0.6", "SET names runs.lr twice"),
        ("runs.lr=-1.0", "runs.lr must be > 0, got -1.0"),
    ]:
        with pytest.raises(ConfigError, match="^[^\n]*$") as err:
            apply_settings(cfg, parse_settings(text))
        assert says in str(err.value), str(err.value)


def test_a_try_checks_its_settings_without_importing_the_chapters_code():
    import subprocess
    import sys
    from pathlib import Path

    code = (
        "import sys\nfrom lib.experiments import config, modules\n"
        "[config(m, s) for m in modules().values() for s in ('ci', 'book')]\n"
        "print(sorted(n for n in ('torch', 'numpy', 'matplotlib', 'scipy') if n in sys.modules))"
    )
    root = Path(__file__).resolve().parents[1]
    found = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True,
                           text=True, check=True).stdout  # fmt: skip
    assert found.strip() == "[]"


def test_a_chapters_names_load_when_read_and_win_over_its_modules_of_the_same_name():
    import types

    from lib.experiments import ch12_attention_that_learns as ex
    from lib.experiments.ch12_attention_that_learns import ratio  # it imports the module `model`

    assert ratio.model is ex.model and not isinstance(ex.model, types.ModuleType)
    assert ex.readings.__name__ == f"{ex.__name__}.readings" and "fig_escape" in dir(ex)
    with pytest.raises(AttributeError, match="no attribute 'nowhere'"):
        ex.nowhere  # noqa: B018

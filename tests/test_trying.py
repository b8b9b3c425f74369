"""``make try``: a reader's own settings, validated, in a run that asserts nothing."""

import pytest

from lib.book import claims, trying
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

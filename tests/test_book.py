"""Scale and device selection, and the build plumbing that keeps the book honest."""

from pathlib import Path

import pytest
import yaml

from lib import booktools
from lib.config import SCALES, ConfigError, chapter_config, get_device, get_scale

ROOT = Path(__file__).resolve().parent.parent


def test_scale_default_and_validation(monkeypatch):
    monkeypatch.delenv("BOOK_SCALE", raising=False)
    assert get_scale() in ("book", "paper")
    for s in SCALES:
        monkeypatch.setenv("BOOK_SCALE", s)
        assert get_scale() == s
    monkeypatch.setenv("BOOK_SCALE", "huge")
    with pytest.raises(ConfigError, match="ci, book, paper"):
        get_scale()


def test_device_override(monkeypatch):
    monkeypatch.setenv("BOOK_DEVICE", "cpu")
    assert get_device().type == "cpu"
    monkeypatch.setenv("BOOK_DEVICE", "toaster")
    with pytest.raises(ConfigError, match="toaster"):
        get_device()


def test_every_chapter_has_a_config_for_every_scale():
    chapters = sorted(p.stem for p in (ROOT / "chapters").glob("*.md"))
    assert chapters, "no chapters"
    for ch in chapters:
        for s in SCALES:
            cfg = chapter_config(ch, s)
            assert cfg["scale"] == s
    with pytest.raises(ConfigError, match="known chapters"):
        chapter_config("99_nonexistent", "ci")


def test_chapters_are_runnable_myst_notebooks_and_in_toc():
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    files = {c["file"] for part in toc["parts"] for c in part["chapters"]}
    for md in sorted((ROOT / "chapters").glob("*.md")):
        nb = booktools.check_chapter(md)  # raises on a non-MyST header or no code cells
        assert f"chapters/{md.stem}" in files, f"{md} is not in _toc.yml"
        src = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
        assert "announce(" in src, f"{md}: the first output must state scale and device"
        assert "assert " in nb.cells[-1].source or "assert " in src.rsplit("\n\n", 1)[-1], (
            f"{md}: a chapter ends by asserting its headline claims"
        )


def test_check_chapter_refuses_markdown_only_header(tmp_path):
    bad = tmp_path / "bad.md"
    bad.write_text(
        "---\njupytext:\n  text_representation:\n    format_name: markdown\n---\n\n```{code-cell} ipython3\n1\n```\n"
    )
    with pytest.raises(ValueError, match="extension: .md"):
        booktools.check_chapter(bad)


def test_cache_is_cleared_when_lib_changes(tmp_path):
    cache = tmp_path / "cache"
    assert booktools.refresh_cache(cache, "aaa")  # new cache
    (cache / "executed.db").write_text("x")
    assert not booktools.refresh_cache(cache, "aaa")
    assert (cache / "executed.db").exists()
    assert booktools.refresh_cache(cache, "bbb")  # lib changed
    assert not (cache / "executed.db").exists()


def test_source_stamp_tracks_lib_and_scale(tmp_path):
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "a.py").write_text("x = 1\n")
    s1 = booktools.source_stamp(tmp_path, scale="ci")
    assert s1 == booktools.source_stamp(tmp_path, scale="ci")
    assert s1 != booktools.source_stamp(tmp_path, scale="book")
    (tmp_path / "lib" / "a.py").write_text("x = 2\n")
    assert s1 != booktools.source_stamp(tmp_path, scale="ci")

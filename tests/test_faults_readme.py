"""The README's ``make try`` lines run as written.

Each ``make try ...`` line of the README's code blocks goes through the project's Makefile
exactly as a reader types it, at BOOK_SCALE=ci with every training run cut to two steps
(BOOK_SMOKE=1), and must finish and write its page. The book's folder is a temporary one
that links to the project's sources, so the runs land in its ``build/try/``, not the
project's. Run by ``make faults`` and ``make test``: each line executes a chapter in a kernel
and builds its page. Also here: the helpers that let Chapter 8 run on any ratio grid.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
from toybook import PROJECT, make

from lib.experiments import ch08_sharper_attention as ch08

# What a try run reads from the book's folder: its chapters and library, the book's files.
SOURCES = ("chapters", "lib", "_ext", "docs", "_config.yml", "_toc.yml", "index.md",
           "references.bib", "pyproject.toml", "requirements.txt", "requirements-data.txt")  # fmt: skip


def try_lines(readme: Path) -> list[list[str]]:
    """Every ``make try ...`` line in the code blocks of ``readme``, split as a shell would
    (its comment left out)."""
    blocks = re.findall(r"^```[^\n]*\n(.*?)^```", readme.read_text(encoding="utf-8"), re.M | re.S)
    lines = [line.strip() for block in blocks for line in block.splitlines()]
    return [shlex.split(line, comments=True) for line in lines if line.startswith("make try ")]


def test_the_readme_has_try_lines_to_run():
    found = try_lines(PROJECT / "README.md")
    assert len(found) >= 2, "the README's 'Try it yourself' lost its make try examples"
    assert all(argv[:2] == ["make", "try"] for argv in found)
    assert ["make", "try", "CH=02", "SET=gamma=0.75 seeds=(0, 1)"] in found


@pytest.mark.parametrize("argv", try_lines(PROJECT / "README.md"), ids=shlex.join)
def test_a_readme_try_line_runs_and_writes_its_page(argv, tmp_path):
    root = tmp_path / "book"
    root.mkdir()
    for name in SOURCES:
        (root / name).symlink_to(PROJECT / name)
    proc = make(root, *argv[1:], env={"BOOK_SMOKE": "1"})
    out, _ = proc.communicate(timeout=600)
    assert proc.returncode == 0, f"{shlex.join(argv)} failed:\n{out[-3000:]}"
    stem = re.search(r"CH=(\S+)", shlex.join(argv)).group(1)
    pages = list((root / "build" / "try").glob(f"{stem}*/_build/html/chapters/*.html"))
    assert len(pages) == 1 and pages[0].stem.startswith(stem), out[-3000:]
    assert "A try run, not the book" in pages[0].read_text(encoding="utf-8")


def test_chapter_8_reads_any_ratio_grid_and_says_which_ratio_stands_for_the_codes():
    assert ch08.sweep_ratios((1.0, 3.0, 5.0, 10.0)) == (1.0, 3.0, 5.0, 10.0)  # the book's
    assert ch08.sweep_ratios((2.0, 20.0)) == (1.0, 2.0, 20.0)  # r = 1, the reference, added
    assert ch08.nearest_ratio((1.0, 3.0, 5.0, 10.0), 5.0) == 5.0
    assert ch08.nearest_ratio((1.0, 2.0, 20.0), 5.0) == 2.0  # nearest on a log scale
    rows = [{"panel": "FAFO", "status": "reproduced"}, {"panel": ch08.CODE_PANEL, "status": "x"}]
    assert ch08.code_panel_rows(rows, 5.0) == rows
    assert ch08.code_panel_rows(rows, 2.0)[1] == {"panel": "CACO, r=2", "status": "not comparable"}
    assert [ch08.picks(n) for n in (1, 2, 3, 5)] == [(0, 0, 0), (0, 1, 1), (0, 1, 2), (0, 2, 4)]
    assert len(ch08.shades((0.5, 0.5, 0.5), 4)) == 4
    assert ch08.shades((0.5, 0.2, 0.0), 3)[1] == (0.5, 0.2, 0.0)  # the colour itself, mid-grid

"""A toy two-chapter book, built by the tests of the build pipeline in a temporary folder
(tests/test_build.py, tests/test_faults.py): the book's own build, on chapters of a second.
Also: a folder built once per test session for the tests that only read it, and a copy of
the toy with both chapters executed, for the tests that start from an executed book."""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

PROJECT = Path(__file__).resolve().parent.parent
HEADER = """---
jupytext:
  text_representation:
    extension: .md
    format_name: myst
kernelspec:
  display_name: Python 3
  language: python
  name: python3
---
"""
CHAPTER_A = """
# A

```{code-cell} ipython3
import os
from lib.a import VALUE
print("value", VALUE, "scale", os.environ["BOOK_SCALE"])
```
"""
CHAPTER_B = """
# B

```{code-cell} ipython3
import os, pathlib, time
from lib import b
if "TOY_MARK" in os.environ:  # tells the test that this kernel is running
    pathlib.Path(os.environ["TOY_MARK"]).write_text(str(os.getpid()))
time.sleep(float(os.environ.get("TOY_SLEEP", "0")))
print("word", b.WORD)
```
"""


def make_toy(folder: Path) -> Path:
    """Write the toy book into ``folder``; return it."""
    (folder / "chapters").mkdir(parents=True)
    (folder / "lib").mkdir()
    (folder / "_config.yml").write_text(
        'title: Toy\nonly_build_toc_files: true\nexecute:\n  execute_notebooks: "off"\n'
    )
    (folder / "_toc.yml").write_text(
        "format: jb-book\nroot: index\nchapters:\n  - file: chapters/01_a\n  - file: chapters/02_b\n"
    )
    (folder / "index.md").write_text("# Toy\n\nA toy book.\n")
    (folder / "lib" / "__init__.py").write_text("")
    (folder / "lib" / "a.py").write_text("VALUE = 1\n")
    (folder / "lib" / "b.py").write_text('WORD = "first"\n')
    (folder / "chapters" / "01_a.md").write_text(HEADER + CHAPTER_A)
    (folder / "chapters" / "02_b.md").write_text(HEADER + CHAPTER_B)
    return folder


def cli(toy: Path, *args: str, env=None, **kw) -> subprocess.Popen:
    """``python -m bookbuild ARGS`` in its own session, at ci scale on the CPU."""
    full = {**os.environ, "BOOK_SCALE": "ci", "BOOK_DEVICE": "cpu", **(env or {})}
    cmd = [sys.executable, "-m", "bookbuild", *args]
    return subprocess.Popen(cmd, cwd=PROJECT, env=full, text=True, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, start_new_session=True, **kw)  # fmt: skip


def make(toy: Path, *args: str, env=None) -> subprocess.Popen:
    """The project's Makefile on the toy book, in its own session: its outputs, lock and
    build in the toy's folder, the project's environment (``STAMP``: already installed)."""
    (toy / ".installed").touch()
    full = {**os.environ, "BOOK_SCALE": "ci", "BOOK_DEVICE": "cpu", **(env or {})}
    full.pop("MAKEFLAGS", None)  # not the jobs of a make that runs these tests
    full.pop("MFLAGS", None)
    folders = [f"BOOK_ROOT={toy}", f"EXECUTED={toy}/build/executed", f"STAGED={toy}/build/book",
               f"LOCKFILE={toy}/.book.lock", f"STAMP={toy}/.installed", f"SMOKE={toy}/smoke"]  # fmt: skip
    cmd = ["make", "--no-print-directory", "-C", str(PROJECT), *folders, *args]
    return subprocess.Popen(cmd, env=full, text=True, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip


def alive(pid: int) -> bool:
    """Whether process ``pid`` still exists."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def outlived(pids, within: float = 0.5) -> list[int]:
    """The processes of ``pids`` still there ``within`` seconds from now (looked at every
    20 ms: the wait ends as soon as all have gone)."""
    deadline = time.monotonic() + within
    while (left := [pid for pid in pids if alive(pid)]) and time.monotonic() < deadline:
        time.sleep(0.02)
    return left


def toy_module(monkeypatch, **fields):
    """Make the toy's chapter 01_a a chapter with settings: an experiment module whose
    ``Config`` has ``fields`` (name=default), found by :func:`lib.experiments.module_for`."""
    import dataclasses
    import types

    from lib.experiments import ChapterConfig

    config = dataclasses.make_dataclass(
        "Config", [(k, type(v), v) for k, v in fields.items()], bases=(ChapterConfig,), frozen=True
    )
    module = types.ModuleType("toy_ch01_a")
    module.CHAPTER, module.Config, module.OVERRIDES = "01_a", config, {}
    monkeypatch.setattr("lib.experiments.module_for", lambda stem: module)
    return module


def shared_folder(tmp_path_factory, name: str, build: Callable[[Path], object]) -> Path:
    """The folder ``name`` that ``build(folder)`` fills once per test session, for tests that
    only read it: under pytest-xdist the first worker that asks builds it while the others
    wait. A build that raises is tried again by the next test that asks."""
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent  # this session's folder, above each worker's own
    folder, done = base / name, base / f"{name}.done"
    with open(base / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.exists():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            build(folder)
            done.touch()
    return folder


def _execute_toy(folder: Path) -> None:
    from bookbuild.execute import execute

    make_toy(folder)
    execute(folder / "build" / "executed", "ci", "cpu", folder, log=lambda *a: None)


def executed_toy(tmp_path_factory, folder: Path) -> Path:
    """A copy, in ``folder``, of the toy book with both chapters executed at ci scale on the
    CPU (executed once per test session). A chapter's stamp holds paths relative to the
    book's folder, so the copy's chapters are up to date (a test that copies it says so)."""
    shared = shared_folder(tmp_path_factory, "executed-toy", _execute_toy)
    shutil.copytree(shared, folder, symlinks=True)
    return folder

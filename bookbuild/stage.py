"""Staging: a copy of the book whose chapters are the executed notebooks, execution off."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from .fold import stage_notebook
from .mathjax import Copies, stage_mathjax
from .notebook import ROOT, BuildError, atomic_write, chapters, write_error

BOOK_FILES = (
    "_config.yml",
    "_toc.yml",
    "index.md",
    "references.bib",
    "_ext/book_ext.py",
    "_ext/static/book.css",
)
MD_FOLDER = "md"  # the chapters' Markdown sources, served for download (_ext/book_ext.py)
NOT_EXECUTED = "_not_executed.txt"  # the pages whose warnings _ext/book_ext.py does not show


def _write_if_changed(dst: Path, text: str) -> None:
    if not dst.exists() or dst.read_text() != text:
        try:
            atomic_write(dst, text)
        except OSError as err:
            raise BuildError(write_error(err, dst)) from None


def stage(
    executed: Path,
    out: Path,
    root: Path = ROOT,
    partial: bool = False,
    doctrees: Path | None = None,
) -> Path:
    """A copy of the book whose chapters are the executed notebooks, with execution off.

    Files are copied only when they changed, so Sphinx re-reads exactly the pages whose
    notebooks were executed again; every copy is verified against its source, and one that
    a full disk left short is made again (:class:`bookbuild.mathjax.Copies`). With ``partial`` (``make chapter``), a chapter never
    executed is staged as its source, a page without outputs, and said so in one line;
    Sphinx then shows no warning about those pages (they are listed in
    ``_not_executed.txt``, read by ``_ext/book_ext.py``), only those of the others. When a
    book-wide file changed (the config, the toc, the Sphinx extension), Sphinx's saved
    environment ``doctrees`` is removed, so that every page is read again.
    """
    config = (root / "_config.yml").read_text()
    if 'execute_notebooks: "off"' not in config:
        raise BuildError(
            "_config.yml must set 'execute_notebooks: \"off\"': chapters are executed by "
            "bookbuild, never by jupyter-book"
        )
    copies = Copies(out)  # every copied file verified against its source (bookbuild/mathjax.py)
    changed = [n for n in BOOK_FILES if (root / n).exists() and copies.file(root / n, out / n)]
    if changed and doctrees is not None and doctrees.exists():
        print(f"{', '.join(changed)} changed: every page is read again")
        shutil.rmtree(doctrees)
    shutil.rmtree(out / "_static" / "mathjax", ignore_errors=True)  # an earlier layout
    stage_mathjax(out / "_extra" / "mathjax", copies)
    wanted, not_executed = set(), []
    for md in chapters(root):
        copies.file(md, out / "_extra" / MD_FOLDER / "chapters" / md.name)
        nb = executed / f"{md.stem}.ipynb"
        if not nb.exists() and partial:
            not_executed.append(md.stem)
            nb = md
        elif not nb.exists():
            raise BuildError(f"{nb} does not exist: execute chapter {md.stem} first")
        else:
            cells = json.loads(nb.read_text(encoding="utf-8"))["cells"]
            code = [c for c in cells if c["cell_type"] == "code" and c["source"]]
            if not any(c.get("outputs") for c in code):
                raise BuildError(f"{nb} has no outputs: it was never executed")
        if nb.suffix == ".ipynb":
            try:
                stage_notebook(nb, out / "chapters" / nb.name)
            except OSError as err:
                raise BuildError(write_error(err, out / "chapters" / nb.name)) from None
        else:
            copies.file(nb, out / "chapters" / nb.name)
        wanted.add(nb.name)
    for old in (out / "chapters").glob("*"):
        if old.name not in wanted:
            old.unlink()
    if not_executed:
        print(f"not executed yet, so their pages show the code without outputs (and no "
              f"warnings): {', '.join(not_executed)}")  # fmt: skip
    copies.save()
    listed = "".join(f"chapters/{stem}\n" for stem in not_executed)
    if listed:
        _write_if_changed(out / NOT_EXECUTED, listed)
    else:
        (out / NOT_EXECUTED).unlink(missing_ok=True)
    return out

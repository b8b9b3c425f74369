"""Build plumbing for the book, called by the Makefile (``python -m lib.booktools CMD``).

* ``stamp``: jupyter-cache keys a notebook only on its own code, so a change to
  ``lib/`` (or to the scale) would leave stale outputs in the book. Before every
  build we hash ``lib/``, the requirements and the scale; when the hash differs
  from the one stored beside the cache, the cache is cleared and every chapter
  re-executes.
* ``convert``: chapters are jupytext MyST-Markdown; nbmake collects only
  ``.ipynb``. Convert each chapter, refusing one whose header is not MyST (which
  would silently turn its code cells into Markdown) or that has no code cell.
* ``stage``: the strict build in the test command reuses the notebooks nbmake just
  executed, instead of executing every chapter a second time.
"""

from __future__ import annotations

import hashlib
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STAMP_NAME = "lib-stamp.txt"


def source_stamp(root: Path = ROOT, scale: str | None = None) -> str:
    """Hash of everything a chapter's outputs depend on besides its own code."""
    from .config import get_device, get_scale

    h = hashlib.sha256()
    files = sorted((root / "lib").rglob("*.py")) + [
        root / "requirements.txt",
        root / "requirements-data.txt",
    ]
    for f in files:
        if f.exists():
            h.update(str(f.relative_to(root)).encode())
            h.update(f.read_bytes())
    h.update(f"scale={scale or get_scale()};device={get_device().type}".encode())
    return h.hexdigest()


def refresh_cache(cache: Path, stamp: str) -> bool:
    """Clear ``cache`` if its stored stamp differs from ``stamp``; return True if cleared."""
    stored = cache / STAMP_NAME
    if stored.exists() and stored.read_text().strip() == stamp:
        return False
    if cache.exists():
        shutil.rmtree(cache)
    cache.mkdir(parents=True)
    stored.write_text(stamp + "\n")
    return True


def check_chapter(path: Path):
    """Read a chapter with jupytext; raise ValueError unless it is a runnable MyST notebook."""
    import jupytext

    text = path.read_text(encoding="utf-8")
    head = text.split("---", 2)[1] if text.startswith("---") else ""
    for needle in ("extension: .md", "format_name: myst", "kernelspec:"):
        if needle not in head:
            raise ValueError(
                f"{path}: the jupytext header lacks {needle!r}; without it jupytext reads the "
                "code cells as Markdown and the chapter would 'pass' without running anything"
            )
    nb = jupytext.reads(text, fmt="md:myst")
    n_code = sum(c.cell_type == "code" for c in nb.cells)
    if n_code == 0:
        raise ValueError(f"{path}: no code cells")
    return nb


def convert(out_dir: Path, chapters: Path = ROOT / "chapters") -> list[Path]:
    """Write every chapter as an .ipynb into ``out_dir`` (for nbmake and ruff)."""
    import jupytext

    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for md in sorted(chapters.glob("*.md")):
        nb = check_chapter(md)
        target = out_dir / (md.stem + ".ipynb")
        jupytext.write(nb, target, fmt="ipynb")
        written.append(target)
    if not written:
        raise ValueError(f"no chapters found in {chapters}")
    return written


def stage(executed: Path, out: Path, root: Path = ROOT) -> Path:
    """A copy of the book whose chapters are the executed notebooks, with execution off."""
    if out.exists():
        shutil.rmtree(out)
    (out / "chapters").mkdir(parents=True)
    for name in ("_toc.yml", "index.md", "references.bib"):
        shutil.copy(root / name, out / name)
    config = (root / "_config.yml").read_text()
    if "execute_notebooks: cache" not in config:
        raise ValueError("_config.yml must set 'execute_notebooks: cache'")
    (out / "_config.yml").write_text(
        config.replace("execute_notebooks: cache", 'execute_notebooks: "off"')
    )
    chapters = sorted((root / "chapters").glob("*.md"))
    for md in chapters:
        nb = executed / (md.stem + ".ipynb")
        if not nb.exists():
            raise FileNotFoundError(f"{nb} was not executed (run nbmake with --overwrite first)")
        shutil.copy(nb, out / "chapters" / nb.name)
    return out


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__)
        return 2
    cmd, args = argv[0], argv[1:]
    if cmd == "stamp":
        cache = Path(args[0]) if args else ROOT / ".jupyter_cache"
        cleared = refresh_cache(cache, source_stamp())
        print(
            f"{cache}: "
            + (
                "lib/ or scale changed: cache cleared, chapters will re-execute"
                if cleared
                else "up to date"
            )
        )
    elif cmd == "convert":
        for p in convert(Path(args[0])):
            print(f"converted {p}")
    elif cmd == "stage":
        print(f"staged {stage(Path(args[0]), Path(args[1]))}")
    else:
        print(f"unknown command {cmd!r}; use stamp, convert or stage", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""Chapters as notebooks: read and check a chapter, convert every chapter to ``.ipynb``,
execute one in a fresh kernel, and the worker process that does so.

This module imports nothing from ``lib`` (whose ``__init__`` imports torch): a worker
process of :mod:`lib.book.pool` loads this file alone and calls :func:`run_child`.
"""

from __future__ import annotations

import os
import signal
import tempfile
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # the book's folder
STAMP_KEY = "book_stamp"
CELL_TIMEOUT = 1200  # seconds; a book-scale chapter runs in under 10 minutes


class BuildError(RuntimeError):
    """A build step failed; the message names the chapter or file and the fix."""


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


def chapters(root: Path = ROOT) -> list[Path]:
    found = sorted((root / "chapters").glob("*.md"))
    if not found:
        raise BuildError(f"no chapters found in {root / 'chapters'}")
    return found


def convert(out_dir: Path, root: Path = ROOT) -> list[Path]:
    """Write every chapter as an .ipynb into ``out_dir`` (for nbmake and ruff)."""
    import jupytext

    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for md in chapters(root):
        target = out_dir / (md.stem + ".ipynb")
        jupytext.write(check_chapter(md), target, fmt="ipynb")
        written.append(target)
    return written


def atomic_write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text)
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)


def kernels_over_ipc() -> None:
    """Start every Jupyter kernel of this process on Unix sockets with paths of its own.

    Over TCP each kernel takes five free ports, found by binding port 0 and letting go: two
    kernels starting at once in two processes (two chapters side by side) can be handed the
    same port, and one dies ("Address already in use"; seen once in ``make test``). A socket
    path made from a fresh UUID cannot collide.
    """
    from jupyter_client.manager import AsyncKernelManager, KernelManager

    def own_path(self):
        return os.path.join(tempfile.gettempdir(), f"kernel-{uuid.uuid4().hex}-ipc")

    KernelManager.transport.default_value = "ipc"  # one trait, shared by the subclasses
    for cls in (KernelManager, AsyncKernelManager):
        cls._ip_default = own_path  # traitlets looks a default up in the class itself first


def execute_one(md: Path, out: Path, stamp: str, root: Path = ROOT) -> None:
    """Execute chapter ``md`` in a fresh kernel (cwd: the book root) and write ``out``."""
    import nbformat
    from nbclient import NotebookClient

    kernels_over_ipc()
    nb = check_chapter(md)
    nb.metadata[STAMP_KEY] = stamp
    client = NotebookClient(
        nb, timeout=CELL_TIMEOUT, kernel_name="python3", resources={"metadata": {"path": str(root)}}
    )
    client.execute()
    atomic_write(out, nbformat.writes(nb))


def run_child(md: str, out: str, stamp: str, root: str) -> int:
    """One worker: execute one chapter; SIGTERM shuts the kernel down before exiting."""

    def stop(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)
    try:
        execute_one(Path(md), Path(out), stamp, Path(root))
    except KeyboardInterrupt:
        print(f"{Path(md).stem}: interrupted")
        return 130
    except Exception as err:  # the cell's error, with its traceback, names the cause
        text = str(err)
        print(text)
        tail = [ln for ln in text.splitlines() if ln.strip()]
        print(tail[-1] if tail else type(err).__name__)
        return 1
    return 0

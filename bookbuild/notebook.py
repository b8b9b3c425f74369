"""Chapters as notebooks: read and check a chapter, convert every chapter to ``.ipynb``,
execute one in a fresh kernel, and the worker process that does so.

This module imports nothing from ``lib``: a worker process of :mod:`bookbuild.pool` loads
this file alone, without its package, and calls :func:`run_child`.
"""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import tempfile
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]  # the book's folder
STAMP_KEY = "book_stamp"
FAILED_KEY = (
    "book_failed"  # a chapter that failed: the one line of its error (its notebook's metadata)
)
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


def select_chapters(names: str | list[str] | None, root: Path = ROOT) -> list[Path]:
    """The chapters that ``names`` name exactly, in book order (``None`` or empty: all).

    ``names`` is a list, or one string of names separated by spaces or commas (``CH`` of
    the Makefile). A chapter is named by its file's stem (``02_context_staircase``) or by
    its number, with or without the leading zero (``02``, ``2``). Anything else (``0``,
    ``1x``, ``-h``, a prefix of two chapters) is refused with one line that lists the
    chapters: never a guess.
    """
    found = chapters(root)
    if isinstance(names, str):
        names = names.replace(",", " ").split()
    if not names:
        return found
    by_name: dict[str, list[Path]] = {}
    for md in found:
        by_name[md.stem] = [md]
        number = md.stem.partition("_")[0]
        if number.isascii() and number.isdigit():
            by_name.setdefault(str(int(number)), []).append(md)
    wanted = []
    for name in names:
        key = str(int(name)) if name.isascii() and name.isdigit() else name
        if len(by_name.get(key, ())) > 1:
            raise BuildError(
                f"chapter {name!r} is ambiguous: name one of "
                f"{', '.join(md.stem for md in by_name[key])} by its stem"
            )
        if key not in by_name:
            stem = found[min(1, len(found) - 1)].stem
            number = stem.partition("_")[0]
            forms = f"{int(number)}, {number} or {stem}" if number.isdigit() else stem
            raise BuildError(
                f"no chapter {name!r}: name one by its number or its file's stem (e.g. "
                f"{forms}); the chapters are {', '.join(md.stem for md in found)}"
            )
        wanted += by_name[key]
    return [md for md in found if md in wanted]


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
    """Write ``text`` to ``path`` through a temporary file beside it, renamed into place:
    ``path`` is either the old file or the whole new one. The temporary file is removed
    on every exit path (a full disk, an interrupt)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


_CAUSES = {
    errno.ENOSPC: "the disk is full",
    errno.EDQUOT: "the disk quota is used up",
    errno.EROFS: "the file system is read-only",
    errno.EACCES: "permission denied",
    errno.EPERM: "not permitted (an immutable file or folder?)",
    errno.EFBIG: "the file is larger than this process may write",
}


def write_error(err: OSError, path: Path | str | None = None) -> str:
    """One line for a write that failed: the path, and the cause in words.

    A copy's error names its target (``filename2``), not its source; a ``shutil.Error``
    (``copytree``: a list of ``(source, target, message)``) is read for its first failure."""
    code, strerror = err.errno, err.strerror
    where = path if path is not None else (err.filename2 or err.filename)
    failures = err.args[0] if err.args and isinstance(err.args[0], list) else []
    if failures and len(failures[0]) == 3:  # shutil.Error: the messages of its copies
        where, message = where or failures[0][1], str(failures[0][2])
        code = next((c for c in _CAUSES if os.strerror(c) in message), None)
        strerror = os.strerror(code) if code is not None else message
    cause = _CAUSES.get(code, strerror or str(err) or type(err).__name__)
    detail = f" ({strerror})" if strerror and cause != strerror else ""
    return f"cannot write {where or 'a file'}: {cause}{detail}"


# Seconds a kernel is given to end after its shutdown request, half of them before SIGTERM
# (jupyter_client's default: 5). Once the cells have run, nothing of the kernel is kept. An
# ipykernel sometimes hangs at shutdown (its control thread waits on an output thread that
# has already stopped) until SIGTERM: 4 of 38 measured shutdowns took 3.5 s, not 0.1 s.
SHUTDOWN_WAIT = 1.0


def kernel_defaults() -> None:
    """Start every Jupyter kernel of this process on Unix sockets with paths of its own, and
    stop it within :data:`SHUTDOWN_WAIT` seconds.

    Over TCP each kernel takes five free ports, found by binding port 0 and letting go: two
    kernels starting at once in two processes (two chapters side by side) can be handed the
    same port, and one dies ("Address already in use"; seen once in ``make test``). A socket
    path made from a fresh UUID cannot collide.
    """
    from jupyter_client.manager import AsyncKernelManager, KernelManager

    def own_path(self):
        return os.path.join(tempfile.gettempdir(), f"kernel-{uuid.uuid4().hex}-ipc")

    KernelManager.transport.default_value = "ipc"  # one trait, shared by the subclasses
    KernelManager.shutdown_wait_time.default_value = SHUTDOWN_WAIT
    for cls in (KernelManager, AsyncKernelManager):
        cls._ip_default = own_path  # traitlets looks a default up in the class itself first


class WriteFailed(RuntimeError):
    """The chapter ran, but its notebook could not be written (the message says why)."""


def execute_one(
    md: Path,
    out: Path,
    stamp: str,
    root: Path = ROOT,
    published: Path | None = None,
    source: Path | None = None,
) -> None:
    """Execute chapter ``md`` in a fresh kernel (cwd: the book root) and write ``out``.

    ``published``: where ``out`` will be published, named when the write fails.
    ``source``: the chapter already read as a notebook (:func:`write_source`), so that
    this process need not load jupytext (a fifth of a second of a worker's start)."""
    import nbformat
    from nbclient import NotebookClient

    kernel_defaults()
    nb = nbformat.read(source, as_version=4) if source is not None else check_chapter(md)
    nb.metadata[STAMP_KEY] = stamp
    nb.metadata["book_chapter"] = md.stem.partition("_")[0]
    client = NotebookClient(
        nb, timeout=CELL_TIMEOUT, kernel_name="python3", resources={"metadata": {"path": str(root)}}
    )
    try:
        client.execute()
    except Exception as err:  # the cells that ran, under a banner that names the failure
        mark_failed(nb, failure_line(err), stamp)
        with contextlib.suppress(OSError):
            atomic_write(out, nbformat.writes(nb))
        raise
    try:
        atomic_write(out, nbformat.writes(nb))
    except OSError as err:
        raise WriteFailed(write_error(err, published or out)) from None


def write_source(md: Path, path: Path) -> None:
    """Chapter ``md`` read and checked (:func:`check_chapter`), written to ``path`` as the
    notebook that :func:`execute_one` runs."""
    import nbformat

    atomic_write(path, nbformat.writes(check_chapter(md)))


def failure_line(err: BaseException) -> str:
    """One line for a chapter's failure: the cell's error and its message (its last line)."""
    name, value = getattr(err, "ename", None), getattr(err, "evalue", None)
    text = f"{name}: {value}" if name else f"{type(err).__name__}: {err}"
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return " ".join(lines)[:2000] if lines else type(err).__name__


BANNER = """```{{admonition}} This chapter failed to execute
:class: error
The build ran this chapter and stopped at an error: `{reason}`. The cells below are the
ones that ran, with their outputs; the chapter's claims were not recorded, and the
reproduction report marks the chapter as failed. Rerun it with `make chapter CH={number}`.
```"""


def mark_failed(nb, reason: str, stamp: str) -> None:
    """Mark a partly executed notebook as failed: a banner right under its title naming the
    error, the error in its metadata (:data:`FAILED_KEY`), and a stamp that matches no
    chapter, so that the next build runs it again."""
    import nbformat

    number = str(nb.metadata.get("book_chapter", "NN"))
    text = BANNER.format(reason=reason.replace("`", "'"), number=number)
    for cell in nb.cells:  # right under the title, above everything else
        lines = cell.source.split("\n") if cell.cell_type == "markdown" else []
        title = next((i for i, ln in enumerate(lines) if ln.startswith("# ")), None)
        if title is not None:
            cell.source = "\n".join([*lines[: title + 1], "", text, "", *lines[title + 1 :]])
            break
    else:
        nb.cells.insert(0, nbformat.v4.new_markdown_cell(text))
    nb.metadata[FAILED_KEY] = reason
    nb.metadata[STAMP_KEY] = "failed:" + stamp


def failed_reason(path: Path) -> str | None:
    """The one line of the failure of an executed notebook marked failed, else ``None``."""
    import json

    try:
        meta = json.loads(path.read_text(encoding="utf-8")).get("metadata", {})
    except (OSError, ValueError):
        return None
    return meta.get(FAILED_KEY)


WRITE_FAILED = 3  # a worker's exit status when its chapter ran but could not be written


def run_child(
    md: str, out: str, stamp: str, root: str, published: str | None = None, source: str = ""
) -> int:
    """One worker: execute one chapter; SIGTERM or SIGHUP shuts the kernel down before
    exiting (the first one: a second would cut the shutdown short)."""
    stopping = []

    def stop(signum, frame):
        if not stopping:
            stopping.append(signum)
            raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGHUP, stop)
    try:
        execute_one(Path(md), Path(out), stamp, Path(root), published and Path(published),
                    Path(source) if source else None)  # fmt: skip
    except KeyboardInterrupt:
        print(f"{Path(md).stem}: interrupted")
        return 130
    except WriteFailed as err:
        print(err)
        return WRITE_FAILED
    except Exception as err:  # the cell's error, with its traceback, names the cause
        text = str(err)
        print(text)
        tail = [ln for ln in text.splitlines() if ln.strip()]
        print(tail[-1] if tail else type(err).__name__)
        return 1
    return 0

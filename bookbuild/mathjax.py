"""What staging copies, verified: MathJax for pages that show math offline (found in the
installed django-static-mathjax package) and the book's own files.

Every copy is checked against its source by size and SHA-256, and a copy that is missing,
truncated or changed is made again on the next run. A folder of copies keeps a manifest,
:data:`MANIFEST`: ``{relative path: [size, SHA-256, source mtime, copy mtime]}``, written
once every copy of a run is complete. A copy whose size and both times match its entry is
trusted without being read; any other is hashed. A file is written through a temporary
file renamed into place, so a failed write (a full disk) leaves no partial file, and is
named in one line with its cause.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shlex
import shutil
import sys
import tempfile
from pathlib import Path

from .notebook import BuildError, atomic_write, write_error

MANIFEST = ".copies.json"
MATHJAX_PIN = "django-static-mathjax==3.2.2.1"


def mathjax_dir() -> Path:
    """MathJax 3's ``es5`` folder inside the installed django-static-mathjax package.

    Found without importing the package (it is a Django app; only its files are used).
    """
    import importlib.util

    spec = importlib.util.find_spec("mathjax")
    path = Path(spec.submodule_search_locations[0]) / "static" / "mathjax" / "es5" if spec else None
    if path is None or not (path / "tex-chtml.js").is_file():
        raise BuildError(
            "MathJax is not installed, so the pages could not show math offline; install "
            f"it with: {shlex.quote(sys.executable)} -m pip install {MATHJAX_PIN}"
        )
    return path


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        while chunk := fh.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def copy_file(src: Path, dst: Path) -> None:
    """Copy ``src`` to ``dst`` through a temporary file beside it, renamed into place; a
    failure raises :class:`BuildError` naming ``dst`` and the cause, and leaves no partial
    file."""
    tmp = None
    try:
        dst.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=dst.parent, prefix=f".{dst.name}.", suffix=".tmp")
        with os.fdopen(fd, "wb") as out, src.open("rb") as inp:
            shutil.copyfileobj(inp, out, 1 << 20)
        os.chmod(tmp, 0o644)
        os.replace(tmp, dst)
    except BaseException as err:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        if isinstance(err, OSError):
            raise BuildError(write_error(err, dst)) from None
        raise


class Copies:
    """Verified copies into the folder ``root``, recorded in its :data:`MANIFEST`."""

    def __init__(self, root: Path):
        self.root = root
        self.old: dict[str, list] = {}
        self.new: dict[str, list] = {}
        with contextlib.suppress(OSError, ValueError, AttributeError):  # none, or unreadable
            found = json.loads((root / MANIFEST).read_text())
            self.old = {k: v for k, v in found.items() if isinstance(v, list) and len(v) == 4}

    def file(self, src: Path, dst: Path) -> bool:
        """Make ``dst`` (inside ``root``) a verified copy of ``src``; return whether it was
        copied."""
        rel = dst.relative_to(self.root).as_posix()
        s = src.stat()
        entry = self.old.get(rel)
        same_source = bool(entry) and entry[0] == s.st_size and entry[2] == s.st_mtime_ns
        try:
            d = dst.stat()
        except FileNotFoundError:
            d = None
        if same_source and d is not None and d.st_size == s.st_size and entry[3] == d.st_mtime_ns:
            self.new[rel] = entry  # neither changed since both were hashed
            return False
        digest = entry[1] if same_source else sha256(src)
        copied = d is None or d.st_size != s.st_size or sha256(dst) != digest
        if copied:
            copy_file(src, dst)
            if dst.stat().st_size != s.st_size or sha256(dst) != digest:
                raise BuildError(f"{dst} is not an exact copy of {src}: run the command again")
        self.new[rel] = [s.st_size, digest, s.st_mtime_ns, dst.stat().st_mtime_ns]
        return copied

    def tree(self, src: Path, dest: Path) -> int:
        """Make the folder ``dest`` an exact copy of ``src``: every file verified, any other
        file removed. Return the number of files copied."""
        files = sorted(p for p in src.rglob("*") if p.is_file())
        copied = sum(self.file(p, dest / p.relative_to(src)) for p in files)
        wanted = {dest / p.relative_to(src) for p in files}
        for p in sorted(dest.rglob("*"), reverse=True):  # a file's folder after its files
            if p.is_file() and p not in wanted or p.is_symlink():
                p.unlink()
            elif p.is_dir() and not any(p.iterdir()):
                p.rmdir()
        return copied

    def save(self) -> None:
        """Write the manifest of this run's copies (call it once they are all complete)."""
        path = self.root / MANIFEST
        try:
            atomic_write(path, json.dumps(self.new, indent=0, sort_keys=True))
        except OSError as err:
            raise BuildError(write_error(err, path)) from None


def stage_mathjax(dest: Path, copies: Copies) -> int:
    """Copy MathJax into ``dest``, verified by ``copies``; return the files copied."""
    return copies.tree(mathjax_dir(), dest)

"""A chapter's outputs, published together or not at all.

A chapter's run makes three outputs in the executed folder: its notebook, its claims
(``claims/<chapter>.json``, written by the chapter itself) and, when it fails, its log.
Each worker writes into a private staging folder of its own (``.staging-<chapter>-*``,
beside the outputs, so that publishing is a rename): the notebook, and the claims, which
start as copies of the published ones (the report page reads every chapter's). Only a
chapter that ran to the end is published: its own new claims and its notebook are renamed
into place, and its old failure log is removed. Should a rename fail, those already done
are undone. A failed or interrupted chapter leaves the published outputs as they were.

The staging folder is removed on every exit path; one left by a run that was killed, and
a temporary file of an interrupted write, are removed by the next run.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from pathlib import Path

from .notebook import BuildError, write_error

STAGING_PREFIX = ".staging-"


def remove_leftovers(out_dir: Path) -> list[Path]:
    """Remove what an earlier run that was killed left in ``out_dir``: staging folders and
    temporary files. Call it holding the folder's lock. Returns what was removed."""
    found = [*out_dir.glob(f"{STAGING_PREFIX}*"), *out_dir.glob(".*.tmp")]
    found += [*out_dir.glob("claims/*.tmp"), *out_dir.glob("claims/.*.tmp")]
    for path in found:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            with contextlib.suppress(OSError):
                path.unlink()
    return found


def check_writable(out_dir: Path) -> None:
    """Raise :class:`BuildError` (one line: the folder and the cause) unless a file can be
    created in ``out_dir``: found before a chapter runs, not after."""
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(dir=out_dir, prefix=".probe.", suffix=".tmp")
        os.close(fd)
    except OSError as err:
        raise BuildError(write_error(err, out_dir)) from None
    with contextlib.suppress(OSError):  # (a run holding the lock may have removed it)
        os.unlink(probe)


def staging(out_dir: Path, stem: str, claims: Path | None) -> Path:
    """A new staging folder for chapter ``stem``; with ``claims``, its ``claims/`` starts
    as a copy of the published claims (copies, not links: a chapter may write in place)."""
    folder = Path(tempfile.mkdtemp(dir=out_dir, prefix=f"{STAGING_PREFIX}{stem}-"))
    try:
        if claims is not None:
            (folder / "claims").mkdir()
            for f in sorted(claims.glob("*.json")) if claims.is_dir() else []:
                shutil.copy2(f, folder / "claims" / f.name)
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    return folder


def _changed_claims(folder: Path, claims: Path, stem: str) -> list[tuple[Path, Path]]:
    """The claims files the chapter wrote, its own alone (``<stem>.json`` and its kept
    curves): new ones, and those that differ from the published file. The staging folder
    also holds copies of the other chapters' claims, taken when it was made; one of those
    may since have been published anew (or withdrawn), and must not be put back."""
    moves = []
    own = (f"{stem}.json", f"{stem}.curves.json")
    for f in sorted(p for p in (folder / "claims").glob("*.json") if p.name in own):
        dst = claims / f.name
        if not (dst.is_file() and dst.read_bytes() == f.read_bytes()):
            moves.append((f, dst))
    return moves


def publish(folder: Path, notebook: Path, claims: Path | None, log: Path) -> None:
    """Publish a chapter that ran to the end: its claims, then its notebook, renamed from
    the staging ``folder`` into place; then its old failure ``log`` goes. All or nothing:
    on a failure the renames done are undone, and an OSError names the path."""
    moves = _changed_claims(folder, claims, notebook.stem) if claims is not None else []
    moves.append((folder / notebook.name, notebook))
    if claims is not None:
        claims.mkdir(parents=True, exist_ok=True)
    done: list[tuple[Path, Path, Path | None]] = []  # (staged, published, its old version)
    for i, (src, dst) in enumerate(moves):
        try:
            old = None
            if dst.exists():
                old = folder / f"old-{i}"
                os.link(dst, old)
            os.replace(src, dst)
            done.append((src, dst, old))
        except OSError as err:
            for staged, published, before in reversed(done):  # back as they were
                with contextlib.suppress(OSError):
                    os.replace(published, staged)
                    if before is not None:
                        os.replace(before, published)
            raise OSError(err.errno, err.strerror, str(dst)) from None
    with contextlib.suppress(FileNotFoundError):
        log.unlink()


def publish_failed(folder: Path, notebook: Path, claims: Path | None, stem: str) -> bool:
    """Publish the notebook of a chapter that failed, if its worker wrote one (the cells
    that ran, under a banner: :func:`bookbuild.notebook.mark_failed`), so that the book
    still builds its page; and withdraw the chapter's published claims and kept curves,
    which a later run no longer supports (the report marks the chapter failed). Returns
    whether a notebook was published."""
    if claims is not None:
        for name in (f"{stem}.json", f"{stem}.curves.json"):
            with contextlib.suppress(FileNotFoundError):
                (claims / name).unlink()
    staged = folder / notebook.name
    if not staged.is_file():
        return False
    try:
        os.replace(staged, notebook)
    except OSError as err:
        raise OSError(err.errno, err.strerror, str(notebook)) from None
    return True

"""``make test`` does not run a chapter twice on the same inputs.

After a chapter passes under nbmake, its executed notebook and its claims are kept in a
cache with the chapter's stamp (:func:`bookbuild.stamps.chapter_stamp`: its source, the
``lib`` modules it imports, ``lib``'s data files, the requirements, every installed
package's version and Python), taken at ``ci`` scale with the settings of the test run
(:func:`run_settings`). The next ``make test`` restores a chapter whose stamp is unchanged
instead of running it again, as a build system reports a cached test result; the report
page always runs, on the claims of every chapter. ``make test FRESH=1`` runs every
chapter, and a clean checkout (CI) has no cache. Only chapters that passed are kept, so
a failure is never restored.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from .execute import REPORT_PREFIX
from .notebook import ROOT, STAMP_KEY, atomic_write, chapters
from .stamps import chapter_stamp, environment_fingerprint, notebook_stamp
from .timing import _junit_cases

STAMPS = "test-stamps.json"  # in the notebook folder: each chapter's stamp, taken before the run
TODO = "todo.txt"  # in the notebook folder: the notebooks nbmake has to run
CACHED = "cached.txt"  # in the timing folder: the chapters restored from the cache
SETTINGS = ("BOOK_DEVICE", "BOOK_SMOKE", "OMP_WAIT_POLICY", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def run_settings(env=None) -> str:
    """The settings of the test run that a chapter's outputs depend on, as text."""
    env = os.environ if env is None else env
    return "nbmake; " + "; ".join(f"{k}={env.get(k, '')}" for k in SETTINGS)


def restore(
    nb_dir: Path, cache: Path, times: Path | None = None, root: Path = ROOT, fresh: bool = False
) -> tuple[list[str], list[str]]:
    """Restore into ``nb_dir`` every chapter (not the report) whose cached stamp matches;
    return ``(to run, restored)`` stems. Writes the stamps and the list of notebooks to run
    into ``nb_dir`` and, with ``times``, the restored chapters into ``times/cached.txt``."""
    from lib.book.claims import CURVES  # (numpy: the command line starts without it)

    env = environment_fingerprint() + "\n" + run_settings()
    stamps, todo, restored = {}, [], []
    (nb_dir / "claims").mkdir(parents=True, exist_ok=True)
    for md in chapters(root):
        if md.stem.startswith(REPORT_PREFIX):
            continue
        stamps[md.stem] = stamp = chapter_stamp(md, "ci", "cpu", root, env=env)
        kept, claims = cache / f"{md.stem}.ipynb", cache / "claims" / f"{md.stem}.json"
        if not fresh and notebook_stamp(kept) == stamp and claims.is_file():
            shutil.copyfile(kept, nb_dir / kept.name)
            shutil.copyfile(claims, nb_dir / "claims" / claims.name)
            curves = claims.with_name(md.stem + CURVES)
            if curves.is_file():
                shutil.copyfile(curves, nb_dir / "claims" / curves.name)
            restored.append(md.stem)
        else:
            todo.append(md.stem)
    atomic_write(nb_dir / STAMPS, json.dumps(stamps, indent=1))
    atomic_write(nb_dir / TODO, "".join(f"{nb_dir / s}.ipynb\n" for s in todo))
    if times is not None:
        times.mkdir(parents=True, exist_ok=True)
        atomic_write(times / CACHED, "".join(f"{s}\n" for s in restored))
    return todo, restored


def store(nb_dir: Path, cache: Path, junit: Path) -> list[str]:
    """Keep every chapter that passed in the JUnit file ``junit`` (nbmake's), stamped as
    :func:`restore` found it before the run; return their stems."""
    from lib.book.claims import CURVES

    stamps = json.loads((nb_dir / STAMPS).read_text())
    kept = []
    (cache / "claims").mkdir(parents=True, exist_ok=True)
    for name, _, outcome in _junit_cases(junit):
        stem = Path(name).stem
        claims = nb_dir / "claims" / f"{stem}.json"
        if outcome != "passed" or stem not in stamps or not claims.is_file():
            continue
        nb = json.loads((nb_dir / f"{stem}.ipynb").read_text(encoding="utf-8"))
        nb.setdefault("metadata", {})[STAMP_KEY] = stamps[stem]
        atomic_write(cache / "claims" / claims.name, claims.read_text(encoding="utf-8"))
        curves = claims.with_name(stem + CURVES)
        if curves.is_file():
            atomic_write(cache / "claims" / curves.name, curves.read_text(encoding="utf-8"))
        atomic_write(cache / f"{stem}.ipynb", json.dumps(nb, indent=1))
        kept.append(stem)
    return kept

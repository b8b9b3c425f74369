"""``make robust``: the ``ci`` book under a perturbation, against the unperturbed one.

A verdict that flips when every initial parameter moves by a relative 1e-6 (about a
float32 rounding) would flip on another CPU, whose last bits differ. The perturbed run
(``BOOK_PERTURB=REL:SEED``, :func:`lib.env.perturbation`) executes every chapter at ``ci``
into ``<out>/perturbed``; the unperturbed claims come from ``make test``'s cache where
a chapter's stamp is fresh there, and are executed into ``<out>/plain`` otherwise. The
command fails when a check or a finding differs between the two (or a chapter fails),
and prints every measured claim that changed (:func:`bookbuild.reference.compare_runs`).
Both runs are stamped, so a second ``make robust`` on the same inputs runs nothing.
"""

from __future__ import annotations

import os
from pathlib import Path

from .execute import REPORT_PREFIX, execute
from .notebook import ROOT, BuildError, chapters
from .reference import compare_runs
from .testcache import restore


def run_robust(
    out: Path, cache: Path, perturb: str, root: Path = ROOT, workers: int | None = None, log=print
) -> int:
    """Run the perturbed and (where the test cache is not fresh) the unperturbed ``ci``
    book, then compare their claims; returns 0 when no check or finding changed."""
    from lib.env import PERTURB_ENV, perturbation

    stems = [md.stem for md in chapters(root) if not md.stem.startswith(REPORT_PREFIX)]
    plain = out / "plain"
    saved = os.environ.pop(PERTURB_ENV, None)
    try:
        todo, restored = restore(plain, cache, root=root)
        if restored:
            log(f"unperturbed: {len(restored)} chapter(s) from make test's cache")
        if todo:
            log(f"unperturbed: {len(todo)} chapter(s) to execute at ci")
            execute(plain, "ci", "cpu", root, only=todo, workers=workers, log=log)
        os.environ[PERTURB_ENV] = perturb
        perturbation()  # refuses a malformed value before anything runs
        failed = ""
        try:
            execute(out / "perturbed", "ci", "cpu", root, only=stems, workers=workers, log=log)
        except BuildError as err:  # its checks and findings are then missing: compared below
            failed = str(err)
    finally:
        if saved is None:
            os.environ.pop(PERTURB_ENV, None)
        else:
            os.environ[PERTURB_ENV] = saved
    log(f"BOOK_PERTURB={perturb} against the unperturbed run, at BOOK_SCALE=ci:")
    rc = compare_runs(out / "perturbed" / "claims", plain / "claims", "ci", log=log)
    if failed:
        log(f"error: under the perturbation, {failed}")
        rc = 1
    return rc

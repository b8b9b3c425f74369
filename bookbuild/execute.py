"""``execute``: the stale chapters, found by their stamps, run in the pool of workers; the
report page after the others, on the claims they recorded.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path

from lib.data.corpus_files import corpus_problems
from lib.env import FAILED_ENV

from . import outputs
from .notebook import ROOT, BuildError, atomic_write, failed_reason, select_chapters, write_error
from .pool import Job, Pool, run_pool, worker_env
from .stamps import chapter_stamp, environment_fingerprint, notebook_stamp

KNOWN_SECONDS = ROOT / "docs" / "chapter_seconds.json"


def known_seconds(scale: str) -> dict[str, float]:
    """Each chapter's seconds on the reference machine at ``scale`` (``paper``: those at
    ``book``), from :data:`KNOWN_SECONDS`: the order of a checkout's first build."""
    table = json.loads(KNOWN_SECONDS.read_text())
    return dict(table.get(scale, table["book"]))


def _durations_path(out_dir: Path) -> Path:
    return out_dir / "durations.json"


REPORT_PREFIX = "99_"  # pages that gather what the chapters recorded: executed after them


def failures(out_dir: Path, root: Path = ROOT) -> dict[str, str]:
    """``{chapter: the one line of its error}`` for every chapter of the book whose executed
    notebook in ``out_dir`` is marked failed (:func:`bookbuild.notebook.mark_failed`)."""
    from .notebook import chapters

    out = {}
    for md in chapters(root):
        reason = failed_reason(out_dir / f"{md.stem}.ipynb")
        if reason is not None:
            out[md.stem] = reason
    return out


def _claims_digest(claims: Path) -> str:
    h = hashlib.sha256()
    for f in sorted(claims.glob("*.json")):
        h.update(f.name.encode() + b"\0" + f.read_bytes())
    return h.hexdigest()


def execute(
    out_dir: Path,
    scale: str,
    device: str,
    root: Path = ROOT,
    only: list[str] | None = None,
    workers: int | None = None,
    threads: int | None = 1,
    log=print,
    expected: dict[str, float] | None = None,
) -> dict[str, str]:
    """Execute the stale chapters into ``out_dir``; return chapter -> 'executed' / 'up to date'.

    ``only``: the chapters to consider, by stem or number (``"07"``, ``"7"``; exactly,
    :func:`bookbuild.notebook.select_chapters`); the others are left as they are.
    ``workers``: chapters at a time (default: one per core); ``threads``: torch threads
    per worker (``None``: torch's default, every core). ``expected``: the seconds some
    chapters are expected to take, by stem, in place of the last run's (a long chapter
    says every minute how long it has run, of about how long). Chapters record their
    claims in ``out_dir/claims``; a report page (stem ``99_...``) runs after the others,
    and its stamp includes those claims. A chapter that fails stops neither the others nor
    the report, which marks it (:data:`FAILED_ENV`); its page shows the cells that ran
    under a banner. Raises :class:`BuildError` naming every chapter whose execution failed,
    once all have run. A chapter's notebook, claims and failure log are published
    together or not at all (:mod:`bookbuild.outputs`); a folder that cannot be written, and
    a corpus file of a chapter to run that is not the pinned one
    (:func:`lib.data.corpus_files.corpus_problems`), are named before any chapter runs.
    """
    from filelock import FileLock

    selected = select_chapters(only, root)
    outputs.check_writable(out_dir)
    claims = out_dir.resolve() / "claims"  # absolute: the kernels run in the book's root
    with FileLock(str(out_dir / ".lock")):
        outputs.remove_leftovers(out_dir)
        env_fp = environment_fingerprint()
        durations = known_seconds(scale)  # before this checkout has recorded its own
        if _durations_path(out_dir).exists():
            durations.update(json.loads(_durations_path(out_dir).read_text()))
        status: dict[str, str] = {}
        failed: dict[str, str] = {}
        env = dict(worker_env(root, scale, device, threads), BOOK_CLAIMS_DIR=str(claims))
        pool = Pool(env, root, log_dir=out_dir, workers=workers, log=log, claims=claims)
        for group in (
            [m for m in selected if not m.stem.startswith(REPORT_PREFIX)],
            [m for m in selected if m.stem.startswith(REPORT_PREFIX)],
        ):
            extra = ""
            if group and group[0].stem.startswith(REPORT_PREFIX):
                # the report reads every chapter's claims, and marks those that failed
                gone = failures(out_dir, root)
                pool = dataclasses.replace(pool, env=dict(env, **{FAILED_ENV: json.dumps(gone)}))
                from .reference import REFERENCE  # (numpy: only for the report)

                ref = root / REFERENCE.relative_to(ROOT)  # the report compares with it
                extra = _claims_digest(claims) + json.dumps(gone, sort_keys=True)
                extra += hashlib.sha256(ref.read_bytes() if ref.is_file() else b"").hexdigest()
            todo = []
            for md in group:
                stamp = chapter_stamp(md, scale, device, root, env=env_fp + extra)
                out = out_dir / f"{md.stem}.ipynb"
                if notebook_stamp(out) == stamp:
                    status[md.stem] = "up to date"
                else:
                    about = {**durations, **(expected or {})}.get(md.stem, 0.0)
                    todo.append(Job(md, out, stamp, expected=about))
            todo.sort(key=lambda j: -j.expected)  # longest first
            # every corpus the chapters to run read is checked before the first one starts
            broken = corpus_problems([j.md.stem for j in todo], root / "lib" / "experiments")
            if broken:
                raise BuildError("\n".join(broken))
            done = run_pool(todo, pool, what=f"at BOOK_SCALE={scale} on {device}")
            durations.update(done.seconds)
            status.update(dict.fromkeys(done.seconds, "executed"))
            failed.update(done.failed)
        try:
            atomic_write(_durations_path(out_dir), json.dumps(durations, indent=1))
        except OSError as err:  # only the order of the next run depends on it
            log(f"warning: {write_error(err, _durations_path(out_dir))}")
        if failed:
            lines = "\n".join(f"  {k}: {v}" for k, v in sorted(failed.items()))
            raise BuildError(
                f"{len(failed)} chapter(s) failed to execute (run `make chapter CH=NN` to "
                f"rerun one):\n{lines}"
            )
        return status

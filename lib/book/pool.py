"""The pool of worker processes that execute chapters, and what stops them.

Each chapter runs in its own process and session (:func:`lib.book.notebook.run_child`, its
kernel a child of that), ``workers`` at a time. Ctrl-C in the parent sends SIGTERM to every
running worker's session; a worker turns SIGTERM into KeyboardInterrupt, which shuts its
kernel down before it exits, so no kernel outlives the interrupt.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from . import notebook
from .notebook import ROOT, atomic_write


def worker_env(root: Path, scale: str, device: str, threads: int | None = 1) -> dict[str, str]:
    """The environment of a worker: scale, device, ``root`` first on the path, and torch and
    BLAS on ``threads`` threads each (``None``: their default, every core)."""
    env = dict(os.environ)
    path = [str(root)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])
    env.update(
        BOOK_SCALE=scale, BOOK_DEVICE=device, BOOK_QUIET="1", PYTHONPATH=os.pathsep.join(path)
    )
    if threads:  # workers share the cores instead of oversubscribing them
        env.update(
            {
                v: str(threads)
                for v in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")
            }
        )
        # A chapter that runs on more threads for a while (a stability rerun) must not spin
        # for the cores the other workers hold: waiting threads sleep (same results).
        env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    return env


@dataclass(frozen=True)
class Job:
    """One chapter to execute: its source, the notebook to write, and the stamp it carries."""

    md: Path
    out: Path
    stamp: str


@dataclass(frozen=True)
class Pool:
    """How to run jobs: the worker environment, the book's folder (the kernels' cwd), the
    folder for failure logs, and how many workers at a time (default: one per core)."""

    env: dict[str, str]
    root: Path
    log_dir: Path
    workers: int | None = None
    log: Callable[[str], object] = print


@dataclass
class PoolResult:
    """What a run of the pool did: the seconds of each chapter that was executed, and, for
    each one that failed, one line naming its error and the log that holds its traceback."""

    seconds: dict[str, float] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)


def run_pool(jobs: list[Job], pool: Pool, what: str = "") -> PoolResult:
    """Execute ``jobs`` in order, ``pool.workers`` at a time, each in its own session.

    ``what`` completes the first log line (e.g. the scale and the device). On Ctrl-C
    (KeyboardInterrupt) every running worker is sent SIGTERM, the jobs not yet started are
    cancelled, and the interrupt is raised again once the workers have ended.
    """
    result = PoolResult()
    if not jobs:
        return result
    n = max(1, min(pool.workers or os.cpu_count() or 1, len(jobs)))
    pool.log(f"executing {len(jobs)} chapter(s){' ' + what if what else ''}, {n} at a time")
    procs: dict[str, subprocess.Popen] = {}

    def run(job: Job) -> None:
        stem = job.md.stem
        t0 = time.perf_counter()
        cmd = [sys.executable, "-c", _CHILD, notebook.__file__, str(job.md), str(job.out),
               job.stamp, str(pool.root)]  # fmt: skip
        # The worker runs lib/book/notebook.py alone, without importing its package (which
        # imports torch: seconds per chapter); the kernel runs in ``root`` with ``root``
        # first on its path, so a chapter imports root's lib.
        p = subprocess.Popen(
            cmd, env=pool.env, cwd=ROOT, start_new_session=True,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip
        procs[stem] = p
        text, _ = p.communicate()
        dt = time.perf_counter() - t0
        if p.returncode != 0:
            text = re.sub(r"\x1b\[[0-9;]*m", "", text)  # the kernel's colours
            log_file = pool.log_dir / f"{stem}.log"
            atomic_write(log_file, text)
            last = text.strip().splitlines()[-1] if text.strip() else f"exit {p.returncode}"
            result.failed[stem] = f"{last} (traceback in {log_file})"
            pool.log(f"  FAILED {stem} after {dt:.0f} s")
        else:
            result.seconds[stem] = dt
            pool.log(f"  {stem}: {dt:.0f} s")

    executor = ThreadPoolExecutor(n)
    try:
        list(executor.map(run, jobs))
    except KeyboardInterrupt:
        for p in procs.values():
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
        executor.shutdown(wait=True, cancel_futures=True)
        raise
    executor.shutdown()
    return result


# A worker: lib/book/notebook.py loaded as a lone module (not as part of its package), then
# its run_child.
_CHILD = (
    "import importlib.util, sys; spec = importlib.util.spec_from_file_location('_booktools', "
    "sys.argv[1]); m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m); "
    "sys.exit(m.run_child(*sys.argv[2:]))"
)

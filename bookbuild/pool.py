"""The pool of worker processes that execute chapters, and what stops them.

Each chapter runs in its own process and session (:func:`bookbuild.notebook.run_child`, its
kernel a child of that), ``workers`` at a time, writing into a staging folder of its own;
a chapter that ran to the end is published from there (:mod:`bookbuild.outputs`). A chapter
that runs long says so every minute, with the time it is expected to take. Ctrl-C (or
SIGTERM, SIGHUP: :func:`bookbuild.cli.interrupt_on_stop`) in the parent sends SIGTERM to
every running worker's session; a worker turns SIGTERM into KeyboardInterrupt, which
shuts its kernel down before it exits, so no kernel outlives the interrupt, and the
parent returns only once every worker has ended. An interrupted chapter is reported as
such, not as a failure, and leaves no failure log.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from . import notebook, outputs
from .notebook import ROOT, WRITE_FAILED, atomic_write, write_error


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
    """One chapter to execute: its source, the notebook to write, the stamp it carries, and
    the seconds it is expected to take (0: unknown)."""

    md: Path
    out: Path
    stamp: str
    expected: float = 0.0


@dataclass(frozen=True)
class Pool:
    """How to run jobs: the worker environment, the book's folder (the kernels' cwd), the
    folder for failure logs and staging, how many workers at a time (default: one per
    core), the published claims folder (a worker's ``BOOK_CLAIMS_DIR`` is its own copy),
    and the seconds between two "still running" lines of a chapter."""

    env: dict[str, str]
    root: Path
    log_dir: Path
    workers: int | None = None
    log: Callable[[str], object] = print
    claims: Path | None = None
    progress: float | None = None  # None: every PROGRESS seconds


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
    interrupted = threading.Event()
    starting = threading.Lock()  # a worker is either started before the interrupt, or never

    def run(job: Job) -> None:
        stem = job.md.stem
        t0 = time.perf_counter()
        log_file = pool.log_dir / f"{stem}.log"
        try:
            folder = outputs.staging(pool.log_dir, stem, pool.claims)
        except OSError as err:
            result.failed[stem] = write_error(err)
            pool.log(f"  FAILED {stem}: {result.failed[stem]}")
            return
        try:
            env = pool.env
            if pool.claims is not None:
                env = dict(env, BOOK_CLAIMS_DIR=str(folder / "claims"))
            cmd = [sys.executable, "-c", _CHILD, notebook.__file__, str(job.md),
                   str(folder / job.out.name), job.stamp, str(pool.root), str(job.out),
                   _source(job, folder)]  # fmt: skip
            # The worker runs bookbuild/notebook.py alone, without importing its package;
            # the kernel runs in ``root`` with ``root`` first on its path, so a chapter
            # imports root's lib.
            with starting:
                if interrupted.is_set():
                    return
                p = subprocess.Popen(
                    cmd, env=env, cwd=ROOT, start_new_session=True,
                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                )  # fmt: skip
                procs[stem] = p
            text = _communicate(p, pool, stem, job.expected, t0)
            dt = time.perf_counter() - t0
            if interrupted.is_set() or p.returncode in (130, -signal.SIGTERM, -signal.SIGINT):
                pool.log(f"  interrupted {stem} after {dt:.0f} s")
                return
            text = re.sub(r"\x1b\[[0-9;]*m", "", text)  # the kernel's colours
            last = text.strip().splitlines()[-1] if text.strip() else f"exit {p.returncode}"
            if p.returncode == WRITE_FAILED:  # it ran, but its notebook could not be written
                result.failed[stem] = last
            elif p.returncode != 0:
                try:
                    atomic_write(log_file, text)
                    result.failed[stem] = f"{last} (traceback in {log_file})"
                except OSError as err:
                    result.failed[stem] = f"{last} (no traceback: {write_error(err, log_file)})"
                try:  # its page still builds: the cells that ran, under a banner
                    outputs.publish_failed(folder, job.out, pool.claims, stem)
                except OSError as err:
                    pool.log(f"  warning: {write_error(err)}")
            else:
                try:
                    outputs.publish(folder, job.out, pool.claims, log_file)
                except OSError as err:
                    result.failed[stem] = write_error(err)
            if stem in result.failed:
                pool.log(f"  FAILED {stem} after {dt:.0f} s")
            else:
                result.seconds[stem] = dt
                pool.log(f"  {stem}: {dt:.0f} s")
        finally:
            shutil.rmtree(folder, ignore_errors=True)

    executor = ThreadPoolExecutor(n)
    try:
        list(executor.map(run, jobs))
    except KeyboardInterrupt:
        while True:  # a second Ctrl-C does not leave a worker behind
            try:
                with starting:
                    interrupted.set()
                    for p in procs.values():
                        if p.poll() is None:
                            with contextlib.suppress(ProcessLookupError):
                                os.killpg(p.pid, signal.SIGTERM)
                executor.shutdown(wait=True, cancel_futures=True)
                break
            except KeyboardInterrupt:
                continue
        raise
    executor.shutdown()
    return result


def _source(job: Job, folder: Path) -> str:
    """The chapter read here, as a notebook in its staging ``folder``, for the worker to run
    (it then starts without jupytext); "" where it cannot be read: the worker reads it
    itself, and its error is the chapter's failure, as any other."""
    path = folder / "source" / job.out.name
    try:
        notebook.write_source(job.md, path)
    except Exception:
        return ""
    return str(path)


PROGRESS = 60.0  # seconds between two "still running" lines of a chapter, by default


def span(seconds: float) -> str:
    """A duration in words: ``45 s``, ``2 min``."""
    return f"{seconds:.0f} s" if seconds < 60 else f"{round(seconds / 60)} min"


def _communicate(p: subprocess.Popen, pool: Pool, stem: str, expected: float, t0: float) -> str:
    """The worker's output once it has ended; meanwhile, every ``pool.progress`` seconds, a
    line saying how long the chapter has run, of about how long."""
    every = pool.progress or PROGRESS
    n = 1
    while True:
        wait = t0 + n * every - time.perf_counter()
        try:
            return p.communicate(timeout=max(wait, 0.0))[0]
        except subprocess.TimeoutExpired:
            about = f" of about {span(expected)}" if expected > 0 else ""
            pool.log(f"  still running {stem}: {span(time.perf_counter() - t0)}{about}")
            n = int((time.perf_counter() - t0) // every) + 1


# A worker: bookbuild/notebook.py loaded as a lone module (not as part of its package), then
# its run_child.
_CHILD = (
    "import importlib.util, sys; spec = importlib.util.spec_from_file_location('_booktools', "
    "sys.argv[1]); m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m); "
    "sys.exit(m.run_child(*sys.argv[2:]))"
)

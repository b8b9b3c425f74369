"""Stopping a build by a signal, on the toy book (tests/toybook.py) through the project's
Makefile: SIGTERM, SIGHUP and SIGINT, sent to ``make``'s whole process group (``timeout``,
a closed terminal, Ctrl-C) or to ``make`` alone (``kill PID``).

``make`` passes SIGTERM on to its children only, and SIGINT and SIGHUP not at all; the lock
(bookbuild/lock.py) passes each on to the build, so ``make`` returns only once every worker,
kernel and Sphinx run has ended, and the lock is free. Run by ``make faults``. Each of the
six cases runs on a command that takes a while to stop, under make and the lock, side by
side in one test; two of them (and the Sphinx step) run on the toy book's own build.
Also here: the line a long chapter prints every so often.
"""

from __future__ import annotations

import fcntl
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from toybook import PROJECT, alive, make, make_toy

from bookbuild import pool
from bookbuild.execute import execute

MESSAGE = "interrupted: nothing half-written was kept; run the same command again"
CASES = [(s, to) for s in ("SIGTERM", "SIGHUP", "SIGINT") for to in ("group", "make")]


def _processes(word: str, also: str = "") -> list[int]:
    """The processes whose command line names ``word`` (and ``also``)."""
    found = []
    for name in os.listdir("/proc"):
        try:
            argv = Path(f"/proc/{name}/cmdline").read_bytes() if name.isdigit() else b""
        except OSError:
            continue
        if word.encode() in argv and also.encode() in argv:
            found.append(int(name))
    return found


def _lock_is_free(folder: Path, name: str = ".book.lock") -> bool:
    fd = os.open(folder / name, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    finally:
        os.close(fd)
    return True


def _send(p, signame: str, to: str) -> None:
    (os.killpg if to == "group" else os.kill)(p.pid, getattr(signal, signame))


def _signal_when(builds: dict, ready) -> None:
    """Send each build its case's signal once ``ready(mark)`` says it is running."""
    deadline = time.time() + 120
    waiting = dict(builds)
    while waiting:
        assert time.time() < deadline, f"not started in 120 s: {sorted(waiting)}"
        for case, (_, mark, p) in list(waiting.items()):
            if ready(mark):
                _send(p, *case)
                del waiting[case]
        time.sleep(0.05)


# A command that takes half a second to stop once signalled, and says by what.
SLOW_STOP = """
import os, signal, sys, time
from pathlib import Path
got = []
for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
    signal.signal(s, lambda signum, frame: got.append(signum))
Path(sys.argv[1]).write_text(str(os.getpid()))
while not got:
    time.sleep(0.01)
time.sleep(0.5)
Path(sys.argv[1] + ".stopped").write_text(signal.Signals(got[0]).name)
sys.exit(130)
"""


def test_each_signal_to_make_or_its_group_reaches_the_locked_command_before_make_returns(
    tmp_path,
):
    """``make`` passes SIGTERM to its children only and SIGINT, SIGHUP to none: the lock
    died of SIGTERM at once (releasing the lock with the command still running), and
    SIGINT or SIGHUP to make alone never reached the command."""
    (tmp_path / "slow_stop.py").write_text(SLOW_STOP)
    lock = re.search(r"^LOCK := (.*)$", (PROJECT / "Makefile").read_text(), re.M)[1]
    lock = lock.replace("$(BIN)/python", sys.executable)  # the Makefile's LOCK, as it runs
    lock = lock.replace("bookbuild/lock.py", str(PROJECT / "bookbuild" / "lock.py"))
    builds = {}
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS")}
    for signame, to in CASES:
        case = tmp_path / f"{signame}-{to}"
        case.mkdir()
        (case / "Makefile").write_text(
            "SHELL := /bin/bash\n.SHELLFLAGS := -eu -o pipefail -c\n"  # the project's
            f"LOCKFILE := {case}/.lock\nLOCK := {lock}\n"  # as make book runs it:
            "outer:\n\tt0=0; $(LOCK) $(MAKE) --no-print-directory inner; echo $$t0\n"
            f"inner:\n\t{sys.executable} {tmp_path}/slow_stop.py {case}/pid\n"
        )
        p = subprocess.Popen(["make", "-s", "-C", str(case)], env=env, text=True,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             start_new_session=True)  # fmt: skip
        builds[signame, to] = (case, case / "pid", p)
    _signal_when(builds, lambda mark: mark.exists() and mark.read_text())
    for (signame, to), (case, mark, p) in builds.items():
        p.wait(timeout=30)
        said = f"{signame} to the {to}"
        assert not alive(int(mark.read_text())), f"the command outlived make; {said}"
        assert _lock_is_free(case, ".lock"), f"make returned with the lock held; {said}"
        stopped = Path(f"{mark}.stopped")
        assert stopped.exists() and stopped.read_text() == signame, said
        assert p.returncode == -getattr(signal, signame), (said, p.returncode, p.stdout.read())


def test_a_signal_to_make_or_its_group_stops_every_worker_and_kernel_first(tmp_path):
    """``timeout 6 make chapter CH=01`` (SIGTERM): make returned at once and the lock was
    released while the worker and its kernel ran on for 20 s; a second build started beside
    them. SIGTERM to make alone during the Sphinx step left jupyter-book building the
    pages. (SIGINT to the group: tests/test_faults.py; every signal, to the lock: above.)"""
    builds = {}
    for signame, to in (("SIGTERM", "make"), ("SIGHUP", "group")):
        toy = make_toy(tmp_path / f"{signame}-{to}")
        mark = toy / "kernel.pid"
        env = {"TOY_SLEEP": "120", "TOY_MARK": str(mark)}
        builds[signame, to] = (toy, mark, make(toy, "chapter", "CH=2", env=env))
    _signal_when(builds, lambda mark: mark.exists() and mark.read_text())  # a kernel sleeps
    for (signame, to), (toy, mark, p) in builds.items():
        p.wait(timeout=60)  # then, before its output's end (what lingers would hold it):
        said = f"{signame} to the {to}"
        assert not alive(int(mark.read_text())), f"a kernel outlived make; {said}"
        assert not _processes(str(toy / "chapters")), f"a worker outlived make; {said}"
        assert _lock_is_free(toy), f"make returned with the lock held; {said}"
        out = p.stdout.read()
        assert p.returncode != 0 and MESSAGE in out and "interrupted 02_b after" in out, out
        assert "FAILED" not in out and not (toy / "build" / "executed" / "02_b.log").exists()
    # The next build starts at once and runs the chapter; SIGTERM to make alone during its
    # Sphinx step stops that too before make returns.
    toy = builds["SIGTERM", "make"][0]
    p = make(toy, "chapter", "CH=2")
    builds = {("SIGTERM", "make"): (toy, toy, p)}
    _signal_when(builds, lambda toy: p.poll() is not None or _processes("jupyter-book", str(toy)))
    p.wait(timeout=60)
    assert not _processes("jupyter-book", str(toy)), "jupyter-book outlived make"
    assert _lock_is_free(toy), "make returned with the lock held"
    out = p.stdout.read()
    assert p.returncode != 0 and "waiting" not in out and "02_b: " in out, out
    assert "jupyter-book build" in out and "The book is in" not in out, out


def test_a_long_chapter_says_every_so_often_how_long_it_has_run_of_about_how_long(
    tmp_path, monkeypatch
):
    """A chapter of paper scale ran for an hour with no line at all: was it stuck?"""
    toy = make_toy(tmp_path / "toy")
    monkeypatch.setattr(pool, "PROGRESS", 0.2)  # the kernel alone takes longer to start
    lines = []
    executed = toy / "build" / "executed"
    execute(executed, "ci", "cpu", toy, only=["02_b"], log=lines.append, expected={"02_b": 240})
    said = [ln for ln in lines if re.fullmatch(r"  still running 02_b: \d s of about 4 min", ln)]
    assert said and lines[-1].startswith("  02_b: "), lines
    assert pool.span(45) == "45 s" and pool.span(150) == "2 min"

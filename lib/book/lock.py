"""Run a command while holding a lock file: ``python lib/book/lock.py LOCKFILE COMMAND...``.

The Makefile's ``LOCK``: two builds in one checkout take turns instead of clobbering each
other's outputs. It replaces ``flock(1)`` for two reasons:

* **Told.** A run that finds the lock held says so once, naming the holder's command
  (``make chapter CH=01``, written into the lock file by the holder), instead of waiting
  in silence.
* **Ctrl-C.** The terminal sends SIGINT to the whole foreground group, this process
  included. ``flock`` died of it at once, so ``make`` returned while the command it ran
  was still stopping its workers, whose last lines then came after the prompt. Here
  SIGINT is left to the command (it received it too); this process waits for it to end
  and only then ends, by the same signal, so ``make`` reports the interrupt after
  everything has stopped.

Run as a file, with the standard library only: it starts in milliseconds (``import lib``
would load torch).
"""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import sys
from pathlib import Path


def _argv(pid: int) -> list[str]:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [a.decode(errors="replace") for a in raw.split(b"\0") if a]


def _parent(pid: int) -> int:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0
    return int(stat.rpartition(")")[2].split()[1])


def user_command(command: list[str]) -> str:
    """The command a person typed that led here: the nearest ``make`` among this process's
    ancestors (``make chapter CH=01``), else ``command`` itself."""
    pid = os.getppid()
    for _ in range(8):
        argv = _argv(pid)
        if argv and Path(argv[0]).name in ("make", "gmake"):
            return " ".join(["make", *argv[1:]])
        pid = _parent(pid)
        if pid <= 1:
            break
    return " ".join(command)


def holder(fd: int) -> str:
    """What the lock file says about its holder: ``pid N: COMMAND``, or ``another run``."""
    try:
        text = os.pread(fd, 4096, 0).decode(errors="replace").strip()
    except OSError:
        text = ""
    pid, _, command = text.partition("\n")
    return f"pid {pid}: {command}" if pid.isdigit() and command else "another run"


def run_locked(lockfile: str, command: list[str], log=None) -> int:
    """Run ``command`` holding an exclusive lock on ``lockfile``; return its exit status
    (``-N`` when signal N ended it). Says once when it has to wait, and for whom."""
    log = log or (lambda line: print(line, file=sys.stderr, flush=True))
    fd = os.open(lockfile, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log(f"waiting for {lockfile}, held by {holder(fd)}")
            fcntl.flock(fd, fcntl.LOCK_EX)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n{user_command(command)}\n".encode(), 0)
        # SIGINT reaches the command directly (same process group): wait for it to end.
        previous = signal.signal(signal.SIGINT, lambda signum, frame: None)
        try:
            child = subprocess.Popen(command)
            while True:
                try:
                    return child.wait()
                except InterruptedError:  # pragma: no cover (PEP 475 retries the wait)
                    continue
        finally:
            signal.signal(signal.SIGINT, previous)
    finally:
        os.close(fd)


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print("usage: python lib/book/lock.py LOCKFILE COMMAND...", file=sys.stderr)
        return 2
    try:
        code = run_locked(argv[0], argv[1:])
    except OSError as err:
        print(f"error: {err.filename or argv[0]}: {err.strerror}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # while waiting for the lock: nothing was started
        code = -signal.SIGINT
    if code < 0:  # ended by a signal: end by the same one, so that make reports it so
        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

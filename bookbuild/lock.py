"""Run a command while holding a lock file: ``python bookbuild/lock.py LOCKFILE COMMAND...``.

The Makefile's ``LOCK``: two builds in one checkout take turns instead of clobbering each
other's outputs. It replaces ``flock(1)`` for two reasons:

* **Told.** A run that finds the lock held says so once, naming the holder's command
  (``make chapter CH=01``, written into the lock file by the holder), instead of waiting
  in silence.
* **Stops that stop.** The lock is released only once the command and everything it
  started in this process group have ended, however the build was stopped:

  - Ctrl-C sends SIGINT to the whole foreground group, the command included: this
    process waits for it to end.
  - SIGTERM or SIGHUP reaching this process (``timeout`` and a closed terminal signal
    the whole group) is passed on to the command.
  - SIGINT, SIGHUP or SIGTERM sent to the ``make`` above alone: ``make`` passes SIGTERM to
    its own child only (the shell of the recipe, which the Makefile's ``trap`` keeps
    waiting for this process) and the others to none, and waits. Its handler resets the
    signal before waiting, so the signal drops out of the ones it catches (``SigCgt`` in
    ``/proc/PID/status``); this process watches for that and passes the signal on. A
    ``make`` that is gone counts as SIGTERM.

  Passing a signal on means sending it to every process of this group that descends
  from the command (the workers, in sessions of their own, are the command's to stop),
  and to any that appear later while the command ends. This process then ends as the
  command did, or by the SIGTERM or SIGHUP it received, so that ``make`` reports the
  interrupt after everything has stopped. The command stays in the terminal's
  foreground group: Ctrl-Z and a password prompt work as without the lock.

Run as a file, with the standard library only: it starts in milliseconds (``import lib``
would load torch).
"""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

STOPS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
POLL = 0.1  # seconds between looks at make and at new processes while stopping


def _argv(pid: int) -> list[str]:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [a.decode(errors="replace") for a in raw.split(b"\0") if a]


def _stat(pid: int) -> list[str]:
    """The fields of ``/proc/PID/stat`` after the name: state, ppid, pgrp, ... (or none)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return []


def _parent(pid: int) -> int:
    fields = _stat(pid)
    return int(fields[1]) if fields else 0


def _make_ancestor() -> int:
    """The nearest ``make`` among this process's ancestors, else 0."""
    pid = os.getppid()
    for _ in range(8):
        argv = _argv(pid)
        if argv and Path(argv[0]).name in ("make", "gmake"):
            return pid
        pid = _parent(pid)
        if pid <= 1:
            break
    return 0


def user_command(command: list[str]) -> str:
    """The command a person typed that led here: the nearest ``make`` among this process's
    ancestors (``make chapter CH=01``), else ``command`` itself."""
    pid = _make_ancestor()
    return " ".join(["make", *_argv(pid)[1:]]) if pid else " ".join(command)


def holder(fd: int) -> str:
    """What the lock file says about its holder: ``pid N: COMMAND``, or ``another run``."""
    try:
        text = os.pread(fd, 4096, 0).decode(errors="replace").strip()
    except OSError:
        text = ""
    pid, _, command = text.partition("\n")
    return f"pid {pid}: {command}" if pid.isdigit() and command else "another run"


def descendants(root: int) -> list[int]:
    """``root`` and the processes of this process group that descend from it (through
    processes of this group); just ``root`` where ``/proc`` cannot be read."""
    group = os.getpgrp()
    children: dict[int, list[int]] = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return [root]
    for name in names:
        if name.isdigit():
            fields = _stat(int(name))
            if len(fields) > 2 and int(fields[2]) == group:
                children.setdefault(int(fields[1]), []).append(int(name))
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(children.get(pid, []))
    return found


class _Watch:
    """The signals that stop the command: those this process received, and those the
    ``make`` above caught until now (its handler resets the one it got)."""

    def __init__(self) -> None:
        self.received: list[int] = []
        self.make = _make_ancestor()
        self.start = self._start()
        self.caught = self._caught()
        self.signal = 0

    def _start(self) -> str:
        """When the make above started ('' once it has ended, or where there is none)."""
        fields = _stat(self.make) if self.make else []
        return fields[19] if len(fields) > 19 and fields[0] != "Z" else ""

    def _caught(self) -> int:
        try:
            text = Path(f"/proc/{self.make}/status").read_text()
        except OSError:
            return 0
        line = next((ln for ln in text.splitlines() if ln.startswith("SigCgt:")), "")
        return int(line.split()[1], 16) if line else 0

    def handler(self, signum: int, frame) -> None:
        self.received.append(signum)

    def stop(self) -> int:
        """The signal to pass on to the command (the first one found sticks), or 0."""
        if not self.signal:
            self.signal = self._stop()
        return self.signal

    def _stop(self) -> int:
        for signum in self.received:
            if signum != signal.SIGINT:  # SIGINT: the terminal sent it to the command too
                return signum
        if not self.make or signal.SIGINT in self.received:
            return 0
        if self._start() != self.start:  # make is gone
            return signal.SIGTERM
        caught = self._caught()
        for signum in STOPS:
            bit = 1 << (signum - 1)
            if self.caught & bit and not caught & bit:
                time.sleep(POLL / 2)  # the same signal sent to this group arrives first
                return 0 if signum in self.received else signum
        return 0


def _wait(child: subprocess.Popen, watch: _Watch) -> int:
    """Wait for ``child``; pass a stop on to it and to every process of this group that
    descends from it, including those that appear while it ends."""
    sent: set[int] = set()
    while True:
        try:
            return child.wait(timeout=POLL)
        except subprocess.TimeoutExpired:
            signum = watch.stop()
            for pid in descendants(child.pid) if signum else []:
                if pid not in sent:
                    sent.add(pid)
                    try:
                        os.kill(pid, signum)
                    except ProcessLookupError:
                        pass


def run_locked(lockfile: str, command: list[str], log=None) -> int:
    """Run ``command`` holding an exclusive lock on ``lockfile``; return its exit status
    (``-N`` when signal N ended it, or stopped it and this process). Says once when it has
    to wait, and for whom."""
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
        watch = _Watch()
        previous = {s: signal.signal(s, watch.handler) for s in STOPS}
        try:
            code = _wait(subprocess.Popen(command), watch)
        finally:
            for s, handler in previous.items():
                signal.signal(s, handler)
        stopped = [s for s in watch.received if s != signal.SIGINT]
        return -stopped[0] if stopped else code
    finally:
        os.close(fd)


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print("usage: python bookbuild/lock.py LOCKFILE COMMAND...", file=sys.stderr)
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

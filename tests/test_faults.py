"""The build when something breaks, on the toy book (tests/toybook.py) in a temporary
folder, through the project's own Makefile and command line: Ctrl-C, a full disk, a
read-only build folder, and the one-chapter build's warnings.

Run by ``make faults``, and by ``make test`` beside the unit tests; not by ``make unit``: each
case runs chapters in kernels, seconds each. The disk cases mount a small tmpfs in a user and mount
namespace of their own (``unshare``); where the system allows none, they are skipped.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from toybook import HEADER, PROJECT, alive, executed_toy, make, make_toy, toy_module

from bookbuild.execute import execute
from bookbuild.notebook import BuildError
from bookbuild.stage import stage


def _wait_for(path: Path, timeout: float = 120) -> None:
    deadline = time.time() + timeout
    while not path.exists():
        assert time.time() < deadline, f"{path} did not appear in {timeout} s"
        time.sleep(0.1)


def test_ctrl_c_in_make_returns_after_every_worker_and_kernel_has_stopped(tmp_path):
    """``make`` returned 3 ms after SIGINT, and the workers' lines ("FAILED ...",
    "interrupted", make's error) came seconds later, after the prompt; the interrupt was
    called a failure, and its zmq traceback stayed as the chapter's failure log."""
    toy = make_toy(tmp_path / "toy")
    mark = tmp_path / "b_is_running"
    p = make(toy, "chapter", "CH=2", env={"TOY_SLEEP": "120", "TOY_MARK": str(mark)})
    _wait_for(mark)  # chapter B sleeps in its kernel
    kernel = int(mark.read_text())
    os.killpg(p.pid, signal.SIGINT)  # what Ctrl-C does: the whole foreground group
    p.wait(timeout=60)
    assert not alive(kernel), "make returned while chapter B's kernel was still running"
    out = p.stdout.read()  # everything was said before make returned
    assert p.returncode != 0 and "interrupted 02_b after" in out and "FAILED" not in out, out
    executed = toy / "build" / "executed"
    assert not (executed / "02_b.log").exists(), "an interrupt is not a failure"
    assert not (executed / "02_b.ipynb").exists()
    assert [f.name for f in executed.glob(".*")] == [".lock"]  # no temporary file or folder


def test_a_failure_log_goes_when_the_chapter_next_succeeds(tmp_path):
    """The log of a failure stayed after the next successful run of the chapter."""
    toy = make_toy(tmp_path / "toy")
    executed = toy / "build" / "executed"
    good = (toy / "chapters" / "02_b.md").read_text()
    (toy / "chapters" / "02_b.md").write_text(HEADER + "\n```{code-cell} ipython3\n1 / 0\n```\n")
    with pytest.raises(BuildError, match="02_b: ZeroDivisionError"):
        execute(executed, "ci", "cpu", toy, only=["02_b"], log=lambda *a: None)
    assert "ZeroDivisionError" in (executed / "02_b.log").read_text()
    (toy / "chapters" / "02_b.md").write_text(good)
    execute(executed, "ci", "cpu", toy, only=["02_b"], log=lambda *a: None)
    assert (executed / "02_b.ipynb").exists() and not (executed / "02_b.log").exists()


# ---------------------------------------------------------------------------
# A full disk, a read-only folder: a tmpfs of 64 KiB in a namespace of its own
# ---------------------------------------------------------------------------

CLAIMING = """
# A

```{code-cell} ipython3
import json, os, pathlib
from lib.a import VALUE
claims = pathlib.Path(os.environ["BOOK_CLAIMS_DIR"])
claims.mkdir(parents=True, exist_ok=True)
(claims / "01_a.json").write_text(json.dumps({"value": VALUE}))
print("x" * int(os.environ.get("TOY_BYTES", "0")))
print("value", VALUE)
```
"""

# Runs inside the namespace, where DISK is a 64 KiB tmpfs; prints what it saw as JSON.
DRIVER = """
import contextlib, io, json, os, subprocess, sys, time
from pathlib import Path
from bookbuild.cli import main
from bookbuild.execute import execute
from bookbuild.notebook import BuildError

toy, disk = Path(sys.argv[1]), Path(sys.argv[2])
executed = disk / "executed"
seen = {}

def run(name, value, toy_bytes):
    (toy / "lib" / "a.py").write_text(f"VALUE = {value}\\n")
    os.environ["TOY_BYTES"] = str(toy_bytes)
    err = io.StringIO()
    t0 = time.time()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            code = main(["execute", str(executed), "--root", str(toy), "--only=01_a"])
        except BaseException as exc:  # what escaped the command line: a traceback
            code = f"{type(exc).__name__}: {exc}"
    files = sorted(str(p.relative_to(disk)) for p in disk.rglob("*"))
    claims = executed / "claims" / "01_a.json"
    nb = executed / "01_a.ipynb"
    seen[name] = dict(code=code, err=err.getvalue(), seconds=time.time() - t0, files=files,
                      claims=claims.read_text() if claims.exists() else None,
                      notebook=nb.read_text() if nb.exists() else None)

run("first", 1, 0)
run("full", 2, 200_000)  # a notebook of 200 KB on a disk of 64 KiB
for left in (executed / ".01_a.ipynb.left.tmp", executed / ".staging-01_a-left" / "x"):
    left.parent.mkdir(parents=True, exist_ok=True)  # what a killed run leaves
    with contextlib.suppress(OSError):  # (the disk may still be full of it)
        left.write_text("half")
run("recovered", 2, 0)
subprocess.run(["mount", "-o", "remount,ro", str(disk)], check=True)
run("read-only", 3, 0)
print(json.dumps(seen))
"""


def _namespace_tmpfs() -> str | None:
    """Why a small tmpfs cannot be mounted here (None: it can)."""
    try:
        p = subprocess.run(["unshare", "--user", "--map-root-user", "--mount", "sh", "-c",
                            "mount -t tmpfs -o size=64k tmpfs /mnt"],
                           capture_output=True, text=True, timeout=30)  # fmt: skip
    except (OSError, subprocess.TimeoutExpired) as err:
        return f"unshare: {err}"
    return None if p.returncode == 0 else f"no tmpfs in a user namespace: {p.stderr.strip()}"


def test_a_full_or_read_only_disk_is_named_in_one_line_and_nothing_half_done_is_kept(tmp_path):
    """Toy chapter A run four times into a 64 KiB tmpfs (:data:`DRIVER`).

    A 72 KB tmpfs gave a chained ``OSError: [Errno 28]`` and left a truncated
    ``.01_signatures.ipynb.*.tmp``, still there after a successful rerun; the claims were
    rewritten while the notebook stayed old. ``chattr +i build/executed`` gave, after the
    chapter had run for 10 s, a raw traceback about a ``.log.*.tmp`` file, hiding that the
    notebook could not be saved."""
    why = _namespace_tmpfs()
    if why:
        pytest.skip(why)
    toy = make_toy(tmp_path / "toy")
    (toy / "chapters" / "01_a.md").write_text(HEADER + CLAIMING)
    (tmp_path / "driver.py").write_text(DRIVER)
    disk = tmp_path / "disk"
    disk.mkdir()
    script = (f"mount -t tmpfs -o size=64k tmpfs {disk} && "
              f"exec {sys.executable} {tmp_path / 'driver.py'} {toy} {disk}")  # fmt: skip
    env = {**os.environ, "BOOK_SCALE": "ci", "BOOK_DEVICE": "cpu", "PYTHONPATH": str(PROJECT)}
    p = subprocess.run(["unshare", "--user", "--map-root-user", "--mount", "sh", "-c", script],
                       capture_output=True, text=True, timeout=600, cwd=PROJECT, env=env)  # fmt: skip
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    seen = json.loads(p.stdout.strip().splitlines()[-1])
    leftovers = lambda run: [f for f in run["files"] if "tmp" in f or "staging" in f]  # noqa: E731

    # The disk is full: one line names the file and the cause; nothing of the run is
    # published (the claims and the notebook are the first run's) and nothing is left.
    first, full = seen["first"], seen["full"]
    assert first["code"] == 0 and json.loads(first["claims"]) == {"value": 1}, first
    assert full["code"] == 2, full
    line = (f"  01_a: cannot write {disk}/executed/01_a.ipynb: the disk is full "
            "(No space left on device)")  # fmt: skip
    assert line in full["err"].splitlines(), full["err"]
    assert "Traceback" not in full["err"] and "Errno" not in full["err"], full["err"]
    assert full["claims"] == first["claims"] and full["notebook"] == first["notebook"]
    assert not leftovers(full), full["files"]

    # The next run removes what a killed run left, and publishes.
    recovered = seen["recovered"]
    assert recovered["code"] == 0 and json.loads(recovered["claims"]) == {"value": 2}, recovered
    assert "value 2" in recovered["notebook"]
    assert not leftovers(recovered) and not [f for f in recovered["files"] if ".log" in f]

    # Read-only: the folder is named before any chapter runs.
    ro = seen["read-only"]
    assert ro["code"] == 2 and ro["err"] == (
        f"error: cannot write {disk}/executed: the file system is read-only "
        "(Read-only file system)\n"
    ), ro
    assert ro["seconds"] < 10, "a chapter ran before the folder was found read-only"
    assert "value 2" in ro["notebook"]


# ---------------------------------------------------------------------------
# The one-chapter build
# ---------------------------------------------------------------------------


def test_a_one_chapter_build_is_quiet_about_the_pages_it_did_not_execute(tmp_path):
    """A fresh ``make chapter CH=01`` ended with "build succeeded, 1056 warnings": the glue
    keys and glued figures of the nine pages it had not executed. Those pages' warnings
    go; the built chapter's stay, and its page shows its outputs."""
    toy = make_toy(tmp_path / "toy")
    (toy / "_ext").mkdir()
    (toy / "_ext" / "book_ext.py").write_text((PROJECT / "_ext" / "book_ext.py").read_text())
    with (toy / "_config.yml").open("a") as fh:
        fh.write("sphinx:\n  local_extensions:\n    book_ext: _ext\n")
    with (toy / "chapters" / "02_b.md").open("a") as fh:  # glue that exists once B has run
        fh.write("\nThe word is {glue:text}`word`, in {numref}`fig-word`.\n")
    with (toy / "chapters" / "01_a.md").open("a") as fh:  # a real warning of the built page
        fh.write("\nSee {numref}`fig-nowhere`.\n")
    p = make(toy, "chapter", "CH=01")
    out, _ = p.communicate(timeout=600)
    assert p.returncode == 0, out
    out = re.sub(r"\x1b\[[0-9;]*m", "", out)  # Sphinx's colours
    warnings = [line for line in out.splitlines() if "WARNING" in line]
    assert len(warnings) == 1 and "01_a" in warnings[0] and "fig-nowhere" in warnings[0], out
    assert "build succeeded, 1 warning." in out, out
    assert "value 1" in (toy / "_build" / "html" / "chapters" / "01_a.html").read_text()
    assert (toy / "_build" / "html" / "chapters" / "02_b.html").exists()  # the code, no outputs


def test_a_try_run_touches_neither_the_books_outputs_nor_its_stamps(
    tmp_path, tmp_path_factory, monkeypatch
):
    """``make try`` writes into build/try/<chapter>-<hash> alone: the book's executed
    notebooks, their stamps and claims are byte for byte what they were, and the book's
    own build afterwards finds the chapter up to date."""
    from bookbuild import trying

    toy = executed_toy(tmp_path_factory, tmp_path / "toy")  # a copy: its stamps still hold
    executed = toy / "build" / "executed"
    status = execute(executed, "ci", "cpu", toy, log=lambda *_: None)
    assert status == {"01_a": "up to date", "02_b": "up to date"}
    before = {p.relative_to(executed): p.read_bytes() for p in executed.rglob("*") if p.is_file()}

    toy_module(monkeypatch, value=1)
    out = trying.run_try("1", "value=2", "ci", "cpu", toy, log=lambda *_: None, page=False)
    assert out.is_file() and out.parent.parent == toy / trying.TRY_DIR
    after = {p.relative_to(executed): p.read_bytes() for p in executed.rglob("*") if p.is_file()}
    assert after == before, "a try run changed the book's outputs"
    status = execute(executed, "ci", "cpu", toy, log=lambda *_: None)
    assert status == {"01_a": "up to date", "02_b": "up to date"}
    with pytest.raises(trying.ConfigError, match="did you mean 'value'"):
        trying.run_try("1", "valu=2", "ci", "cpu", toy, log=lambda *_: None, page=False)


def test_a_failing_chapter_still_yields_every_page_a_banner_and_a_non_zero_exit(
    tmp_path, tmp_path_factory
):
    """``make book`` stopped at a chapter that failed and built no HTML at all: the index
    and the other pages were never built. Now every page is built, the failed one shows
    the cells that ran under a banner naming the error, and the command exits non-zero
    naming the chapter."""
    toy = executed_toy(tmp_path_factory, tmp_path / "toy")  # chapter A up to date
    (toy / "chapters" / "02_b.md").write_text(
        HEADER + "\n# B\n\n```{code-cell} ipython3\nprint('before the claim')\n```\n\n"
        "```{code-cell} ipython3\nraise AssertionError('claim x: partly, the chapter says new')\n```\n"
    )
    p = make(toy, "book")
    out, _ = p.communicate(timeout=600)
    assert p.returncode == 2, out
    assert "1 chapter(s) failed to execute" in out and "02_b: AssertionError: claim x" in out, out
    pages = toy / "_build" / "html"
    assert (pages / "index.html").exists() and "value 1" in (
        pages / "chapters" / "01_a.html"
    ).read_text()
    b = (pages / "chapters" / "02_b.html").read_text()
    assert "This chapter failed to execute" in b and "before the claim" in b, b[-2000:]
    assert b.index("This chapter failed to execute") < b.index("before the claim")  # on top
    assert "claim x: partly, the chapter says new" in b
    # the failed chapter runs again next time (its stamp matches nothing), and passes once
    # fixed: its staged page has no banner (the HTML of a changed page: test_build.py)
    (toy / "chapters" / "02_b.md").write_text(
        HEADER + "\n# B\n\n```{code-cell} ipython3\nprint('fixed')\n```\n"
    )
    executed = toy / "build" / "executed"
    status = execute(executed, "ci", "cpu", toy, log=lambda *_: None)
    assert status == {"01_a": "up to date", "02_b": "executed"}
    stage(executed, toy / "build" / "book", root=toy)
    b = (toy / "build" / "book" / "chapters" / "02_b.ipynb").read_text()
    assert "fixed" in b and "failed to execute" not in b

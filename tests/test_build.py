"""The build pipeline on a toy two-chapter book in a temporary folder.

Each test is a defect the pipeline once had: a `lib/` edit or a scale change that left
stale outputs in the HTML, one edit that re-executed every chapter, an interrupt that
left the run half-done, two runs in one checkout that clobbered each other, a stage of
notebooks that were never executed.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pytest
from toybook import HEADER, PROJECT, alive, cli, executed_toy, make_toy, outlived, shared_folder

from bookbuild import testcache
from bookbuild.execute import execute
from bookbuild.notebook import STAMP_KEY, BuildError, convert, write_error
from bookbuild.pool import worker_env
from bookbuild.stage import stage
from bookbuild.stamps import chapter_stamp, lib_closure
from bookbuild.timing import timing_table


@pytest.fixture
def toy(tmp_path: Path) -> Path:
    return make_toy(tmp_path)


@pytest.fixture
def executed(tmp_path: Path, tmp_path_factory) -> Path:
    """The toy book with both chapters executed (a copy of the session's)."""
    return executed_toy(tmp_path_factory, tmp_path / "toy")


def _run(toy: Path, *args: str, env=None) -> str:
    p = cli(toy, *args, env=env)
    out, _ = p.communicate(timeout=300)
    assert p.returncode == 0, out
    return out


def _executed(toy: Path, scale: str = "ci") -> list[str]:
    """Execute the toy book in this process (the CLI's own function, without the seconds
    of a new process importing torch); return the chapters that were executed."""
    status = execute(toy / "build" / "executed", scale, "cpu", toy, log=lambda *a: None)
    return sorted(k for k, v in status.items() if v == "executed")


def _html(toy: Path, scale: str = "ci") -> dict[str, str]:
    """Execute, stage and build the toy book as `make book` does; return page texts. The
    build is `make book`'s ``jupyter-book build`` command, run in this process (its imports,
    seconds, are paid once, not once per build)."""
    _executed(toy, scale)
    stage(toy / "build" / "executed", toy / "build" / "book", root=toy)
    args = ["build", str(toy / "build" / "book"), "--path-output", str(toy)]
    with contextlib.chdir(toy), contextlib.redirect_stdout(io.StringIO()):
        with warnings.catch_warnings():  # its packages' deprecations, unseen on its command line
            warnings.simplefilter("ignore")
            from jupyter_book.cli.main import main as jupyter_book

            jupyter_book.main(args, standalone_mode=False)
    pages = toy / "_build" / "html" / "chapters"
    return {p.stem: p.read_text() for p in pages.glob("*.html")}


def test_a_lib_edit_reexecutes_only_the_chapters_that_import_it_and_the_html_shows_it(executed):
    """A lib edit re-executes the chapters that import the module, and the pages show the
    new values (one toy book, two builds); a scale change re-executes every chapter."""
    toy = executed
    pages = _html(toy)
    assert "value 1" in pages["01_a"] and "word first" in pages["02_b"]
    assert "scale ci" in pages["01_a"]
    (toy / "lib" / "a.py").write_text("VALUE = 2\n")
    assert _executed(toy) == ["01_a"]  # 02_b does not import lib.a
    pages = _html(toy)  # nothing is executed twice: the stamps are up to date
    assert "value 2" in pages["01_a"] and "value 1" not in pages["01_a"]
    assert _executed(toy, scale="book") == ["01_a", "02_b"]  # a scale change: every chapter
    assert "scale book" in (toy / "build" / "executed" / "01_a.ipynb").read_text()


def test_stamps_track_data_files_versions_scale_and_device(toy):
    md = toy / "chapters" / "01_a.md"
    s = chapter_stamp(md, "ci", "cpu", toy, env="e1")
    assert s == chapter_stamp(md, "ci", "cpu", toy, env="e1")
    assert s != chapter_stamp(md, "book", "cpu", toy, env="e1")
    assert s != chapter_stamp(md, "ci", "cuda:0", toy, env="e1")
    assert s != chapter_stamp(md, "ci", "cpu", toy, env="e2")  # a package version
    (toy / "lib" / "table.csv").write_text("1,2\n")  # a non-.py file in lib/
    assert s != chapter_stamp(md, "ci", "cpu", toy, env="e1")
    # lib.b is not imported by chapter A: editing it leaves A's stamp alone
    s = chapter_stamp(md, "ci", "cpu", toy, env="e1")
    (toy / "lib" / "b.py").write_text('WORD = "second"\n')
    assert s == chapter_stamp(md, "ci", "cpu", toy, env="e1")


def test_transitive_imports_are_followed(toy):
    (toy / "lib" / "a.py").write_text("from .c import X\nVALUE = X\n")
    (toy / "lib" / "c.py").write_text("X = 3\n")
    code = "from lib.a import VALUE\n"
    assert [p.name for p in lib_closure(code, toy)] == ["__init__.py", "a.py", "c.py"]


def test_modules_in_layer_folders_are_followed_across_layers(toy):
    """The library's layers are folders: a chapter's stamp holds a module two folders away,
    reached by an absolute import and then by relative ones across layers, with the
    packages on the way; a module of another layer that nothing imports stays out."""
    for layer in ("measure", "training"):
        (toy / "lib" / layer).mkdir()
        (toy / "lib" / layer / "__init__.py").write_text("")
    (toy / "lib" / "measure" / "stairs.py").write_text("from ..training.engine import T\n")
    (toy / "lib" / "training" / "engine.py").write_text("from . import init\nT = 1\n")
    (toy / "lib" / "training" / "init.py").write_text("")
    (toy / "lib" / "training" / "sweep.py").write_text("")
    code = "from lib.measure.stairs import T\nfrom lib.measure import stairs as st\n"
    got = [str(p.relative_to(toy / "lib")) for p in lib_closure(code, toy)]
    assert got == [
        "__init__.py",
        "measure/__init__.py",
        "measure/stairs.py",
        "training/__init__.py",
        "training/engine.py",
        "training/init.py",
    ]


def test_a_subpackage_module_and_its_relative_imports_are_followed(toy):
    """A chapter that imports its own experiment module depends on it, on the package's
    __init__ and on what they import (relative imports included), and on no other
    chapter's experiment module."""
    ex = toy / "lib" / "experiments"
    ex.mkdir()
    (ex / "__init__.py").write_text("from ..c import X\n")
    (ex / "ch01_a.py").write_text("from .. import a\nfrom . import X\n")
    (ex / "ch02_b.py").write_text("from ..b import WORD\n")
    (toy / "lib" / "a.py").write_text("A = 1\n")
    (toy / "lib" / "c.py").write_text("X = 3\n")
    code = "from lib.experiments import ch01_a as ex\n"
    got = [str(p.relative_to(toy / "lib")) for p in lib_closure(code, toy)]
    assert got == [
        "__init__.py",
        "a.py",
        "c.py",
        "experiments/__init__.py",
        "experiments/ch01_a.py",
    ]


def _wait_for(paths, timeout: float = 60) -> None:
    deadline = time.time() + timeout
    while not all(p.exists() for p in paths):
        assert time.time() < deadline, f"none of {paths} appeared in {timeout} s"
        time.sleep(0.1)


def test_an_interrupted_run_stops_at_once_keeps_nothing_half_done_and_recovers(toy):
    mark = toy / "b_is_running"
    p = cli(toy, "execute", str(toy / "build" / "executed"), "--root", str(toy), "--workers", "1",
             env={"TOY_SLEEP": "60", "TOY_MARK": str(mark)})  # fmt: skip
    _wait_for([toy / "build" / "executed" / "01_a.ipynb", mark])  # B sleeps in its kernel
    t0 = time.time()
    os.killpg(p.pid, signal.SIGINT)
    out, _ = p.communicate(timeout=30)
    assert p.returncode == 130 and time.time() - t0 < 20, out
    assert "interrupted 02_b after" in out and "FAILED" not in out, out  # not a failure
    assert not (toy / "build" / "executed" / "02_b.ipynb").exists()
    assert not (toy / "build" / "executed" / "02_b.log").exists()  # nothing failed
    left = [f.name for f in (toy / "build" / "executed").glob(".*") if f.name != ".lock"]
    assert not left, left  # no temporary file or staging folder
    assert not outlived([int(mark.read_text())]), "chapter B's kernel outlived the interrupt"
    assert _executed(toy) == ["02_b"]


def test_two_concurrent_runs_both_finish_and_agree(toy):
    ps = [
        cli(toy, "execute", str(toy / "build" / "executed"), "--root", str(toy)) for _ in range(2)
    ]
    outs = [p.communicate(timeout=300)[0] for p in ps]
    assert all(p.returncode == 0 for p in ps), outs
    # They took turns: one executed both chapters, the other found them up to date.
    assert sorted(o.count("up to date)") and "(2 up to date)" in o for o in outs) == [False, True]
    for nb in (toy / "build" / "executed").glob("*.ipynb"):
        assert json.loads(nb.read_text())["metadata"][STAMP_KEY]


def test_stage_refuses_a_notebook_without_outputs_and_names_it(toy, tmp_path):
    executed = tmp_path / "never_run"
    convert(executed, root=toy)
    with pytest.raises(BuildError, match="01_a.ipynb has no outputs"):
        stage(executed, tmp_path / "staged", root=toy)


def test_a_failing_chapter_is_named_in_one_line(executed):
    toy = executed  # chapter A up to date: B alone runs
    (toy / "chapters" / "02_b.md").write_text(HEADER + "\n```{code-cell} ipython3\n1 / 0\n```\n")
    p = cli(toy, "execute", str(toy / "build" / "executed"), "--root", str(toy))
    out, _ = p.communicate(timeout=300)
    assert p.returncode == 2
    assert "error: 1 chapter(s) failed" in out and "02_b: ZeroDivisionError" in out


def _notebooks(folder: Path, cells: dict[str, str]) -> None:
    import nbformat

    for name, code in cells.items():
        nb = nbformat.v4.new_notebook()
        nb.cells = [nbformat.v4.new_code_cell(code)]
        nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                     "language": "python"}  # fmt: skip
        nbformat.write(nb, folder / f"{name}.ipynb")
    (folder / "conftest.py").write_text((PROJECT / "conftest.py").read_text())


def _pytest(folder: Path, *args: str) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--nbmake", *args]
    return subprocess.Popen(cmd, cwd=folder, text=True, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip


@pytest.mark.parametrize("workers", [0, 2], ids=["serial", "xdist"])
def test_ctrl_c_stops_the_whole_nbmake_run(tmp_path, workers):
    """nbclient swallows SIGINT and nbmake would go on to the next chapter; the project's
    conftest.py makes the session stop once the interrupted chapters have ended, serially
    and under pytest-xdist (``make chapters``): no chapter starts after the interrupt, and
    no kernel outlives it."""
    running = 1 if workers == 0 else workers
    names = [f"nb{i}" for i in range(1, running + 2)]
    _notebooks(tmp_path, {n: f"import os, pathlib, time\n"
                             f"pathlib.Path('{n}.pid').write_text(str(os.getpid()))\n"
                             f"time.sleep(60)\nprint('done {n}')" for n in names})  # fmt: skip
    p = _pytest(
        tmp_path, *[f"{n}.ipynb" for n in names], *(["-n", str(workers)] if workers else [])
    )
    started = [tmp_path / f"{n}.pid" for n in names[:running]]
    _wait_for(started)  # the first chapters are sleeping in their kernels
    t0 = time.time()
    os.killpg(p.pid, signal.SIGINT)  # what Ctrl-C does: the whole foreground group
    out, _ = p.communicate(timeout=60)
    assert time.time() - t0 < 20, out
    assert p.returncode == 2 and ("Interrupted" in out or "KeyboardInterrupt" in out), out
    assert not (tmp_path / f"{names[-1]}.pid").exists(), out  # the last one never started
    assert not any(f"done {n}" in out for n in names), out  # no chapter ran to its end
    left = outlived([int(f.read_text()) for f in started])
    assert not left, f"kernels {left} outlived the interrupt"


# One nbmake run under ``-n 2`` that two tests read: four notebooks, each recording when it
# started, its worker (the kernel's parent) and the socket its kernel listens on.
SECONDS = {"nb_a": 10, "nb_b": 500, "nb_c": 1, "nb_d": 400}  # recorded, for the order
RECORD = (
    "import os, pathlib, time\n"
    "from ipykernel.kernelapp import IPKernelApp\n"
    "app = IPKernelApp.instance()\n"
    "pathlib.Path('{n}.run').write_text(f'{{time.time()}} {{os.getppid()}} {{app.transport}} "
    "{{app.ip}}')"
)


def _two_workers(folder: Path) -> None:
    (folder / ".cache").mkdir()
    (folder / ".cache" / "chapter-durations.json").write_text(json.dumps(SECONDS))
    _notebooks(folder, {n: RECORD.format(n=n) for n in SECONDS})
    p = _pytest(folder, "-n", "2", *[f"{n}.ipynb" for n in sorted(SECONDS)])
    out, _ = p.communicate(timeout=120)
    (folder / "out.txt").write_text(f"{p.returncode}\n{out}")


@pytest.fixture
def two_workers(tmp_path_factory) -> tuple[int, str, dict[str, list[str]]]:
    """The shared run: its exit status, its output, and each notebook's record."""
    folder = shared_folder(tmp_path_factory, "nbmake-two-workers", _two_workers)
    code, out = (folder / "out.txt").read_text().split("\n", 1)
    runs = {n: (folder / f"{n}.run").read_text().split() for n in SECONDS
            if (folder / f"{n}.run").exists()}  # fmt: skip
    return int(code), out, runs


def test_parallel_chapters_start_longest_first_on_different_workers(two_workers):
    """Under ``-n 2`` the notebooks are ordered by their recorded seconds, and the two
    longest start first, one on each worker (xdist's default would give both to one)."""
    code, out, runs = two_workers
    assert code == 0 and set(runs) == set(SECONDS), out
    order = sorted(SECONDS, key=lambda n: float(runs[n][0]))
    assert set(order[:2]) == {"nb_b", "nb_d"}, order
    assert runs["nb_b"][1] != runs["nb_d"][1], runs  # different workers


def test_the_timing_table_lists_phases_and_notebooks_and_records_their_seconds(tmp_path):
    times = tmp_path / "times"
    times.mkdir()
    (times / "phases.txt").write_text("environment 0\nlint 5300\nchapters 250400\n")
    (times / "chapters.xml").write_text(
        '<testsuites><testsuite><testcase classname="x" name="02_b.ipynb" time="200.4"/>'
        '<testcase classname="x" name="01_a.ipynb" time="50.0"><failure message="boom"/>'
        "</testcase></testsuite></testsuites>"
    )
    (tmp_path / ".cache").mkdir()
    (tmp_path / ".cache" / "chapter-durations.json").write_text('{"01_a": 70.0, "03_c": 9.0}')
    table = timing_table(times, root=tmp_path)
    rows = {line.split()[0]: line.split()[1:] for line in table.splitlines() if line.strip()}
    assert rows["lint"] == ["5"] and rows["chapters"] == ["250"] and rows["total"][-1] == "256"
    assert rows["02_b"] == ["200", "passed"] and rows["01_a"] == ["50", "failure"]
    recorded = json.loads((tmp_path / ".cache" / "chapter-durations.json").read_text())
    assert recorded == {"01_a": 70.0, "02_b": 200.4, "03_c": 9.0}  # a failed run: a lower bound
    (tmp_path / ".cache" / "chapter-durations.json").write_text('{"01_a": 7.0}')
    timing_table(times, root=tmp_path)
    recorded = json.loads((tmp_path / ".cache" / "chapter-durations.json").read_text())
    assert recorded == {"01_a": 50.0, "02_b": 200.4}
    # phases side by side: the total is the wall clock (wall.txt, after the environment)
    (times / "phases.txt").write_text("environment 9000\nchapters 250400\nchecks 60000\n")
    (times / "wall.txt").write_text("260400\n")
    rows = {line.split()[0]: line.split()[1:] for line in timing_table(times, root=tmp_path)
            .splitlines() if line.strip()}  # fmt: skip
    assert rows["total"][-1] == "269"


def test_parallel_workers_run_one_thread_each_and_never_spin_for_a_core(tmp_path, monkeypatch):
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    env = worker_env(tmp_path, "ci", "cpu")
    assert env["OMP_NUM_THREADS"] == env["MKL_NUM_THREADS"] == "1"
    assert env["OMP_WAIT_POLICY"] == "PASSIVE"
    assert "OMP_WAIT_POLICY" not in worker_env(tmp_path, "ci", "cpu", threads=None)


def test_importing_lib_makes_waiting_threads_sleep_unless_told_otherwise():
    """``import lib`` sets OMP_WAIT_POLICY=PASSIVE before torch loads (a chapter run by hand
    gets what `make` exports); an explicit setting is kept. It does not import torch (the
    build's command line starts in a fraction of a second); torch, imported after lib or
    before it, flushes denormal floats to zero, and without lib it does not (the control)."""
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    run = lambda code, e=env: subprocess.run(
        [sys.executable, "-c", code], env=e, capture_output=True, text=True, check=True,
        cwd=PROJECT,
    ).stdout.split()  # fmt: skip
    policy = "import os, sys, bookbuild.cli; print(os.environ['OMP_WAIT_POLICY'],"
    policy += " 'torch' in sys.modules)"
    assert run(policy, dict(env, OMP_WAIT_POLICY="ACTIVE")) == ["ACTIVE", "False"]
    flushed = "print((torch.tensor([1e-39]) * torch.tensor([1.0])).item() == 0.0)"
    assert run(f"{policy}; import torch; {flushed}") == ["PASSIVE", "False", "True"]
    # torch first: not flushed without lib (the control), flushed once lib is imported
    assert run(f"import torch; {flushed}; import lib; {flushed}") == ["False", "True"]


def test_make_test_restores_only_chapters_that_passed_on_the_same_inputs(toy, monkeypatch):
    """bookbuild/testcache.py: a chapter that passed is not run again while its stamp holds;
    a failed one, an edited lib module, other thread settings or FRESH=1 run it again."""
    nb, cache, times = toy / "executed", toy / "build" / "test-cache", toy / "times"
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    convert(nb, root=toy)
    restore = lambda **kw: testcache.restore(nb, cache, times, root=toy, **kw)
    assert restore() == (["01_a", "02_b"], [])
    for stem in ("01_a", "02_b"):  # what nbmake leaves: executed notebooks and claims
        run = json.loads((nb / f"{stem}.ipynb").read_text())
        run["cells"][-1]["outputs"] = [{"output_type": "stream", "name": "stdout", "text": stem}]
        (nb / f"{stem}.ipynb").write_text(json.dumps(run))
        (nb / "claims" / f"{stem}.json").write_text(json.dumps({"chapter": stem}))
    junit = toy / "chapters.xml"
    junit.write_text(
        '<testsuites><testsuite><testcase name="01_a.ipynb" time="3"/><testcase name="02_b.ipynb"'
        ' time="4"><failure message="boom"/></testcase></testsuite></testsuites>'
    )
    assert testcache.store(nb, cache, junit) == ["01_a"]  # never a failure
    convert(nb, root=toy)  # make test starts from unexecuted notebooks
    (nb / "claims" / "01_a.json").unlink()
    assert restore() == (["02_b"], ["01_a"])
    assert json.loads((nb / "01_a.ipynb").read_text())["cells"][-1]["outputs"][0]["text"] == "01_a"
    assert json.loads((nb / "claims" / "01_a.json").read_text()) == {"chapter": "01_a"}
    assert (nb / "todo.txt").read_text() == f"{nb / '02_b'}.ipynb\n"
    table = timing_table(times, root=toy, record=False)
    assert "01_a" in table and "passed before, unchanged" in table
    assert restore(fresh=True) == (["01_a", "02_b"], [])
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    assert restore()[1] == []  # other thread settings: run again
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    (toy / "lib" / "a.py").write_text("VALUE = 2\n")
    assert restore()[1] == []  # the chapter imports lib.a: run again
    (toy / "lib" / "a.py").write_text("VALUE = 1\n")
    assert restore()[1] == ["01_a"]


def test_kernels_listen_on_unix_sockets_of_their_own(two_workers):
    """Two kernels started at once over TCP can be handed the same free port (one died in
    ``make test``: "Address already in use"); nbmake's kernels, under the project's
    conftest.py (the shared run above: two workers side by side), and the book's executor
    use Unix sockets with paths of their own."""
    from jupyter_client.manager import AsyncKernelManager, KernelManager

    from bookbuild.notebook import SHUTDOWN_WAIT, kernel_defaults

    kernel_defaults()
    managers = [AsyncKernelManager(), AsyncKernelManager(), KernelManager()]
    assert {m.transport for m in managers} == {"ipc"}
    assert {m.shutdown_wait_time for m in managers} == {SHUTDOWN_WAIT}
    assert len({m.ip for m in managers}) == 3
    code, out, runs = two_workers
    assert code == 0 and set(runs) == set(SECONDS), out
    assert {r[2] for r in runs.values()} == {"ipc"}, runs
    assert all("kernel-" in r[3] for r in runs.values()), runs
    assert len({r[3] for r in runs.values()}) == len(runs), runs  # a path of its own each


LOCK = [sys.executable, str(PROJECT / "bookbuild" / "lock.py")]  # the Makefile's LOCK


def _wait_for_text(path: Path, timeout: float = 30) -> str:
    deadline = time.time() + timeout
    while not (path.exists() and path.read_text().strip()):
        assert time.time() < deadline, f"{path} stayed empty for {timeout} s"
        time.sleep(0.05)
    return path.read_text()


def test_a_run_waiting_for_the_lock_says_so_once_naming_the_holders_command(tmp_path):
    """A second ``make chapter`` waited 13 s on the lock with no message."""
    lock = tmp_path / ".book.lock"
    (tmp_path / "Makefile").write_text(
        f"hold:\n\t{' '.join(LOCK)} {lock} {sys.executable} -c 'import time; time.sleep(1)'\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS")}
    holder = subprocess.Popen(["make", "-s", "-C", str(tmp_path), "hold"], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    pid = _wait_for_text(lock).split()[0]
    waiter = subprocess.run([*LOCK, str(lock), "echo", "ran"], capture_output=True, text=True,
                            timeout=60)  # fmt: skip
    assert holder.wait(timeout=30) == 0  # the waiter ran once the holder had finished
    assert waiter.returncode == 0 and waiter.stdout == "ran\n"
    assert waiter.stderr == f"waiting for {lock}, held by pid {pid}: make -s -C {tmp_path} hold\n"


def test_on_ctrl_c_the_lock_returns_only_after_its_command_has_ended(tmp_path):
    """``flock`` died of the SIGINT at once: make returned 3 ms after Ctrl-C, and the
    command's last lines came seconds later, after the prompt."""
    code = (
        "import os, signal, sys, time\n"
        "def stop(*a):\n"
        "    time.sleep(0.5)\n"
        "    print('stopped', flush=True)\n"
        "    sys.exit(130)\n"
        "signal.signal(signal.SIGINT, stop)\n"
        "print(os.getpid(), flush=True)\n"
        "time.sleep(60)\n"
    )
    p = subprocess.Popen([*LOCK, str(tmp_path / "lock"), sys.executable, "-c", code],
                         stdout=subprocess.PIPE, text=True, start_new_session=True)  # fmt: skip
    child = int(p.stdout.readline())
    os.killpg(p.pid, signal.SIGINT)  # what Ctrl-C does: the whole foreground group
    p.wait(timeout=30)
    assert not alive(child), "the lock returned while its command was still running"
    assert p.stdout.read() == "stopped\n" and p.returncode == 130


def test_a_write_that_fails_leaves_no_temporary_file_and_is_named_in_one_line(
    tmp_path, monkeypatch
):
    """A full disk left a truncated ``.01_signatures.ipynb.*.tmp`` and a chained traceback."""
    import errno

    from bookbuild import notebook

    def full(src, dst):
        raise OSError(errno.ENOSPC, "No space left on device", str(dst))

    monkeypatch.setattr(notebook.os, "replace", full)
    with pytest.raises(OSError) as err:
        notebook.atomic_write(tmp_path / "out" / "01_a.ipynb", "{}")
    assert list((tmp_path / "out").iterdir()) == []
    assert write_error(err.value) == (
        f"cannot write {tmp_path / 'out' / '01_a.ipynb'}: the disk is full "
        "(No space left on device)"
    )


def test_a_chapters_claims_and_notebook_are_published_together_or_not_at_all(tmp_path):
    from bookbuild import outputs

    out = tmp_path / "executed"
    claims, nb, log = out / "claims", out / "01_a.ipynb", out / "01_a.log"
    claims.mkdir(parents=True)
    (claims / "01_a.json").write_text("old claims")
    (claims / "02_b.json").write_text("B's claims")
    log.write_text("the last run's traceback")
    nb.mkdir()  # a folder where the notebook goes: its rename fails after the claims'
    folder = outputs.staging(out, "01_a", claims)
    assert (folder / "claims" / "02_b.json").read_text() == "B's claims"  # the report reads all
    (folder / "claims" / "01_a.json").write_text("new claims")
    (folder / "01_a.ipynb").write_text("new notebook")
    with pytest.raises(OSError) as err:
        outputs.publish(folder, nb, claims, log)
    assert err.value.filename == str(nb)
    assert (claims / "01_a.json").read_text() == "old claims" and log.exists()  # undone
    nb.rmdir()
    outputs.publish(folder, nb, claims, log)
    assert (claims / "01_a.json").read_text() == "new claims" and nb.read_text() == "new notebook"
    assert not log.exists()  # the old failure log goes with the new outputs
    assert outputs.remove_leftovers(out) == [folder] and not folder.exists()


def test_a_failed_notebook_opens_with_its_banner_right_under_the_title():
    import nbformat

    from bookbuild.notebook import FAILED_KEY, mark_failed

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("(sec-x)=\n# 9. Title\n\nIntro.\n\n:::{admonition} box\n:::"),
                nbformat.v4.new_code_cell("1 / 0")]  # fmt: skip
    nb.metadata["book_chapter"] = "09"
    mark_failed(nb, "ClaimError: claim 'x': partly, the chapter says `new result`", "abc")
    src = nb.cells[0].source
    assert src.index("# 9. Title") < src.index("This chapter failed") < src.index("Intro.")
    assert "make chapter CH=09" in src and "'new result'" in src and len(nb.cells) == 2
    assert (
        nb.metadata[FAILED_KEY].startswith("ClaimError") and nb.metadata[STAMP_KEY] == "failed:abc"
    )


def test_a_chapter_publishes_its_own_claims_and_never_an_older_copy_of_anothers(tmp_path):
    """Chapter B's staging folder copied A's claims when B started; A then published new
    claims (or failed, and its claims were withdrawn); B's publish put the old copy back."""
    from bookbuild import outputs

    out = tmp_path / "executed"
    claims = out / "claims"
    claims.mkdir(parents=True)
    (claims / "01_a.json").write_text("A, old")
    b = outputs.staging(out, "02_b", claims)  # B starts: a copy of A's old claims
    (claims / "01_a.json").write_text("A, new")  # A finishes while B runs
    (b / "claims" / "02_b.json").write_text("B")
    (b / "02_b.ipynb").write_text("B's notebook")
    outputs.publish(b, out / "02_b.ipynb", claims, out / "02_b.log")
    assert (claims / "01_a.json").read_text() == "A, new" and (
        claims / "02_b.json"
    ).read_text() == "B"
    c = outputs.staging(out, "03_c", claims)
    outputs.publish_failed(outputs.staging(out, "01_a", claims), out / "01_a.ipynb", claims, "01_a")
    (c / "03_c.ipynb").write_text("C's notebook")
    outputs.publish(c, out / "03_c.ipynb", claims, out / "03_c.log")
    assert not (claims / "01_a.json").exists()  # A failed: its claims stay withdrawn

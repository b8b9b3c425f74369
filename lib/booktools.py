"""Build plumbing for the book, called by the Makefile (``python -m lib.booktools CMD``).

The book never shows outputs from other code, another scale or another version, and a
rebuild executes only what changed:

* ``execute``: every chapter has a **stamp**, a hash of what its outputs depend on: its
  own source; the ``lib`` modules it imports, transitively (found by parsing the
  imports); every other file in ``lib/``; ``pyproject.toml`` and the requirements files;
  the name and version of every installed distribution; the Python version; the scale
  and the device. A chapter whose executed notebook is missing or carries another stamp
  is executed again, the stale ones in parallel (one worker per core, torch on one
  thread each, the longest chapter first). A notebook is written only when its
  execution finished, atomically, so an interrupted run leaves nothing half-done and a
  rerun recovers. Ctrl-C stops every worker and kernel.
* ``stage``: a copy of the book whose chapters are the executed notebooks, with
  execution off. Sphinx re-reads a page when its file changes, and a notebook changes
  exactly when it was executed again, so a page is re-read if and only if its outputs
  may differ. A notebook without outputs is refused, and named.
* ``convert``: chapters are jupytext MyST-Markdown; nbmake and ruff read ``.ipynb``.
  A chapter whose header is not MyST (which would silently turn its code cells into
  Markdown) or that has no code cell is refused.

Every command holds a lock on its output folder, so two runs in one checkout serialize
instead of clobbering each other.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import importlib.metadata
import json
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "lib"
STAMP_KEY = "book_stamp"
BOOK_FILES = ("_config.yml", "_toc.yml", "index.md", "references.bib", "_ext/book_ext.py")
CELL_TIMEOUT = 1200  # seconds; a book-scale chapter runs in under 10 minutes


class BuildError(RuntimeError):
    """A build step failed; the message names the chapter or file and the fix."""


# ---------------------------------------------------------------------------
# Chapters as notebooks
# ---------------------------------------------------------------------------


def check_chapter(path: Path):
    """Read a chapter with jupytext; raise ValueError unless it is a runnable MyST notebook."""
    import jupytext

    text = path.read_text(encoding="utf-8")
    head = text.split("---", 2)[1] if text.startswith("---") else ""
    for needle in ("extension: .md", "format_name: myst", "kernelspec:"):
        if needle not in head:
            raise ValueError(
                f"{path}: the jupytext header lacks {needle!r}; without it jupytext reads the "
                "code cells as Markdown and the chapter would 'pass' without running anything"
            )
    nb = jupytext.reads(text, fmt="md:myst")
    n_code = sum(c.cell_type == "code" for c in nb.cells)
    if n_code == 0:
        raise ValueError(f"{path}: no code cells")
    return nb


def chapters(root: Path = ROOT) -> list[Path]:
    found = sorted((root / "chapters").glob("*.md"))
    if not found:
        raise BuildError(f"no chapters found in {root / 'chapters'}")
    return found


def convert(out_dir: Path, root: Path = ROOT) -> list[Path]:
    """Write every chapter as an .ipynb into ``out_dir`` (for nbmake and ruff)."""
    import jupytext

    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for md in chapters(root):
        target = out_dir / (md.stem + ".ipynb")
        jupytext.write(check_chapter(md), target, fmt="ipynb")
        written.append(target)
    return written


# ---------------------------------------------------------------------------
# Stamps
# ---------------------------------------------------------------------------


def _module_file(pkg: Path, name: str) -> Path | None:
    """The file of module ``name`` (dotted, relative to the package; "" is the package)."""
    base = pkg.joinpath(*name.split(".")) if name else pkg
    for f in (base.with_suffix(".py") if name else None, base / "__init__.py"):
        if f is not None and f.is_file():
            return f
    return None


def _imported_modules(
    source: str,
    package: str = PACKAGE,
    current: str | None = None,
    is_package: bool = False,
    pkg: Path | None = None,
) -> set[str]:
    """Dotted names (relative to ``package``; "" is the package itself) of the package
    modules that ``source`` imports, with every parent package they import on the way.

    ``current`` is the importing module's dotted name inside the package (None for code
    outside it, such as a chapter); relative imports are resolved against it.
    """
    pkg = ROOT / package if pkg is None else pkg
    found: set[str] = set()

    def add(parts: list[str]) -> None:
        for i in range(len(parts) + 1):
            found.add(".".join(parts[:i]))

    here = current.split(".") if current else []
    if current is not None and not is_package:
        here = here[:-1]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for a in node.names:
                parts = a.name.split(".")
                if parts[0] == package:
                    add(parts[1:])
        elif isinstance(node, ast.ImportFrom):
            mod = [p for p in (node.module or "").split(".") if p]
            if node.level == 0:
                if not mod or mod[0] != package:
                    continue
                base = mod[1:]
            elif current is None:
                continue
            else:
                base = here[: len(here) - (node.level - 1)] + mod
            add(base)
            for a in node.names:  # from lib import engine  /  from . import ch07
                sub = ".".join(base + [a.name])
                if _module_file(pkg, sub) is not None:
                    add(base + [a.name])
    return found


def lib_closure(source: str, root: Path = ROOT, package: str = PACKAGE) -> list[Path]:
    """The ``package`` module files that ``source`` imports, transitively, sorted."""
    pkg = root / package
    seen: set[str] = set()
    files: set[Path] = set()
    todo = _imported_modules(source, package, pkg=pkg)
    while todo:
        name = todo.pop()
        f = _module_file(pkg, name)
        if name in seen or f is None:
            continue
        seen.add(name)
        files.add(f)
        text = f.read_text(encoding="utf-8")
        is_pkg = f.name == "__init__.py"
        todo |= _imported_modules(text, package, current=name, is_package=is_pkg, pkg=pkg) - seen
    return sorted(files)


def environment_fingerprint() -> str:
    """Python version and every installed distribution with its version."""
    dists = sorted(
        {f"{d.metadata['Name']}=={d.version}".lower() for d in importlib.metadata.distributions()}
    )
    return f"python {platform.python_version()}\n" + "\n".join(dists)


def chapter_stamp(
    md: Path, scale: str, device: str, root: Path = ROOT, env: str | None = None
) -> str:
    """Hash of everything the outputs of chapter ``md`` depend on (see the module docstring)."""
    source = md.read_text(encoding="utf-8")
    nb = check_chapter(md)
    code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    try:
        modules = lib_closure(code, root)
    except SyntaxError as err:
        raise BuildError(
            f"{md}: a code cell is not valid Python ({err.msg}, line {err.lineno})"
        ) from None
    pkg = root / PACKAGE
    data = [f for f in sorted(pkg.rglob("*")) if f.is_file() and f.suffix not in (".py", ".pyc")]
    extra = [root / n for n in ("pyproject.toml", "requirements.txt", "requirements-data.txt")]
    h = hashlib.sha256()
    h.update(source.encode())
    for f in modules + data + extra:
        if f.exists() and "__pycache__" not in f.parts:
            h.update(str(f.relative_to(root)).encode() + b"\0" + f.read_bytes())
    h.update((env if env is not None else environment_fingerprint()).encode())
    h.update(f"scale={scale};device={device}".encode())
    return h.hexdigest()


def notebook_stamp(path: Path) -> str | None:
    """The stamp stored in an executed notebook, or None (missing or unreadable)."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))["metadata"].get(STAMP_KEY)
    except (OSError, ValueError, KeyError):
        return None


# ---------------------------------------------------------------------------
# Execution
# ---------------------------------------------------------------------------


def _atomic_write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text)
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)


def execute_one(md: Path, out: Path, stamp: str, root: Path = ROOT) -> None:
    """Execute chapter ``md`` in a fresh kernel (cwd: the book root) and write ``out``."""
    import nbformat
    from nbclient import NotebookClient

    nb = check_chapter(md)
    nb.metadata[STAMP_KEY] = stamp
    client = NotebookClient(
        nb, timeout=CELL_TIMEOUT, kernel_name="python3", resources={"metadata": {"path": str(root)}}
    )
    client.execute()
    _atomic_write(out, nbformat.writes(nb))


def _worker_env(root: Path, scale: str, device: str, threads: int | None = 1) -> dict[str, str]:
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


def _durations_path(out_dir: Path) -> Path:
    return out_dir / "durations.json"


REPORT_PREFIX = "99_"  # pages that gather what the chapters recorded: executed after them


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
) -> dict[str, str]:
    """Execute the stale chapters into ``out_dir``; return chapter -> 'executed' / 'up to date'.

    ``only``: chapter stems or prefixes (``"07"``) to consider; the others are left as
    they are. ``workers``: chapters at a time (default: one per core); ``threads``: torch
    threads per worker (``None``: torch's default, every core). Chapters record their
    claims in ``out_dir/claims``; a report page (stem ``99_...``) runs after the others,
    and its stamp includes those claims. Raises :class:`BuildError` naming every chapter
    whose execution failed.
    """
    from filelock import FileLock

    out_dir.mkdir(parents=True, exist_ok=True)
    claims = out_dir.resolve() / "claims"  # absolute: the kernels run in the book's root
    with FileLock(str(out_dir / ".lock")):
        env_fp = environment_fingerprint()
        selected = [
            md
            for md in chapters(root)
            if not only or any(md.stem == o or md.stem.startswith(o) for o in only)
        ]
        if only and not selected:
            raise BuildError(
                f"no chapter matches {only}; chapters are {[m.stem for m in chapters(root)]}"
            )
        durations = {}
        if _durations_path(out_dir).exists():
            durations = json.loads(_durations_path(out_dir).read_text())
        status: dict[str, str] = {}
        failed: dict[str, str] = {}
        env = dict(_worker_env(root, scale, device, threads), BOOK_CLAIMS_DIR=str(claims))
        for group in (
            [m for m in selected if not m.stem.startswith(REPORT_PREFIX)],
            [m for m in selected if m.stem.startswith(REPORT_PREFIX)],
        ):
            extra = (
                ""
                if not group or not group[0].stem.startswith(REPORT_PREFIX)
                else _claims_digest(claims)
            )
            todo = []
            for md in group:
                stamp = chapter_stamp(md, scale, device, root, env=env_fp + extra)
                out = out_dir / f"{md.stem}.ipynb"
                if notebook_stamp(out) == stamp:
                    status[md.stem] = "up to date"
                else:
                    todo.append((md, out, stamp))
            todo.sort(key=lambda t: -durations.get(t[0].stem, 0.0))  # longest first
            _run_pool(
                todo, out_dir, env, root, workers, scale, device, durations, status, failed, log
            )
            if failed:
                break
        _atomic_write(_durations_path(out_dir), json.dumps(durations, indent=1))
        if failed:
            lines = "\n".join(f"  {k}: {v}" for k, v in sorted(failed.items()))
            raise BuildError(
                f"{len(failed)} chapter(s) failed to execute (run `make chapter CH=NN` to "
                f"rerun one):\n{lines}"
            )
        return status


def _run_pool(todo, out_dir, env, root, workers, scale, device, durations, status, failed, log):
    """Execute ``todo`` = [(md, out, stamp)], ``workers`` at a time, each in its own session."""
    if not todo:
        return
    n = max(1, min(workers or os.cpu_count() or 1, len(todo)))
    log(f"executing {len(todo)} chapter(s) at BOOK_SCALE={scale} on {device}, {n} at a time")
    procs: dict[str, subprocess.Popen] = {}

    def run(item):
        md, out, stamp = item
        t0 = time.perf_counter()
        cmd = [sys.executable, "-c", _CHILD, __file__, str(md), str(out), stamp, str(root)]
        # The worker runs this file alone, without importing its package (which imports
        # torch: seconds per chapter); the kernel runs in ``root`` with ``root`` first on
        # its path, so a chapter imports root's lib.
        p = subprocess.Popen(
            cmd, env=env, cwd=ROOT, start_new_session=True,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip
        procs[md.stem] = p
        text, _ = p.communicate()
        dt = time.perf_counter() - t0
        if p.returncode != 0:
            text = re.sub(r"\x1b\[[0-9;]*m", "", text)  # the kernel's colours
            log_file = out_dir / f"{md.stem}.log"
            _atomic_write(log_file, text)
            last = text.strip().splitlines()[-1] if text.strip() else f"exit {p.returncode}"
            failed[md.stem] = f"{last} (traceback in {log_file})"
            log(f"  FAILED {md.stem} after {dt:.0f} s")
        else:
            durations[md.stem] = dt
            status[md.stem] = "executed"
            log(f"  {md.stem}: {dt:.0f} s")

    pool = ThreadPoolExecutor(n)
    try:
        list(pool.map(run, todo))
    except KeyboardInterrupt:
        for p in procs.values():
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    pool.shutdown()


# A worker: this file loaded as a lone module (not as part of its package), then _run_child.
_CHILD = (
    "import importlib.util, sys; spec = importlib.util.spec_from_file_location('_booktools', "
    "sys.argv[1]); m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m); "
    "sys.exit(m._run_child(*sys.argv[2:]))"
)


def _run_child(md: str, out: str, stamp: str, root: str) -> int:
    """One worker: execute one chapter; SIGTERM shuts the kernel down before exiting."""

    def stop(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)
    try:
        execute_one(Path(md), Path(out), stamp, Path(root))
    except KeyboardInterrupt:
        print(f"{Path(md).stem}: interrupted")
        return 130
    except Exception as err:  # the cell's error, with its traceback, names the cause
        text = str(err)
        print(text)
        tail = [ln for ln in text.splitlines() if ln.strip()]
        print(tail[-1] if tail else type(err).__name__)
        return 1
    return 0


# ---------------------------------------------------------------------------
# Staging and the Sphinx build
# ---------------------------------------------------------------------------


def _copy_if_changed(src: Path, dst: Path) -> bool:
    if dst.exists() and dst.read_bytes() == src.read_bytes():
        return False
    dst.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(src, dst)
    return True


def mathjax_dir() -> Path:
    """MathJax 3's ``es5`` folder inside the installed django-static-mathjax package.

    Found without importing the package (it is a Django app; only its files are used).
    """
    import importlib.util

    spec = importlib.util.find_spec("mathjax")
    path = Path(spec.submodule_search_locations[0]) / "static" / "mathjax" / "es5" if spec else None
    if path is None or not (path / "tex-chtml.js").is_file():
        raise BuildError(
            "MathJax is not installed, so the pages could not show math offline; "
            "install it with: pip install django-static-mathjax==3.2.2.1"
        )
    return path


def _stage_mathjax(dest: Path) -> None:
    src = mathjax_dir()
    if (
        not (dest / "tex-chtml.js").is_file()
        or (dest / "tex-chtml.js").read_bytes() != (src / "tex-chtml.js").read_bytes()
    ):
        shutil.rmtree(dest, ignore_errors=True)
        shutil.copytree(src, dest)


FOLD_TAGS = {"show-input", "hide-input", "remove-input", "remove-cell", "hide-cell"}


def fold_plumbing(nb: dict) -> dict:
    """Fold every code cell that carries none of :data:`FOLD_TAGS` (``hide-input``).

    The book's convention: plumbing is folded by default, and the cells that *are* the
    argument (the model, the loss, the measurement, the check of an equation) carry the
    tag ``show-input`` and stay open.
    """
    for cell in nb["cells"]:
        if cell["cell_type"] != "code":
            continue
        tags = cell.setdefault("metadata", {}).setdefault("tags", [])
        if not FOLD_TAGS & set(tags):
            tags.append("hide-input")
    return nb


def _stage_notebook(src: Path, dst: Path) -> None:
    """Copy an executed notebook with its plumbing folded; write only when it changed."""
    text = json.dumps(fold_plumbing(json.loads(src.read_text(encoding="utf-8"))), indent=1)
    if dst.exists() and dst.read_text(encoding="utf-8") == text:
        return
    _atomic_write(dst, text)


def stage(
    executed: Path,
    out: Path,
    root: Path = ROOT,
    partial: bool = False,
    doctrees: Path | None = None,
) -> Path:
    """A copy of the book whose chapters are the executed notebooks, with execution off.

    Files are copied only when they changed, so Sphinx re-reads exactly the pages whose
    notebooks were executed again. With ``partial`` (``make chapter``), a chapter never
    executed is staged as its source, a page without outputs, and said so. When a
    book-wide file changed (the config, the toc, the Sphinx extension), Sphinx's saved
    environment ``doctrees`` is removed, so that every page is read again.
    """
    config = (root / "_config.yml").read_text()
    if 'execute_notebooks: "off"' not in config:
        raise BuildError(
            "_config.yml must set 'execute_notebooks: \"off\"': chapters are executed by "
            "lib.booktools, never by jupyter-book"
        )
    changed = [n for n in BOOK_FILES if (root / n).exists() and _copy_if_changed(root / n, out / n)]
    if changed and doctrees is not None and doctrees.exists():
        print(f"{', '.join(changed)} changed: every page is read again")
        shutil.rmtree(doctrees)
    shutil.rmtree(out / "_static" / "mathjax", ignore_errors=True)  # an earlier layout
    _stage_mathjax(out / "_extra" / "mathjax")
    wanted = set()
    for md in chapters(root):
        nb = executed / f"{md.stem}.ipynb"
        if not nb.exists() and partial:
            print(f"{md.stem} is not executed yet: its page shows the code without outputs")
            nb = md
        elif not nb.exists():
            raise BuildError(f"{nb} does not exist: execute chapter {md.stem} first")
        else:
            cells = json.loads(nb.read_text(encoding="utf-8"))["cells"]
            code = [c for c in cells if c["cell_type"] == "code" and c["source"]]
            if not any(c.get("outputs") for c in code):
                raise BuildError(f"{nb} has no outputs: it was never executed")
        if nb.suffix == ".ipynb":
            _stage_notebook(nb, out / "chapters" / nb.name)
        else:
            _copy_if_changed(nb, out / "chapters" / nb.name)
        wanted.add(nb.name)
    for old in (out / "chapters").glob("*"):
        if old.name not in wanted:
            old.unlink()
    return out


# ---------------------------------------------------------------------------
# The timing table of ``make test``
# ---------------------------------------------------------------------------

DURATIONS_RECORD = Path(".cache") / "chapter-durations.json"  # read by conftest.py


def _junit_cases(path: Path) -> list[tuple[str, float, str]]:
    """(name, seconds, outcome) of every test case in a JUnit XML file (none if missing)."""
    import xml.etree.ElementTree as ET

    if not path.is_file():
        return []
    cases = []
    for case in ET.parse(path).getroot().iter("testcase"):
        kinds = {child.tag for child in case}
        outcome = next((k for k in ("failure", "error", "skipped") if k in kinds), "passed")
        cases.append((case.get("name", "?"), float(case.get("time", 0.0)), outcome))
    return cases


def timing_table(times: Path, root: Path = ROOT, record: bool = True) -> str:
    """The table ``make test`` prints at its end: the seconds of each phase (``phases.txt``:
    lines ``phase milliseconds``, as the Makefile writes them) and of each notebook (the
    JUnit XML files ``chapters.xml`` and ``report.xml`` of nbmake). With ``record``, the
    seconds of every notebook are merged into ``.cache/chapter-durations.json`` (those of
    one that failed only where they are longer than the recorded ones: a lower bound),
    from which the next run orders the chapters, the longest first (conftest.py)."""
    phases = []
    if (times / "phases.txt").is_file():
        for line in (times / "phases.txt").read_text().split("\n"):
            if line.strip():
                name, ms = line.split()
                phases.append((name, int(ms) / 1000))
    notebooks = [c for f in ("chapters.xml", "report.xml") for c in _junit_cases(times / f)]
    unit = _junit_cases(times / "unit.xml")
    w = max([len(Path(n).stem) + 2 for n, *_ in notebooks] + [34])
    lines = [f"make test: seconds per phase ({os.cpu_count()} cores)", f"{'phase':<{w}}{'s':>8}"]
    lines += [f"{n:<{w}}{t:>8.0f}" for n, t in phases]
    if phases:
        lines.append(f"{'total':<{w}}{sum(t for _, t in phases):>8.0f}")
    if unit:
        lines.append(f"{'(unit tests: ' + str(len(unit)) + ', summed)':<{w}}"
                     f"{sum(t for _, t, _ in unit):>8.0f}")  # fmt: skip
    if notebooks:
        lines += ["", f"{'notebook (nbmake, BOOK_SCALE=ci)':<{w}}{'s':>8}  outcome"]
        lines += [f"{Path(n).stem:<{w}}{t:>8.0f}  {o}" for n, t, o in notebooks]
    if record and notebooks:
        path = root / DURATIONS_RECORD
        try:
            known = json.loads(path.read_text())
        except (OSError, ValueError):
            known = {}
        for n, t, o in notebooks:  # a failed run's seconds are a lower bound of its length
            stem = Path(n).stem
            known[stem] = round(t, 1) if o == "passed" else max(known.get(stem, 0.0), round(t, 1))
        _atomic_write(path, json.dumps(known, indent=1, sort_keys=True))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    from .env import ConfigError, get_device, get_scale, scale_warning

    ap = argparse.ArgumentParser(prog="python -m lib.booktools", description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    ex = sub.add_parser("execute", help="execute the stale chapters")
    ex.add_argument("out", type=Path)
    ex.add_argument("--only", nargs="*", default=None, help="chapter numbers or stems")
    ex.add_argument("--workers", type=int, default=None)
    ex.add_argument("--root", type=Path, default=ROOT, help="the book's folder")
    cv = sub.add_parser("convert", help="write every chapter as .ipynb")
    cv.add_argument("out", type=Path)
    st = sub.add_parser("stage", help="stage executed notebooks as a book")
    st.add_argument("executed", type=Path)
    st.add_argument("out", type=Path)
    st.add_argument("--partial", action="store_true", help="stage unexecuted chapters as source")
    st.add_argument("--root", type=Path, default=ROOT, help="the book's folder")
    st.add_argument("--doctrees", type=Path, default=None, help="Sphinx's saved environment")
    tt = sub.add_parser("times", help="print the timing table of `make test`")
    tt.add_argument("times", type=Path, help="the folder of phases.txt and the JUnit files")
    args = ap.parse_args(argv)
    try:
        if args.cmd == "times":
            print(timing_table(args.times))
        elif args.cmd == "execute":
            scale, device = get_scale(), get_device()
            warning = scale_warning(scale, device)
            if warning:
                print(warning, file=sys.stderr)
            device = str(device)
            status = execute(
                args.out, scale, device, args.root, only=args.only or None, workers=args.workers
            )
            fresh = sum(v == "up to date" for v in status.values())
            print(f"{len(status)} chapter(s) ready in {args.out} ({fresh} up to date)")
        elif args.cmd == "convert":
            for p in convert(args.out):
                print(f"converted {p}")
        elif args.cmd == "stage":
            print(
                f"staged {stage(args.executed, args.out, args.root, args.partial, args.doctrees)}"
            )
    except (ConfigError, BuildError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(
            "interrupted: nothing half-written was kept; run the same command again",
            file=sys.stderr,
        )
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())

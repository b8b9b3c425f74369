"""The command line: ``python -m bookbuild execute|convert|stage|times|test-cache ...``."""

from __future__ import annotations

import argparse
import json
import signal
import sys
from pathlib import Path

from .execute import execute
from .notebook import ROOT, BuildError, atomic_write, convert, select_chapters, write_error
from .stage import stage
from .testcache import restore, store
from .timing import timing_table
from .trying import SMOKE_SUMMARY


def paper_estimate(stems: list[str], root: Path = ROOT) -> str | None:
    """What ``make paper-smoke`` measured on this machine for these chapters' full paper
    runs, if it measured them all."""
    try:
        rows = json.loads((root / SMOKE_SUMMARY).read_text())
        seconds = {r["chapter"]: float(r["estimate_s"]) for r in rows}
        hours = sum(seconds[s] for s in stems) / 3600
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return f"about {hours:,.1f} hours for {', '.join(stems)} ({SMOKE_SUMMARY})"


def interrupt_on_stop() -> None:
    """SIGTERM and SIGHUP interrupt as Ctrl-C does (KeyboardInterrupt: the workers are
    stopped, and the same message is printed); only the first of the three does, so that
    a second one does not cut the stopping short. A signal ignored from the start stays so."""
    stopping = []

    def stop(signum, frame):
        if not stopping:
            stopping.append(signum)
            raise KeyboardInterrupt

    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(signum) is not signal.SIG_IGN:
            signal.signal(signum, stop)


class _Cpu:
    """``torch.device("cpu")`` as the command line reads it (its ``type`` and its name)."""

    type = "cpu"

    def __str__(self) -> str:
        return "cpu"


def device_named():
    """``BOOK_DEVICE``'s device (:func:`lib.env.get_device`); ``cpu`` without loading torch,
    which takes seconds (the tests run many builds at ``BOOK_DEVICE=cpu``)."""
    import os

    from lib.env import get_device

    if os.environ.get("BOOK_DEVICE", "").strip() == "cpu":
        return _Cpu()
    return get_device()


def check_inputs(only: str | None, root: Path = ROOT) -> None:
    """What a build is asked for, checked before it waits on the lock: the chapters ``only``
    names, ``BOOK_SCALE`` and ``BOOK_DEVICE`` (torch is loaded only where the device or a
    paper scale needs it)."""
    import os

    from lib.env import ConfigError, check_scale, get_device, get_scale

    if only is not None and not only.replace(",", " ").split():
        raise ConfigError(f"CH={only!r} names no chapter: name one, e.g. CH=07")
    stems = [md.stem for md in select_chapters(only, root)] if only else []
    raw_scale = os.environ.get("BOOK_SCALE", "").strip()
    scale = get_scale() if raw_scale else None  # None: chosen with the device, never refused
    device = os.environ.get("BOOK_DEVICE", "").strip()
    if (device == "" and scale != "paper") or (device == "cpu" and scale in ("ci", "book")):
        return
    check_scale(get_scale(), get_device(), estimate=paper_estimate(stems, root) if stems else None)


def main(argv: list[str] | None = None) -> int:
    from lib.env import ConfigError, check_scale, get_scale

    if argv is None:  # run as a program (not called by a test): it owns its signals
        interrupt_on_stop()

    ap = argparse.ArgumentParser(
        prog="python -m bookbuild", description=sys.modules[__package__].__doc__.split("\n")[0]
    )
    sub = ap.add_subparsers(dest="cmd", required=True)
    ex = sub.add_parser("execute", help="execute the stale chapters")
    ex.add_argument("out", type=Path)
    ex.add_argument("--only", default=None,
                    help="chapters, by number or stem, separated by spaces or commas")  # fmt: skip
    ex.add_argument("--workers", type=int, default=None)
    ex.add_argument("--root", type=Path, default=ROOT, help="the book's folder")
    ex.add_argument("--keep-going", action="store_true",
                    help="a failed chapter does not stop the build: `failures` ends it")  # fmt: skip
    fl = sub.add_parser("failures", help="name the chapters that failed; exit 2 if any did")
    fl.add_argument("executed", type=Path)
    fl.add_argument("--root", type=Path, default=ROOT, help="the book's folder")
    rf = sub.add_parser("reference", help="write the claims' statuses as the reference run's")
    rf.add_argument("claims", type=Path, help="a folder of claims (e.g. build/executed/claims)")
    rf.add_argument("--scale", required=True, choices=("ci", "book", "paper"))
    rb = sub.add_parser("robust", help="the ci book under a perturbation, against the plain one")
    rb.add_argument("out", type=Path)
    rb.add_argument("--cache", type=Path, required=True, help="make test's cache of chapters")
    rb.add_argument("--perturb", default="1e-6:1", help="BOOK_PERTURB's REL:SEED")
    rb.add_argument("--root", type=Path, default=ROOT, help="the book's folder")
    rb.add_argument("--workers", type=int, default=None)
    cp = sub.add_parser("compare", help="compare a run's claims with another run's")
    cp.add_argument("claims", type=Path, help="the run's claims folder")
    cp.add_argument("--against", type=Path, default=None,
                    help="the other run's claims folder (default: the reference run's)")  # fmt: skip
    cp.add_argument(
        "--scale", default=None, help="the scale of the reference (default: BOOK_SCALE)"
    )
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
    tc = sub.add_parser("test-cache", help="restore or keep the chapters of `make test`")
    tc.add_argument("action", choices=("restore", "store"))
    tc.add_argument("notebooks", type=Path, help="the folder nbmake runs the notebooks in")
    tc.add_argument("cache", type=Path)
    tc.add_argument("--times", type=Path, default=None, help="the folder of the timing table")
    tc.add_argument("--junit", type=Path, default=None, help="nbmake's JUnit file (store)")
    tc.add_argument("--fresh", action="store_true", help="restore nothing: run every chapter")
    tm = sub.add_parser("timings", help="write docs/timings.md from the last test and book runs")
    tm.add_argument("out", type=Path)
    ck = sub.add_parser("check", help="check CH, BOOK_SCALE and BOOK_DEVICE before the lock")
    ck.add_argument("--only", default=None, help="the chapters, as for execute")
    ck.add_argument("--root", type=Path, default=ROOT, help="the book's folder")
    tr = sub.add_parser("try", help="run one chapter with your own settings, into build/try/")
    tr.add_argument("--only", required=True, help="the chapter: its number or stem")
    tr.add_argument("--set", dest="settings", required=True, help='e.g. "seeds=(0, 1) lr=0.003"')
    tr.add_argument("--root", type=Path, default=ROOT, help="the book's folder")
    args = ap.parse_args(argv)
    try:
        if args.cmd == "times":
            print(timing_table(args.times))
        elif args.cmd == "test-cache" and args.action == "restore":
            todo, restored = restore(args.notebooks, args.cache, args.times, fresh=args.fresh)
            if restored:
                print(f"{len(restored)} chapter(s) unchanged since they last passed, not run "
                      f"again (FRESH=1 runs them): {' '.join(restored)}")  # fmt: skip
        elif args.cmd == "test-cache":
            if args.junit is None:
                raise ValueError("test-cache store needs --junit, the JUnit file of nbmake")
            store(args.notebooks, args.cache, args.junit)
        elif args.cmd == "execute":
            selected = select_chapters(args.only, args.root)
            scale, device = get_scale(), device_named()
            stems = [md.stem for md in selected] if args.only else []
            check_scale(scale, device, estimate=paper_estimate(stems, args.root) if stems else None)
            try:
                status = execute(
                    args.out, scale, str(device), args.root, only=stems or None,
                    workers=args.workers,
                )  # fmt: skip
            except BuildError as err:
                if not args.keep_going:
                    raise
                print(f"error: {err}\nthe pages are built all the same, each failed one under "
                      "a banner; the build then fails", file=sys.stderr)  # fmt: skip
                return 0
            fresh = sum(v == "up to date" for v in status.values())
            print(f"{len(status)} chapter(s) ready in {args.out} ({fresh} up to date)")
            # (the comparison loads numpy: only where a chapter recorded claims to compare)
            if not args.only and any((args.out / "claims").glob("*.json")):
                from .reference import print_changes

                print_changes(args.out / "claims", scale)
        elif args.cmd == "failures":
            from .execute import failures

            gone = failures(args.executed, args.root)
            if gone:
                lines = "\n".join(f"  {k}: {v}" for k, v in sorted(gone.items()))
                print(f"error: {len(gone)} chapter(s) failed to execute; their pages open with a "
                      f"banner (rerun one with `make chapter CH=NN`):\n{lines}",
                      file=sys.stderr)  # fmt: skip
                return 2
        elif args.cmd == "reference":
            from .reference import write_reference

            print(f"wrote {write_reference(args.claims, args.scale)}")
        elif args.cmd == "robust":
            from .robust import run_robust

            return run_robust(args.out, args.cache, args.perturb, args.root, args.workers)
        elif args.cmd == "compare":
            from .reference import compare_runs

            return compare_runs(args.claims, args.against, args.scale or get_scale())
        elif args.cmd == "timings":
            from .timing import timings_markdown

            atomic_write(args.out, timings_markdown(ROOT))
            print(f"wrote {args.out}")
        elif args.cmd == "check":
            check_inputs(args.only, args.root)
        elif args.cmd == "try":
            from lib.experiments.settings import parse_settings

            from .trying import chapter_to_try, run_try

            chapter_to_try(args.only, args.root)  # the cheap checks first: no torch yet
            parse_settings(args.settings)
            scale, device = get_scale(), device_named()
            check_scale(scale, device)
            run_try(args.only, args.settings, scale, str(device), args.root)
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
    except OSError as err:  # a full disk, a folder that cannot be written
        print(f"error: {write_error(err)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(
            "interrupted: nothing half-written was kept; run the same command again",
            file=sys.stderr,
        )
        return 130
    return 0

"""Benchmark: K instances batched against the same K run one after another.

Run ``make bench`` (or ``python -m bookbuild.bench``). For every model family in
:data:`FAMILIES` it trains K=16 instances for S Adam steps three ways and prints
steps per second (one "step" advances all K instances) and the ratios, once on one CPU
thread (how the book trains: one worker per core, one thread each) and once on torch's
default (every core):

* batched: one call of :func:`lib.training.engine.train` with K=16;
* sequential: 16 calls with K=1, the same engine;
* plain: 16 runs of an ordinary ``nn.Module`` + ``torch.optim.Adam`` loop, the
  implementation a reader would write first.

A last line times one batched small-initialization run (gamma = 1) on modular addition
with denormal floats flushed to zero, as the book does (:mod:`lib.process`), against the
same run computing with denormals.

With ``--build`` it times the book's build instead (``python -m bookbuild.bench --build``), at
``BOOK_SCALE=ci`` in temporary folders:

* serial against parallel: every chapter one after another with torch free to use every
  core (the old build), against :func:`bookbuild.execute.execute`'s parallel workers, one
  torch thread each;
* busy against quiet: the parallel run again while another process keeps one core
  busy, chapter by chapter.

With ``--paper-smoke OUT`` (``make paper-smoke``) it runs every chapter at
``BOOK_SCALE=paper`` in the smoke mode (``BOOK_SMOKE=1``, :mod:`lib.env`: every training
run makes 2 optimizer steps and is logged at all its logging steps; claims are recorded,
not asserted), one chapter at a time under nbmake on one thread, and prints for each: the
peak memory (the largest resident set of the chapter's processes, from ``wait4``), the
smoke run's seconds, the paper step count of its training runs, the time per step, and the
estimated full ``paper`` time on this CPU: the smoke run's seconds, less the seconds its
training runs took, plus, for each run, its paper steps times its measured seconds per
step (the faster of the two), plus its logs: their measured seconds, scaled from the logs
the smoke run made (the first three and the last; all of them with ``BOOK_SMOKE_LOGS=all``)
to the run's number of logs.

Speed is measured here, as ratios, and never in a timed test.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from functools import partial

import torch
import torch.nn as nn

from lib.env import cpu_threads, quietly
from lib.training.engine import train
from lib.training.layers import ACTIVATIONS
from lib.training.models import EmbMLP, LinearEmb, Transformer, build


class _PlainEmbMLP(nn.Module):
    def __init__(self, V, d, m, n_out, activation):
        super().__init__()
        self.E = nn.Embedding(V, d)
        self.W1 = nn.Linear(d, m, bias=False)
        self.W2 = nn.Linear(m, n_out, bias=False)
        self.act = ACTIVATIONS[activation]

    def forward(self, X):
        return self.W2(self.act(self.W1(self.E(X).sum(1))))


class _PlainLinear(nn.Module):
    def __init__(self, V, d, n_out):
        super().__init__()
        self.E = nn.Embedding(V, d)
        self.W = nn.Linear(d, n_out, bias=False)

    def forward(self, X):
        return self.W(self.E(X).sum(1))


class _PlainTransformer(nn.Module):
    """One attention layer, no biases, last-position readout: the textbook version."""

    def __init__(self, V, d, L):
        super().__init__()
        self.E = nn.Embedding(V, d)
        self.P = nn.Parameter(torch.randn(L, d) * L**-0.5)
        self.attn = nn.MultiheadAttention(d, 1, bias=False, batch_first=True)
        self.U = nn.Linear(d, V, bias=False)
        self.register_buffer("mask", torch.triu(torch.ones(L, L, dtype=torch.bool), 1))

    def forward(self, X):
        h = self.E(X) + self.P[: X.shape[1]]
        h = h + self.attn(h, h, h, attn_mask=self.mask, need_weights=False)[0]
        return self.U(h[:, -1])


def _families(V, L, d, batch):
    yield "Emb-MLP (SiLU)", EmbMLP(V, d, 4 * d, V), lambda: _PlainEmbMLP(V, d, 4 * d, V, "silu")
    yield "linear embedding", LinearEmb(V, d, V), lambda: _PlainLinear(V, d, V)
    yield "transformer (1 layer)", Transformer(V, d, L), lambda: _PlainTransformer(V, d, L)


FAMILIES = ("Emb-MLP (SiLU)", "linear embedding", "transformer (1 layer)")
# The speed-up that batching must give over sequential runs, for the two families the book
# trains most.
GOAL, GOAL_MODELS = 5.0, ("Emb-MLP (SiLU)", "transformer (1 layer)")


def _data(V, L, N=4096, seed=0):
    gen = torch.Generator().manual_seed(seed)
    return torch.randint(0, V, (N, L), generator=gen), torch.randint(0, V, (N,), generator=gen)


def _time(fn, repeats=3):
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def _batched(model, X, y, K, steps, kw):
    train(model, build(model, list(range(K))), (X, y), steps, **kw)


def _sequential(model, X, y, K, steps, kw):
    for k in range(K):
        train(model, build(model, [k]), (X, y), steps, **kw)


def _plain_loop(make_net, X, y, K, steps, batch):
    for k in range(K):
        torch.manual_seed(k)
        net = make_net()
        opt = torch.optim.Adam(net.parameters(), lr=1e-3)
        gen = torch.Generator().manual_seed(0)
        for _ in range(steps):
            idx = torch.randint(0, X.shape[0], (batch,), generator=gen)
            loss = nn.functional.cross_entropy(net(X[idx]), y[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()


def run(K=16, steps=200, V=161, L=9, d=32, batch=64, repeats=3, threads=None):
    """Rows ``(family, batched, sequential, plain steps/s, batched/seq, batched/plain)``,
    on ``threads`` CPU threads (``None``: torch's default, every core)."""
    X, y = _data(V, L)
    kw = dict(optimizer="adam", lr=1e-3, batch_size=batch, log_at=[steps])
    rows = []
    with cpu_threads(threads), quietly():  # hundreds of short runs: no bar for each
        for name, model, plain in _families(V, L, d, batch):
            t_b = _time(partial(_batched, model, X, y, K, steps, kw), repeats)
            t_s = _time(partial(_sequential, model, X, y, K, steps, kw), repeats)
            t_p = _time(partial(_plain_loop, plain, X, y, K, steps, batch), repeats)
            rows.append((name, steps / t_b, steps / t_s, steps / t_p, t_s / t_b, t_p / t_b))
    return rows


_DENORMAL_RUN = """
import time, torch
from lib.data import tasks
from lib.training import engine
from lib.training.models import EmbMLP, build
torch.set_flush_denormal({flush})  # overrides lib's import-time setting, before any
# parallel op, so that torch's worker threads copy it
d = tasks.with_marker(tasks.modular_addition(0, p=47).train, 161, 3)
model = EmbMLP(162, 64, 128, 162)
params = build(model, list(range({K})), gamma=1.0)
t0 = time.perf_counter()
engine.train(model, params, (d.X, d.y), {steps}, optimizer="adam", lr=1e-2, batch_size=128,
             log_at=[0])
print(time.perf_counter() - t0)
"""


def run_denormal(K=8, steps=1500):
    """Seconds for one small-init Adam run on modular addition, denormals flushed or not.

    Each run is a fresh process, because the flag must be set before torch's worker threads
    exist (they copy it when created).
    """
    times = {}
    for flush in (True, False):
        code = _DENORMAL_RUN.format(flush=flush, K=K, steps=steps)
        out = subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "BOOK_QUIET": "1"},
        )
        times[flush] = float(out.stdout.strip().splitlines()[-1])
    return times[True], times[False]


def run_build(scale: str = "ci"):
    """Wall seconds of every chapter executed serially (torch free to use every core) and
    in parallel (one worker per core, one thread each), and per-chapter seconds of the
    parallel run, quiet and with another process keeping one core busy."""
    import tempfile
    from pathlib import Path

    from lib.env import get_device

    from .execute import execute

    device = str(get_device())
    silent = lambda *a: None  # noqa: E731
    wall, per_chapter = {}, {}
    with tempfile.TemporaryDirectory() as tmp:
        runs = (("serial", dict(workers=1, threads=None)), ("parallel", {}), ("busy", {}))
        for name, kw in runs:
            hog = (
                subprocess.Popen([sys.executable, "-c", "while True: pass"])
                if name == "busy"
                else None
            )
            try:
                t0 = time.perf_counter()
                execute(Path(tmp) / name, scale, device, log=silent, **kw)
                wall[name] = time.perf_counter() - t0
            finally:
                if hog is not None:
                    hog.kill()
            per_chapter[name] = json.loads((Path(tmp) / name / "durations.json").read_text())
    return wall, per_chapter


def main_build(scale: str) -> None:
    wall, per = run_build(scale)
    print(f"book build at BOOK_SCALE={scale}, {os.cpu_count()} cores")
    print(f"{'chapter':<28}{'serial s':>10}{'parallel s':>12}{'busy s':>9}{'busy/quiet':>12}")
    for ch in sorted(per["parallel"]):
        q, b = per["parallel"][ch], per["busy"][ch]
        print(f"{ch:<28}{per['serial'][ch]:>10.0f}{q:>12.0f}{b:>9.0f}{b / q:>11.2f}x")
    worst = max(per["busy"][c] / per["parallel"][c] for c in per["parallel"])
    print(
        f"all chapters: serial {wall['serial']:.0f} s, parallel {wall['parallel']:.0f} s, "
        f"serial/parallel {wall['serial'] / wall['parallel']:.2f}x; with one core busy "
        f"{wall['busy']:.0f} s, worst chapter busy/quiet {worst:.2f}x"
    )


def smoke_estimate(wall: float, runs: list[dict]) -> dict:
    """A chapter's full-run estimate from its smoke run (see the module docstring).

    ``wall``: the chapter's seconds in the smoke mode; ``runs``: its training runs' records
    (:func:`lib.env.smoke_record`). Returns the paper steps (summed over runs), the seconds
    per step (weighted by steps), the seconds the runs took in the smoke mode, and the
    estimated seconds of the whole chapter at full length."""
    smoke_s = sum(r["wall_s"] for r in runs)
    full = [
        r["steps"] * min(r["step_s"]) + r["log_s"] * r["n_logs"] / r.get("n_logs_run", r["n_logs"])
        if r["step_s"]
        else r["wall_s"]
        for r in runs
    ]
    steps = sum(r["steps"] for r in runs)
    train_s = sum(r["steps"] * min(r["step_s"]) for r in runs if r["step_s"])
    return dict(
        runs=len(runs),
        paper_steps=steps,
        s_per_step=train_s / steps if steps else float("nan"),
        runs_smoke_s=smoke_s,
        estimate_s=wall - smoke_s + sum(full),
    )


def _run_measured(cmd, env, log_path):
    """Run ``cmd``; return (exit code, seconds, peak resident set in bytes). The peak is
    wait4's: the largest of the process and of every descendant it waited for (a kernel)."""
    t0 = time.perf_counter()
    with open(log_path, "w") as log:
        p = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT)
        try:
            _, status, usage = os.wait4(p.pid, 0)
        except KeyboardInterrupt:
            p.terminate()
            p.wait()
            raise
        p.returncode = os.waitstatus_to_exitcode(status)
    return p.returncode, time.perf_counter() - t0, usage.ru_maxrss * 1024


def _smoke_child(md: str, out: str, errors: str) -> int:
    """Execute chapter ``md`` into ``out`` with every cell run even after one fails
    (nbclient's ``allow_errors``), so that one analysis that cannot read a 2-step run does
    not hide the paper-scale runs after it; write the cells' errors as JSON to ``errors``."""
    from pathlib import Path

    import nbformat
    from nbclient import NotebookClient

    from .notebook import ROOT, check_chapter

    nb = check_chapter(Path(md))
    client = NotebookClient(nb, timeout=None, kernel_name="python3", allow_errors=True,
                            resources={"metadata": {"path": str(ROOT)}})  # fmt: skip
    try:
        client.execute()
    finally:
        Path(out).write_text(nbformat.writes(nb))
    found = []
    code = [c for c in nb.cells if c.cell_type == "code"]
    for i, cell in enumerate(code):
        for o in cell.get("outputs", []):
            if o.get("output_type") == "error" and not any(
                (e["cell"], e["ename"], e["evalue"]) == (i, o["ename"], o["evalue"][:300])
                for e in found
            ):
                first = next((ln for ln in cell.source.splitlines() if ln.strip()), "")
                found.append(dict(cell=i, ename=o["ename"], evalue=o["evalue"][:300], line=first))
    Path(errors).write_text(json.dumps(found, indent=1))
    return 0


_SMOKE_CHILD = (
    "import sys; from bookbuild.bench import _smoke_child; sys.exit(_smoke_child(*sys.argv[1:]))"
)


def paper_smoke(out, only=None, log=print):
    """Every chapter (or those ``only`` names, exactly: :func:`bookbuild.notebook.select_chapters`)
    at paper scale in the smoke mode, one at a time; returns one row per chapter (with the
    errors of its cells; every cell is run) and writes them to ``out/summary.json``."""
    from pathlib import Path

    from .notebook import ROOT, select_chapters

    # the report page last, on the claims recorded here; a name that is no chapter is
    # refused before anything runs
    chapters = select_chapters(only)
    out = Path(out).resolve()
    (out / "notebooks").mkdir(parents=True, exist_ok=True)
    env = {
        **os.environ,
        "BOOK_SCALE": "paper",
        "BOOK_SMOKE": "1",
        "BOOK_DEVICE": os.environ.get("BOOK_DEVICE", "cpu"),
        "BOOK_QUIET": "1",
        "BOOK_CLAIMS_DIR": str(out / "claims"),
        "PYTHONPATH": str(ROOT),
        **{v: "1" for v in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")},
    }
    rows = []
    for md in chapters:
        record, errors = out / f"{md.stem}.runs.jsonl", out / f"{md.stem}.errors.json"
        record.unlink(missing_ok=True)
        errors.unlink(missing_ok=True)
        nb = out / "notebooks" / f"{md.stem}.ipynb"
        cmd = [sys.executable, "-c", _SMOKE_CHILD, str(md), str(nb), str(errors)]
        log(f"{md.stem}: running at BOOK_SCALE=paper, BOOK_SMOKE=1 ...")
        code, wall, peak = _run_measured(
            cmd, {**env, "BOOK_SMOKE_LOG": str(record)}, out / f"{md.stem}.log"
        )
        runs = [json.loads(x) for x in record.read_text().splitlines()] if record.exists() else []
        errs = json.loads(errors.read_text()) if errors.exists() else []
        if code != 0 and not errs:
            errs = [dict(cell=-1, ename="exit", evalue=f"exit {code}", line="")]
        row = dict(chapter=md.stem, passed=not errs, errors=errs, wall_s=wall, peak_bytes=peak)
        row.update(smoke_estimate(wall, runs))
        rows.append(row)
        outcome = "passed" if not errs else f"{len(errs)} cell error(s), in {nb}"
        log(f"  {outcome}; {wall:.0f} s, peak {peak / 2**30:.2f} GiB")
    # A run of some chapters (--only) updates their rows of the summary and keeps the others.
    summary = out / "summary.json"
    kept = json.loads(summary.read_text()) if summary.exists() else []
    done = {r["chapter"] for r in rows}
    rows = sorted([r for r in kept if r["chapter"] not in done] + rows, key=lambda r: r["chapter"])
    summary.write_text(json.dumps(rows, indent=1))
    return rows


def smoke_table(rows) -> str:
    """The table of :func:`paper_smoke` (Markdown, for the terminal and the README)."""

    def hours(s):
        return f"{s / 3600:.1f} h" if s >= 360 else f"{s / 60:.1f} min"

    lines = [
        "| chapter | outcome | peak memory | smoke run | training runs | paper steps "
        "| s per step | estimated paper time, this CPU, 1 thread |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        per = r["s_per_step"]
        lines.append(
            f"| {r['chapter']} | {'passed' if r['passed'] else str(len(r['errors'])) + ' errors'} "
            f"| {r['peak_bytes'] / 2**30:.2f} GiB | {r['wall_s']:.0f} s | {r['runs']} "
            f"| {r['paper_steps']:,} | {per:.3g} | {hours(r['estimate_s'])} |"
            if per == per
            else f"| {r['chapter']} | {'passed' if r['passed'] else str(len(r['errors'])) + ' errors'} "
            f"| {r['peak_bytes'] / 2**30:.2f} GiB | {r['wall_s']:.0f} s | 0 | 0 | - "
            f"| {hours(r['estimate_s'])} |"
        )
    errors = [
        f"- {r['chapter']}, code cell {e['cell']} (`{e['line'][:60]}`): {e['ename']}: "
        f"{e['evalue'].splitlines()[0][:160] if e['evalue'] else ''}"
        for r in rows
        for e in r["errors"]
    ]
    total = sum(r["estimate_s"] for r in rows)
    lines.append(f"| all | {sum(r['passed'] for r in rows)}/{len(rows)} passed | "
                 f"{max(r['peak_bytes'] for r in rows) / 2**30:.2f} GiB (max) | "
                 f"{sum(r['wall_s'] for r in rows):.0f} s | | | | {hours(total)} |")  # fmt: skip
    if errors:
        lines += ["", "Cell errors (every cell was run):", *errors]
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", action="store_true", help="time the book's build instead")
    ap.add_argument("--paper-smoke", metavar="OUT", default=None,
                    help="run every chapter at paper scale in the smoke mode, into OUT")  # fmt: skip
    ap.add_argument("--only", default=None, help="chapters by number or stem (paper smoke)")
    ap.add_argument("--scale", default="ci", help="scale of the build benchmark")
    ap.add_argument("--K", type=int, default=16)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--d", type=int, default=32)
    ap.add_argument("--batch", type=int, default=64)
    args = ap.parse_args(argv)
    if args.paper_smoke:
        from .notebook import BuildError

        try:
            rows = paper_smoke(args.paper_smoke, args.only)
        except BuildError as err:
            print(f"error: {err}", file=sys.stderr)
            return 2
        print(f"\nBOOK_SCALE=paper BOOK_SMOKE=1 on {os.cpu_count()} cores, one chapter at a time:")
        print(smoke_table(rows))
        return 0 if all(r["passed"] for r in rows) else 1
    if args.build:
        return main_build(args.scale)
    wait = os.environ.get("OMP_WAIT_POLICY", "unset")
    # One thread is how the book trains (one worker per core, one torch thread each); every
    # core is torch's default. With OMP_WAIT_POLICY=PASSIVE (the book's setting) the
    # threads of a multi-threaded run sleep between operations, and waking them costs most
    # on the many small operations of a K=1 run.
    for threads in (1, torch.get_num_threads()):
        rows = run(K=args.K, steps=args.steps, d=args.d, batch=args.batch, threads=threads)
        print(
            f"\nK={args.K} instances, {args.steps} Adam steps, d={args.d}, batch={args.batch}, "
            f"{threads} thread(s), OMP_WAIT_POLICY={wait} "
            "(steps/s: one step advances all K instances)"
        )
        print(
            f"{'model':<22}{'batched':>9}{'sequential':>12}{'plain':>8}"
            f"{'batched/seq':>13}{'batched/plain':>15}"
        )
        for name, b, s, p, r_s, r_p in rows:
            print(f"{name:<22}{b:>9.1f}{s:>12.1f}{p:>8.1f}{r_s:>12.1f}x{r_p:>14.1f}x")
        for name, *_, r_s, _ in rows:
            if name in GOAL_MODELS:
                met = "met" if r_s >= GOAL else "NOT met"
                print(f"goal batched/sequential >= {GOAL:.0f}x at K={args.K} for {name}: "
                      f"{r_s:.1f}x, {met}")  # fmt: skip
    t_flush, t_denormal = run_denormal()
    print(
        "\nsmall-init (gamma=1) Emb-MLP on modular addition, K=8, 1500 Adam steps: denormals flushed "
        f"{t_flush:.1f} s, computed {t_denormal:.1f} s, ratio {t_denormal / t_flush:.1f}x"
    )


if __name__ == "__main__":
    sys.exit(main())

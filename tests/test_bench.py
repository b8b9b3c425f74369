"""The benchmark's command line (bookbuild/bench.py): quiet, and exact about chapters."""

from __future__ import annotations

import json
import os
from pathlib import Path

from bookbuild import bench
from bookbuild.notebook import chapters


def test_the_benchmark_shows_no_progress_bar_per_short_run(monkeypatch, capsys):
    """``make bench`` printed hundreds of progress bars, one per sequential run, around
    its table. Bars are for a person watching one long run."""
    monkeypatch.delenv("BOOK_QUIET", raising=False)
    # the plain torch loop has no bar; its first torch.optim.Adam imports torch._dynamo (s)
    monkeypatch.setattr(bench, "_plain_loop", lambda *a: None)
    bench.run(K=2, steps=2, V=11, L=3, d=4, batch=4, repeats=1, threads=1)
    err = capsys.readouterr().err
    assert "it/s" not in err and "%|" not in err, err[:300]
    assert "BOOK_QUIET" not in os.environ  # restored


def test_paper_smoke_runs_exactly_the_chapter_named(tmp_path, monkeypatch, capsys):
    """``make paper-smoke CH=1`` ran nothing, wrote an empty summary and ended in
    ``ValueError: max() arg is an empty sequence``; a name that is no chapter is refused
    before anything is written."""
    ran = []

    def measured(cmd, env, log_path):  # the chapter's run, without running it
        ran.append(Path(cmd[3]).stem)
        return 0, 1.0, 2**20

    monkeypatch.setattr(bench, "_run_measured", measured)
    first = chapters()[0].stem
    assert bench.main(["--paper-smoke", str(tmp_path / "smoke"), "--only=1"]) == 0
    assert ran == [first]
    rows = json.loads((tmp_path / "smoke" / "summary.json").read_text())
    assert [r["chapter"] for r in rows] == [first]
    capsys.readouterr()
    assert bench.main(["--paper-smoke", str(tmp_path / "none"), "--only=0"]) == 2
    assert capsys.readouterr().err.startswith("error: no chapter '0'")
    assert not (tmp_path / "none").exists() and ran == [first]

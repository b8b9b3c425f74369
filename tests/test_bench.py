"""The benchmark's command line (lib/bench.py)."""

from __future__ import annotations

import os

from lib import bench


def test_the_benchmark_shows_no_progress_bar_per_short_run(monkeypatch, capsys):
    """``make bench`` printed hundreds of progress bars, one per sequential run, around
    its table. Bars are for a person watching one long run."""
    monkeypatch.delenv("BOOK_QUIET", raising=False)
    bench.run(K=2, steps=2, V=11, L=3, d=4, batch=4, repeats=1, threads=1)
    err = capsys.readouterr().err
    assert "it/s" not in err and "%|" not in err, err[:300]
    assert "BOOK_QUIET" not in os.environ  # restored


"""Runs that two chapters read are trained once (lib/training/run_cache.py)."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from lib.training import run_cache
from lib.training.engine import History


@pytest.fixture
def folder(tmp_path, monkeypatch):
    monkeypatch.setenv(run_cache.CACHE_ENV, str(tmp_path))
    return tmp_path


def counting(value: float, calls: list):
    def train():
        calls.append(value)
        return History(np.arange(3), {"w": np.full((3, 2), value, np.float32)})

    return train


def test_a_run_is_trained_once_and_read_back_exactly(folder):
    calls = []
    a = run_cache.cached_history({"lr": 0.1, "seeds": (0, 1)}, counting(1.5, calls), "cpu")
    b = run_cache.cached_history({"lr": 0.1, "seeds": [0, 1]}, counting(9.0, calls), "cpu")
    assert calls == [1.5]
    assert np.array_equal(a.steps, b.steps) and a["w"].dtype == b["w"].dtype == np.float32
    assert np.array_equal(a["w"], b["w"])


def test_other_settings_a_perturbation_or_the_smoke_mode_train_again(folder, monkeypatch):
    calls = []
    run_cache.cached_history({"lr": 0.1}, counting(1.0, calls), "cpu")
    run_cache.cached_history({"lr": 0.2}, counting(2.0, calls), "cpu")
    monkeypatch.setenv("BOOK_PERTURB", "1e-6:1")
    run_cache.cached_history({"lr": 0.1}, counting(3.0, calls), "cpu")
    monkeypatch.setenv("BOOK_SMOKE", "1")
    run_cache.cached_history({"lr": 0.1}, counting(4.0, calls), "cpu")
    assert calls == [1.0, 2.0, 3.0, 4.0]


def test_a_damaged_entry_is_trained_again_and_off_trains_every_time(folder, monkeypatch):
    calls = []
    run_cache.cached_history({"lr": 0.1}, counting(1.0, calls), "cpu")
    (entry,) = folder.glob("*.npz")
    entry.write_bytes(entry.read_bytes()[:20])
    assert run_cache.cached_history({"lr": 0.1}, counting(2.0, calls), "cpu")["w"][0, 0] == 2.0
    monkeypatch.setenv(run_cache.CACHE_ENV, "off")
    run_cache.cached_history({"lr": 0.1}, counting(3.0, calls), "cpu")
    assert calls == [1.0, 2.0, 3.0] and len(list(folder.glob("*.npz"))) == 1


def test_two_at_once_take_turns_and_the_second_reads_the_first(folder):
    calls, started, results = [], threading.Event(), []

    def slow():
        started.set()
        threading.Event().wait(0.3)  # the other reader arrives while this one trains
        return counting(1.0, calls)()

    first = threading.Thread(
        target=lambda: results.append(run_cache.cached_history({"a": 1}, slow, "cpu"))
    )
    first.start()
    started.wait(5)
    second = run_cache.cached_history({"a": 1}, counting(2.0, calls), "cpu")
    first.join(5)
    assert calls == [1.0] and second["w"][0, 0] == results[0]["w"][0, 0] == 1.0


def test_a_key_holds_only_plain_values():
    with pytest.raises(TypeError, match="numbers, strings or tensors"):
        run_cache.run_key({"model": object()}, "cpu")


def test_only_the_most_recently_used_entries_are_kept(folder, monkeypatch):
    monkeypatch.setattr(run_cache, "KEEP", 2)
    calls = []
    for lr in (0.1, 0.2, 0.3):
        run_cache.cached_history({"lr": lr}, counting(lr, calls), "cpu")
    assert len(list(folder.glob("*.npz"))) == 2
    run_cache.cached_history({"lr": 0.1}, counting(0.1, calls), "cpu")  # pruned: trained again
    assert calls == [0.1, 0.2, 0.3, 0.1]

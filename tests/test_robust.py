"""Verdicts that hold on any machine: the perturbed rerun, the family-wise floor of a
negative control, and a run's differences from the reference run or from another run."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from bookbuild.reference import compare_runs, print_changes, write_reference
from lib.book import claims
from lib.env import ConfigError, perturbation
from lib.measure.nulls import familywise_floor, floor_of
from lib.training.engine import train
from lib.training.init import ParamSpec


def test_book_perturb_is_read_strictly(monkeypatch):
    monkeypatch.delenv("BOOK_PERTURB", raising=False)
    assert perturbation() is None
    monkeypatch.setenv("BOOK_PERTURB", "1e-6:1")
    assert perturbation() == (1e-6, 1)
    for bad in ("1e-6", "x:1", "0:1", "1:1", "1e-6:a"):
        monkeypatch.setenv("BOOK_PERTURB", bad)
        with pytest.raises(ConfigError, match="REL:SEED"):
            perturbation()


class _Linear:
    """A batched linear model, ``(K, B, d) -> (K, B, c)``."""

    def specs(self):
        return {"W": ParamSpec((3, 2), 3, "mlp")}

    def forward(self, params, X):
        return torch.einsum("kbd,kdc->kbc", X.expand(params["W"].shape[0], *X.shape[-2:]),
                            params["W"])  # fmt: skip


def _run(monkeypatch, perturb: str | None, K: int = 2):
    if perturb is None:
        monkeypatch.delenv("BOOK_PERTURB", raising=False)
    else:
        monkeypatch.setenv("BOOK_PERTURB", perturb)
    g = torch.Generator().manual_seed(0)
    W = (torch.randn(K, 3, 2, generator=g) * 0.1).requires_grad_(True)
    X, y = torch.randn(16, 3, generator=g), torch.randint(0, 2, (16,), generator=g)
    train(_Linear(), {"W": W}, (X, y), 0, log_at=[0])
    return W.detach().clone()


def test_a_perturbed_run_moves_every_initial_parameter_by_its_relative_size(monkeypatch):
    plain, moved = _run(monkeypatch, None), _run(monkeypatch, "1e-3:1")
    rel = (moved / plain - 1).abs()
    assert torch.equal(_run(monkeypatch, None), plain)  # off by default: byte-identical
    assert torch.equal(_run(monkeypatch, "1e-3:1"), moved)  # a fixed seed: the same copy
    assert 0 < rel.max() < 5e-3 and rel.mean() > 1e-4
    assert not torch.equal(_run(monkeypatch, "1e-3:2"), moved)
    # instance k's noise does not depend on the batch: (K, ...) and one instance agree
    assert torch.equal(_run(monkeypatch, "1e-3:1", K=1)[0], moved[0])


def test_the_familywise_floor_takes_the_max_over_everything_the_control_scans():
    rng = np.random.default_rng(0)
    curves = [rng.normal(0, 0.05, (20, 4, 200)) for _ in range(3)]  # 3 runs, 4 seeds each
    fw = familywise_floor(curves, 0.99)
    per_run = max(floor_of(c, 0.95) for c in curves)
    assert fw > per_run  # one family: the max over runs, steps and seeds, at 1%
    # a control with nothing there: its largest statistic over the family clears the
    # family-wise floor about 1% of the time, the per-run 95% floor far more often
    hits_fw = hits_run = 0
    for _ in range(200):
        real = [rng.normal(0, 0.05, (20, 4)) for _ in range(3)]
        top = max(r.max() for r in real)
        hits_fw += top > fw
        hits_run += any(
            (r.max(0) > floor_of(c, 0.95)).any() for r, c in zip(real, curves, strict=True)
        )
    assert hits_fw <= 8 and hits_run >= 60, (hits_fw, hits_run)
    with pytest.raises(ValueError, match="different numbers of permutations"):
        familywise_floor([curves[0], curves[1][..., :10]])


def _ledger(tmp, chapter: str, statuses: dict[str, tuple[str, list[int]]]):
    led = claims.Ledger(chapter).section("s", label="new")
    for cid, (tier, holds) in statuses.items():
        led.check(cid, cid, holds=holds, tier=tier, verdict=("new result", "partly"))
    led.save(tmp)


def test_compare_fails_on_a_changed_finding_and_prints_a_changed_measured_claim(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    _ledger(a, "01_x", {"f": ("finding", [1, 1]), "m": ("measured", [1, 1])})
    _ledger(b, "01_x", {"f": ("finding", [1, 1]), "m": ("measured", [1, 0])})
    lines: list[str] = []
    assert compare_runs(b, a, "ci", log=lines.append) == 0
    assert "0 check(s) or finding(s) and 1 measured claim(s) changed" in lines[0]
    assert "01_x m (measured): here partly; other: new result" in lines[1]
    _ledger(b, "01_x", {"f": ("finding", [1, 0]), "m": ("measured", [1, 1])})
    lines.clear()
    assert compare_runs(b, a, "ci", log=lines.append) == 1
    assert any(line.startswith("FAILED 01_x f (finding)") for line in lines)
    (b / "01_x.json").unlink()  # a chapter that failed under the perturbation
    assert compare_runs(b, a, "ci", log=lines.append) == 1


def test_the_reference_is_written_per_scale_and_read_back(tmp_path):
    a, b, ref = tmp_path / "a", tmp_path / "b", tmp_path / "reference.json"
    _ledger(a, "01_x", {"f": ("finding", [1, 1]), "m": ("measured", [1, 1])})
    write_reference(a, "ci", path=ref)
    write_reference(a, "book", path=ref)
    data = json.loads(ref.read_text())
    assert set(data) == {"ci", "book"} and data["ci"]["claims"]["01_x"]["m"] == ["measured",
                                                                             "new result"]  # fmt: skip
    _ledger(b, "01_x", {"f": ("finding", [1, 1]), "m": ("measured", [0, 1])})
    lines: list[str] = []
    assert print_changes(b, "ci", path=ref, log=lines.append) == 1
    assert "here partly; reference: new result" in lines[1]
    assert print_changes(b, "paper", path=ref, log=lines.append) == 0  # none recorded there

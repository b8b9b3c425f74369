"""The settings of the Scan-and-Snap runs that Chapters 7 and 8 share: the group
:class:`ScanSnapRuns` both chapters' ``Config`` hold (as ``runs``) and what changes in it
at the other scales. The runs themselves are :mod:`lib.experiments.qkov_training`; this
module imports nothing but the configs' base classes, so reading either chapter's settings
imports no torch.
"""

from __future__ import annotations

from dataclasses import dataclass

from . import SubConfig


@dataclass(frozen=True)
class ScanSnapRuns(SubConfig):
    """The Scan-and-Snap runs of Chapters 7 and 8, at book scale: the same group in both
    chapters' ``Config`` (as ``runs``), so both read the same runs.

    gamma: the init rate of every randomly drawn weight, ``N(0, fan_in^(-2 gamma))``. At
        ``gamma = 1/2`` a weight of the 50-token model has standard deviation ``50^(-1/2)``,
        the scale of PyTorch's default init (whose uniform draw has a standard deviation
        ``sqrt(3)`` smaller).
    lr: the SGD rate: eta_OV of every run and eta_QK of the equal-rate ones (the official
        code: 0.01, the paper scale; larger at the smaller scales to fit the time budget).
    seeds: the init seeds (one instance per seed).
    seq_len, batch_size: sequence length and batch of the training runs.
    steps: SGD steps of FAFO, CAFO and CACO; faco_steps: of FACO, which needs longer to
        reach the official code's stopping loss.
    n_logs: logging steps of a run: ``n_logs`` log-spaced and ``n_logs + 1`` evenly spaced.
    data_seed: the Scan-and-Snap streams, ``data_seed + i`` for the i-th of FAFO, FACO,
        CAFO, CACO (the same at every scale).
    """

    gamma: float = 0.5
    lr: float = 1.0
    seeds: tuple[int, ...] = (0, 1, 2)
    seq_len: int = 128
    batch_size: int = 32
    steps: int = 5000
    faco_steps: int = 8000
    n_logs: int = 40
    data_seed: int = 100


# What changes at the other scales, in both chapters' OVERRIDES (as ``runs=...``).
SCAN_SNAP_OVERRIDES = {
    "ci": dict(lr=2.0, seeds=(0, 1), steps=2500, faco_steps=4000),
    "paper": dict(lr=0.01, seeds=(1234, 1235, 1236, 1237, 1238), steps=625000, faco_steps=625000),
}

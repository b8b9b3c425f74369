"""Chapter 11's probe: one batched run of Chapter 2's Emb-MLP with every step logged
(:func:`run_probe`), its instances selected by init and seed (:class:`Probe`), and the law's
view of it, arm by arm (:class:`Arms`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from ...theory.adam_plateau import probe_callbacks, split_sigma
from ...training.engine import History, train
from ...training.models import build


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
        model,
        params,
        (X, y),
        steps,
        log_at=np.arange(steps + 1),
        callbacks=cb,
        opt_state=state,
        **kw,
    )
    return Probe(hist, np.asarray(gammas, dtype=float), np.asarray(seeds, dtype=int))


@dataclass(frozen=True)
class Arms:
    """The probe read arm by arm: the law's inits ``gammas`` on the sweep's ``seeds``, and
    the calibration arm, ``gamma_cal`` on ``cal_seeds``."""

    probe: Probe
    gammas: list[float]
    seeds: list[int]
    cal_seeds: list[int]
    gamma_cal: float

    @property
    def steps(self) -> np.ndarray:
        """The probe's logged steps (every step: ``steps[i] == i``)."""
        return self.probe.history.steps

    def arm(self, gamma: float, name: str, seeds: Sequence[int] | None = None) -> np.ndarray:
        """``(n_logs, n)``: the metric ``name`` at ``gamma`` on ``seeds`` (default: the
        sweep's)."""
        return self.probe.arm(gamma, name, seeds=self.seeds if seeds is None else seeds)

    def cal(self, name: str) -> np.ndarray:
        """``(n_logs, n)``: the metric ``name`` on the calibration arm."""
        return self.arm(self.gamma_cal, name, self.cal_seeds)

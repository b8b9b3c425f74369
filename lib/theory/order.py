r"""What sets the order of the stairs (Chapter 10): context order against signal strength.

On the competing-orders task (:func:`lib.data.tasks.competing_orders`) a *low* family of
sequences carries its label at context order 0 and a *high* family at order 1 (or at
order 0 too, in the control). How strongly each family drives training is a per-sequence
loss weight: the high family's sequences weigh :math:`\rho` times as much as the low
family's (:func:`strength_weights`, :func:`weighted_cross_entropy`), so :math:`\rho` is an
instance dimension of one batched run. Each family's loss (:func:`family_loss_callbacks`)
falls off its plateau at an escape step (:func:`escapes`); :func:`who_first` says which
family escaped first, and :func:`boundary` finds, per init and seed, the strength ratio at
which the winner changes.

**The small-init prediction.** With every weight of size :math:`\varepsilon`, the low
family's logit is a product of three small factors (its anchor's row, :math:`W_1`,
:math:`W_2`, through :math:`c_1`) and the high family's of five (its anchor's row, the
gate's row, :math:`W_1` twice, :math:`W_2`, through :math:`c_2`). The drive on the anchors'
feature contrast (:func:`feature_drive`) is then smaller for the high family by the two
extra factors, :math:`\propto(Vd)^{-\gamma}` (:func:`power_count_slope`). A product of
:math:`k` balanced factors of size :math:`x` growing as :math:`\dot x=\lambda x^{k-1}`
blows up at :math:`T=x/((k-2)\dot x)`, so the two escapes are equal where

.. math:: \rho^* = \frac{x_{\rm high}\,\dot x_{\rm low}}{3\,x_{\rm low}\,\dot x_{\rm high}}

(:func:`predicted_boundary`), with the drives :math:`\dot x` read off the gradient at
initialization and equal strengths. Numbers only; the argument is on the page.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import torch
import torch.nn.functional as F

from ..training.engine import cached_callbacks

__all__ = [
    "strength_weights",
    "weighted_cross_entropy",
    "family_loss_callbacks",
    "escapes",
    "who_first",
    "boundary",
    "slope_interval",
    "power_count_slope",
    "feature_contrasts",
    "feature_drive",
    "predicted_boundary",
    "rising_phase",
    "log_overlap",
]


def strength_weights(family: torch.Tensor, ratios: Sequence[float]) -> torch.Tensor:
    """Per-instance sequence weights ``(K, N)``: a high-family sequence (``family == 1``)
    weighs ``ratios[k]`` times a low-family one, and each instance's weights sum to 1."""
    rho = torch.as_tensor(list(ratios), dtype=torch.float64)
    if rho.ndim != 1 or not len(rho) or not (torch.isfinite(rho).all() and (rho > 0).all()):
        raise ValueError(f"ratios must be finite and > 0, one per instance; got {list(ratios)}")
    w = torch.where(family.bool()[None], rho[:, None], torch.ones_like(rho)[:, None])
    return (w / w.sum(1, keepdim=True)).float()


def _ce(logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Cross-entropy per instance and sequence, ``(K, N)``; labels ``(N,)`` or ``(K, N)``."""
    K, C = logits.shape[0], logits.shape[-1]
    y = y.expand(K, *y.shape) if y.dim() == logits.dim() - 2 else y
    return F.cross_entropy(logits.reshape(-1, C), y.reshape(-1), reduction="none").view(K, -1)


def weighted_cross_entropy(weights: torch.Tensor):
    """A ``loss_fn`` for :func:`lib.training.engine.train`: each instance's weighted mean
    cross-entropy, ``sum_n weights[k, n] * CE[k, n]`` (weights ``(K, N)``, rows summing to 1)."""

    def loss(logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        ce = _ce(logits, y)
        if ce.shape != weights.shape:
            raise ValueError(
                f"weights have shape {tuple(weights.shape)}, the loss {tuple(ce.shape)}"
            )
        return (weights.to(ce.device, ce.dtype) * ce).sum(1)

    return loss


def family_loss_callbacks(model, X: torch.Tensor, y: torch.Tensor, family: torch.Tensor) -> dict:
    """Callbacks ``loss_low`` and ``loss_high``: each family's mean cross-entropy, per
    instance ``(K,)`` (unweighted: a family's own progress). With one binary label this is
    the family's sign-bit loss: ``ln 2`` while its label is unknown."""
    fam = family.bool()

    def measure(step, params):
        ce = _ce(model.forward(params, X.to(fam.device)).double(), y)
        return {"loss_low": ce[:, ~fam].mean(1), "loss_high": ce[:, fam].mean(1)}

    return cached_callbacks(measure, ("loss_low", "loss_high"))


def escapes(steps, loss, frac: float = 0.5) -> np.ndarray:
    """Per instance, the first logged step at which a family's loss falls below
    ``frac * ln 2``; ``inf`` where it never does, NaN where it is already there at step 0
    (a large init can start below it: there is no stair to time)."""
    v = np.asarray(loss, dtype=float)
    level = frac * math.log(2)
    hit = v < level
    out = np.where(hit.any(0), np.asarray(steps, dtype=float)[hit.argmax(0)], np.inf)
    return np.where(hit[0], np.nan, out)


def who_first(t_low, t_high) -> np.ndarray:
    """``-1`` where the low family escaped first, ``+1`` where the high family did, ``0`` at
    the same logged step; NaN where either escape is undefined or neither came."""
    a, b = np.asarray(t_low, dtype=float), np.asarray(t_high, dtype=float)
    with np.errstate(invalid="ignore"):
        out = np.sign(a - b)
    return np.where(np.isnan(a) | np.isnan(b) | (np.isinf(a) & np.isinf(b)), np.nan, out)


def boundary(log_ratios, t_low, t_high) -> np.ndarray:
    r"""Where the winner changes: per column, the :math:`\ln\rho` at which
    :math:`\ln(t_{\rm high}/t_{\rm low})` crosses zero, interpolated linearly in
    :math:`\ln\rho` between the last ratio at which the low family escaped first and the next.

    ``log_ratios`` ``(R,)`` ascending; ``t_low``, ``t_high`` ``(R, M)``. ``-inf`` where the
    high family is already first (or level) at the smallest ratio, ``+inf`` where the low
    family is first at every ratio, NaN where a column has an undefined escape.
    """
    x = np.asarray(log_ratios, dtype=float)
    a, b = np.asarray(t_low, dtype=float), np.asarray(t_high, dtype=float)
    if a.ndim == 1:
        a, b = a[:, None], b[:, None]
    if not (a.shape == b.shape and a.shape[0] == len(x)) or np.any(np.diff(x) <= 0):
        raise ValueError("need ascending log_ratios (R,) and escapes of shape (R, M)")
    with np.errstate(divide="ignore", invalid="ignore"):
        lead = np.log(b) - np.log(a)  # > 0: the low family first
    out = np.full(a.shape[1], np.nan)
    for m in range(a.shape[1]):  # M is a handful of (gamma, seed) pairs
        ell = lead[:, m]
        if np.isnan(ell).any():
            continue
        low_first = ell > 0
        if not low_first[0]:
            out[m] = -np.inf
        elif low_first.all():
            out[m] = np.inf
        else:
            i = int(np.argmin(low_first))  # the first ratio at which the low family is not first
            lo, hi = ell[i - 1], ell[i]
            frac = lo / (lo - hi) if np.isfinite(lo) and np.isfinite(hi) else 0.5
            out[m] = x[i - 1] + frac * (x[i] - x[i - 1])
    return out


def slope_interval(x, Y, n_boot: int = 2000, seed: int = 0, q: float = 0.95):
    """The slope of the median over seeds of ``Y`` ``(len(x), S)`` against ``x``, and its
    bootstrap interval over seeds (seeds resampled with replacement; a resample whose
    median is not finite at some ``x`` gives no slope). Returns ``(slope, lo, hi)``;
    NaN where the medians are not finite."""
    x, Y = np.asarray(x, dtype=float), np.asarray(Y, dtype=float)

    def fit(rows):
        med = np.median(rows, axis=1)
        return np.polyfit(x, med, 1)[0] if np.isfinite(med).all() else np.nan

    slope = fit(Y)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, Y.shape[1], size=(n_boot, Y.shape[1]))
    boots = np.array([fit(Y[:, i]) for i in idx])
    boots = boots[np.isfinite(boots)]
    if not len(boots):
        return slope, np.nan, np.nan
    lo, hi = np.quantile(boots, [(1 - q) / 2, (1 + q) / 2])
    return slope, float(lo), float(hi)


def power_count_slope(vocab_size: int, d_model: int) -> float:
    r"""The slope of :math:`\ln\rho^*` against :math:`\gamma` that counting powers of the
    init predicts: the high family's two extra factors, a gate row (fan-in ``V``) and
    :math:`W_1` (fan-in ``d``), each :math:`\propto \mathrm{fan\_in}^{-\gamma}`."""
    return math.log(vocab_size) + math.log(d_model)


def feature_contrasts(layout) -> dict:
    """``{family: (anchors, f)}``: each family's anchors and the ±1 feature its label
    reads (the low family: the upper half of its anchors; the high family: parity)."""
    n = len(layout.low)
    f_low = torch.tensor([1.0 if i >= n // 2 else -1.0 for i in range(n)], dtype=torch.float64)
    f_high = torch.tensor([1.0 if b % 2 else -1.0 for b in layout.high], dtype=torch.float64)
    return {"low": (list(layout.low), f_low), "high": (list(layout.high), f_high)}


def feature_drive(E: torch.Tensor, grad_E: torch.Tensor, layout) -> dict:
    r"""Per family and instance (Chapter 10, ``eq-order-drive``): the size of the anchors'
    feature contrast,
    :math:`x=\|\sum_a f_a E_a\|`, and of the drive on it, :math:`\dot x=\|\sum_a f_a
    (-\partial L/\partial E_a)\|`. ``E`` and ``grad_E`` are ``(K, V, d)``; returns
    ``{"x_low", "x_high", "drive_low", "drive_high"}`` of shape ``(K,)`` (float64)."""
    out = {}
    for fam, (tok, f) in feature_contrasts(layout).items():
        f = f.to(E.device)
        out[f"x_{fam}"] = torch.einsum("a,kad->kd", f, E[:, tok].double()).norm(dim=-1)
        out[f"drive_{fam}"] = torch.einsum("a,kad->kd", f, -grad_E[:, tok].double()).norm(dim=-1)
    return out


def predicted_boundary(drive: dict) -> torch.Tensor:
    r""":math:`\rho^*=x_{\rm high}\dot x_{\rm low}/(3\,x_{\rm low}\dot x_{\rm high})` per
    instance, from :func:`feature_drive` at initialization with equal strengths (the
    blow-up times :math:`x/((k-2)\dot x)` of a 3-factor and a 5-factor product equal;
    Chapter 10, ``eq-order-boundary``)."""
    return drive["x_high"] * drive["drive_low"] / (3 * drive["x_low"] * drive["drive_high"])


def rising_phase(steps, curve, floor: float = -np.inf, lo: float = 0.1, hi: float = 0.9):
    """Per instance, the steps at which a rising curve first reaches ``lo`` and ``hi`` of
    its way from its start to its maximum (both NaN where its maximum never exceeds
    ``floor``): the stair's rising phase. ``curve`` is ``(n_logs, K)``; returns ``(t_lo,
    t_hi)``."""
    steps = np.asarray(steps, dtype=float)
    c = np.asarray(curve, dtype=float)
    start, top = c[0], np.nanmax(c, 0)
    t = {}
    for name, frac in (("lo", lo), ("hi", hi)):
        level = start + frac * (top - start)
        hit = c >= level[None]
        t[name] = np.where(hit.any(0) & (top > floor), steps[hit.argmax(0)], np.nan)
    return t["lo"], t["hi"]


def log_overlap(a_lo, a_hi, b_lo, b_hi) -> np.ndarray:
    """How much two rising phases overlap in log time: the length of the intersection of
    ``[ln a_lo, ln a_hi]`` and ``[ln b_lo, ln b_hi]`` over the shorter of the two (0: one
    stair is done before the other starts; 1: one lies inside the other). Steps >= 1;
    NaN where a phase is undefined. A phase of zero length overlaps (1) where it lies
    inside the other and not (0) where it lies outside."""
    la, ha, lb, hb = (np.log(np.asarray(v, dtype=float)) for v in (a_lo, a_hi, b_lo, b_hi))
    inter = np.minimum(ha, hb) - np.maximum(la, lb)  # < 0: apart
    shorter = np.minimum(ha - la, hb - lb)
    with np.errstate(divide="ignore", invalid="ignore"):
        frac = np.where(shorter > 0, np.clip(inter, 0, None) / shorter, (inter >= 0) * 1.0)
    return np.where(np.isnan(inter + shorter), np.nan, np.minimum(frac, 1.0))

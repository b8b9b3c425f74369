r"""How long the bit-1 plateau lasts under Adam (Chapter 11): symmetry, contrast, a law in gamma.

**The hidden symmetry.** On the two-stair gated-parity-bit task
(:func:`lib.data.tasks.gated_parity_bits`), the map :math:`\sigma` that swaps the two gates
:math:`g_+\leftrightarrow g_-` *and* the two label blocks :math:`y\leftrightarrow y\pm B`
sends the data set to itself. On the Emb-MLP's weights it swaps the two gate rows of
:math:`E` and the two block halves of the columns of :math:`W_2` (:func:`sigma`), so the
loss is :math:`\sigma`-invariant and a :math:`\sigma`-symmetric state, on which bit 1 is
unknowable, stays symmetric under gradient descent and under Adam (both act coordinate by
coordinate). Bit 1 is carried by the :math:`\sigma`-antisymmetric part (:func:`split_sigma`):
the gate half-difference :math:`a_E=(E_{g_+}-E_{g_-})/2` and the block half-difference
:math:`a_W=(W_2^{(0)}-W_2^{(1)})/2`.

**The XOR contrast.** The mean bit-1 logit margin :math:`D=\langle l_y-l_{y'}\rangle`
(:func:`xor_contrast`) is, to first order in :math:`u=a_EW_1`,

.. math:: D = 2\sum_{h,b} u_h\,M_{hb}\,a_{W,hb},\qquad
          M_{hb}=\langle s_a\,\sigma'(q^{\rm sym}_h)\rangle_{\,\mathrm{pos}=b}

(:func:`bilinear_contrast`): bilinear in the two antisymmetric factors, with the
anchor-parity modulation :math:`M` of the symmetric pre-activations in between.

**Two phases under Adam.** (1) Sign descent: every coordinate moves about ``lr`` per step,
the symmetric weights grow linearly and reach the order-0 scale at the knee :math:`t_p`
(:func:`knee`); the first (sign) step leaves the antisymmetric factors at their init
sizes, so the seed scales as :math:`(V d_h)^{-\gamma}` (fan-ins of :math:`E` and
:math:`W_2`, :func:`seed_exponent`). (2) The plateau: :math:`D` grows exponentially at a
rate :math:`\Lambda` (:func:`log_rate`) until the sign-bit loss falls below
:math:`\tfrac12\ln2`, i.e. :math:`D\approx D^*` (:func:`escape_level`).
:func:`predict_escape` puts the two together; :func:`gradient_flow_escape` is the
gradient-flow control. Adam's second moment remembers phase 1, so on the plateau its step
on the bit-1 coordinates grows as :func:`adam_clock`. :func:`probe_callbacks` logs these
quantities during a run (the chapter's probe run is
:func:`lib.experiments.ch11_plateau_length_under_adam.run_probe`). Numbers only; the
argument is on the page.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import torch
import torch.nn.functional as F

from ..measure import onsets
from ..training.engine import cached_callbacks

__all__ = [
    "label_flip",
    "gate_swap",
    "sigma",
    "split_sigma",
    "xor_contrast",
    "bilinear_contrast",
    "probe_callbacks",
    "knee",
    "linear_fit",
    "log_rate",
    "stretch_rate",
    "parting",
    "escape_level",
    "adam_clock",
    "seed_exponent",
    "predict_escape",
    "calibrate",
    "gradient_flow_escape",
    "on_grid",
    "rel_error",
]


def label_flip(layout, n_labels: int) -> torch.Tensor:
    """The label permutation that flips bit 1: ``y -> y + B`` in even blocks, ``y - B`` in odd."""
    c = torch.arange(n_labels)
    B = layout.block
    return torch.where((c // B) % 2 == 0, c + B, c - B)


def gate_swap(layout, vocab_size: int) -> torch.Tensor:
    """The token permutation that swaps the two bit-1 gates ``g+ <-> g-``."""
    perm = torch.arange(vocab_size)
    gp, gm = layout.gates
    perm[gp], perm[gm] = gm, gp
    return perm


def sigma(params: dict, layout, n_labels: int) -> dict:
    """The symmetry on Emb-MLP weights: gate rows of ``E`` and label blocks of ``W2`` swapped."""
    E, W2 = params["E"], params["W2"]
    out = dict(params)
    out["E"] = E[:, gate_swap(layout, E.shape[1]).to(E.device)]
    out["W2"] = W2[..., label_flip(layout, n_labels).to(W2.device)]
    return out


def split_sigma(params: dict, layout, n_labels: int) -> tuple[dict, dict]:
    """``(symmetric, antisymmetric)`` parts ``(p + sigma p) / 2`` and ``(p - sigma p) / 2``."""
    s = sigma(params, layout, n_labels)
    sym = {k: (params[k] + s[k]) / 2 for k in params}
    anti = {k: (params[k] - s[k]) / 2 for k in params}
    return sym, anti


def xor_contrast(logits: torch.Tensor, y: torch.Tensor, y_flip: torch.Tensor) -> torch.Tensor:
    """Mean bit-1 margin ``D = mean_n (l_y - l_y')`` per instance; logits ``(K, N, C)``."""
    idx = torch.arange(y.shape[-1], device=logits.device)
    return (logits[..., idx, y] - logits[..., idx, y_flip]).double().mean(-1)


def _dsilu(x: torch.Tensor) -> torch.Tensor:
    s = torch.sigmoid(x)
    return s * (1 + x * (1 - s))


def bilinear_contrast(params: dict, data, layout) -> dict:
    """The first-order XOR contrast of a silu Emb-MLP on ``[z, a, g]`` sequences (Chapter 11,
    ``eq-adam-contrast``).

    Returns ``{"u": (K, H), "M": (K, H, B), "aW": (K, H, B), "D_lin": (K,)}`` with
    ``u = a_E W1``, ``M[h, b]`` the mean over the (key, anchor) pairs of position ``b`` of
    ``s_a silu'(q_sym)_h`` (``s_a = +1`` for odd anchors, ``q_sym`` the pre-activation with
    both gates replaced by their mean row) and ``D_lin = 2 sum u M a_W``.
    """
    E, W1, W2 = params["E"], params["W1"], params["W2"]
    dev = E.device
    B = layout.block
    gp, gm = layout.gates
    X, y = data.X.to(dev), data.y.to(dev)
    keep = X[:, 2] == gp  # one sequence per (key, anchor)
    z, a = X[keep, 0], X[keep, 1]
    s_a = torch.where(a % 2 == 1, 1.0, -1.0).to(E.dtype)
    a_E = (E[:, gp] - E[:, gm]) / 2
    h_sym = E[:, z] + E[:, a] + ((E[:, gp] + E[:, gm]) / 2)[:, None]
    q_sym = torch.matmul(h_sym, W1)  # (K, n, H)
    onehot = F.one_hot(y[keep] % B, B).to(E.dtype)  # (n, B)
    M = torch.einsum("knh,nb->khb", s_a[None, :, None] * _dsilu(q_sym), onehot) / keep.sum()
    u = torch.einsum("kd,kdh->kh", a_E, W1)
    aW = (W2[..., :B] - W2[..., B : 2 * B]) / 2
    D_lin = 2 * torch.einsum("kh,khb,khb->k", u, M, aW)
    return {"u": u, "M": M, "aW": aW, "D_lin": D_lin.double()}


def probe_callbacks(
    model, data, layout, opt_state: dict | None = None, beta2: float = 0.999, eps: float = 1e-8
) -> dict:
    r"""Callbacks for :func:`lib.training.engine.train`, per instance (K,), at every logged step.

    ``D`` (:func:`xor_contrast`), ``D_lin`` (:func:`bilinear_contrast`), ``u`` (norm of
    ``a_E W1``), ``M`` (norm of the parity modulation), ``W1`` (Frobenius norm of ``W1``)
    and ``bit1`` (the sign-bit loss of :func:`lib.measure.staircase_callbacks.bit_callbacks`). With the
    run's ``opt_state`` (:func:`lib.training.engine.train`), also ``step``: Adam's step per unit
    gradient on the bit-1 coordinates, the geometric mean of the mean of
    :math:`1/(\sqrt{\hat v}+\epsilon)` (Adam's own denominator, ``beta2`` and ``eps`` those
    of the run) over the two gate rows of ``E`` and over the first two label blocks of
    ``W2`` (``nan`` before the first step or without Adam's state).
    """
    flip = label_flip(layout, data.n_labels)
    gates = list(layout.gates)
    n_w2 = 2 * layout.block

    def adam_step(step, params):
        K = params["E"].shape[0]
        st = opt_state or {}
        if step < 1 or "v" not in st.get("E", {}) or "v" not in st.get("W2", {}):
            return torch.full((K,), float("nan"), dtype=torch.float64)
        corr = (1 - beta2**step) ** 0.5
        inv = lambda v: (1 / (v.double().sqrt() / corr + eps)).flatten(1).mean(-1)
        return (inv(st["E"]["v"][:, gates]) * inv(st["W2"]["v"][..., :n_w2])).sqrt()

    def measure(step, params):
        dev = params["E"].device
        X, y = data.X.to(dev), data.y.to(dev)
        yf = flip.to(dev)[y]
        logits = model.forward(params, X)
        lp = torch.log_softmax(logits.double(), -1)
        idx = torch.arange(len(y), device=dev)
        ly, lf = lp[..., idx, y], lp[..., idx, yf]
        bil = bilinear_contrast(params, data, layout)
        return {
            "D": xor_contrast(logits, y, yf),
            "D_lin": bil["D_lin"],
            "u": bil["u"].norm(dim=-1),
            "M": bil["M"].flatten(1).norm(dim=-1),
            "W1": params["W1"].flatten(1).norm(dim=-1),
            "bit1": -(ly - torch.logaddexp(ly, lf)).mean(-1),
            "step": adam_step(step, params),
        }

    return cached_callbacks(measure, ("D", "D_lin", "u", "M", "W1", "bit1", "step"))


def knee(steps, norm, frac: float = 1 / 3, after: int = 5) -> np.ndarray:
    """Per instance, the first logged step past ``after`` at which a norm's growth per step
    falls below ``frac`` of its largest growth per step: the end of a linear rise.
    ``norm`` is ``(n_logs, K)``; returns ``(K,)`` floats (``nan`` if it never does)."""
    steps = np.asarray(steps, dtype=float)
    v = np.asarray(norm, dtype=float).reshape(len(steps), -1)
    rate = np.diff(v, axis=0) / np.diff(steps)[:, None]
    late = (steps[1:] > after)[:, None] & (rate < frac * rate.max(0))
    return np.where(late.any(0), steps[1:][late.argmax(0)], np.nan)


def linear_fit(steps, values, lo: float, hi: float) -> tuple[np.ndarray, np.ndarray]:
    """Per instance, slope and R^2 of a straight line through ``values`` over ``lo <= step <= hi``
    (``lo``, ``hi`` scalars or per instance); ``nan`` where fewer than 3 points."""
    steps = np.asarray(steps, dtype=float)
    v = np.asarray(values, dtype=float).reshape(len(steps), -1)
    lo, hi = np.broadcast_to(lo, v.shape[1]), np.broadcast_to(hi, v.shape[1])
    slope, r2 = np.full(v.shape[1], np.nan), np.full(v.shape[1], np.nan)
    for k in range(v.shape[1]):
        sel = (steps >= lo[k]) & (steps <= hi[k]) & np.isfinite(v[:, k])
        if sel.sum() >= 3:
            c = np.polyfit(steps[sel], v[sel, k], 1)
            res = v[sel, k] - np.polyval(c, steps[sel])
            tot = v[sel, k] - v[sel, k].mean()
            slope[k], r2[k] = c[0], 1 - (res @ res) / max(tot @ tot, 1e-300)
    return slope, r2


def log_rate(steps, D, start, hi: float = 0.1, stop=None) -> np.ndarray:
    """Per instance, the slope of ``ln D`` over the logged steps ``>= start`` (and ``< stop``)
    at which ``0 < D < hi``: the exponential growth rate of ``D`` below ``hi``.
    ``D`` is ``(n_logs, K)``; ``start``/``stop`` scalars or ``(K,)``; ``nan`` if < 3 points."""
    steps = np.asarray(steps, dtype=float)
    v = np.asarray(D, dtype=float).reshape(len(steps), -1)
    K = v.shape[1]
    start = np.broadcast_to(np.asarray(start, dtype=float), K)
    stop = np.broadcast_to(np.asarray(np.inf if stop is None else stop, dtype=float), K)
    out = np.full(K, np.nan)
    for k in range(K):
        sel = (steps >= start[k]) & (steps < stop[k]) & (v[:, k] > 0) & (v[:, k] < hi)
        if sel.sum() >= 3:
            out[k] = np.polyfit(steps[sel], np.log(v[sel, k]), 1)[0]
    return out


def stretch_rate(steps, D, lo: float, hi: float) -> np.ndarray:
    """Per instance, the slope of ``ln D`` from the first logged step at which ``D >= lo``,
    over the steps at which ``lo <= D < hi``: the growth rate of ``D`` on its way from
    ``lo`` to ``hi`` (:func:`log_rate` gives it below ``lo``). ``nan`` where ``D`` never
    reaches ``lo`` or fewer than 3 steps qualify."""
    steps = np.asarray(steps, dtype=float)
    v = np.asarray(D, dtype=float).reshape(len(steps), -1)
    reached = v >= lo
    start = np.where(reached.any(0), steps[reached.argmax(0)], np.inf)
    above = np.where(v >= lo, v, 0.0)  # below lo after the start (a dip): skipped
    return log_rate(steps, above, start, hi=hi)


def parting(steps, a, b, tol: float) -> tuple[np.ndarray, np.ndarray]:
    """Where two runs of one curve part: per instance, the first logged step at which
    ``|b - a|`` exceeds ``tol`` times the largest ``|a|`` so far (``nan``: never), and the
    largest such relative gap. ``a`` and ``b`` are ``(n_logs, K)``; measuring against the
    running peak keeps a curve that crosses zero from parting where the two agree."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a.shape != b.shape:
        raise ValueError(f"the two runs differ in shape: {a.shape} and {b.shape}")
    with np.errstate(divide="ignore", invalid="ignore"):
        gap = np.abs(b - a) / np.maximum.accumulate(np.abs(a), 0)
    gap = np.where(np.isnan(gap), 0.0, gap)  # 0 / 0: both still exactly zero
    return np.asarray(onsets.onset_step(steps, gap, tol), dtype=float), gap.max(0)


def escape_level(frac: float = 0.5) -> float:
    """The margin ``D*`` at which a sign-bit loss ``softplus(-D)`` equals ``frac * ln 2``."""
    if not 0 < frac < 1:
        raise ValueError(f"frac must be in (0, 1), got {frac}")
    return -math.log(2.0**frac - 1.0)


def adam_clock(steps, beta2: float = 0.999) -> np.ndarray:
    r"""Adam's step per unit gradient after a burst, up to the burst's scale:
    :math:`\phi(t)=\sqrt{(1-\beta_2^t)/((1-\beta_2)\beta_2^t)}`.

    If a coordinate's gradients :math:`g_s` are spent by step :math:`t_p` and negligible
    after, the bias-corrected second moment is
    :math:`\hat v_t=(1-\beta_2)\beta_2^t G/(1-\beta_2^t)` with
    :math:`G=\sum_{s\le t_p}\beta_2^{-s}g_s^2`, so :math:`1/\sqrt{\hat v_t}=\phi(t)/\sqrt G`:
    about :math:`\sqrt{t/G}` for :math:`t\ll1/(1-\beta_2)`. ``steps`` >= 1.
    """
    t = np.asarray(steps, dtype=float)
    if np.any(t < 1):
        raise ValueError(f"Adam's clock starts at step 1, got {t.min()}")
    return np.sqrt(-np.expm1(t * math.log(beta2)) / ((1 - beta2) * beta2**t))


def seed_exponent(model) -> float:
    """``ln(fan_in(E) * fan_in(W2))``: the seed of the XOR contrast scales as ``exp(-this * gamma)``."""
    specs = model.specs()
    return math.log(specs["E"].fan_in * specs["W2"].fan_in)


def predict_escape(
    gammas,
    gamma_cal: float,
    D_entry: float,
    t_entry: float,
    rate: float,
    exponent: float,
    d_star: float,
) -> np.ndarray:
    r"""The two-phase law (Chapter 11, ``eq-adam-plateau``): escape step of bit 1 at each
    ``gamma``.

    The XOR contrast at the end of the sign phase (step ``t_entry``) measured at
    ``gamma_cal``, ``D_entry``, is carried to ``gamma`` by the seed law
    :math:`D_p(\gamma)=D_{\rm entry}\,e^{-x(\gamma-\gamma_{\rm cal})}` (``x = exponent``);
    then :math:`D` grows as :math:`e^{\Lambda t}` (``rate``) to ``d_star``:
    :math:`T=t_p+\ln(D^*/D_p)/\Lambda`. Where :math:`D_p\ge D^*` the bit is learned in the
    sign phase, in which :math:`D` grows linearly: :math:`T=t_p D^*/D_p`.
    """
    if not (D_entry > 0 and rate > 0 and t_entry > 0 and d_star > 0):
        raise ValueError(
            f"need D_entry, rate, t_entry, d_star > 0; got {D_entry}, {rate}, {t_entry}, {d_star}"
        )
    gam = np.asarray(gammas, dtype=float)
    Dp = D_entry * np.exp(-exponent * (gam - gamma_cal))
    plateau = t_entry + np.log(d_star / Dp) / rate
    return np.where(Dp < d_star, plateau, t_entry * d_star / Dp)


def calibrate(probe, gamma_cal: float, seeds: Sequence[int]) -> tuple[float, float, float]:
    """The law's constants on a calibration arm of ``probe`` (a probe run read by ``arm``,
    :class:`lib.experiments.ch11_plateau_length_under_adam.Probe`): ``(t_p, D_entry, rate)``, the
    median over its seeds of the knee of ``|W1|`` (:func:`knee`), of ``D`` at that step, and
    of the rate of ``ln D`` from it while ``D < 0.1`` (:func:`log_rate`). No escape enters."""
    steps = probe.history.steps
    t_p = float(np.median(knee(steps, probe.arm(gamma_cal, "W1", seeds))))
    if not np.isfinite(t_p):
        raise ValueError(f"the calibration arm (gamma={gamma_cal}) has no knee in |W1|")
    D = probe.arm(gamma_cal, "D", seeds)
    at = int(np.searchsorted(steps, t_p))
    return t_p, float(np.median(D[at])), float(np.nanmedian(log_rate(steps, D, t_p)))


def gradient_flow_escape(D0, rate: float, d_star: float) -> np.ndarray:
    """Exponential escape from the init, one rate: ``T = ln(D*/|D0|) / rate``."""
    if not rate > 0:
        raise ValueError(f"rate must be > 0, got {rate}")
    return np.log(d_star / np.abs(np.asarray(D0, dtype=float))) / rate


def on_grid(T, steps) -> np.ndarray:
    """The first logged step at or after each ``T`` (``inf`` past the last): a predicted step
    read as :func:`lib.measure.onsets.escape_steps` reads a measured one."""
    steps = np.asarray(steps, dtype=float)
    T = np.asarray(T, dtype=float)
    i = np.searchsorted(steps, np.where(np.isfinite(T), T, np.inf) - 1e-9)
    return np.where(i < len(steps), steps[np.minimum(i, len(steps) - 1)], np.inf)


def rel_error(pred, meas) -> np.ndarray:
    """``pred / meas - 1``."""
    return np.asarray(pred, dtype=float) / np.asarray(meas, dtype=float) - 1

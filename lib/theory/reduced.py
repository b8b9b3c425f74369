"""The reduced two-scalar theory of QK/OV learning (Chapter 7, ``sec-qkov-reduced``:
equations ``eq-reduced-loss`` to ``eq-reduced-matched``).

The official README's ODE for single-query attention on Scan-and-Snap data: two scalars,
the QK strength ``mu_qk`` and the OV strength ``mu_ov``, with relevant attention mass
``alpha = m e^mu_qk / (m e^mu_qk + n)`` and loss ``log(1 + (M-1) e^{-alpha mu_ov})``;
its conserved quantity (the "line" the flow moves along) and the Lambert-W closed form of
alpha at a given loss. The network it reduces is :mod:`lib.training.qkov`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.integrate import solve_ivp
from scipy.optimize import brentq
from scipy.special import expit, lambertw

from ..training.qkov import PARAMETERIZATIONS


@dataclass(frozen=True)
class ReducedModel:
    """The two-scalar gradient flow of the official code's README (Chapter 7, ``eq-reduced-flow``)::

        d mu_ov/dt = eta_ov alpha / (b D),
        d mu_qk/dt = eta_qk (M-1) alpha (1-alpha) mu_ov / (M b^2 D),   D = e^{alpha mu_ov} + M - 1.

    It is a preconditioned gradient flow on L = log(1 + (M-1) e^{-alpha mu_ov}):
    ``d mu/dt = -eta c grad L`` with ``c_ov = 1/(b (M-1))`` and ``c_qk = 1/(M b^2)``.
    Defaults are the code's simulation constants m=5, n=50, b=50, M=20.
    """

    m: float = 5.0
    n: float = 50.0
    M: int = 20
    b: float = 50.0

    def __post_init__(self):
        if self.m <= 0 or self.n <= 0 or self.b <= 0 or self.M < 2:
            raise ValueError("need m, n, b > 0 and M >= 2")

    @property
    def c_ov(self) -> float:
        return 1.0 / (self.b * (self.M - 1))

    @property
    def c_qk(self) -> float:
        return 1.0 / (self.M * self.b**2)

    def alpha(self, mu_qk):
        """alpha = m e^mu / (m e^mu + n), written as a logistic so it never overflows."""
        return expit(np.asarray(mu_qk, dtype=float) + np.log(self.m / self.n))

    def loss(self, mu_qk, mu_ov):
        z = self.alpha(mu_qk) * np.asarray(mu_ov, dtype=float)
        return np.logaddexp(0.0, np.log(self.M - 1) - z)

    def _one_over_D(self, z):
        # 1 / (e^z + M - 1) = e^{-z} / (1 + (M-1) e^{-z})
        return np.exp(-z - np.logaddexp(0.0, np.log(self.M - 1) - z))

    def rhs(self, t, y, eta_qk: float, eta_ov: float, kind: str = "CACO", delta=(0.0, 0.0)):
        """Right-hand side of the flow for (mu_qk, mu_ov). A factorized circuit (FA/FO)
        multiplies its rate by sqrt(4 mu^2 + Delta^2) (Chapter 7, ``eq-qkov-scalar-rate``), its implicit
        rescaling."""
        mu_qk, mu_ov = y
        a = float(self.alpha(mu_qk))
        inv_D = float(self._one_over_D(a * mu_ov))
        d_ov = eta_ov * a * inv_D / self.b
        d_qk = eta_qk * (self.M - 1) * a * (1 - a) * mu_ov * inv_D / (self.M * self.b**2)
        if kind not in PARAMETERIZATIONS:
            raise ValueError(f"unknown kind {kind!r}; choose from {list(PARAMETERIZATIONS)}")
        if kind[:2] == "FA":
            d_qk *= np.sqrt(4 * mu_qk**2 + delta[0] ** 2)
        if kind[2:] == "FO":
            d_ov *= np.sqrt(4 * mu_ov**2 + delta[1] ** 2)
        return [d_qk, d_ov]

    def G(self, mu_qk):
        """G(mu) = mu + (m/n) e^mu, the antiderivative of 1/(1 - alpha(mu))."""
        mu = np.asarray(mu_qk, dtype=float)
        return mu + (self.m / self.n) * np.exp(mu)

    def k(self, r: float) -> float:
        """Slope of the line: k = (r/2) c_qk / c_ov = r (M-1) / (2 M b)."""
        return r * (self.M - 1) / (2 * self.M * self.b)

    def invariant(self, mu_qk, mu_ov, r: float):
        """G(mu_qk) - k mu_ov^2, conserved by the CACO flow with eta_qk / eta_ov = r."""
        return self.G(mu_qk) - self.k(r) * np.asarray(mu_ov, dtype=float) ** 2

    def alpha_closed_form(self, mu_ov, r: float, mu_qk0: float = 0.0, mu_ov0: float = 0.0):
        """alpha along the CACO trajectory as a function of mu_ov (Lambert W, Chapter 7,
        ``eq-reduced-alpha``):
        alpha = W0(zeta) / (1 + W0(zeta)),  zeta = (m/n) exp(G(mu_qk0) + k (mu_ov^2 - mu_ov0^2))."""
        log_zeta = np.log(self.m / self.n) + self.G(mu_qk0)
        log_zeta = log_zeta + self.k(r) * (np.asarray(mu_ov, dtype=float) ** 2 - mu_ov0**2)
        w = np.real(lambertw(np.exp(np.minimum(log_zeta, 700.0)), 0))
        # Beyond exp's range solve w + log w = log zeta by Newton from W0(e^700).
        for _ in range(50 if np.any(log_zeta > 700.0) else 0):
            w = np.where(log_zeta > 700.0, w - (w + np.log(w) - log_zeta) / (1 + 1 / w), w)
        return w / (1 + w)

    def margin_at_loss(self, loss):
        """s* = alpha mu_ov = log((M-1) / (e^loss - 1)), the margin that gives this loss."""
        return np.log(self.M - 1) - np.log(np.expm1(np.asarray(loss, dtype=float)))

    def alpha_at_loss(self, loss: float, r: float, mu_qk0: float = 0.0, mu_ov0: float = 0.0):
        """The unique root alpha of  logit(alpha) + alpha/(1-alpha)
        = log(m/n) + G(mu_qk0) + k ((s*/alpha)^2 - mu_ov0^2)   (Chapter 7, ``eq-reduced-matched``)."""
        s = float(self.margin_at_loss(loss))
        rhs0 = np.log(self.m / self.n) + float(self.G(mu_qk0)) - self.k(r) * mu_ov0**2

        def f(a):
            return np.log(a / (1 - a)) + a / (1 - a) - rhs0 - self.k(r) * (s / a) ** 2

        return brentq(f, 1e-12, 1 - 1e-12, xtol=1e-15, rtol=1e-14)

    def solve(
        self,
        r: float,
        eta_ov: float = 1.0,
        kind: str = "CACO",
        y0=(0.0, 0.0),
        t_max: float = 1e9,
        stop_losses=(),
        t_eval=None,
        rtol: float = 1e-10,
        atol: float = 1e-12,
    ):
        """Integrate the flow with ``solve_ivp`` (LSODA) from ``y0 = (mu_qk, mu_ov)`` until
        ``t_max`` or the smallest of ``stop_losses``. Events record every stop loss:
        ``sol.t_events[i]``, ``sol.y_events[i]`` for ``stop_losses[i]``."""
        eta_qk = r * eta_ov
        events = []
        for i, lo in enumerate(stop_losses):

            def ev(t, y, *args, lo=lo):
                return float(self.loss(y[0], y[1])) - lo

            ev.terminal = bool(i == int(np.argmin(stop_losses)))
            ev.direction = -1
            events.append(ev)
        return solve_ivp(
            self.rhs,
            (0.0, t_max),
            list(y0),
            method="LSODA",
            args=(eta_qk, eta_ov, kind),
            events=events or None,
            t_eval=t_eval,
            rtol=rtol,
            atol=atol,
            dense_output=t_eval is None,
        )

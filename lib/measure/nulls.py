r"""Label-permutation nulls of the staircase's alignments (Chapters 2, 4, 9 and 12).

A stair is read off :math:`R_j`, the partial correlation between the pairwise cosines of
the anchors' embedding increment :math:`\Delta E` and those of the order-:math:`j`
signature, controlling for the other orders (:func:`lib.measure.staircase.order_partials`). How
large does :math:`R_j` get by chance? Here chance keeps everything but the rule: the labels
are permuted across sequences (every link between a label and its context is gone, the
sequences and the label marginal stay), the order-:math:`j` signature is recomputed on
them, and the *trained* increment is read against it exactly as against the real one
(partial, controlling for the real other orders). Over ``n_perm`` permutations this gives,
at every logged step and for every instance, the :math:`R_j` that a signature without a
rule reaches with this very increment: a null that knows the increment's structure (its
order-0 geometry, whatever memorizing put into it), which an isotropic Gaussian increment
does not.

A run's **floor** of order :math:`j` (:func:`floor_of`) is the ``q`` quantile, over
permutations and instances, of the *largest* null :math:`R_j` over the run's logged steps.
A stair comes when its :math:`R_j` ever passes the floor, so chance is given the same
chances: its best moment over the same steps. (The largest per-step quantile instead, as
Chapter 5 reads its bands, lets a curve without a stair cross it at some step far more
often than 1 - q: one look per logged step.)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np
import torch

from . import metrics as M

__all__ = ["PermutationNull", "familywise_floor", "floor_of", "permuted_labels", "run_floors"]


def permuted_labels(y: torch.Tensor, n_perm: int, seed: int = 0) -> list[torch.Tensor]:
    """``n_perm`` permutations of the labels ``y`` across sequences, from one generator."""
    if n_perm < 1:
        raise ValueError(f"n_perm must be >= 1, got {n_perm}")
    gen = torch.Generator().manual_seed(int(seed))
    y = torch.as_tensor(y)
    return [y[torch.randperm(len(y), generator=gen)] for _ in range(n_perm)]


def _pairs(phi: torch.Tensor) -> torch.Tensor:
    """Upper triangle of the cosine matrix of the rows of ``phi`` (flattened rows)."""
    phi = M.as_f64(phi)
    return M.upper_triangle(M.cosine_similarity_matrix(phi.reshape(phi.shape[0], -1)))


def _basis(controls: list[torch.Tensor], P: int) -> torch.Tensor:
    """Orthonormal basis of span([1, controls]) over the P pairs (as :func:`M.partial_corr`)."""
    Z = torch.stack([torch.ones(P, dtype=torch.float64), *controls], 1)
    U, s, _ = torch.linalg.svd(Z, full_matrices=False)
    return U[:, s > s.max() * Z.shape[0] * torch.finfo(torch.float64).eps]


def _unit_residual(v: torch.Tensor, U: torch.Tensor) -> torch.Tensor:
    """``v`` (..., P) minus its projection on span(U), scaled to unit norm (0 stays 0)."""
    r = v - (v @ U) @ U.T
    n = r.norm(dim=-1, keepdim=True)
    return torch.where(n > 0, r / n.clamp_min(torch.finfo(torch.float64).tiny), 0.0)


class PermutationNull:
    """Partial :math:`R_j` of increments against real and label-permuted signatures.

    Args:
        phis: ``{order: (T, F)}`` the real signatures of the tracked tokens, mean row
            removed (:attr:`lib.measure.staircase.OrderTargets.phis`).
        permuted: one ``{order: (T, F)}`` per permutation, the same signatures counted on
            permuted labels (:meth:`of_labels` makes them).

    Calling it on a centred increment ``dE`` ``(K, T, d)`` returns ``{order: (K, n_perm)}``,
    each order's partial R against every permuted signature, controlling for the *real*
    other orders (the reading of the real signature, with only the tested one replaced);
    :meth:`real` returns the reading of the real signatures, ``{order: (K,)}``, the same
    numbers as :func:`lib.measure.staircase.order_partials` (tested).
    """

    def __init__(
        self, phis: Mapping[int, torch.Tensor], permuted: list[Mapping[int, torch.Tensor]]
    ):
        if not permuted:
            raise ValueError("a permutation null needs at least one permutation")
        self.orders = tuple(sorted(phis))
        real = {o: _pairs(phis[o]) for o in self.orders}
        P = next(iter(real.values())).shape[0]
        self._U, self._real, self._perm = {}, {}, {}
        for o in self.orders:
            U = _basis([real[q] for q in self.orders if q != o], P)
            self._U[o] = U
            self._real[o] = _unit_residual(real[o], U)  # (P,)
            self._perm[o] = _unit_residual(torch.stack([_pairs(p[o]) for p in permuted]), U)

    @classmethod
    def of_labels(
        cls,
        targets_of: Callable[[torch.Tensor], object],
        y: torch.Tensor,
        n_perm: int,
        seed: int = 0,
    ) -> PermutationNull:
        """The null of the signatures ``targets_of(y)`` (an object with ``phis``, such as
        :class:`lib.measure.staircase.OrderTargets`) over ``n_perm`` permutations of ``y``."""
        real = targets_of(torch.as_tensor(y)).phis
        return cls(real, [targets_of(yp).phis for yp in permuted_labels(y, n_perm, seed)])

    @property
    def n_perm(self) -> int:
        return next(iter(self._perm.values())).shape[0]

    def _increment_pairs(self, dE: torch.Tensor) -> torch.Tensor:
        dE = M.as_f64(dE)
        return M.upper_triangle(M.cosine_similarity_matrix(dE))  # (K, P)

    def real(self, dE) -> dict:
        """``{order: (K,)}`` partial R of the centred increment against the real signatures."""
        se = self._increment_pairs(dE)
        return {o: _unit_residual(se, self._U[o]) @ self._real[o] for o in self.orders}

    def __call__(self, dE) -> dict:
        """``{order: (K, n_perm)}`` partial R against each label-permuted signature."""
        se = self._increment_pairs(dE)
        return {o: _unit_residual(se, self._U[o]) @ self._perm[o].T for o in self.orders}


def floor_of(null_curve, q: float = 0.95) -> float:
    """A run's floor of one order from its logged null, ``(n_logs, K, n_perm)``.

    Per instance and permutation, the largest null R over the logged steps (NaN, e.g. the
    zero increment at step 0, ignored); then the ``q`` quantile of those maxima over
    instances and permutations.
    """
    if not 0 < q < 1:
        raise ValueError(f"q must be in (0, 1), got {q}")
    v = np.asarray(null_curve, dtype=float)
    if v.ndim != 3:
        raise ValueError(f"the null curve must be (n_logs, K, n_perm), got shape {v.shape}")
    peak = np.nanmax(np.where(np.isnan(v), -np.inf, v), axis=0)
    if not np.isfinite(peak).any():
        raise ValueError("the null curve has no finite value")
    return float(np.quantile(peak[np.isfinite(peak)], q))


def run_floors(history, q: float, prefix: str = "") -> dict:
    """A run's own permutation floor of each order, ``{order: floor}``: :func:`floor_of` of
    every ``{prefix}null{order}`` the run logged (a :class:`lib.training.engine.History`)."""
    orders = sorted(
        int(k[len(prefix) + 4 :]) for k in history.metrics if k.startswith(prefix + "null")
    )
    return {o: floor_of(history[f"{prefix}null{o}"], q) for o in orders}


FAMILYWISE_Q = 0.99  # the level of a negative control's family-wise floor: 1%


def familywise_floor(null_curves, q: float = FAMILYWISE_Q) -> float:
    """A negative control's family-wise floor: one max-statistic permutation null over
    everything the control scans.

    ``null_curves``: one logged null ``(n_logs, K, n_perm)`` per run of the control (or one
    array), all with the same ``n_perm`` permutations, permutation p of every run drawn from
    one set of permuted labels. Per permutation, the largest null R over every run, logged
    step and instance (NaN ignored); the floor is the ``q`` quantile of those maxima. A
    control whose largest real R over the same family stays below it has found nothing at
    the level ``1 - q``, however many seeds, rates and steps it scanned (``q = 0.99``: 1%).
    """
    if not 0 < q < 1:
        raise ValueError(f"q must be in (0, 1), got {q}")
    curves = [null_curves] if isinstance(null_curves, np.ndarray) else list(null_curves)
    peaks = []
    for c in curves:
        v = np.asarray(c, dtype=float)
        if v.ndim != 3:
            raise ValueError(f"a null curve must be (n_logs, K, n_perm), got shape {v.shape}")
        v = np.where(np.isnan(v), -np.inf, v)
        peaks.append(v.max(axis=(0, 1)))  # (n_perm,): the largest over steps and instances
    n = {len(pk) for pk in peaks}
    if len(n) != 1:
        raise ValueError(f"the null curves have different numbers of permutations: {sorted(n)}")
    peak = np.max(np.stack(peaks), axis=0)
    if not np.isfinite(peak).any():
        raise ValueError("the null curves have no finite value")
    return float(np.quantile(peak[np.isfinite(peak)], q))

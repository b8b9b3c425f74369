r"""Reading the context staircase (Chapter 2; the claim is ``contextstaircase``).

The staircase is read off the *increment* of the embedding table of the tracked tokens
:math:`T` (the anchors),

.. math:: \Delta E_s(t) = E_s(t) - E_s(0),\qquad
          \Delta\bar E_s = \Delta E_s - \tfrac{1}{|T|}\textstyle\sum_{s'\in T}\Delta E_{s'}:

under small initialization :math:`E(0)` is noise that dominates a raw cosine, and the
mean row is a direction every token shares. Each order's signature (:class:`OrderTargets`:
order 0 the label signature, order 1 the interaction with a gate, order 2 the joint third
cumulant with two gates) has its mean row removed the same way, and each order is measured
by its partial :math:`R_{\cos}` controlling for the others (:func:`order_partials`),
against a label-permutation null (:func:`label_null`). A run
(:mod:`lib.experiments.staircase_runs`) logs these with :mod:`lib.measure.staircase_callbacks`; a :class:`BitRun` holds it labelled by gamma
and seed, and :meth:`BitRun.stairs` reads one arm's onsets (:mod:`lib.measure.onsets`),
escapes and plateaus (:mod:`lib.measure.plateaus`) as :class:`Stairs`.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from ..data import tasks
from ..training.engine import History
from ..training.sweep import Sweep
from . import metrics as M
from . import onsets
from .nulls import PermutationNull, floor_of, permuted_labels
from .onsets import escape_steps, stair_onsets, staircase_climbs
from .plateaus import plateau_mask

__all__ = [
    "increment",
    "OrderTargets",
    "order_targets",
    "parity_targets",
    "selective_targets",
    "label_null",
    "order_partials",
    "Stairs",
    "BitRun",
    "StairTask",
    "parity_task",
    "gate_blind",
]


def increment(E, E0, tokens: Sequence[int], subtract_mean_row: bool = True) -> torch.Tensor:
    r"""The increment :math:`\Delta E = E - E_0` on the tracked rows, optionally minus its mean row.

    ``E``, ``E0`` are ``(K, V, d)`` (or ``(V, d)``); returns ``(K, T, d)`` in float64.
    """
    E, E0 = M.as_f64(E), M.as_f64(E0)
    if E.shape != E0.shape:
        raise ValueError(f"E has shape {tuple(E.shape)} but E0 has {tuple(E0.shape)}")
    idx = torch.as_tensor(list(tokens), dtype=torch.long, device=E.device)
    dE = (E - E0.to(E.device))[..., idx, :]
    if subtract_mean_row:
        dE = dE - dE.mean(-2, keepdim=True)
    return dE


# ---------------------------------------------------------------------------
# One stair per order: the gated-parity-bit task (Chapter 2)
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class OrderTargets:
    """Signatures of order 0, 1 (and 2) of the tracked tokens, each with its mean row removed.

    Attributes:
        tokens: tracked token ids (the anchors), length T.
        phis: ``{order: (T, n_features) float64}``, every row minus the mean row over T.
    """

    tokens: tuple[int, ...]
    phis: dict

    @property
    def orders(self) -> tuple[int, ...]:
        return tuple(sorted(self.phis))


def _one_hot(t: torch.Tensor, values: Sequence[int]) -> torch.Tensor:
    return (t[:, None] == torch.as_tensor(list(values))[None, :]).double()


def _context(X, s: int, gate_pos, gates, pair_pos, pairs):
    """What :func:`order_targets` reads of token ``s`` that no label changes: the sequences
    that hold it, and the centred one-hots of its gate (and of its pair of gates)."""
    rows = (X == s).any(1)
    G = _one_hot(X[rows, gate_pos], gates)
    if pair_pos is None:
        return rows, G - G.mean(0), None, None
    H = _one_hot(X[rows, pair_pos[0]], pairs[0])
    K = _one_hot(X[rows, pair_pos[1]], pairs[1])
    return rows, G - G.mean(0), H - H.mean(0), K - K.mean(0)


def order_targets(X, y, n_labels: int, tokens, gate_pos, gates, pair_pos=None, pairs=None,
                  orders=None, memo: dict | None = None) -> OrderTargets:  # fmt: skip
    r"""Order-0/1/2 signatures of ``tokens`` counted on ``(X, y)``, mean row removed.

    For a tracked token ``s`` (expectations over the sequences that contain it):

    * order 0, the label signature :math:`\phi^y_s=\mathbb E[e_y]`;
    * order 1, the interaction with the gate at position ``gate_pos``,
      :math:`\mathbb E[(e_g-\bar e_g)\otimes(e_y-\bar e_y)]` (what the gate adds beyond
      order 0; :func:`lib.data.signatures.joint_interaction` restricted to the gates);
    * order 2 (with ``pair_pos = (i, j)`` and ``pairs = (family_i, family_j)``), the joint
      third cumulant :math:`\mathbb E[(e_h-\bar e_h)\otimes(e_k-\bar e_k)\otimes(e_y-\bar e_y)]`
      of two gates from different families and the label: what the pair adds beyond
      each gate alone.

    Each signature then has its mean row over ``tokens`` removed, as the embedding
    increment has (both sides of :math:`R_{\cos}` centred the same way).

    ``orders`` (default: all) counts only those orders; ``memo``, a dict that calls on the
    same ``X`` share (:func:`label_null`'s permutations), keeps what does not depend on
    ``y`` from the first of them.
    """
    X, y = torch.as_tensor(X), torch.as_tensor(y)
    labels = range(n_labels)
    every = (0, 1) if pair_pos is None else (0, 1, 2)
    phis: dict = {o: [] for o in every if orders is None or o in orders}
    memo = {} if memo is None else memo
    if "contexts" not in memo:
        memo["contexts"] = [_context(X, s, gate_pos, gates, pair_pos, pairs) for s in tokens]
    for rows, Gc, Hc, Kc in memo["contexts"]:
        Y = _one_hot(y[rows], labels)
        if 0 in phis:
            phis[0].append(Y.mean(0))
        if 1 in phis or 2 in phis:
            Yc = Y - Y.mean(0)
        if 1 in phis:
            phis[1].append((Gc.T @ Yc / len(Y)).flatten())
        if 2 in phis:
            phis[2].append(torch.einsum("nh,nk,ny->hky", Hc, Kc, Yc).flatten() / len(Y))
    out = {}
    for o, rows in phis.items():
        P = torch.stack(rows)
        out[o] = P - P.mean(0, keepdim=True)
    return OrderTargets(tuple(int(t) for t in tokens), out)


def parity_targets(data, layout, **reuse) -> OrderTargets:
    """:func:`order_targets` of the anchors of :func:`lib.data.tasks.gated_parity_bits`
    (``reuse``: its ``orders`` and ``memo``)."""
    L = data.X.shape[1]
    pair = (2, 3) if layout.h else None
    return order_targets(
        data.X,
        data.y,
        data.n_labels,
        layout.anchors,
        L - 1,
        layout.gates,
        pair,
        (layout.h, layout.k) if layout.h else None,
        **reuse,
    )


def selective_targets(data, layout, **reuse) -> OrderTargets:
    """:func:`order_targets` of the anchors of :func:`lib.data.tasks.selective_parity_bits`: order 1
    is the interaction with the gate at the counting position (just before the anchor)."""
    return order_targets(
        data.X, data.y, data.n_labels, layout.anchors, layout.gate_pos, layout.gates, **reuse
    )


def label_null(data, layout, n_perm: int, seed: int = 0, targets=parity_targets):
    """The label-permutation null (:class:`lib.measure.nulls.PermutationNull`) of ``targets(data,
    layout)``: the same signatures counted on ``n_perm`` permutations of the labels.

    Order 0 is read against whole labels permuted across sequences. The orders above it are
    read against the label *blocks* permuted (``y mod B`` kept, ``y div B`` permuted,
    ``B = layout.block``): every bit loses its link to the context while each label's
    order-0 part stays where it was, so the null of a higher order keeps the order-0
    geometry that its partial R controls for (a conditional permutation test). Each
    permutation counts only the orders it is read for, and the sequences are read once
    (``targets`` takes ``orders`` and ``memo``, as :func:`order_targets`).
    """
    y, B = torch.as_tensor(data.y), int(layout.block)
    memo: dict = {}
    of = lambda labels, orders=None: (
        targets(dataclasses.replace(data, y=labels), layout, orders=orders, memo=memo).phis
    )
    whole = permuted_labels(y, n_perm, seed)
    blocks = [y % B + B * yb for yb in permuted_labels(y // B, n_perm, seed + 1)]
    permuted = [{0: of(a, (0,))[0]} | of(b, (1, 2))
                for a, b in zip(whole, blocks, strict=True)]  # fmt: skip
    return PermutationNull(of(y), permuted)


def order_partials(dE, targets: OrderTargets) -> dict:
    """Partial :math:`R_{\\cos}` of each order, controlling for all the other orders.

    ``dE`` is ``(..., T, d)``, already centred (:func:`increment`). Returns
    ``{order: (...)}`` tensors. With a single order there is nothing to control for.
    """
    out = {}
    for o, phi in targets.phis.items():
        others = [p for q, p in targets.phis.items() if q != o]
        if others:
            out[o] = M.r_cos_partial(dE, phi, others, subtract_mean_row=False)
        else:
            out[o] = M.r_cos(dE, phi, subtract_mean_row=False)
    return out


@dataclass(frozen=True)
class Stairs:
    """What one arm (one gamma, every seed) of a :class:`BitRun` climbed.

    Attributes:
        onsets: ``{order: (seeds,)}`` onset steps (:func:`stair_onsets`), ``inf`` if never.
        escapes: ``{bit: (seeds,)}`` escape steps (:func:`escape_steps`), ``inf`` if never.
        plateaus: ``{bit: (n_logs, seeds) bool}`` the plateau of the bit
            (:func:`plateau_mask`, after the previous order's onset).
        plateau_R: ``{bit: (seeds,)}`` median over the plateau of the partial R of order
            ``bit`` (NaN for a seed without a plateau).
    """

    onsets: dict
    escapes: dict
    plateaus: dict
    plateau_R: dict

    def climbs(self) -> bool:
        """The staircase check (:func:`staircase_climbs`) over every seed."""
        return staircase_climbs([self.onsets[o] for o in sorted(self.onsets)])

    def climbs_per_seed(self) -> list[bool]:
        """The staircase check, seed by seed."""
        n = len(next(iter(self.onsets.values())))
        return [
            staircase_climbs([self.onsets[o][k : k + 1] for o in sorted(self.onsets)])
            for k in range(n)
        ]


@dataclass
class BitRun:
    """One batched run of :func:`lib.experiments.staircase_runs.train_bits`, labelled: read back by gamma, not by index.

    Attributes:
        history: the run's :class:`lib.training.engine.History` (instances gamma-major).
        sweep: its :class:`lib.training.sweep.Sweep` over ``gamma`` and ``seed`` (and ``copy``, for
            an ensemble run: the arrays of :meth:`arm` then hold every (seed, copy)
            instance, seed-major, and :meth:`per_seed` folds them back).
        targets: the :class:`OrderTargets` it was measured against.
        floor: ``{order: floor}``, the run's permutation floor (:func:`lib.measure.nulls.floor_of`).
        params: the trained weights of every instance (set by :func:`lib.experiments.staircase_runs.run_bits`).
    """

    history: History
    sweep: Sweep
    targets: OrderTargets
    floor: dict
    params: dict | None = None

    @property
    def gammas(self) -> list[float]:
        """The run's gammas, ascending."""
        return sorted(self.sweep.axes["gamma"])

    @property
    def copies(self) -> int:
        """Copies per seed (1 for a run without an ensemble)."""
        return len(self.sweep.axes.get("copy", [0]))

    @property
    def seeds(self) -> list[int]:
        return list(self.sweep.axes["seed"])

    def per_seed(self, values) -> np.ndarray:
        """Per-instance values of one arm, ``(seeds * copies, ...)``, as ``(seeds, copies, ...)``."""
        v = np.asarray(values)
        return v.reshape(len(self.seeds), self.copies, *v.shape[1:])

    def copy(self, c: int = 0, null_q: float = 0.95) -> BitRun:
        """Copy ``c`` of every seed of an ensemble run, as a run of its own (copy 0: the seeds
        themselves, as a run without copies would have trained them). Its floor is read from
        its own instances' logged null (:func:`lib.measure.nulls.floor_of` at ``null_q``) where
        the run logged one, else the run's floor is kept."""
        if "copy" not in self.sweep.axes:
            raise ValueError("copy() reads an ensemble run; this run has no copies")
        if c not in self.sweep.axes["copy"]:
            raise ValueError(f"copy {c} was not run; copies: {self.sweep.axes['copy']}")
        keep = np.flatnonzero(np.array(self.sweep["copy"]) == c)
        history = History(
            self.history.steps, {n: v[:, keep] for n, v in self.history.metrics.items()}
        )
        sweep = Sweep(**{a: v for a, v in self.sweep.axes.items() if a != "copy"})
        floor = {
            o: floor_of(history[f"null{o}"], null_q) if f"null{o}" in history.metrics else f
            for o, f in self.floor.items()
        }
        params = {n: p[keep] for n, p in self.params.items()} if self.params else self.params
        return BitRun(history, sweep, self.targets, floor, params)

    @functools.cached_property
    def data(self):
        """Every logged metric as an ``xarray.Dataset`` with dims ``(step, gamma, seed[, copy])``."""
        return self.sweep.dataset(self.history)

    def arm(self, gamma: float) -> tuple[np.ndarray, dict]:
        """Steps and ``{metric: (n_logs, instances, ...)}`` of the instances at ``gamma``:
        one per seed, or one per (seed, copy) of an ensemble run, seed-major."""
        ds = self.data
        if float(gamma) not in self.sweep.axes["gamma"]:
            raise KeyError(f"gamma={gamma} was not run; gammas: {self.sweep.axes['gamma']}")
        inst = ("seed", "copy") if "copy" in self.sweep.axes else ("seed",)
        n = len(self.history.steps)

        def values(k):
            v = ds[k].sel(gamma=float(gamma)).transpose("step", *inst, ...).values
            return v.reshape(n, -1, *v.shape[1 + len(inst) :])

        return self.history.steps, {k: values(k) for k in ds}

    def onset_levels(self, gamma: float) -> dict:
        """``{order: (seeds,)}``: the level of R at which :func:`stair_onsets` puts each
        onset of the arm at ``gamma`` (half the run's maximum, at least the floor)."""
        steps, m = self.arm(gamma)
        return {
            o: onsets.relative_onset(steps, m[f"R{o}"], floor=self.floor[o])[1]
            for o in self.targets.orders
        }

    def stairs(self, gamma: float, levels: dict | None = None) -> Stairs:
        """Onsets, escapes and plateaus of the arm at ``gamma``, every seed.

        ``levels`` (``{order: (seeds,)}``, e.g. another run's :meth:`onset_levels`) puts the
        onsets where R first reaches those levels, instead of half this run's own maximum:
        a rerun read against its base run's levels is read like with like, and needs only
        the steps up to its base run's last event (:func:`lib.measure.stability.rerun_horizon`).
        """
        steps, m = self.arm(gamma)
        orders = self.targets.orders
        if levels is None:
            on = {o: stair_onsets(steps, m[f"R{o}"], self.floor[o]) for o in orders}
        else:
            at = lambda o: [  # the first step at each level, as relative_onset reads it
                float(onsets.onset_step(steps, m[f"R{o}"][:, k], float(v)))
                for k, v in enumerate(levels[o])
            ]
            on = {o: np.nan_to_num(np.array(at(o)), nan=np.inf) for o in orders}
        esc = {o: escape_steps(steps, m[f"bit{o}"]) for o in orders if o > 0}
        masks = {o: plateau_mask(steps, m[f"bit{o}"], on[o - 1]) for o in esc}
        med = {
            o: np.array(
                [
                    np.median(m[f"R{o}"][mask[:, k], k]) if mask[:, k].any() else np.nan
                    for k in range(mask.shape[1])
                ]
            )
            for o, mask in masks.items()
        }
        return Stairs(on, esc, masks, med)


@dataclass(frozen=True)
class StairTask:
    """A gated-parity-bit task as the staircase reads it: the data, its layout, the
    order-0/1 targets on the anchors and their label-permutation null
    (:class:`lib.measure.nulls.PermutationNull`)."""

    data: tasks.TaskData
    layout: tasks.ParityBits
    targets: OrderTargets
    null: object


def parity_task(n_keys: int, n_anchors: int, n_perm: int) -> StairTask:
    """Chapter 2's two-stair task with ``n_keys`` keys and ``n_anchors`` anchors, its targets
    (:func:`parity_targets`) and its null of ``n_perm`` permutations (:func:`label_null`)."""
    data, layout = tasks.gated_parity_bits(n_keys, n_anchors)
    targets = parity_targets(data, layout)
    return StairTask(data, layout, targets, label_null(data, layout, n_perm))


def gate_blind(task: StairTask, seed: int, n_perm: int) -> tuple[StairTask, StairTask]:
    """The negative control: the bit-1 signs permuted across sequences
    (:func:`lib.data.tasks.shuffled_bit1`), so that neither the gate nor the anchor carries
    information about bit 1; order 0 is untouched, so the first stair should still come.

    Returns the control task read against the *rule's* targets and their null (what must
    not come is the rule's order-1 geometry), and the control read against the shuffled
    labels' own targets and their own null.
    """
    blind, lay = tasks.shuffled_bit1(task.data, task.layout, seed)
    own = StairTask(blind, lay, parity_targets(blind, lay), label_null(blind, lay, n_perm))
    return StairTask(blind, lay, task.targets, task.null), own

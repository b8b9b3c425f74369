r"""Measuring the context staircase during training (Chapter 2; the claim is ``contextstaircase``).

The staircase is read off the *increment* of the embedding table of the tracked tokens
:math:`T` (the anchors),

.. math:: \Delta E_s(t) = E_s(t) - E_s(0),\qquad
          \Delta\bar E_s = \Delta E_s - \tfrac{1}{|T|}\textstyle\sum_{s'\in T}\Delta E_{s'}:

under small initialization :math:`E(0)` is noise that dominates a raw cosine, and the
mean row is a direction every token shares. Each order's signature (:class:`OrderTargets`:
order 0 the label signature, order 1 the interaction with a gate, order 2 the joint third
cumulant with two gates) has its mean row removed the same way, and each order is measured
by its partial :math:`R_{\cos}` controlling for the others (:func:`order_partials`),
against a Gaussian noise floor (:func:`order_noise_floor`). The sign-bit losses of
:func:`bit_callbacks` place the plateaus; :func:`stair_onsets`, :func:`escape_steps` and
:func:`staircase_climbs` turn the curves into the chapter's checks, with ``inf`` for a
stair that never comes. :func:`run_bits` returns a run as a :class:`BitRun`, labelled by
gamma and seed, whose :meth:`BitRun.stairs` reads all of that off one arm (:class:`Stairs`).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from ..env import cpu_threads
from ..training.engine import History, cached_callbacks, train
from ..training.init import perturb
from ..training.models import build
from ..training.sweep import Sweep
from . import metrics as M
from .nulls import PermutationNull, floor_of, permuted_labels

__all__ = [
    "increment",
    "OrderTargets",
    "order_targets",
    "parity_targets",
    "selective_targets",
    "label_null",
    "order_partials",
    "order_noise_floor",
    "bit_callbacks",
    "raw_alignment_callbacks",
    "leading_term_callback",
    "escape_steps",
    "stair_onsets",
    "staircase_climbs",
    "train_bits",
    "copy_params",
    "plateau_mask",
    "plateau_and_fall",
    "Stairs",
    "BitRun",
    "run_bits",
    "rerun_horizon",
    "log_step_shift",
    "stability",
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


def _gamma_seed_sweep(seeds, gammas, who: str, copies: int = 1) -> Sweep:
    """The gamma-major grid of a run (seed, then copy, fastest), as a :class:`lib.training.sweep.Sweep`.

    With ``copies > 1`` the grid has a third axis, ``copy``: the perturbed copies of a seed.
    """
    if len(seeds) == 0 or len(gammas) == 0:
        raise ValueError(f"{who} needs at least one seed and one gamma")
    if copies < 1:
        raise ValueError(f"{who} needs copies >= 1, got {copies}")
    axes = dict(gamma=[float(x) for x in gammas], seed=[int(s) for s in seeds])
    return Sweep(**axes, **({"copy": list(range(copies))} if copies > 1 else {}))


def _gamma_seed_grid(seeds, gammas, who: str) -> tuple[np.ndarray, np.ndarray]:
    """Per-instance (gamma, seed) of the gamma-major grid."""
    sw = _gamma_seed_sweep(seeds, gammas, who)
    return np.array(sw["gamma"]), np.array(sw["seed"])


COPY_NOISE_SEED = (
    11  # the generator family of the copies' perturbations (lib.training.init.perturb)
)


def copy_params(model, sweep: Sweep, copy_rel: float, device="cpu") -> dict:
    """The initial weights of every instance of ``sweep`` (axes gamma, seed and maybe copy).

    Copy 0 of a seed is the seed's own init; copy ``c > 0`` multiplies every weight by
    ``1 + copy_rel * z`` with noise of its own, drawn from (seed, copy) alone
    (:func:`lib.training.init.perturb`), so a copy is the same whatever else shares the batch.
    """
    seed_k = [int(s) for s in sweep["seed"]]
    params = build(model, seed_k, gamma=[float(gamma) for gamma in sweep["gamma"]], device=device)
    if "copy" not in sweep.axes:
        return params
    copy_k = np.array(sweep["copy"])
    keys = [s * 10_007 + int(c) for s, c in zip(seed_k, copy_k, strict=True)]
    return perturb(params, (copy_k > 0) * float(copy_rel), seed=COPY_NOISE_SEED, keys=keys)


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


def order_targets(X, y, n_labels: int, tokens, gate_pos, gates, pair_pos=None, pairs=None):
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
    """
    X, y = torch.as_tensor(X), torch.as_tensor(y)
    labels = range(n_labels)
    phis: dict = {0: [], 1: []}
    if pair_pos is not None:
        phis[2] = []
    for s in tokens:
        rows = (X == s).any(1)
        Y = _one_hot(y[rows], labels)
        Yc = Y - Y.mean(0)
        G = _one_hot(X[rows, gate_pos], gates)
        phis[0].append(Y.mean(0))
        phis[1].append(((G - G.mean(0)).T @ Yc / len(Y)).flatten())
        if pair_pos is not None:
            H = _one_hot(X[rows, pair_pos[0]], pairs[0])
            K = _one_hot(X[rows, pair_pos[1]], pairs[1])
            Hc, Kc = H - H.mean(0), K - K.mean(0)
            phis[2].append(torch.einsum("nh,nk,ny->hky", Hc, Kc, Yc).flatten() / len(Y))
    out = {}
    for o, rows in phis.items():
        P = torch.stack(rows)
        out[o] = P - P.mean(0, keepdim=True)
    return OrderTargets(tuple(int(t) for t in tokens), out)


def parity_targets(data, layout) -> OrderTargets:
    """:func:`order_targets` of the anchors of :func:`lib.data.tasks.gated_parity_bits`."""
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
    )


def selective_targets(data, layout) -> OrderTargets:
    """:func:`order_targets` of the anchors of :func:`lib.data.tasks.selective_parity_bits`: order 1
    is the interaction with the gate at the counting position (just before the anchor)."""
    return order_targets(
        data.X, data.y, data.n_labels, layout.anchors, layout.gate_pos, layout.gates
    )


def label_null(data, layout, n_perm: int, seed: int = 0, targets=parity_targets):
    """The label-permutation null (:class:`lib.measure.nulls.PermutationNull`) of ``targets(data,
    layout)``: the same signatures counted on ``n_perm`` permutations of the labels.

    Order 0 is read against whole labels permuted across sequences. The orders above it are
    read against the label *blocks* permuted (``y mod B`` kept, ``y div B`` permuted,
    ``B = layout.block``): every bit loses its link to the context while each label's
    order-0 part stays where it was, so the null of a higher order keeps the order-0
    geometry that its partial R controls for (a conditional permutation test).
    """
    y, B = torch.as_tensor(data.y), int(layout.block)
    of = lambda labels: targets(dataclasses.replace(data, y=labels), layout).phis
    whole = permuted_labels(y, n_perm, seed)
    blocks = [y % B + B * yb for yb in permuted_labels(y // B, n_perm, seed + 1)]
    permuted = [{0: of(a)[0]} | {o: p for o, p in of(b).items() if o > 0}
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


def order_noise_floor(targets: OrderTargets, d: int, n: int = 2000, q: float = 0.95, seed: int = 0):
    """``q`` quantile of each order's partial R for Gaussian increments of shape (T, d)."""
    if not 0 < q < 1:
        raise ValueError(f"q must be in (0, 1), got {q}")
    gen = torch.Generator().manual_seed(seed)
    dE = torch.randn(n, len(targets.tokens), d, generator=gen, dtype=torch.float64)
    dE = dE - dE.mean(-2, keepdim=True)
    return {o: float(torch.quantile(v, q)) for o, v in order_partials(dE, targets).items()}


def bit_callbacks(
    model, data, layout, targets: OrderTargets, E0, emb: str = "E", null=None
) -> dict:
    r"""Callbacks logging the staircase of the gated-parity-bit task, per instance (K,).

    * ``R{o}``: the partial :math:`R_{\cos}` of order ``o`` on the anchors' increment;
    * with ``null`` (a :class:`lib.measure.nulls.PermutationNull` of ``targets``), ``null{o}``:
      ``(K, n_perm)``, the same reading against each label-permuted signature;
    * ``loss``-like curves on the whole of ``data``: ``loss_all`` (cross-entropy), ``acc``,
      and for each bit ``j`` the **sign-bit loss**
      :math:`-\log\frac{p(y)}{p(y)+p(y')}`, with :math:`y'` the label with bit ``j``
      flipped: ``ln 2`` while the bit is unknown, 0 once it is learned. Each plateau of the
      staircase is a stretch where one sign-bit loss sits at ``ln 2``.
    """
    E0 = E0.detach().clone()
    tok = list(targets.tokens)
    X, y = data.X.to(E0.device), data.y.to(E0.device)  # (N, L) shared or (K, N, L)
    # Bit j of a label is read off the label itself (its block), so the flip stays in the
    # label space even when the labels are shuffled (the negative control).
    flips = {}
    for j in (1, 2) if layout.bit2 is not None else (1,):
        shift = layout.block * 2 ** (j - 1)
        flips[j] = torch.where((y // shift) % 2 == 0, y + shift, y - shift)

    def measure(step, params):
        dE = increment(params[emb], E0, tok, subtract_mean_row=True)
        v = {f"R{o}": r for o, r in order_partials(dE, targets).items()}
        if null is not None:
            v.update({f"null{o}": r for o, r in null(dE).items()})
        lp = torch.log_softmax(model.forward(params, X).double(), -1)  # (K, N, n)
        at = lambda labels: lp.gather(-1, labels.expand(lp.shape[:-1])[..., None])[..., 0]
        ly = at(y)
        v["loss_all"] = -ly.mean(-1)
        v["acc"] = (lp.argmax(-1) == y).double().mean(-1)
        for j, yf in flips.items():
            two = torch.logaddexp(ly, at(yf))
            v[f"bit{j}"] = -(ly - two).mean(-1)
        return v

    names = [f"R{o}" for o in targets.orders] + ["loss_all", "acc"]
    names += [f"bit{j}" for j in flips] + ([f"null{o}" for o in null.orders] if null else [])
    return cached_callbacks(measure, names)


def raw_alignment_callbacks(targets: OrderTargets, emb: str = "E") -> dict:
    """Callbacks ``rawR{o}``: each order's partial R on the tracked rows of E itself.

    The increment (:func:`increment`) moves along the order-0 signature from the first
    step, so its ``R0`` is high at once; the rows themselves, ``E(t)`` with the mean row
    removed, align only as the increment outgrows the random init. Both sides centred the
    same way. Per instance ``(K,)``.
    """
    tok = list(targets.tokens)

    def measure(step, params):
        rows = params[emb][:, tok].double()
        R = order_partials(rows - rows.mean(-2, keepdim=True), targets)
        return {f"rawR{o}": R[o] for o in targets.orders}

    return cached_callbacks(measure, [f"rawR{o}" for o in targets.orders])


def leading_term_callback(model, data, tokens, c1: float):
    r"""A callback: per instance, the smallest cosine over ``tokens`` between the embedding's
    negative gradient and the Emb-MLP's leading-order term
    :math:`c_1 r_s(\phi^y_s-u)W_2^\top W_1^\top` at the *current* weights (Chapter 2).
    """
    from ..data.signatures import label_signature, token_rate
    from ..training.engine import cross_entropy

    tok = list(tokens)
    V, n = data.vocab_size, data.n_labels
    r_s = token_rate(data.X, V)[tok]
    phi_u = label_signature(data.X, data.y, V, n)[tok] - 1.0 / n

    def lead(step, params):
        X, y = data.X.to(params["E"].device), data.y.to(params["E"].device)
        with torch.enable_grad():
            q = {k: v.detach().requires_grad_(True) for k, v in params.items()}
            (gE,) = torch.autograd.grad(cross_entropy(model.forward(q, X), y).sum(), [q["E"]])
        W1, W2 = params["W1"].double(), params["W2"].double()
        phi = phi_u.to(W1.device, torch.float64)
        pred = c1 * r_s.to(W1.device)[None, :, None] * torch.einsum("tn,khn,kdh->ktd", phi, W2, W1)
        return (
            torch.nn.functional.cosine_similarity(-gE[:, tok].double(), pred, dim=-1).min(1).values
        )

    return lead


def escape_steps(steps, bit_loss, frac: float = 0.5):
    """Per instance, the first logged step at which a sign-bit loss falls below ``frac * ln 2``.

    ``bit_loss`` is ``(n_logs, K)``; returns ``(K,)`` floats, ``inf`` where it never does.
    """
    v = np.asarray(bit_loss, dtype=float)
    hit = v < frac * np.log(2)
    first = hit.argmax(0)
    return np.where(hit.any(0), np.asarray(steps, dtype=float)[first], np.inf)


def stair_onsets(steps, curve, floor: float, frac: float = 0.5):
    """Onset of a stair per instance: first step at which the partial R reaches
    ``max(frac * its maximum, floor)``; ``inf`` where it never exceeds ``floor``.

    Same rule as :func:`lib.measure.metrics.relative_onset`, with ``inf`` (not NaN) for a stair that never
    comes, so that ``onset0 < onset1`` fails when order 1 never rises.
    """
    on, _ = M.relative_onset(steps, curve, frac=frac, floor=floor)
    return np.where(np.isnan(on), np.inf, on)


def staircase_climbs(onsets_by_order) -> bool:
    """The staircase check: every onset finite and strictly increasing with the order.

    ``onsets_by_order`` is a list (order 0, 1, ...) of per-instance onset arrays. False if
    any stair never comes (``inf``) or comes out of order, in any instance.
    """
    on = np.stack([np.asarray(o, dtype=float) for o in onsets_by_order])
    return bool(np.isfinite(on).all() and np.all(np.diff(on, axis=0) > 0))


def train_bits(
    model,
    data,
    layout,
    targets: OrderTargets,
    seeds: Sequence[int],
    gammas: Sequence[float],
    steps: int,
    device="cpu",
    zero_frozen: Sequence[str] = (),
    perturb_init: float = 0.0,
    threads: int | None = None,
    probes: bool = False,
    copies: int = 1,
    copy_rel: float = 1e-6,
    null=None,
    fit_data=None,
    params_out: dict | None = None,
    **train_kwargs,
) -> tuple[History, np.ndarray, np.ndarray]:
    """One batched run of the gated-parity-bit task over every (gamma, seed) pair.

    Instances are gamma-major (seed, then copy, fastest). With ``copies > 1`` each seed is
    an ensemble: copy 0 is the seed's own init, and every other copy multiplies it by
    ``1 + copy_rel * z`` (:func:`copy_params`): a verdict's odds under rounding-sized
    changes are read off the copies (:mod:`lib.measure.rates`). ``null`` (a
    :class:`lib.measure.nulls.PermutationNull`) logs the permutation null of every order.
    ``fit_data`` (an ``(X, target)`` pair, with its ``loss_fn``) is what the run trains on
    instead of ``(data.X, data.y)``, e.g. :func:`lib.data.tasks.label_distributions` with
    :func:`lib.training.engine.soft_cross_entropy`; the callbacks still read ``data``. ``params_out``
    (a dict) receives the trained weights. Weights named in
    ``zero_frozen`` are set to zero and not trained (e.g. ``("P",)``: an attention model
    without position embeddings). ``perturb_init`` multiplies every initial weight by
    ``1 + perturb_init * z`` (:func:`lib.training.init.perturb`, seed 1): the rerun of the stability
    checks; ``threads`` runs it on that many CPU threads (:func:`lib.env.cpu_threads`), the
    other rerun. ``probes`` adds the callbacks of :func:`lib.measure.probes.bit_probe_callbacks`
    (an attention model: where bit 1 lives). The callbacks of :func:`bit_callbacks` are added;
    other keyword arguments go to :func:`lib.training.engine.train`. Returns
    ``(history, gamma_k, seed_k)``.
    """
    sweep = _gamma_seed_sweep(seeds, gammas, "train_bits", copies)
    gamma_k, seed_k = np.array(sweep["gamma"]), np.array(sweep["seed"])
    params = copy_params(model, sweep, copy_rel, device=device)
    if perturb_init:
        params = perturb(params, perturb_init, seed=1)
    with torch.no_grad():
        for name in zero_frozen:
            params[name].zero_()
    callbacks = dict(train_kwargs.pop("callbacks", None) or {})
    callbacks.update(bit_callbacks(model, data, layout, targets, params["E"], null=null))
    if probes:
        from .probes import bit_probe_callbacks

        callbacks.update(bit_probe_callbacks(model, data, layout, targets, params))
    frozen = tuple(train_kwargs.pop("frozen", ())) + tuple(zero_frozen)
    X, y = (data.X, data.y) if fit_data is None else fit_data
    X, y = X.to(device), y.to(device)
    with cpu_threads(threads):
        history = train(
            model, params, (X, y), steps, callbacks=callbacks, frozen=frozen, **train_kwargs
        )
    if params_out is not None:
        params_out.update({n: p.detach() for n, p in params.items()})
    return history, gamma_k, seed_k


def plateau_mask(steps, bit_loss, after, level: float = 0.9):
    """The plateau of a bit, per instance: logged steps after ``after[k]`` (the previous
    stair's onset) and before the escape (:func:`escape_steps`) at which the bit's
    sign-bit loss is still at least ``level * ln 2``. Returns a boolean ``(n_logs, K)``.
    """
    steps = np.asarray(steps, dtype=float)[:, None]
    v = np.asarray(bit_loss, dtype=float)
    esc = escape_steps(steps[:, 0], v)
    return (
        (steps > np.asarray(after, dtype=float)[None])
        & (steps < esc[None])
        & (v >= level * np.log(2))
    )


def plateau_and_fall(steps, bit_loss, after, level: float = 0.9, frac: float = 0.5):
    """How long a sign-bit loss sits on its plateau, and how long it takes to fall off it.

    Per instance, in steps (linear time): ``wait`` from ``after[k]`` (the previous stair's
    onset) to the last logged step before the escape (:func:`escape_steps`, loss below
    ``frac * ln 2``) at which the loss is still at least ``level * ln 2``; ``fall`` from there
    to the escape. A plateau is a wait at least as long as the fall; a smooth decay from
    ``ln 2`` has a short wait and a long fall. Returns ``(wait, fall)``, NaN where the loss
    never escapes or never sits at the level after ``after``.
    """
    steps = np.asarray(steps, dtype=float)
    v = np.asarray(bit_loss, dtype=float)
    esc = escape_steps(steps, v, frac)
    after = np.asarray(after, dtype=float)
    wait, fall = np.full(v.shape[1], np.nan), np.full(v.shape[1], np.nan)
    for k in range(v.shape[1]):
        on = (steps >= after[k]) & (steps < esc[k]) & (v[:, k] >= level * np.log(2))
        if np.isfinite(esc[k]) and on.any():
            t_exit = steps[on].max()
            wait[k], fall[k] = t_exit - after[k], esc[k] - t_exit
    return wait, fall


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
    """One batched run of :func:`train_bits`, labelled: read back by gamma, not by index.

    Attributes:
        history: the run's :class:`lib.training.engine.History` (instances gamma-major).
        sweep: its :class:`lib.training.sweep.Sweep` over ``gamma`` and ``seed`` (and ``copy``, for
            an ensemble run: the arrays of :meth:`arm` then hold every (seed, copy)
            instance, seed-major, and :meth:`per_seed` folds them back).
        targets: the :class:`OrderTargets` it was measured against.
        floor: ``{order: floor}``, the permutation floor (:func:`lib.measure.nulls.floor_of`) or a
            Gaussian one (:func:`order_noise_floor`).
        params: the trained weights of every instance (set by :func:`run_bits`).
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
            o: M.relative_onset(steps, m[f"R{o}"], floor=self.floor[o])[1]
            for o in self.targets.orders
        }

    def stairs(self, gamma: float, levels: dict | None = None) -> Stairs:
        """Onsets, escapes and plateaus of the arm at ``gamma``, every seed.

        ``levels`` (``{order: (seeds,)}``, e.g. another run's :meth:`onset_levels`) puts the
        onsets where R first reaches those levels, instead of half this run's own maximum:
        a rerun read against its base run's levels is read like with like, and needs only
        the steps up to its base run's last event (:func:`rerun_horizon`).
        """
        steps, m = self.arm(gamma)
        orders = self.targets.orders
        if levels is None:
            on = {o: stair_onsets(steps, m[f"R{o}"], self.floor[o]) for o in orders}
        else:
            at = lambda o: [  # the first step at each level, as relative_onset reads it
                float(M.onset_step(steps, m[f"R{o}"][:, k], float(v)))
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


def run_bits(model, data, layout, targets: OrderTargets, seeds, gammas, steps, floor=None, **kw):
    """:func:`train_bits` over every (gamma, seed), returned as a labelled :class:`BitRun`.

    The arguments are those of :func:`train_bits`, and ``floor`` (a dict), the floor the
    run's stairs are read against. With ``null`` (a :class:`lib.measure.nulls.PermutationNull`)
    and no ``floor``, the floor is the run's own permutation floor
    (:func:`lib.measure.nulls.floor_of` at ``null_q``, default 0.95, over every instance of the
    run). Every other keyword argument goes to :func:`train_bits`.
    """
    q = kw.pop("null_q", 0.95)
    if (floor is None) == (kw.get("null") is None):
        raise ValueError("run_bits needs a floor or a null (a PermutationNull), not both")
    params: dict = {}
    history, _, _ = train_bits(
        model, data, layout, targets, seeds, gammas, steps, params_out=params, **kw
    )
    if floor is None:
        floor = {o: floor_of(history[f"null{o}"], q) for o in targets.orders}
    sweep = _gamma_seed_sweep(seeds, gammas, "run_bits", kw.get("copies", 1))
    return BitRun(history, sweep, targets, floor, params)


def rerun_horizon(steps, base: Stairs, tol: int) -> int:
    """The last step a stability rerun of ``base`` (logged on ``steps``) has to train for.

    A rerun event more than ``tol`` logged steps after the base run's last event fails the
    check (:func:`stability`) wherever it falls, so the rerun may stop ``tol`` logged steps
    after that event: an event it then never reaches reads ``inf``, which is more than
    ``tol`` logged steps away too. Where the base run misses an event (``inf``), the rerun
    runs to the end: a late event there would otherwise go unseen. Read the truncated rerun
    against the base run's onset levels (:meth:`BitRun.stairs`), not its own maximum.
    """
    steps = np.asarray(steps)
    events = np.concatenate([*base.onsets.values(), *base.escapes.values()]).astype(float)
    if not np.isfinite(events).all():
        return int(steps[-1])
    last = int(np.searchsorted(steps, events.max()))
    return int(steps[min(last + tol, len(steps) - 1)])


def log_step_shift(steps, a, b) -> np.ndarray:
    """Per instance, how many logged steps apart two step readings are (``inf`` = never).

    ``a`` and ``b`` are steps of the grid ``steps`` (or ``inf``, read as one step past its
    end). Two readings that are both ``inf`` are 0 apart.
    """
    steps = np.asarray(steps, dtype=float)
    idx = lambda v: np.where(
        np.isfinite(v), np.searchsorted(steps, np.where(np.isfinite(v), v, 0.0)), len(steps)
    )
    return np.abs(idx(np.asarray(a, dtype=float)) - idx(np.asarray(b, dtype=float)))


def plateau_end(steps, mask) -> np.ndarray:
    """Per instance, the last logged step of a plateau (``mask``: ``(n_logs, K)`` bools, as in
    :attr:`Stairs.plateaus`); ``-inf`` where the instance has no plateau."""
    steps, mask = np.asarray(steps, dtype=float), np.asarray(mask, dtype=bool)
    last = np.where(mask.any(0), len(steps) - 1 - np.argmax(mask[::-1], 0), -1)
    return np.where(last >= 0, steps[np.maximum(last, 0)], -np.inf)


def across_reruns(outs, tol: int) -> dict:
    """Several :func:`stability` readings of one run (one per rerun), combined per seed.

    Returns ``{"decided": ..., "timing_ok": ..., "max_shift": ...}``, each ``(seeds,)``:
    the verdict is the same in every rerun (else the seed is undecided: not a result), every
    onset and escape stays within ``tol`` logged steps in every rerun, and the largest shift.
    """
    return {
        "decided": np.logical_and.reduce([o["same_verdict"] for o in outs]),
        "timing_ok": np.logical_and.reduce([o["shift"] <= tol for o in outs]),
        "max_shift": np.max([o["shift"] for o in outs], 0),
    }


def rerun_divergence(base_steps, base, other_steps, other, until) -> np.ndarray:
    """Per instance, how far a rerun's logged curve has drifted from its base run's.

    ``base`` and ``other`` are ``(n_logs, K)`` curves (e.g. the full-data loss) logged on
    ``base_steps`` and ``other_steps`` (a rerun cut at its horizon logs a prefix of its base
    run's steps). Returns ``(K,)``: the largest ``|other - base| / |base|`` over the steps
    both logged, up to ``until[k]`` (``inf``: all of them). A copy gives 0.
    """
    common, ib, io = np.intersect1d(np.asarray(base_steps), np.asarray(other_steps),
                                    return_indices=True)  # fmt: skip
    b, o = np.asarray(base, dtype=float)[ib], np.asarray(other, dtype=float)[io]
    rel = np.abs(o - b) / np.maximum(np.abs(b), np.finfo(float).tiny)
    upto = common[:, None] <= np.asarray(until, dtype=float)[None]
    return np.where(upto, rel, 0.0).max(0)


def stability(steps, base: Stairs, other: Stairs, tol: int = 2) -> dict:
    """Does a rerun (perturbed init, other thread count) read the same stairs as ``base``?

    Per seed: the largest shift, in logged steps (:func:`log_step_shift`), of any onset or
    escape, and whether the staircase verdict (:meth:`Stairs.climbs_per_seed`) is the same.
    Returns ``{"shift": (seeds,) ints, "same_verdict": (seeds,) bools, "holds": (seeds,)
    bools}``, ``holds`` where the shift is at most ``tol`` and the verdict is the same.
    """
    shifts = [log_step_shift(steps, base.onsets[o], other.onsets[o]) for o in base.onsets]
    shifts += [log_step_shift(steps, base.escapes[b], other.escapes[b]) for b in base.escapes]
    shift = np.max(np.stack(shifts), 0)
    same = np.array(base.climbs_per_seed()) == np.array(other.climbs_per_seed())
    return {"shift": shift, "same_verdict": same, "holds": (shift <= tol) & same}

r"""Measuring the context staircase during training (Chapter 2; the claim is ``contextstaircase``).

The staircase is read off the *increment* of the embedding table,

.. math:: \Delta E_s(t) = E_s(t) - E_s(0),\qquad
          \Delta\bar E_s = \Delta E_s - \tfrac{1}{|T|}\textstyle\sum_{s'\in T}\Delta E_{s'},

over a tracked token set :math:`T`: under small initialization :math:`E(0)` is noise
that dominates a raw cosine, and the mean row is a direction every token shares
(the label marginal's), which says nothing about which tokens are alike. On
:math:`\Delta\bar E` we log, at every logging step of :func:`lib.engine.train`:

* ``R0``, ``R1``: :math:`R_{\cos}(\Delta\bar E, \phi^{(0)})` and
  :math:`R_{\cos}(\Delta\bar E, \phi^{(1)})` (:func:`lib.metrics.r_cos`);
* ``R0_1``, ``R1_0``: the partial correlations :math:`R_{0\cdot1}`, :math:`R_{1\cdot0}`
  (one order controlling for the other, :func:`lib.metrics.r_cos_partial`);
* ``erank``: the effective rank of :math:`\Delta\bar E` (a rank-one increment makes
  every cosine :math:`\pm1`, and R then measures a sign pattern);
* ``shared0_cos``: :math:`\cos(\Delta E_s,\Delta E_t)` for each pair of tracked tokens
  whose order-0 signatures are identical (no mean-row subtraction: for a pair the
  question is whether the two tokens moved the same way);
* ``S_emb``: the full :math:`|T|\times|T|` cosine matrix of :math:`\Delta\bar E`, for
  heatmaps at any logged step.

The targets are a :class:`StairTargets`: the order-0 signature (the label signature,
centred on :math:`u`) and an order-1 signature of every tracked token. For order 1
we use the *interaction* :math:`\phi^{X|y}_s(\mu,\nu)-\phi^X_s(\mu)\phi^y_s(\nu)`
(:func:`lib.signatures.joint_interaction`) restricted to a set of context tokens
:math:`\mu` — what order 1 adds beyond order 0 (Chapter 1).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from . import metrics as M
from . import signatures as sig
from .engine import History, train
from .models import build
from .sweep import Sweep

__all__ = [
    "StairTargets",
    "stair_targets",
    "t3_targets",
    "increment",
    "stair_callbacks",
    "null_r_level",
    "onset_steps",
    "t3_accuracy_callbacks",
    "train_staircase",
    "OrderTargets",
    "order_targets",
    "parity_targets",
    "order_partials",
    "order_noise_floor",
    "bit_callbacks",
    "escape_steps",
    "stair_onsets",
    "staircase_climbs",
    "train_bits",
    "plateau_mask",
]


@dataclass(frozen=True)
class StairTargets:
    """The signatures a staircase is measured against, for tracked tokens ``tokens``.

    Attributes:
        tokens: tracked token ids (rows of the embedding table), length T.
        names: a short label per tracked token (for heatmaps).
        phi0: (T, n_labels) order-0 label signatures, centred on u.
        phi1: (T, C * n_labels) order-1 interaction signatures over the C context tokens.
        S0, S1: (T, T) cosine similarity matrices of phi0 and phi1.
        shared0: index pairs (i, j), i < j, into ``tokens`` whose order-0 signatures are
            identical (cosine 1 to ``tol``).
    """

    tokens: tuple[int, ...]
    names: tuple[str, ...]
    phi0: torch.Tensor
    phi1: torch.Tensor
    S0: torch.Tensor
    S1: torch.Tensor
    shared0: tuple[tuple[int, int], ...]

    @property
    def order_corr(self) -> float:
        """Pearson correlation of the upper triangles of S0 and S1: how much the orders agree."""
        a, b = M.upper_triangle(self.S0), M.upper_triangle(self.S1)
        return float(np.corrcoef(a.numpy(), b.numpy())[0, 1])


def stair_targets(
    X,
    y,
    vocab_size: int,
    n_labels: int,
    tokens: Sequence[int],
    context: Sequence[int],
    names: Sequence[str] | None = None,
    tol: float = 1e-9,
) -> StairTargets:
    r"""Order-0 and order-1 targets of ``tokens`` on the data ``(X, y)``.

    ``phi0[s] = phi^y_s - u``; ``phi1[s] = (phi^{X|y}_s(mu, .) - phi^X_s(mu) phi^y_s)``
    for ``mu in context``, flattened. Pairs with identical order-0 signatures are found
    by their cosine (``> 1 - tol``), so they are exact identities of the data, not a list
    typed in.
    """
    tokens = [int(t) for t in tokens]
    context = [int(c) for c in context]
    if len(tokens) < 3:
        raise ValueError(f"need at least 3 tracked tokens for a correlation, got {len(tokens)}")
    if not context:
        raise ValueError("context must name at least one context token")
    names = [str(t) for t in tokens] if names is None else [str(n) for n in names]
    if len(names) != len(tokens):
        raise ValueError(f"{len(names)} names for {len(tokens)} tokens")
    phi0 = sig.centre(sig.label_signature(X, y, vocab_size, n_labels), "uniform")[tokens]
    if not torch.isfinite(phi0).all():
        raise ValueError("a tracked token never occurs in the data (its signature is NaN)")
    inter = sig.joint_interaction(X, y, vocab_size, n_labels, tokens=tokens)
    phi1 = inter[:, context].flatten(1)
    S0 = M.cosine_similarity_matrix(phi0)
    S1 = M.cosine_similarity_matrix(phi1)
    i, j = torch.triu_indices(len(tokens), len(tokens), offset=1)
    same = S0[i, j] > 1 - tol
    shared0 = tuple((int(a), int(b)) for a, b in zip(i[same], j[same], strict=True))
    return StairTargets(tuple(tokens), tuple(names), phi0, phi1, S0, S1, shared0)


def t3_targets(data) -> StairTargets:
    """Targets on T3 (:func:`lib.tasks.gated_addition`): anchors 1..12 and the two gates.

    Order 1 is the interaction with the anchor and gate context: an anchor's
    interaction with the gates carries its parity, a gate's interaction with the
    anchors its identity; every other entry is zero (Chapter 1).
    """
    anchors, gates = list(data.groups["anchors"]), list(data.groups["gates"])
    return stair_targets(
        data.X,
        data.y,
        data.vocab_size,
        data.n_labels,
        tokens=anchors + gates,
        context=anchors + gates,
        names=[str(a) for a in anchors] + ["g+", "g-"],
    )


def increment(E, E0, tokens: Sequence[int], subtract_mean_row: bool = True) -> torch.Tensor:
    r"""The increment :math:`\Delta E = E - E_0` on the tracked rows, optionally minus its mean row.

    ``E``, ``E0`` are ``(K, V, d)`` (or ``(V, d)``); returns ``(K, T, d)`` in float64.
    """
    E, E0 = M._t(E), M._t(E0)
    if E.shape != E0.shape:
        raise ValueError(f"E has shape {tuple(E.shape)} but E0 has {tuple(E0.shape)}")
    idx = torch.as_tensor(list(tokens), dtype=torch.long, device=E.device)
    dE = (E - E0.to(E.device))[..., idx, :]
    if subtract_mean_row:
        dE = dE - dE.mean(-2, keepdim=True)
    return dE


def stair_callbacks(
    targets: StairTargets, E0: torch.Tensor, emb: str = "E"
) -> dict[str, Callable[[int, dict], torch.Tensor]]:
    """Callbacks for :func:`lib.engine.train` that log the staircase of ``params[emb]``.

    ``E0`` is the (K, V, d) embedding at step 0 (pass ``params["E"].detach().clone()``
    before training). Returns name -> ``fn(step, params)`` with outputs of shape (K,)
    for ``R0, R1, R0_1, R1_0, erank``, (K, n_pairs) for ``shared0_cos`` and (K, T, T)
    for ``S_emb``. At step 0 the increment is zero and the R's are NaN.
    """
    E0 = E0.detach().clone()
    tok = list(targets.tokens)
    pairs = torch.as_tensor(targets.shared0 or [(0, 0)], dtype=torch.long).reshape(-1, 2)
    cache: dict = {}

    def dE(step, params):
        # The callbacks of one logging step share one increment.
        if cache.get("step") != step:
            cache["step"] = step
            cache["dE"] = increment(params[emb], E0, tok, subtract_mean_row=True)
            cache["raw"] = increment(params[emb], E0, tok, subtract_mean_row=False)
        return cache["dE"]

    def r(phi):
        return lambda step, p: M.r_cos(dE(step, p), phi, subtract_mean_row=False)

    def r_partial(phi, control):
        return lambda step, p: M.r_cos_partial(dE(step, p), phi, control, subtract_mean_row=False)

    def shared0_cos(step, p):
        dE(step, p)
        S = M.cosine_similarity_matrix(cache["raw"])
        return S[..., pairs[:, 0], pairs[:, 1]]

    cbs = {
        "R0": r(targets.phi0),
        "R1": r(targets.phi1),
        "R0_1": r_partial(targets.phi0, targets.phi1),
        "R1_0": r_partial(targets.phi1, targets.phi0),
        "erank": lambda step, p: M.effective_rank(dE(step, p)),
        "S_emb": lambda step, p: M.cosine_similarity_matrix(dE(step, p)),
    }
    if targets.shared0:
        cbs["shared0_cos"] = shared0_cos
    return cbs


def null_r_level(targets: StairTargets, d: int, n: int = 2000, q: float = 0.95, seed: int = 0):
    """The ``q`` quantile of R_cos between random Gaussian increments and each target.

    A measured noise floor for onsets: R of an increment with no structure at all.
    Returns ``{"R0": ..., "R1": ..., "R0_1": ..., "R1_0": ...}`` (floats).
    """
    if not 0 < q < 1:
        raise ValueError(f"q must be in (0, 1), got {q}")
    g = torch.Generator().manual_seed(seed)
    dE = torch.randn(n, len(targets.tokens), d, generator=g, dtype=torch.float64)
    dE = dE - dE.mean(-2, keepdim=True)
    vals = {
        "R0": M.r_cos(dE, targets.phi0, subtract_mean_row=False),
        "R1": M.r_cos(dE, targets.phi1, subtract_mean_row=False),
        "R0_1": M.r_cos_partial(dE, targets.phi0, targets.phi1, subtract_mean_row=False),
        "R1_0": M.r_cos_partial(dE, targets.phi1, targets.phi0, subtract_mean_row=False),
    }
    return {k: float(torch.quantile(v, q)) for k, v in vals.items()}


def onset_steps(steps, curves, frac: float = 0.5, floor: float = 0.0):
    """Onset of a stair, per instance: the first logged step at which the curve reaches
    ``max(frac * (its own maximum over the run), floor)``.

    ``curves`` is ``(n_logs, K)``; NaN entries (e.g. step 0) are ignored. The threshold is
    relative to what each instance's curve measures, so it needs no constant tuned to a
    run; ``floor`` (e.g. :func:`null_r_level`) keeps a curve that never rises above noise
    from getting an onset at all. Returns ``(onset (K,), threshold (K,))`` as numpy arrays;
    onset is NaN where the curve never reaches the threshold.
    """
    if not 0 < frac <= 1:
        raise ValueError(f"frac must be in (0, 1], got {frac}")
    curves = np.asarray(curves, dtype=float)
    if curves.ndim == 1:
        curves = curves[:, None]
    peak = np.nanmax(np.where(np.isnan(curves), -np.inf, curves), axis=0)
    thr = np.maximum(frac * peak, floor)
    onset = np.full(curves.shape[1], np.nan)
    for k in range(curves.shape[1]):  # K is a handful of instances
        if peak[k] > floor:
            onset[k] = float(M.onset_step(steps, curves[:, k], float(thr[k])))
    return onset, thr


def t3_accuracy_callbacks(model, data) -> dict[str, Callable]:
    r"""Accuracy and loss on T3 split by what a prediction needs (place the stairs on the loss).

    The label is ``y = z + s m`` (key ``z`` in position 0, magnitude ``m``, sign ``s``).
    Logged per instance, shape (K,), on the whole of ``data``:

    * ``loss_all``: the cross-entropy on all of ``data`` (the engine's ``loss`` is the
      minibatch's);
    * ``acc``: exact accuracy;
    * ``acc_mag``: the prediction is ``z + m`` or ``z - m``: key and magnitude (the
      order-0 information of the anchor) are right, whatever the sign;
    * ``acc_sign``: exact accuracy among the sequences whose magnitude is right;
    * ``loss_sign``: the cross-entropy of the two-way choice between ``z + m`` and
      ``z - m``, :math:`-\log p(y)/(p(z+m)+p(z-m))`; it is ``ln 2`` while the sign
      (the order-1 information) is unknown and 0 once it is learned.
    """
    X, y = data.X, data.y
    rows = torch.arange(len(y), device=y.device)
    m = (y - X[:, 0]).abs()
    plus, minus = X[:, 0] + m, X[:, 0] - m
    state: dict = {"step": None}

    def measure(step, params):
        if state["step"] != step:
            state["step"] = step
            logits = model.forward(params, X)
            pred = logits.argmax(-1)
            lp = torch.log_softmax(logits.double(), -1)
            two = torch.logsumexp(torch.stack([lp[:, rows, plus], lp[:, rows, minus]]), 0)
            exact = (pred == y).double()
            mag = ((pred == plus) | (pred == minus)).double()
            state["v"] = {
                "loss_all": -lp[:, rows, y].mean(-1),
                "acc": exact.mean(-1),
                "acc_mag": mag.mean(-1),
                "acc_sign": exact.sum(-1) / mag.sum(-1).clamp_min(1),
                "loss_sign": -(lp[:, rows, y] - two).mean(-1),
            }
        return state["v"]

    return {
        k: (lambda step, p, k=k: measure(step, p)[k])
        for k in ("loss_all", "acc", "acc_mag", "acc_sign", "loss_sign")
    }


def _gamma_seed_grid(seeds, gammas, who: str) -> tuple[np.ndarray, np.ndarray]:
    """Per-instance (gamma, seed) of the gamma-major grid: a :class:`lib.sweep.Sweep`."""
    if len(seeds) == 0 or len(gammas) == 0:
        raise ValueError(f"{who} needs at least one seed and one gamma")
    sw = Sweep(gamma=[float(g) for g in gammas], seed=[int(s) for s in seeds])
    return np.array(sw["gamma"]), np.array(sw["seed"])


def train_staircase(
    model,
    data,
    targets: StairTargets,
    seeds: Sequence[int],
    gammas: Sequence[float],
    steps: int,
    device="cpu",
    **train_kwargs,
) -> tuple[History, np.ndarray, np.ndarray]:
    """One batched run over every (gamma, seed) pair, logging the staircase.

    Instances are ordered gamma-major: instance ``k`` has ``gamma_k[k]`` and ``seed_k[k]``
    (so ``History[name].reshape(n_logs, len(gammas), len(seeds), ...)`` splits them).
    The staircase callbacks (:func:`stair_callbacks`) are added to ``callbacks``, and the
    T3 accuracy callbacks when ``data`` is a T3 split (it has ``gates``). Other keyword
    arguments go to :func:`lib.engine.train`. Returns ``(history, gamma_k, seed_k)``.
    """
    gamma_k, seed_k = _gamma_seed_grid(seeds, gammas, "train_staircase")
    params = build(model, seed_k.tolist(), gamma=gamma_k.tolist(), device=device)
    callbacks = dict(train_kwargs.pop("callbacks", None) or {})
    callbacks.update(stair_callbacks(targets, params["E"]))
    if "gates" in data.groups:
        callbacks.update(t3_accuracy_callbacks(model, data))
    X, y = data.X.to(device), data.y.to(device)
    history = train(model, params, (X, y), steps, callbacks=callbacks, **train_kwargs)
    return history, gamma_k, seed_k


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
      order 0; :func:`lib.signatures.joint_interaction` restricted to the gates);
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
    """:func:`order_targets` of the anchors of :func:`lib.tasks.gated_parity_bits`."""
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
    g = torch.Generator().manual_seed(seed)
    dE = torch.randn(n, len(targets.tokens), d, generator=g, dtype=torch.float64)
    dE = dE - dE.mean(-2, keepdim=True)
    return {o: float(torch.quantile(v, q)) for o, v in order_partials(dE, targets).items()}


def bit_callbacks(model, data, layout, targets: OrderTargets, E0, emb: str = "E") -> dict:
    r"""Callbacks logging the staircase of the gated-parity-bit task, per instance (K,).

    * ``R{o}``: the partial :math:`R_{\cos}` of order ``o`` on the anchors' increment;
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
    state: dict = {"step": None}

    def measure(step, params):
        if state["step"] != step:
            state["step"] = step
            dE = increment(params[emb], E0, tok, subtract_mean_row=True)
            v = {f"R{o}": r for o, r in order_partials(dE, targets).items()}
            lp = torch.log_softmax(model.forward(params, X).double(), -1)  # (K, N, n)
            at = lambda labels: lp.gather(-1, labels.expand(lp.shape[:-1])[..., None])[..., 0]
            ly = at(y)
            v["loss_all"] = -ly.mean(-1)
            v["acc"] = (lp.argmax(-1) == y).double().mean(-1)
            for j, yf in flips.items():
                two = torch.logaddexp(ly, at(yf))
                v[f"bit{j}"] = -(ly - two).mean(-1)
            state["v"] = v
        return state["v"]

    names = [f"R{o}" for o in targets.orders] + ["loss_all", "acc"]
    names += [f"bit{j}" for j in flips]
    return {n: (lambda step, p, n=n: measure(step, p)[n]) for n in names}


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

    Same rule as :func:`onset_steps`, with ``inf`` (not NaN) for a stair that never
    comes, so that ``onset0 < onset1`` fails when order 1 never rises.
    """
    on, _ = onset_steps(steps, curve, frac=frac, floor=floor)
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
    **train_kwargs,
) -> tuple[History, np.ndarray, np.ndarray]:
    """One batched run of the gated-parity-bit task over every (gamma, seed) pair.

    Instances are gamma-major, as in :func:`train_staircase`. Weights named in
    ``zero_frozen`` are set to zero and not trained (e.g. ``("P",)``: an attention model
    without position embeddings). The callbacks of :func:`bit_callbacks` are added;
    other keyword arguments go to :func:`lib.engine.train`. Returns
    ``(history, gamma_k, seed_k)``.
    """
    gamma_k, seed_k = _gamma_seed_grid(seeds, gammas, "train_bits")
    params = build(model, seed_k.tolist(), gamma=gamma_k.tolist(), device=device)
    with torch.no_grad():
        for name in zero_frozen:
            params[name].zero_()
    callbacks = dict(train_kwargs.pop("callbacks", None) or {})
    callbacks.update(bit_callbacks(model, data, layout, targets, params["E"]))
    frozen = tuple(train_kwargs.pop("frozen", ())) + tuple(zero_frozen)
    X, y = data.X.to(device), data.y.to(device)
    history = train(
        model, params, (X, y), steps, callbacks=callbacks, frozen=frozen, **train_kwargs
    )
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

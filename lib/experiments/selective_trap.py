"""The distractor trap of the selective task (Chapter 12): where learned attention stalls.

Some seeds of the chapter's learned-QK model stop partway: the bit stays partly unknown
while the readout row keeps a share of its attention on the distractor key. Here
:func:`trap_sweep` runs a grid of cells (the QK/rest rate ratio ``r``, the QK init rate
``gamma_qk``, the number of keys ``n_keys``) over seeds as one batched run, and
:func:`trap_forces` reads the mechanism at a stuck point: the force of the loss on the
readout row's attention scores, split into the bit-blind part and the bit part, and the loss
change when the key's attention mass is handed to the gates.

Instances with fewer keys than the task train on their own sequences only: their targets
``P`` weigh the sequences of the other keys zero and are rescaled so that each instance's
loss is the mean over its own sequences (:func:`instance_targets`).
"""

from __future__ import annotations

import dataclasses
import time
import warnings
from collections.abc import Mapping, Sequence

import numpy as np
import torch

from ..data import tasks
from ..measure import onsets
from ..training import engine, models
from ..training.layers import embed, lin, per_instance_tokens
from . import ch12_attention_that_learns as ex

__all__ = [
    "CELL_KEYS",
    "instance_targets",
    "bit_flip",
    "trap_sweep",
    "trap_forces",
]

CELL_KEYS = ("r", "gamma_qk", "n_keys")
KEY, OTHER, GATE = ex.KEY, ex.OTHER, ex.GATE


def instance_targets(X: torch.Tensor, P: torch.Tensor, keys: Sequence[int], n_keys) -> torch.Tensor:
    """Per-instance targets (K, M, C): instance k keeps the sequences whose key is one of
    its first ``n_keys[k]`` keys, the others weigh zero, and the kept rows are rescaled by
    M / (number kept), so that :func:`lib.training.engine.soft_cross_entropy` is the mean
    over the instance's own sequences."""
    n_keys = [int(n) for n in n_keys]
    if any(n < 1 or n > len(keys) for n in n_keys):
        raise ValueError(f"n_keys must lie in 1..{len(keys)}, got {n_keys}")
    rank = torch.full((int(X.max()) + 1,), len(keys), dtype=torch.long)
    rank[torch.as_tensor(list(keys))] = torch.arange(len(keys))
    key_rank = rank[X[:, KEY]]  # (M,)
    keep = key_rank[None, :] < torch.tensor(n_keys)[:, None]  # (K, M)
    scale = X.shape[0] / keep.sum(1, keepdim=True)
    return P[None] * (keep * scale)[..., None].to(P.dtype)


def bit_flip(y: torch.Tensor, block: int) -> torch.Tensor:
    """The label with the bit flipped (the other block)."""
    return torch.where(y // block % 2 == 0, y + block, y - block)


def _pair_and_bit(logits: torch.Tensor, P: torch.Tensor, block: int):
    """Per sequence (K, M), with ``P`` normalized per row: the bit-blind loss
    ``-sum_y P(y) ln(p(y) + p(y'))`` and the sign-bit loss ``-sum_y P(y) ln(p(y) / (p(y) +
    p(y')))``; they add up to the cross-entropy against ``P``."""
    lp = torch.log_softmax(logits.double(), -1)
    C = lp.shape[-1]
    flip = bit_flip(torch.arange(C, device=lp.device), block)
    two = torch.logaddexp(lp, lp[..., flip])
    P = P.to(lp.dtype)
    P = P / P.sum(-1, keepdim=True).clamp_min(1e-300)
    return -(P * two).sum(-1), -(P * (lp - two)).sum(-1)


def _weights(P: torch.Tensor) -> torch.Tensor:
    """(K, M) weights of each instance's own sequences, each row summing to 1."""
    w = P.sum(-1)
    return w / w.sum(-1, keepdim=True)


def _logits_from_attention(mdl, params, Xk: torch.Tensor, A: torch.Tensor) -> torch.Tensor:
    """The one-layer readout (the model's fast path) with the readout row's attention ``A``
    (K, M, L) given: the logits with everything else fixed."""
    E, P = params["E"], params["P"]
    P_L = P[:, : Xk.shape[-1]]
    weights = torch.zeros(*Xk.shape[:-1], E.shape[1], dtype=A.dtype, device=A.device)
    mixed = lin(weights.scatter_add(2, Xk, A), E) + lin(A, P_L)
    h = embed(E, Xk[..., -1:])[:, :, 0] + P_L[:, None, -1] + mixed
    if mdl.d_mlp:
        h = h + lin(mdl._mlp_hidden(params, 0, h), params["W2_0"])
    return lin(h, params["U"])


def _readout(mdl, params, Xk):
    """The readout row's attention (K, M, L), the context part softmaxed, as the model has it."""
    P_L = params["P"][:, : Xk.shape[-1]]
    return mdl._readout_attention(params, Xk, P_L, Xk[..., -1:])


def _measure(mdl, X, P, block, gates):
    """The callbacks of a trap run (means over each instance's own sequences)."""
    w = _weights(P)
    Xk = None

    def measure(step, params):
        nonlocal Xk
        if Xk is None:
            Xk = per_instance_tokens(X, params["E"].shape[0])
        A = _readout(mdl, params, Xk).double()
        _, bit = _pair_and_bit(_logits_from_attention(mdl, params, Xk, A.float()), P, block)
        E = params["E"].double()
        return dict(
            bit1=(w * bit).sum(-1),
            A_key=(w * A[..., KEY]).sum(-1),
            contrast=(w * (A[..., GATE] - A[..., OTHER]).abs()).sum(-1),
            gate_diff=(E[:, gates[0]] - E[:, gates[1]]).norm(dim=-1),
        )

    return engine.cached_callbacks(measure, ["bit1", "A_key", "contrast", "gate_diff"])


def trap_sweep(
    cfg: ex.Config,
    seeds: Sequence[int],
    steps: int,
    cells: Sequence[Mapping],
    device: str = "cpu",
    trap_level: float = 0.1,
    n_logs: int = 40,
    snapshot_at: Sequence[int] = (),
) -> dict:
    """One batched run over ``cells`` x ``seeds`` (seed fastest), each cell a dict with
    ``r`` (eta_QK / eta_rest), ``gamma_qk`` (the QK init rate) and ``n_keys``.

    The task is built with the largest ``n_keys`` of the cells; an instance trains on the
    sequences of its own first ``n_keys`` keys (:func:`instance_targets`). Returns per
    instance (K,): ``cell`` (index into ``cells``), ``seed``, ``bit`` (final sign-bit loss
    / ln 2), ``key_mass`` (final attention of the readout row on the key), ``escape``
    (:func:`lib.measure.onsets.escape_steps`, inf: never), ``trapped``
    (:func:`lib.experiments.ch12_attention_that_learns.trapped_flag`, at ``trap_level``); and ``history`` (``bit1``, ``A_key``, ``contrast`` = mean
    |A_gate - A_other|, ``gate_diff`` = |E_g+ - E_g-|), ``params`` (final), ``snapshots``
    (step -> params at the logged steps ``snapshot_at``), ``model``, ``X``, ``P``,
    ``layout``, ``seconds`` (the run's wall time).
    """
    cells = [dict(c) for c in cells]
    for c in cells:
        if set(c) != set(CELL_KEYS):
            raise ValueError(f"a cell needs exactly {CELL_KEYS}, got {sorted(c)}")
    seeds = [int(s) for s in seeds]
    task = dataclasses.replace(cfg.task, n_keys=max(int(c["n_keys"]) for c in cells))
    cfg = dataclasses.replace(cfg, task=task)
    data, layout, _ = ex.task(cfg)
    X, P = tasks.label_distributions(data)
    mdl = ex.model(cfg, data)
    col = lambda name: [c[name] for c in cells for _ in seeds]
    Pk = instance_targets(X, P, layout.keys, col("n_keys")).to(device)
    X = X.to(device)
    params = models.build(
        mdl, seeds * len(cells), gamma=cfg.gamma, group_gamma={"qk": col("gamma_qk")}, device=device
    )
    log_at = engine.log_grid(steps, n_logs, extra=snapshot_at)
    snaps: dict = {}
    callbacks = _measure(mdl, X, Pk, layout.block, layout.gates)

    def snapshot(step, p):
        if step in snapshot_at:
            snaps[int(step)] = {n: v.detach().clone() for n, v in p.items()}
        return np.zeros(p["E"].shape[0])

    callbacks["snap"] = snapshot
    r = torch.tensor(col("r"), dtype=torch.float32, device=device)
    t0 = time.perf_counter()
    h = engine.train(
        mdl,
        params,
        (X, Pk),
        steps,
        optimizer="adam",
        lr=cfg.lr,
        group_lr={"qk": cfg.lr * r},
        log_at=log_at,
        callbacks=callbacks,
        loss_fn=engine.soft_cross_entropy,
        desc="trap",
    )
    seconds = time.perf_counter() - t0
    bit = h["bit1"][-1] / np.log(2)
    return dict(
        cell=np.repeat(np.arange(len(cells)), len(seeds)),
        seed=np.array(seeds * len(cells)),
        bit=bit,
        key_mass=h["A_key"][-1],
        escape=onsets.escape_steps(h.steps, h["bit1"]),
        trapped=ex.trapped_flag(h.steps, h["bit1"], trap_level),
        history=h,
        params=params,
        snapshots=snaps,
        model=mdl,
        X=X,
        P=Pk,
        layout=layout,
        seconds=seconds,
    )


def trap_forces(mdl, params: Mapping[str, torch.Tensor], X, P, layout) -> dict:
    """The mechanism at a stuck point, per instance, on the readout row.

    * ``force_total``, ``force_pair``, ``force_bit`` (K, 3): minus the gradient of the
      loss w.r.t. the scores of (key, other gate, counting gate), per sequence (mean over
      the instance's sequences), of the whole loss and of its bit-blind and sign-bit parts
      (:func:`_pair_and_bit`); positive: gradient descent raises that score. Each row sums
      to 0 (softmax).
    * ``move_total``, ``move_pair``, ``move_bit`` (K,): the loss change (per unit ln 2 for
      the bit) when the key's attention is handed to the two gates in proportion to their
      own, with everything else fixed (negative: the key's mass was in the way).
    * ``anchor_key`` and ``anchor_bit`` (K, n_anchors): per anchor, the key mass and the
      sign-bit loss / ln 2; ``anchor_rho`` (K,): their Spearman correlation over anchors;
      ``anchor_force_pair`` and ``anchor_force_bit`` (K, n_anchors): the force on the key's
      score per anchor (mean over its sequences).
    """
    from scipy import stats

    w = _weights(P)
    Xk = per_instance_tokens(X, params["E"].shape[0])
    p = {n: v.detach() for n, v in params.items()}
    with torch.no_grad():
        A0 = _readout(mdl, p, Xk).double()
    s = torch.log(A0[..., :-1].clamp_min(1e-300)).requires_grad_(True)
    A = torch.cat([torch.softmax(s, -1), A0[..., -1:]], -1)
    pair, bit = _pair_and_bit(_logits_from_attention(mdl, p, Xk, A.float()), P, layout.block)
    anchors = torch.as_tensor(layout.anchors, device=X.device)
    is_a = (X[:, -1][None, :] == anchors[:, None]).double()  # (n_anchors, M)
    wa = w[:, None, :] * is_a[None]  # (K, n_anchors, M)
    wa = wa / wa.sum(-1, keepdim=True).clamp_min(1e-300)
    out = {}
    for name, part in (("pair", pair), ("bit", bit)):
        (grad,) = torch.autograd.grad((w * part).sum(), [s], retain_graph=True)
        out[f"force_{name}"] = -grad.sum(1)  # grad holds the weights w: the weighted mean
        per_seq = -grad[..., KEY] / w.clamp_min(1e-300)
        out[f"anchor_force_{name}"] = (wa * per_seq[:, None, :]).sum(-1)
    out["force_total"] = out["force_pair"] + out["force_bit"]
    with torch.no_grad():
        gates = A0[..., [OTHER, GATE]]
        moved = A0.clone()
        moved[..., [OTHER, GATE]] = gates + A0[..., KEY : KEY + 1] * gates / gates.sum(
            -1, keepdim=True
        )
        moved[..., KEY] = 0.0
        pair1, bit1 = _pair_and_bit(
            _logits_from_attention(mdl, p, Xk, moved.float()), P, layout.block
        )
        out["move_pair"] = (w * (pair1 - pair)).sum(-1)
        out["move_bit"] = (w * (bit1 - bit)).sum(-1) / np.log(2)
        out["move_total"] = out["move_pair"] + out["move_bit"] * np.log(2)
        out["anchor_key"] = (wa * A0[:, None, :, KEY]).sum(-1)
        out["anchor_bit"] = (wa * bit.detach()[:, None, :]).sum(-1) / np.log(2)
    res = {k: v.detach().cpu().numpy() for k, v in out.items()}
    with np.errstate(invalid="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", stats.ConstantInputWarning)
        rho = [
            stats.spearmanr(a, b).statistic
            for a, b in zip(res["anchor_key"], res["anchor_bit"], strict=True)
        ]
    res["anchor_rho"] = np.array(rho)
    return res


def read_lock(mdl, params, X, P, layout, lock: float = 0.5) -> dict:
    """Per instance at ``params``: the per-anchor key mass and sign-bit loss
    (:func:`trap_forces`), the share of anchors *locked* on the key (key mass above
    ``lock``), and the largest force on the readout row's scores (the whole loss's)."""
    K = params["E"].shape[0]
    f = trap_forces(mdl, params, X, P[None].expand(K, *P.shape) if P.dim() == 2 else P, layout)
    return dict(
        anchor_key=f["anchor_key"],
        anchor_bit=f["anchor_bit"],
        locked=(f["anchor_key"] > lock).mean(1),
        bit=f["anchor_bit"].mean(1),
        force=np.abs(f["force_total"]).max(1),
    )


def lock_persistence(early: dict, late: dict) -> np.ndarray:
    """Per instance, the Spearman correlation over anchors of the key mass at an early
    step and at the end (two :func:`read_lock` readings): whether the anchors that lean on
    the key early are those locked on it at the end (NaN where one is constant)."""
    from scipy import stats

    with np.errstate(invalid="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", stats.ConstantInputWarning)
        pairs = zip(early["anchor_key"], late["anchor_key"], strict=True)
        return np.array([stats.spearmanr(a, b).statistic for a, b in pairs])

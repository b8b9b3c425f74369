"""Chapter 12, when attention has to learn where to look: config, task, model, readings.

The task is :func:`lib.data.tasks.selective_parity_bits`: both gates in every sequence, the one
just before the anchor counts, so the bag of tokens is the same for both values of the bit
and uniform attention cannot read it. The model is one layer of attention with no value or
output weights. The arms and their event times are in :mod:`.selective_escape`, the trap
sweep in :mod:`.selective_trap`; the rate-ratio sweep (Chapter 9's question on this task)
is here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import torch

from ...data import tasks
from ...measure import onsets
from ...measure import staircase as st
from ...training import engine, models
from ...training.sweep import Sweep
from .. import ChapterConfig

CHAPTER = "12_attention_that_learns"

# Positions of a selective sequence [z, g, g', a]; the readout is the anchor's row.
KEY, OTHER, GATE = 0, 1, 2


@dataclass(frozen=True)
class Config(ChapterConfig):
    """Chapter 12 at book scale.

    The task (:func:`lib.data.tasks.selective_parity_bits`):
    n_keys: distractor keys (in no label); one gives attention a position that carries
        nothing.
    n_anchors, width: the anchors and the enumerated label offset u = 0..width-1: wide
        enough that the anchors' label boxes overlap, so that a parity code in the
        embeddings can show in R1 at all.

    The model (``Transformer(ov="identity", readout_sees_self=False)``): one layer, one head,
    a ReLU MLP, learned positions, no value or output weights, the anchor's row attending to
    the three context positions only. d_model, d_mlp: its widths. gamma: the init rate (small
    init); lr: full-batch Adam's learning rate of every weight.

    The arms (:mod:`lib.experiments.selective_escape`), one instance per (arm, seed):
    seeds: the seeds of every arm.
    fast_steps: the horizon of the learned, order-blind, sham, standard-scale frozen and
        uniform arms; slow_steps: the horizon of the arm frozen at the small init.
    frozen_gammas: the query-key init rates of the frozen standard-scale arms.
    matched_gamma: the query-key init rate of a second learned arm, the same init as one
        frozen arm (learning against not learning at one init).
    n_sham, sham_seed: the sham tasks (order-blind, the bit flipped on a random half of the
        anchors) whose paired readings make the null of the attention event.
    pair_q: the quantile of that null (one minus its family-wise level).
    n_logs: log-spaced and evenly spaced logging steps (:func:`lib.training.engine.log_grid`).
    n_perm, null_q: the label permutations of the order-1 floor and their quantile.
    delta: the gate contrast mean |A_2 - A_1| at which attention counts as having moved.
    escape_frac: the bit escapes when its sign-bit loss falls below escape_frac * ln 2.
    trap_frac: a seed is trapped when its sign-bit loss is still at least trap_frac * ln 2
        at the horizon.
    speedup_min: the finding's threshold: the whole bootstrap interval of the ratio of the
        median escapes, frozen at small init over learned, lies above it.
    escape_min: the finding's threshold: the whole exact interval of the share of seeds of
        the small-init frozen arm that escape by slow_steps lies above it.
    n_boot, boot_seed: the seed bootstrap of medians and ratios.
    n_folds, ridge_factor, n_probe_perm: the held-out parity probe
        (:func:`lib.experiments.selective_escape.parity_probe`).
    ratio_grid, ratio_seeds, ratio_steps: the QK/OV rate-ratio sweep (eta_QK = r * lr),
        factorized and collapsed QK, one batched run each, one instance per (r, seed).
    conv_frac: Chapter 9's convergence rule on this task: converged when the final loss
        exceeds the task's floor ln(width) by less than conv_frac * ln 2.
    trap_seeds, trap_steps, trap_gammas, trap_keys, trap_step: the trap sweep
        (:func:`lib.experiments.selective_trap.trap_sweep`), one batched run: the query-key
        init rates and numbers of keys around the main arm's, and the step at which the
        anchors' lock on the key is read.
    """

    n_keys: int = 1
    n_anchors: int = 24
    width: int = 24
    d_model: int = 32
    d_mlp: int = 32
    gamma: float = 1.0
    lr: float = 1e-2
    seeds: tuple[int, ...] = tuple(range(30))
    fast_steps: int = 1500
    slow_steps: int = 6000
    frozen_gammas: tuple[float, ...] = (0.5, 0.75)
    matched_gamma: float = 0.5
    n_sham: int = 4
    sham_seed: int = 1000
    pair_q: float = 0.99
    n_logs: int = 60
    n_perm: int = 100
    null_q: float = 0.95
    delta: float = 0.1
    escape_frac: float = 0.5
    trap_frac: float = 0.1
    speedup_min: float = 3.0
    escape_min: float = 0.5
    n_boot: int = 999
    boot_seed: int = 0
    n_folds: int = 4
    ridge_factor: float = 10.0
    n_probe_perm: int = 200
    ratio_grid: tuple[float, ...] = (0.1, 0.3, 1.0, 3.0)
    ratio_seeds: tuple[int, ...] = tuple(range(10))
    ratio_steps: int = 1200
    conv_frac: float = 0.1
    trap_seeds: tuple[int, ...] = tuple(range(10))
    trap_steps: int = 1000
    trap_gammas: tuple[float, ...] = (0.5, 0.75, 1.25)
    trap_keys: tuple[int, ...] = (2, 4)
    trap_step: int = 25

    RANGES: ClassVar[dict[str, str]] = {"speedup_min": ">= 1", "n_folds": ">= 2"}


OVERRIDES = {
    "ci": dict(
        seeds=tuple(range(8)),
        n_perm=50,
        n_boot=499,
        n_probe_perm=100,
        ratio_seeds=(0, 1, 2),
        trap_seeds=(0, 1, 2),
    ),
    "paper": dict(
        seeds=tuple(range(100)),
        slow_steps=10000,
        ratio_seeds=tuple(range(30)),
        trap_seeds=tuple(range(30)),
    ),  # fmt: skip
}


def task(cfg: Config):
    """The selective task, its layout and its order-0/1 targets on the anchors."""
    data, layout = tasks.selective_parity_bits(cfg.n_keys, cfg.n_anchors, cfg.width)
    return data, layout, st.selective_targets(data, layout)


def model(cfg: Config, data, qk: str = "factorized") -> models.Transformer:
    """The chapter's attention model on ``data``."""
    return models.Transformer(
        data.vocab_size,
        cfg.d_model,
        context_len=data.X.shape[1],
        n_out=data.n_labels,
        d_mlp=cfg.d_mlp,
        ov="identity",
        qk=qk,
        readout_sees_self=False,
    )


def readout_row(mdl, params, X) -> torch.Tensor:
    """The readout (anchor) row's attention on the three context positions, (K, N, 3)."""
    with torch.no_grad():
        _, A = mdl.forward(params, X, return_attention=True)
    return A[-1][..., -1, :-1].double()


def arm_callbacks(mdl, X, P, layout, targets, E0, null=None) -> dict:
    """Per instance, from one forward pass on the distinct sequences ``X`` (M, L), each
    weighted as often as it occurs in the task: ``bit1``, the task's sign-bit loss read
    against its label distributions ``P`` (M, C), and ``loss_all``, the cross-entropy; the
    readout row's attention on the key, the other gate and the counting gate (``A_key``,
    ``A_other``, ``A_gate``), the gate contrast mean ``|A_2 - A_1|`` (``contrast``) and
    ``gate_diff`` = ``|E_g+ - E_g-|``. The first ``len(E0)`` instances also log the
    staircase readings ``R0``, ``R1`` of the anchors' increment from ``E0`` (and, given
    ``null``, their permutation nulls ``null0``, ``null1``)."""
    labels = torch.arange(P.shape[1], device=P.device)
    flip = torch.where(labels // layout.block % 2 == 0, labels + layout.block,
                       labels - layout.block)  # fmt: skip
    tok, E0 = list(targets.tokens), E0.detach().clone()
    S, (gp, gm) = E0.shape[0], layout.gates

    def measure(step, params):
        with torch.no_grad():
            z, A = mdl.forward(params, X, return_attention=True)
            lp = torch.log_softmax(z.double(), -1)
            row = A[-1][..., -1, :-1].double()
            E = params["E"].double()
            v = dict(
                bit1=(P * (torch.logaddexp(lp, lp[..., flip]) - lp)).sum(-1).mean(-1),
                loss_all=-(P * lp).sum(-1).mean(-1),
                A_key=row[..., KEY].mean(1),
                A_other=row[..., OTHER].mean(1),
                A_gate=row[..., GATE].mean(1),
                contrast=(row[..., GATE] - row[..., OTHER]).abs().mean(1),
                gate_diff=(E[:, gp] - E[:, gm]).norm(dim=-1),
            )
            dE = st.increment(params["E"][:S], E0, tok, subtract_mean_row=True)
            v.update({f"R{o}": r for o, r in st.order_partials(dE, targets).items()})
            if null is not None:
                v.update({f"null{o}": r for o, r in null(dE).items()})
        return v

    names = ["bit1", "loss_all", "A_key", "A_other", "A_gate", "contrast", "gate_diff"]
    names += ["R0", "R1"] + (["null0", "null1"] if null else [])
    return engine.cached_callbacks(measure, names)


def bit_accuracy(mdl, params, data, layout) -> np.ndarray:
    """Per instance, the share of sequences whose label beats the same label with the bit
    flipped (a tie counts one half): 1/2 exactly when the logits of the two gate orders
    agree, since the two sequences of a pair then have the same logits and opposite bits."""
    X, y = data.X.to(params["E"].device), data.y.to(params["E"].device)
    flip = torch.where(y // layout.block % 2 == 0, y + layout.block, y - layout.block)
    with torch.no_grad():
        z = mdl.forward(params, X)
    zy = z.gather(-1, y.expand(z.shape[:-1])[..., None])[..., 0]
    zf = z.gather(-1, flip.expand(z.shape[:-1])[..., None])[..., 0]
    return ((zy > zf).double() + 0.5 * (zy == zf).double()).mean(-1).cpu().numpy()


def first_step(steps, curves, level: float) -> np.ndarray:
    """Per instance, the first logged step at which a curve reaches ``level`` (inf: never)."""
    on = onsets.onset_step(steps, curves, level)
    on = on.numpy() if torch.is_tensor(on) else np.asarray(on, dtype=float)
    return np.where(np.isnan(on), np.inf, on)


def trapped_flag(steps, bit_loss, trap_frac: float = 0.1) -> np.ndarray:
    """Per instance, whether the bit *stopped partway*: at the run's last logged step its
    sign-bit loss lies between ``trap_frac`` and ``1 - trap_frac`` (times ln 2), and over the
    second half of the run it fell by less than ``trap_frac * ln 2``. A bit still at ln 2
    has not left its plateau (censored, not trapped); one still falling is slow, not
    trapped. ``bit_loss`` is ``(n_logs, K)`` on the logged ``steps``."""
    v = np.asarray(bit_loss, dtype=float) / np.log(2)
    steps = np.asarray(steps, dtype=float)
    half = int(np.argmin(np.abs(steps - steps[-1] / 2)))
    end = v[-1]
    return (end >= trap_frac) & (end <= 1 - trap_frac) & (v[half] - end < trap_frac)


def excess_loss(loss, width: int) -> np.ndarray:
    """The loss above the task's own floor, ln(width): the label offset no token names."""
    return np.asarray(loss, dtype=float) - np.log(width)


def ratio_sweep(cfg: Config) -> Sweep:
    """The (r, seed) grid of one ratio run."""
    return Sweep(r=list(cfg.ratio_grid), seed=list(cfg.ratio_seeds))


def train_ratios(cfg: Config, mdl, data, layout, targets, null, device, desc: str):
    """One batched full-batch Adam run over the (r, seed) grid, the QK group at r * lr, on
    the distinct sequences against their label distributions, logging :func:`arm_callbacks`.

    Returns ``(history, sweep, floor)`` with the run's own permutation floor.
    """
    from ...measure.nulls import floor_of

    sw = ratio_sweep(cfg)
    X, P = (t.to(device) for t in tasks.label_distributions(data))
    params = models.build(mdl, sw["seed"], gamma=cfg.gamma, device=device)
    h = engine.train(
        mdl, params, (X, P), cfg.ratio_steps, optimizer="adam", lr=cfg.lr,
        group_lr={"qk": cfg.lr * sw.tensor("r", device=device)},
        log_at=engine.log_grid(cfg.ratio_steps, cfg.n_logs),
        callbacks=arm_callbacks(mdl, X, P, layout, targets, params["E"], null=null),
        loss_fn=engine.soft_cross_entropy, desc=desc,
    )  # fmt: skip
    floor = {o: floor_of(h[f"null{o}"], cfg.null_q) for o in targets.orders}
    return h, sw, floor


def ratio_summary(h, sw: Sweep, floor: dict, cfg: Config) -> dict:
    """Per instance of a ratio run, as (r, seed) arrays: ``converged`` and ``counted``
    (Chapter 9's rule on the excess loss), ``trapped`` (the bit not learned at the
    horizon), the order-1 onset (from step 1), the bit's escape, and ``leave``, the first
    step at which the gate contrast reaches ``cfg.delta``."""
    later = h.steps >= 1
    steps = h.steps[later]
    on1 = onsets.stair_onsets(steps, h["R1"][later], floor[1])
    conv = excess_loss(h["loss_all"][-1], cfg.width) < cfg.conv_frac * np.log(2)
    conv_rs = conv.reshape(sw.shape)
    shape = lambda v: np.asarray(v, dtype=float).reshape(sw.shape)
    return dict(
        converged=conv_rs,
        counted=conv_rs & (conv_rs.mean(1) > 0.5)[:, None],
        trapped=trapped_flag(h.steps, h["bit1"], cfg.trap_frac).reshape(sw.shape),
        onset1=shape(on1),
        escape=shape(onsets.escape_steps(h.steps, h["bit1"], cfg.escape_frac)),
        leave=shape(first_step(steps, h["contrast"][later], cfg.delta)),
    )


def init_params(cfg: Config, mdl, seeds=None, device="cpu") -> dict:
    """The seeds' initial weights at the chapter's init rate (every arm draws its embeddings
    this way; only the query-key group's rate differs between arms)."""
    seeds = list(cfg.seeds if seeds is None else seeds)
    return models.build(mdl, seeds, gamma=cfg.gamma, device=device)


def contrast_formula(mdl, params, data, layout) -> torch.Tensor:
    """The attention's contribution to the readout row from the gates' sum and difference
    terms, the chapter's equation ``eq-sel-contrast`` (K, N, d)."""
    A = readout_row(mdl, params, data.X)  # (K, N, 3)
    E, P = params["E"], params["P"]
    gp, gm = layout.gates
    sigma = torch.where(data.X[:, 2] == gp, 1.0, -1.0).to(A.dtype)[None, :, None]
    x0 = E[:, data.X[:, 0]] + P[:, None, 0]
    A0, A1, A2 = (A[..., j : j + 1] for j in range(3))
    even = A0 * x0 + A1 * P[:, None, 1] + A2 * P[:, None, 2]
    even = even + 0.5 * (A1 + A2) * (E[:, gp] + E[:, gm])[:, None]
    return even + 0.5 * sigma * (A2 - A1) * (E[:, gp] - E[:, gm])[:, None]


def derivation_checks(mdl, learned, uniform, data, layout) -> dict:
    """The chapter's identities on trained weights (pass float64 ones): ``formula_err``, the
    relative error of :func:`contrast_formula` against the forward pass; ``order_gap``,
    the largest logit change when the two gates of every sequence swap at uniform
    attention, and ``order_gap_learned``, the same for the learned weights (its control);
    ``uniform_acc``, the bit accuracy at uniform attention per instance, and its largest
    distance from 1/2, ``uniform_acc_max``."""
    swapped = data.X[:, [0, 2, 1, 3]]
    with torch.no_grad():
        _, hidden = mdl.forward(learned, data.X, return_hidden=True)
        mix = hidden["attention0"][:, :, 0]
        err = (mix - contrast_formula(mdl, learned, data, layout)).norm() / mix.norm()
        gap = lambda p: float((mdl.forward(p, swapped) - mdl.forward(p, data.X)).abs().max())
        out = dict(formula_err=float(err), order_gap=gap(uniform), order_gap_learned=gap(learned))
    acc = bit_accuracy(mdl, uniform, data, layout)
    return dict(out, uniform_acc=acc, uniform_acc_max=float(np.abs(acc - 0.5).max() + 0.5))


def attention_before_gates(h, sw: Sweep, i: int, factor: float = 2.0):
    """Per seed of rate ``i`` of a ratio run: the first logged step at which the gate
    difference ``|E_g+ - E_g-|`` reaches ``factor`` times its initial norm (inf: never), and
    how far the mean key mass strays from uniform (1/3) up to that step."""
    shape = (len(h.steps), *sw.shape)
    key, gd = h["A_key"].reshape(shape)[:, i], h["gate_diff"].reshape(shape)[:, i]
    grown = first_step(h.steps, gd / gd[0], factor)
    stray = np.array([np.abs(key[h.steps <= t, s] - 1 / 3).max() for s, t in enumerate(grown)])
    return grown, stray

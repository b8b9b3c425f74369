"""Chapter 8, does faster query-key learning move the context staircase? Config and plumbing.

The chapter trains Chapter 2's attention model on the gated-parity-bit task over a grid of
query-key rates r = eta_QK / eta_rest, factorized and collapsed QK, and seeds (one batched
run per QK parameterization), and reads off per instance the onsets of the order-0 and
order-1 stairs, the escape from the bit-1 plateau and where the readout position attends.
A small character-level Shakespeare LM asks the same question of skip-k signature onsets.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from .. import engine, flow, lm, models, tasks
from .. import metrics as M
from .. import signatures as sig
from .. import staircase as st
from ..sweep import Sweep
from . import ChapterConfig

CHAPTER = "08_qk_rate_and_the_staircase"

# Positions of the gated-parity-bit sequence [z, a, g]: the readout is at the gate.
POSITIONS = ("key", "anchor", "gate")


@dataclass(frozen=True)
class Config(ChapterConfig):
    """Chapter 8 at book scale.

    n_keys, n_anchors: the gated-parity-bit task of Chapter 2 (orders 0 and 1 only).
    d_model, d_hidden: width of the one-layer attention model and of its ReLU MLP.
    gamma: the small-init rate, Chapter 2's ``gamma_small`` (weights ~ N(0, d_in^-2 gamma)).
    lr: full-batch Adam's learning rate of every weight outside the QK group (Chapter 2's).
    r_grid: the ratios r = eta_QK / lr swept, two decades and more around Chapter 2's 0.1.
    qk_kinds: the QK parameterizations, one batched run each (``Transformer.qk``).
    seeds: the seeds of every (r, QK) arm.
    steps, n_logs: Adam steps of every run; n_logs log-spaced and n_logs evenly spaced
        logging steps (:func:`lib.engine.log_grid`).
    floor_samples: Gaussian draws of the R0/R1 noise floors (``order_noise_floor``).
    delta: total-variation distance from uniform attention at which attention counts as
        having left its quasi-static regime (Chapter 4's delta ball).
    t_early: the early step at which the theory line's scaling of the attention's distance
        from uniform with r is read (after Adam's first steps, before anything saturates).
    flat_fraction: the escape step "does not depend on r" when its exponent in r is smaller
        in size than this fraction of the exponent of the step at which attention leaves
        uniform (the theory line predicts 0 against -1/2; the leave step is the run's own
        evidence that the fit can see a dependence on r).
    control_seed: seed of the permutation of the bit-1 signs in the negative control.
    control_r_grid: the ratios the negative control is run at (factorized QK).
    shk_*: the Shakespeare LM (Chapter 7's model and multipliers, at small init):
        d_model, context, MLP width, batch size, steps, Adam lr, the QK multipliers,
        seeds, number of logging steps, tracked characters, skip distances k and the
        permutations of the alignment null; shk_fold_tol: the factor within which an onset
        at the largest multiplier counts as "not moved" from the smallest; shk_probe: the
        number of training windows on which the LM's attention is read.
    """

    n_keys: int = 12
    n_anchors: int = 12
    d_model: int = 128
    d_hidden: int = 128
    gamma: float = 1.0
    lr: float = 1e-2
    r_grid: tuple[float, ...] = (0.03, 0.1, 0.3, 1.0, 3.0, 10.0)
    qk_kinds: tuple[str, ...] = ("factorized", "collapsed")
    seeds: tuple[int, ...] = (0, 1, 2)
    steps: int = 800
    n_logs: int = 32
    floor_samples: int = 4000
    delta: float = 0.05
    t_early: int = 10
    flat_fraction: float = 0.5
    control_seed: int = 0
    control_r_grid: tuple[float, ...] = (0.03, 1.0, 10.0)
    shk_d_model: int = 32
    shk_context: int = 32
    shk_mlp: int = 0
    shk_batch: int = 16
    shk_steps: int = 600
    shk_lr: float = 1e-3
    shk_mults: tuple[float, ...] = (0.1, 1.0, 10.0)
    shk_seeds: tuple[int, ...] = (0, 1, 2)
    shk_n_logs: int = 28
    shk_top: int = 60
    shk_skips: tuple[int, ...] = (2, 3, 4)
    shk_n_perm: int = 200
    shk_fold_tol: float = 2.0
    shk_probe: int = 64


OVERRIDES = {
    "ci": dict(
        r_grid=(0.03, 0.1, 0.3, 1.0, 3.0),
        seeds=(0,),
        steps=500,
        n_logs=24,
        floor_samples=2000,
        control_r_grid=(0.03, 3.0),
        shk_seeds=(0, 1),
    ),
    "paper": dict(
        n_keys=24,
        d_model=256,
        d_hidden=256,
        r_grid=(0.01, 0.03, 0.1, 0.3, 1.0, 3.0, 10.0, 30.0),
        seeds=(0, 1, 2, 3, 4, 5, 6, 7),
        steps=1500,
        n_logs=48,
        shk_steps=2000,
        shk_seeds=(0, 1, 2, 3, 4),
    ),
}


# ---------------------------------------------------------------------------
# The task and its negative control
# ---------------------------------------------------------------------------


def parity_task(cfg: Config):
    """Chapter 2's two-stair task: ``(data, layout, targets, floor)`` (floor per order)."""
    data, layout = tasks.gated_parity_bits(cfg.n_keys, cfg.n_anchors)
    targets = st.parity_targets(data, layout)
    floor = st.order_noise_floor(targets, d=cfg.d_model, n=cfg.floor_samples)
    return data, layout, targets, floor


def gate_blind(data, layout, seed: int):
    """The negative control: the bit-1 signs permuted across sequences, so that neither the
    gate nor the anchor (nor both together) carries information about bit 1.

    Order 0 is untouched (``i_z + a`` is kept), so the first stair should still come. The
    signatures and the noise floor are counted on the new labels, as for the real task.
    Returns ``(data, layout, targets, floor_kwargs)`` like :func:`parity_task` without floor.
    """
    perm = torch.randperm(len(data.y), generator=torch.Generator().manual_seed(seed))
    s1 = layout.bit1[perm]
    y = data.y - layout.block * (layout.bit1 == -1) + layout.block * (s1 == -1)
    blind = tasks.TaskData(
        data.X.clone(), y, data.vocab_size, data.n_labels, dict(data.groups), data.name
    )
    blind.name = data.name + ", bit-1 signs shuffled"
    lay = tasks.ParityBits(
        layout.anchors, layout.keys, layout.gates, layout.h, layout.k, layout.block, s1, None
    )
    return blind, lay, st.parity_targets(blind, lay)


# ---------------------------------------------------------------------------
# The model, the sweep and its callbacks
# ---------------------------------------------------------------------------


def attention_model(cfg: Config, data, qk: str) -> models.Transformer:
    """Chapter 2's attention model: one layer, one head, a ReLU MLP, readout at the gate."""
    return models.Transformer(
        data.vocab_size,
        cfg.d_model,
        context_len=data.X.shape[1],
        n_layers=1,
        n_out=data.n_labels,
        d_mlp=cfg.d_hidden,
        qk=qk,
    )


def qk_product(model: models.Transformer, params) -> torch.Tensor:
    """W_QK of layer 0, (K, d, d): the collapsed matrix, or W_Q W_K^T."""
    if model.qk == "collapsed":
        return params["QK0"]
    return params["Q0"] @ params["K0"].transpose(1, 2)


def attention_callbacks(model, X, params0) -> dict:
    """Per instance: the readout row's mean attention on each position ``attn`` (K, L), its
    total-variation distance from uniform ``attn_dist`` (K,), and the relative change of
    W_QK, ``qk_drift`` = |W_QK - W_QK(0)| / |W_QK(0)| (K,)."""
    QK0 = qk_product(model, params0).detach().clone()
    unif = 1.0 / X.shape[-1]
    state: dict = {"step": None}

    def measure(step, p):
        if state["step"] != step:
            _, A = model.forward(p, X, return_attention=True)
            row = A[0][..., -1, :].double()  # (K, N, L): the readout (gate) position's row
            dq = (qk_product(model, p) - QK0).flatten(1).norm(dim=1)
            state.update(
                step=step,
                attn=row.mean(1),
                attn_dist=0.5 * (row - unif).abs().sum(-1).mean(1),
                qk_drift=dq / QK0.flatten(1).norm(dim=1),
            )
        return state

    return {
        n: (lambda step, p, n=n: measure(step, p)[n]) for n in ("attn", "attn_dist", "qk_drift")
    }


def rate_sweep(cfg: Config, r_grid=None, seeds=None) -> Sweep:
    """The (r, seed) grid of one run; the same for both QK parameterizations."""
    return Sweep(r=list(r_grid or cfg.r_grid), seed=list(seeds or cfg.seeds))


def signature_callbacks(targets, E0, prefix: str) -> dict:
    """Callbacks ``{prefix}R{o}``: the partial R of each order of ``targets`` on the anchors'
    embedding increment (as :func:`lib.staircase.bit_callbacks` logs them), for reading one
    run against a second set of signatures."""
    E0, tok, state = E0.detach().clone(), list(targets.tokens), {"step": None}

    def measure(step, params):
        if state["step"] != step:
            dE = st.increment(params["E"], E0, tok, subtract_mean_row=True)
            state.update(step=step, v=st.order_partials(dE, targets))
        return state["v"]

    return {f"{prefix}R{o}": (lambda s, p, o=o: measure(s, p)[o]) for o in targets.orders}


def train_rates(
    cfg: Config, model, data, layout, targets, sw: Sweep, device, desc="train", also=None
):
    """One batched full-batch Adam run of ``model`` over the (r, seed) grid ``sw``.

    Every weight trains at ``cfg.lr`` except the QK group, at ``r * cfg.lr``; the position
    embedding is zero and frozen (Chapter 2's model). Logs the staircase callbacks of
    :func:`lib.staircase.bit_callbacks` and :func:`attention_callbacks`, and for each
    ``prefix: targets`` of ``also`` the :func:`signature_callbacks` of those targets.
    """
    params = models.build(model, sw["seed"], gamma=cfg.gamma, device=device)
    with torch.no_grad():
        params["P"].zero_()
    X, y = data.X.to(device), data.y.to(device)
    callbacks = st.bit_callbacks(model, data, layout, targets, params["E"])
    callbacks.update(attention_callbacks(model, X, params))
    for prefix, extra in (also or {}).items():
        callbacks.update(signature_callbacks(extra, params["E"], prefix))
    return engine.train(
        model,
        params,
        (X, y),
        cfg.steps,
        optimizer="adam",
        lr=cfg.lr,
        group_lr={"qk": cfg.lr * sw.tensor("r", device=device)},
        log_at=engine.log_grid(cfg.steps, cfg.n_logs, extra=[cfg.t_early]),
        callbacks=callbacks,
        frozen=("P",),
        desc=desc,
    )


def _median_where(v: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Per instance, the median of ``v`` (n_logs, K) over the logged steps in ``mask``."""
    out = np.full(v.shape[1], np.nan)
    for k in range(v.shape[1]):
        if mask[:, k].any():
            out[k] = float(np.median(v[mask[:, k], k]))
    return out


def stair_summary(h, sw: Sweep, floor: dict, delta: float):
    """The per-instance numbers of one run as an ``xarray.Dataset`` over the sweep axes.

    ``onset0``, ``onset1`` (:func:`lib.staircase.stair_onsets`, ``inf``: never above its
    floor), ``escape1`` (:func:`lib.staircase.escape_steps`), ``leave`` (first logged step
    at which the readout row's distance from uniform reaches ``delta``; ``inf``: never),
    attention on the gate and on the anchor at init, on the bit-1 plateau (median over
    :func:`lib.staircase.plateau_mask`) and at the end, final ``R0``, ``R1``, ``loss``,
    and the peak of ``R1``.
    """
    import xarray as xr

    steps = h.steps
    on0 = st.stair_onsets(steps, h["R0"], floor[0])
    on1 = st.stair_onsets(steps, h["R1"], floor[1])
    esc = st.escape_steps(steps, h["bit1"])
    leave = M.onset_step(steps, h["attn_dist"], delta).numpy()
    plateau = st.plateau_mask(steps, h["bit1"], on0)
    A = h["attn"]  # (n_logs, K, L)
    out = {
        "onset0": on0,
        "onset1": on1,
        "escape1": esc,
        "leave": np.where(np.isnan(leave), np.inf, leave),
        "R0": h["R0"][-1],
        "R1": h["R1"][-1],
        "R1_peak": np.nanmax(h["R1"], 0),
        "loss": h["loss_all"][-1],
        "bit1_loss": h["bit1"][-1],
    }
    for j, pos in enumerate(POSITIONS):
        out[f"{pos}_init"] = A[0, :, j]
        out[f"{pos}_plateau"] = _median_where(A[..., j], plateau)
        out[f"{pos}_end"] = A[-1, :, j]
    return xr.Dataset({n: sw.dataarray(v, n) for n, v in out.items()})


def per_instance_table(summaries: dict, names):
    """One row per (QK, r, seed) of the runs' summaries (``{qk: Dataset}``)."""
    import pandas as pd

    rows = [summaries[qk][list(names)].to_dataframe().assign(qk=qk) for qk in summaries]
    return pd.concat(rows).reset_index().set_index(["qk", "r", "seed"])


def loglog_slope(x, y) -> float:
    """Least-squares slope of log y against log x over the finite pairs (NaN if < 2)."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    ok = np.isfinite(x) & np.isfinite(y) & (x > 0) & (y > 0)
    if ok.sum() < 2:
        return float("nan")
    return float(np.polyfit(np.log(x[ok]), np.log(y[ok]), 1)[0])


# ---------------------------------------------------------------------------
# Shakespeare: skip-k onsets against the QK multiplier
# ---------------------------------------------------------------------------


def shakespeare_stream(cfg: Config, device):
    """Training characters of Shakespeare (whole plays held out), the tokenizer, the tracked
    characters (the most frequent) and their centred next-token and skip-k signatures."""
    from .. import corpora

    text, _ = corpora.split_by_document(corpora.load_shakespeare())
    tok = corpora.CharTokenizer(text)
    stream = tok.encode(text)
    counts = torch.bincount(stream, minlength=tok.vocab_size)
    tracked = torch.argsort(counts, descending=True)[: cfg.shk_top].tolist()
    V = tok.vocab_size
    phi = {"next": sig.next_token_signature(stream, V, rows=tracked)}
    for k in cfg.shk_skips:
        phi[f"skip{k}"] = sig.skip_signature(stream, V, k, rows=tracked)
    phi = {n: sig.centre(p) for n, p in phi.items()}
    return tok, stream.to(device), tracked, phi


def shakespeare_run(cfg: Config, tok, stream, tracked, device):
    """One batched Adam run of the small-init LM over (QK multiplier, seed).

    A seed fixes the initial weights and the windows, so the multipliers are paired. The
    QK group trains at ``multiplier * shk_lr``. Logs the increment similarities of the
    tracked characters' embeddings and, on a fixed probe batch of ``shk_probe`` windows, the
    attention's distance from uniform causal averaging (``attn_dist``, Chapter 4's D).
    Returns ``(history, sweep)``.
    """
    sw = Sweep(mult=list(cfg.shk_mults), seed=list(cfg.shk_seeds))
    model = models.Transformer(
        tok.vocab_size,
        cfg.shk_d_model,
        cfg.shk_context,
        n_layers=1,
        readout="all",
        d_mlp=cfg.shk_mlp,
        emb_fan_in=cfg.shk_d_model,
    )
    params = models.build(model, sw["seed"], gamma=cfg.gamma, device=device)
    # A fixed probe batch of training windows (its own seed) on which attention is read.
    probe = lm.window_sampler(stream, cfg.shk_context, cfg.shk_probe, [10_000], device=device)
    X_probe = probe(0)[0][0]
    callbacks = lm.similarity_callbacks(params, tracked, tracked)
    callbacks["attn_dist"] = lambda step, p: flow.attention_distance(
        model.forward(p, X_probe, return_attention=True)[1][0]
    )
    h = engine.train(
        model,
        params,
        lm.window_sampler(stream, cfg.shk_context, cfg.shk_batch, sw["seed"], device=device),
        cfg.shk_steps,
        optimizer="adam",
        lr=cfg.shk_lr,
        group_lr={"qk": cfg.shk_lr * sw.tensor("mult", device=device)},
        log_at=engine.log_grid(cfg.shk_steps, cfg.shk_n_logs),
        callbacks=callbacks,
        desc="shakespeare",
    )
    return h, sw


def skip_onsets(h, sw: Sweep, phi: dict, n_perm: int):
    """Onset per signature and instance (partial R controlling for next-token, above the
    null's largest 95th percentile; ``inf``: never), as an ``xarray.Dataset``, with the
    curves ``{name: (n_logs, K)}`` and null levels ``{name: float}``."""
    import xarray as xr

    curves = lm.alignment_curves(h["S_E"], phi, control="next", n_perm=n_perm)
    out, R, null = {}, {}, {}
    for name, c in curves.items():
        null[name] = float(np.nanmax(c["null_hi"]))
        on = M.relative_onset(h.steps, c["R"], frac=0.5, floor=null[name])[0]
        out[name] = np.where(np.isnan(on), np.inf, on)
        R[name] = c["R"]
    return xr.Dataset({n: sw.dataarray(v, n) for n, v in out.items()}), R, null


__all__ = [
    "CHAPTER",
    "Config",
    "OVERRIDES",
    "POSITIONS",
    "parity_task",
    "gate_blind",
    "attention_model",
    "qk_product",
    "attention_callbacks",
    "rate_sweep",
    "train_rates",
    "signature_callbacks",
    "stair_summary",
    "per_instance_table",
    "loglog_slope",
    "shakespeare_stream",
    "shakespeare_run",
    "skip_onsets",
]

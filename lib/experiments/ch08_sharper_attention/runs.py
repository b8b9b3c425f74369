"""The chapter's training runs: the Scan-and-Snap runs with the CACO ratio sweep, the
fixed-attention runs, the agreement stand-in and the Shakespeare run."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import torch

from ...data import tasks, windows
from ...training import engine, qkov
from ...training.init import init_params
from ...training.models import Transformer, build
from ...training.sweep import Sweep
from .. import qkov_readings as readings
from .. import qkov_training as training
from .settings import sweep_ratios

NAMES = list(qkov.PARAMETERIZATIONS)  # FAFO, FACO, CAFO, CACO


def scan_snap_runs(cfg, device) -> SimpleNamespace:
    """FAFO, FACO and CAFO at equal rates and CACO at every ratio of the sweep and of the
    control, in one batched run; returns ``runs`` (name -> (model, history)), the CACO
    instances (``caco``, their ratios ``R_inst``, ``in_grid``), the ratios ``r_grid`` and
    ``r_control``, the held-out batch ``evalb`` and the ``stats`` over training."""
    runs = training.equal_rate_runs(cfg.runs, device)  # name -> (model, history)
    r_sweep = sweep_ratios(cfg.r_grid)  # the grid, with r = 1 (every ratio's reference)
    caco = Sweep(r=r_sweep + cfg.r_control, seed=cfg.runs.seeds)  # instance k: (ratio, seed)
    R_inst = np.array(caco["r"])
    r_grid, r_control = np.array(r_sweep), np.array(cfg.r_control)
    in_grid = np.isin(R_inst, r_grid)  # the sweep; the rest are the negative control
    runs["CACO"] = training.train_scan_snap(
        cfg.runs,
        "CACO",
        torch.tensor(R_inst * cfg.runs.lr, dtype=torch.float32),  # eta_QK = r eta_OV per instance
        cfg.runs.lr,
        caco["seed"],
        cfg.runs.data_seed + NAMES.index("CACO"),
        cfg.runs.steps,
        device,
    )
    evalb = tasks.scan_snap_batch(
        cfg.eval_n,
        seq_len=cfg.runs.seq_len,
        generator=torch.Generator().manual_seed(cfg.eval_seed),
        device=device,
    )
    stats = {name: readings.stats_over_training(h, m, evalb) for name, (m, h) in runs.items()}
    return SimpleNamespace(
        runs=runs,
        caco=caco,
        R_inst=R_inst,
        r_grid=r_grid,
        r_control=r_control,
        in_grid=in_grid,
        evalb=evalb,
        stats=stats,
    )


def fixed_attention(cfg, device) -> SimpleNamespace:
    """Only OV trained, at every frozen distinct mass ``alpha`` in one batched run, for
    factorized and collapsed OV; returns ``alphas`` and ``histories`` (OV variant -> the
    training history, whose ``lg`` holds the held-out loss and -dL/dalpha)."""
    alphas = torch.tensor(cfg.fixed.alphas, dtype=torch.float32, device=device)
    Lf, Bf = cfg.fixed.seq_len, cfg.fixed.batch_size
    fixed_eval = tasks.scan_snap_batch(
        cfg.fixed.eval_n,
        seq_len=Lf,
        generator=torch.Generator().manual_seed(cfg.fixed.eval_seed),
        device=device,
    )
    fixed = {}
    for ov in ("factorized", "collapsed"):
        fm = qkov.FixedAttentionOV(alphas, ov=ov, bias=ov == "collapsed")
        fp = init_params(fm.specs(), [0] * len(alphas), gamma=cfg.gamma_fixed, device=device)
        fixed[ov] = engine.train(
            fm,
            fp,
            training.scan_snap_stream(len(alphas), Bf, Lf, cfg.fixed.data_seed, device=device),
            cfg.fixed.steps,
            optimizer="sgd",
            lr=cfg.runs.lr,
            log_at=cfg.fixed.n_logs,
            callbacks={"lg": _loss_and_grad(fm, alphas, fixed_eval)},
            desc=f"fixed {ov}",
        )
    return SimpleNamespace(alphas=alphas, histories=fixed)


def _loss_and_grad(fm, alphas, fixed_eval):
    """The callback ``(step, p) ->`` held-out loss and the incentive to sharpen,
    -dL/dalpha by autograd, stacked per alpha."""

    def loss_and_grad(step, p):
        a = alphas.clone().requires_grad_(True)
        with torch.enable_grad():
            lo = engine.cross_entropy(
                fm.forward({n: w.detach() for n, w in p.items()}, fixed_eval.X, a), fixed_eval.y
            )
            (grad_alpha,) = torch.autograd.grad(lo.sum(), a)
        return torch.stack([lo.detach(), -grad_alpha], -1)

    return loss_and_grad


def agreement_run(cfg, device) -> SimpleNamespace:
    """The agreement stand-in: one batched Adam run of the attention-only transformer with
    both QK multipliers and the seeds; returns the model ``tf``, its parameters ``p_tf``,
    the history ``h_tf``, the held-out sentences ``sva_te`` and the multiplier of each
    instance ``sva_r_inst``."""
    sva_tr, sva_te = (
        training.to_device(
            tasks.agreement_batch(n, generator=torch.Generator().manual_seed(s)), device
        )
        for n, s in ((cfg.sva.train_n, cfg.sva.train_seed), (cfg.sva.test_n, cfg.sva.test_seed))
    )
    tf = Transformer(
        vocab_size=tasks.Agreement.VOCAB,
        d_model=cfg.sva.d_model,
        context_len=sva_tr.X.shape[1],
        n_out=2,
        d_mlp=0,
        readout="last",
    )
    sva_arms = Sweep(r=(1.0, cfg.sva.r), seed=cfg.runs.seeds)  # instance k: (QK multiplier, seed)
    sva_r_inst = np.array(sva_arms["r"])
    p_tf = build(tf, sva_arms["seed"], gamma=cfg.runs.gamma, device=device)
    h_tf = engine.train(
        tf,
        p_tf,
        (sva_tr.X, sva_tr.y),
        cfg.sva.steps,
        optimizer="adam",
        lr=cfg.sva.lr,
        group_lr={"qk": torch.tensor(sva_r_inst * cfg.sva.lr, dtype=torch.float32)},
        batch_size=cfg.sva.batch_size,
        log_at=cfg.sva.n_logs,
        desc="agreement",
    )
    return SimpleNamespace(tf=tf, p_tf=p_tf, h_tf=h_tf, sva_te=sva_te, sva_r_inst=sva_r_inst)


def shakespeare_run(cfg, device) -> SimpleNamespace:
    """The character-level Shakespeare decoder: one batched Adam run with every QK
    multiplier and the seeds (paired); returns the data split ``split``, the multiplier of
    each instance ``shk_r`` and the history ``h_shk``, whose ``val`` holds the validation
    loss, entropy, normalized entropy and previous-character mass."""
    shk_split, (Xv, yv) = training.shakespeare_data(cfg, device)  # split by whole plays
    shk_tok, shk_stream = shk_split.tokenizer, shk_split.train
    shk_arms = Sweep(r=cfg.shk.r_grid, seed=cfg.runs.seeds)  # the same seeds for every multiplier
    shk_r = np.array(shk_arms["r"])  # instance k: (QK multiplier, seed)
    shk_model = Transformer(
        vocab_size=shk_tok.vocab_size,
        d_model=cfg.shk.d_model,
        context_len=cfg.shk.context,
        n_layers=cfg.shk.layers,
        d_mlp=cfg.shk.mlp,
        readout="all",
    )
    p_shk = build(shk_model, shk_arms["seed"], gamma=cfg.runs.gamma, device=device)
    h_shk = engine.train(
        shk_model,
        p_shk,
        windows.window_sampler(
            shk_stream, cfg.shk.context, cfg.shk.batch_size, shk_arms["seed"], device=device
        ),
        cfg.shk.steps,
        optimizer="adam",
        lr=cfg.shk.lr,
        group_lr={"qk": torch.tensor(shk_r * cfg.shk.lr, dtype=torch.float32)},
        log_at=cfg.shk.n_logs,
        # validation loss, entropy, normalized entropy and previous-char mass on (Xv, yv)
        callbacks={"val": readings.shk_val_metrics(shk_model, Xv, yv)},
        desc="shakespeare",
    )
    return SimpleNamespace(split=shk_split, shk_r=shk_r, h_shk=h_shk)

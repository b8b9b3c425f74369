"""The training runs of Chapters 7 and 8 and their data: the Scan-and-Snap runs with weight
snapshots, and the Shakespeare data.

The model is :mod:`lib.training.qkov`, the data :mod:`lib.data.tasks` and :mod:`lib.data.corpora`, the
training loop :mod:`lib.training.engine`; the chapters' settings are their ``Config``
(:mod:`lib.experiments.ch07_rescaling_and_reduced_dynamics`,
:mod:`lib.experiments.ch08_sharper_attention`), whose shared group of settings is
:mod:`lib.experiments.qkov_settings`. What is read from the runs is
:mod:`lib.experiments.qkov_readings`.
"""

from __future__ import annotations

import torch

from ..data import corpora, tasks, tokenizers, windows
from ..training import engine, qkov, run_cache
from ..training.init import init_params
from . import ChapterConfig
from .qkov_settings import ScanSnapRuns

NAMES = list(qkov.PARAMETERIZATIONS)  # FAFO, FACO, CAFO, CACO


def to_device(batch, device):
    """A NamedTuple of tensors (e.g. :class:`lib.data.tasks.AgreementBatch`) on ``device``."""
    return type(batch)(*(t.to(device) for t in batch))


def scan_snap_stream(K: int, batch_size: int, seq_len: int, seed: int, device="cpu"):
    """``data(step) -> (X, y)`` with an independent Scan-and-Snap batch per instance,
    X (K, batch_size, seq_len - 1), on ``device``. The batches are drawn by a fixed CPU
    generator, so the stream is reproducible and the same on every device."""
    gen = torch.Generator().manual_seed(seed)

    def data(step):
        b = tasks.scan_snap_batch(K * batch_size, seq_len=seq_len, generator=gen, device=device)
        return b.X.view(K, batch_size, -1), b.y.view(K, batch_size)

    return data


def snapshot_callbacks(model) -> dict:
    """Engine callbacks that log a copy of every weight (K, ...) at every logging step."""
    return {n: (lambda step, p, n=n: p[n].detach().clone()) for n in model.specs()}


def snapshots(history, model, i: int, device=None) -> dict[str, torch.Tensor]:
    """The weights logged at logging index ``i`` of ``history`` (kept on the CPU by the
    engine), on ``device`` (the CPU when None)."""
    return {n: torch.as_tensor(history[n][i], device=device) for n in model.specs()}


def train_scan_snap(
    runs: ScanSnapRuns, name: str, eta_qk, eta_ov, run_seeds, data_seed, n_steps, device
):
    """One batched SGD run of parameterization ``name`` from the official code's init
    (:func:`lib.training.qkov.code_init_`), one instance per seed; returns ``(model, history)``
    with a weight snapshot at every step of :func:`lib.training.engine.log_grid`. Chapters 7 and 8
    both read the equal-rate runs: whichever comes first trains a run, and the other reads it
    (:func:`lib.training.run_cache.cached_history`)."""
    m = qkov.SingleQueryAttention.named(name)
    settings = {f: getattr(runs, f) for f in ("gamma", "batch_size", "seq_len", "n_logs")}
    description = dict(
        run="scan_snap",
        name=name,
        eta_qk=eta_qk,
        eta_ov=eta_ov,
        seeds=list(run_seeds),
        data_seed=data_seed,
        steps=n_steps,
        **settings,
    )

    def train():
        params = init_params(m.specs(), list(run_seeds), gamma=runs.gamma, device=device)
        qkov.code_init_(m, params)
        return engine.train(
            m,
            params,
            scan_snap_stream(len(run_seeds), runs.batch_size, runs.seq_len, data_seed, device),
            n_steps,
            optimizer="sgd",
            group_lr={"qk": eta_qk, "ov": eta_ov},
            log_at=engine.log_grid(n_steps, runs.n_logs),
            callbacks=snapshot_callbacks(m),
            desc=name,
        )

    return m, run_cache.cached_history(description, train, device)


def equal_rate_runs(runs: ScanSnapRuns, device) -> dict:
    """FAFO, FACO and CAFO at equal rates, ``lr`` on both circuits: name -> (model,
    history with weight snapshots). Every run has its own stream of batches."""
    out = {}
    for name in ("FAFO", "FACO", "CAFO"):
        n_steps = runs.faco_steps if name == "FACO" else runs.steps
        data_seed = runs.data_seed + NAMES.index(name)
        out[name] = train_scan_snap(
            runs, name, runs.lr, runs.lr, runs.seeds, data_seed, n_steps, device
        )
    return out


def shakespeare_data(cfg: ChapterConfig, device):
    """The Shakespeare corpus split by whole plays (:func:`lib.data.tokenizers.char_split`) and the
    fixed validation batch: ``(split, (X_val, y_val))``, where (X_val, y_val) are
    ``cfg.shk.val_n`` validation windows of ``cfg.shk.context`` characters."""
    split = tokenizers.char_split(corpora.load_shakespeare())
    sampler = windows.window_sampler(
        split.val, cfg.shk.context, cfg.shk.val_n, [cfg.shk.val_seed], device=device
    )
    Xv, yv = (t[0] for t in sampler(0))
    return split, (Xv, yv)

"""The trap sweep's cells and readings: the (query-key init rate, keys) cells around the
learned arm's, the base cell's weights as :func:`lib.experiments.selective_trap.read_lock`
takes them, and the share trapped per cell."""

from __future__ import annotations

import numpy as np

from .. import ChapterConfig
from .readings import rate


def trap_cells(cfg: ChapterConfig) -> list[dict]:
    """The sweep's cells: the learned arm's, then each query-key init rate, then each number
    of keys."""
    cells = [dict(r=1.0, gamma_qk=cfg.gamma, n_keys=cfg.task.n_keys)]
    cells += [dict(r=1.0, gamma_qk=gq, n_keys=cfg.task.n_keys) for gq in cfg.trap.gammas]
    cells += [dict(r=1.0, gamma_qk=cfg.gamma, n_keys=k) for k in cfg.trap.keys]
    return cells


def base_cell(sweep: dict, at: int | None = None) -> tuple:
    """``(model, params, X, P, layout)`` of the sweep's first cell, its weights at the end or
    at the snapshot step ``at``: the arguments of ``read_lock``."""
    base = sweep["cell"] == 0
    params = sweep["params"] if at is None else sweep["snapshots"][at]
    return (
        sweep["model"],
        {k: v[base] for k, v in params.items()},
        sweep["X"],
        sweep["P"][base],
        sweep["layout"],
    )


def trap_rows(sweep: dict, cells: list[dict]) -> list[dict]:
    """Per cell: its query-key init rate and keys, the share trapped, and the median key
    mass of the trapped and the other seeds."""
    rows = []
    for i, c in enumerate(cells):
        k = sweep["cell"] == i
        t = sweep["trapped"][k]
        rows.append(
            {
                "γ_QK": c["gamma_qk"],
                "keys": c["n_keys"],
                "trapped": rate(t),
                "key mass, trapped": np.median(sweep["key_mass"][k][t]) if t.any() else None,
                "key mass, not trapped": np.median(sweep["key_mass"][k][~t])
                if (~t).any()
                else None,
            }
        )
    return rows


def trap_numbers(cfg: ChapterConfig, sweep: dict, rows: list[dict], rho) -> dict:
    """The sweep's size, the range of the share trapped over the cells, the lock's
    persistence ``rho`` (median) and the gate difference at the snapshot step."""
    h = sweep["history"]
    base = sweep["cell"] == 0
    at = int(np.argmin(np.abs(h.steps - cfg.trap.lock_step)))
    diff0 = h["gate_diff"][0][base]
    return dict(
        n_trap_seeds=len(cfg.trap.seeds),
        trap_steps=cfg.trap.steps,
        trap_step=cfg.trap.lock_step,
        trap_share_lo=min(r["trapped"][0] for r in rows),
        trap_share_hi=max(r["trapped"][0] for r in rows),
        rho_med=float(np.nanmedian(rho)),
        gate_ratio_at=float(np.median(h["gate_diff"][at][base] / diff0)),
    )

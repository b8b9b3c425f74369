"""Chapter 7's balancedness run: FAFO from a random init at several SGD rates in one batched
run, and how far SGD drifts from the conservation law of gradient flow."""

from __future__ import annotations

import numpy as np
import torch

from ...training import engine, qkov
from ...training.init import init_params
from ..qkov_readings import unbalanced_fraction_callback
from ..qkov_training import scan_snap_stream


def balancedness_run(cfg, device) -> dict:
    """The run at the rates ``cfg.balance_lr_factors * cfg.runs.lr`` (``lr``), its history with the
    unbalanced fraction of the Gram matrices' change per circuit (``history["drift"]``), that
    fraction at the end (``end``: rates x (qk, ov)), its log-log slope against the rate
    (``slope``) and whether it grows with the rate (``grows``)."""
    bal_lr = np.array(cfg.balance_lr_factors) * cfg.runs.lr
    m_bal = qkov.SingleQueryAttention.named("FAFO")
    p_bal = init_params(m_bal.specs(), [0] * len(bal_lr), gamma=cfg.runs.gamma, device=device)
    h_bal = engine.train(
        m_bal,
        p_bal,
        scan_snap_stream(
            len(bal_lr), cfg.runs.batch_size, cfg.runs.seq_len, cfg.balance_seed, device=device
        ),
        cfg.balance_steps,
        optimizer="sgd",
        lr=torch.tensor(bal_lr, dtype=torch.float32),
        log_at=cfg.balance_n_logs,
        # the unbalanced fraction of the Gram matrices' change since p_bal, per circuit
        callbacks={"drift": unbalanced_fraction_callback(p_bal)},
        desc="balancedness",
    )
    bal_end = h_bal["drift"][-1]  # (K, 2): qk, ov
    # How the drift grows with the rate: log-log slope over the three rates, per circuit.
    bal_slope = np.polyfit(np.log(bal_lr), np.log(bal_end), 1)[0]  # (2,)
    bal_grows = bool(np.all(np.diff(bal_end, axis=0) > 0))
    return dict(lr=bal_lr, history=h_bal, end=bal_end, slope=bal_slope, grows=bal_grows)


def balance_numbers(bal: dict) -> dict:
    """The glued numbers of :func:`balancedness_run`."""
    bal_lr, bal_end, bal_slope = bal["lr"], bal["end"], bal["slope"]
    return dict(
        bal_slope_qk=float(bal_slope[0]),
        bal_slope_ov=float(bal_slope[1]),
        bal_small=float(bal_end[0].max()),
        bal_large=float(bal_end[-1].max()),
        bal_lr_small=float(bal_lr[0]),
        bal_lr_large=float(bal_lr[-1]),
    )

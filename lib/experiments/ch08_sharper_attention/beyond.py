"""What is read from the two real-data stand-ins: the agreement grammar (accuracy,
attention on the subject, comprehensiveness, sufficiency) and character-level Shakespeare
(entropy, normalized entropy and previous-character mass at the matched validation
loss)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from ...book.page import table
from ...data import tasks
from ...measure import attention, matched_loss
from .. import qkov_readings as readings
from .settings import picks

SVA_TAGS = {
    "accuracy": "acc",
    "rationale mass": "mass",
    "comprehensiveness": "comp",
    "sufficiency": "suff",
    "accuracy, >=2 attractors all mismatched": "hard",
}


def agreement_reading(sva_run) -> dict:
    """Per measure, the seed means of the base arm and the faster-QK arm: accuracy,
    attention on the subject, comprehensiveness and sufficiency on held-out sentences, and
    the accuracy on those whose two or more attractors all disagree with the subject."""
    tf, p_tf, sva_te, sva_r_inst = sva_run.tf, sva_run.p_tf, sva_run.sva_te, sva_run.sva_r_inst
    pad = tasks.Agreement.PAD  # what replaces a removed token
    sva = attention.faithfulness(tf, p_tf, sva_te.X, sva_te.y, sva_te.subject_pos, pad)
    hard = (sva_te.n_mismatched == sva_te.n_attractors) & (sva_te.n_attractors >= 2)
    te_hard = (sva_te.X[hard], sva_te.y[hard], sva_te.subject_pos[hard])
    sva_hard = attention.faithfulness(tf, p_tf, *te_hard, pad)
    base_sel, fast_sel = sva_r_inst == 1.0, sva_r_inst != 1.0
    sva_mean = {
        key: (float(v[base_sel].mean()), float(v[fast_sel].mean())) for key, v in sva.items()
    }
    sva_mean["accuracy, >=2 attractors all mismatched"] = (
        float(sva_hard["accuracy"][base_sel].mean()),
        float(sva_hard["accuracy"][fast_sel].mean()),
    )
    return sva_mean


def agreement_numbers(sva_mean, sva_run, cfg) -> dict:
    """The agreement numbers the text quotes, for glue."""
    return (
        {f"sva_{SVA_TAGS[key]}_base": b0 for key, (b0, _) in sva_mean.items()}
        | {f"sva_{SVA_TAGS[key]}_fast": b1 for key, (_, b1) in sva_mean.items()}
        | dict(
            sva_mult=cfg.sva.r,
            sva_final_loss=float(sva_run.h_tf["loss"][-1].max()),
            acc_tol=cfg.sva.acc_tol,
        )
    )


def agreement_table(sva_mean, cfg):
    """Every held-out measure for both arms (seed means)."""
    return table(
        [(key.replace(">=", "≥"), b0, b1) for key, (b0, b1) in sva_mean.items()],
        ["held-out measure (seed mean)", "QK × 1", f"QK × {cfg.sva.r:g}"],
    )


def shakespeare_reading(shk_run, cfg, device) -> SimpleNamespace:
    """The validation curves (``loss``, ``H``, ``Hn``, ``prev``: each (n_logs, K)), the
    matched validation loss ``target``, every instance's values there (``at``) and their
    seed means per multiplier (``mean``), the entropy of uniform attention, the unigram
    baseline, the entropy per multiplier and seed (``H_by``) and the monotonicity checks."""
    h_shk, shk_r, shk_split = shk_run.h_shk, shk_run.shk_r, shk_run.split
    shk_steps_log = h_shk.steps
    shk_loss, shk_H, shk_Hn, shk_prev = np.moveaxis(h_shk["val"], -1, 0)  # each (n_logs, K)
    shk_target = float(shk_loss.min(0).max())
    shk_at = {
        name: matched_loss.at_matched_loss(shk_loss, v, shk_target)
        for name, v in (("H", shk_H), ("Hn", shk_Hn), ("prev", shk_prev))
    }
    shk_at["step"] = matched_loss.at_matched_loss(
        shk_loss, np.repeat(shk_steps_log[:, None], len(shk_r), 1), shk_target
    )
    shk_at["final loss"] = shk_loss[-1]
    shk_mean = {n: readings.group_by(v, shk_r, cfg.shk.r_grid).mean(1) for n, v in shk_at.items()}
    shk_uniform_H = float(readings.log_positions(cfg.shk.context, device).mean())
    # A context-free baseline: a model that learned nothing from its context scores this.
    shk_unigram = readings.unigram_loss(
        shk_split.train, shk_split.val, shk_split.tokenizer.vocab_size
    )
    shk_prev_monotone = bool(np.all(np.diff(shk_mean["prev"]) > 0))
    H_by = readings.group_by(shk_at["H"], shk_r, cfg.shk.r_grid)  # (n_multipliers, n_seeds)
    shk_H_monotone = bool(np.all(np.diff(shk_mean["H"]) < 0))
    shk_Hn_monotone = bool(np.all(np.diff(shk_mean["Hn"]) < 0))
    return SimpleNamespace(
        steps=shk_steps_log,
        shk_r=shk_r,
        loss=shk_loss,
        H=shk_H,
        target=shk_target,
        at=shk_at,
        mean=shk_mean,
        uniform_H=shk_uniform_H,
        unigram=shk_unigram,
        prev_monotone=shk_prev_monotone,
        H_by=H_by,
        H_monotone=shk_H_monotone,
        Hn_monotone=shk_Hn_monotone,
    )


def shakespeare_numbers(shk, shk_run, cfg) -> dict:
    """The Shakespeare numbers the text quotes, by position in the multiplier grid (_0
    lowest, _1 middle, _2 highest), for glue under the prefix ``shk_``."""
    final = shk.mean["final loss"]  # seed means, by multiplier
    pick = picks(len(cfg.shk.r_grid))  # the lowest, middle and highest multiplier
    shk_split = shk_run.split
    return (
        {f"mult_{i}": cfg.shk.r_grid[k] for i, k in enumerate(pick)}
        | {
            f"{n}_m{i}": float(shk.mean[n][k])
            for n in ("H", "Hn", "prev")
            for i, k in enumerate(pick)
        }
        | {f"final_m{i}": float(final[k]) for i, k in enumerate(pick)}
        | {f"dloss_{i}": float(final[pick[i]] - final[0]) for i in (1, 2)}
        | dict(
            paired_all=int(np.all(np.diff(shk.H_by, axis=0) < 0, axis=0).sum()),
            target=shk.target,
            uniform_H=shk.uniform_H,
            unigram=shk.unigram,
            n_val_plays=len(shk_split.val_documents),
            val_chars=len(shk_split.val_text),
            layers=cfg.shk.layers,
            d_model=cfg.shk.d_model,
            context=cfg.shk.context,
            mlp=cfg.shk.mlp,
            val=cfg.shk.val_n,
            steps=cfg.shk.steps,
            lr=cfg.shk.lr,
        )
    )


def shakespeare_table(shk, cfg):
    """Every reading at the matched validation loss per multiplier (seed means, ranges)."""
    return table(readings.shk_table(shk.at, shk.shk_r, cfg.shk.r_grid))

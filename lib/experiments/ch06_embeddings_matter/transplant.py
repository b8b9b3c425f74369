"""E3's readings: the transplants' checks (alignment, spectrum, effective rank), final
accuracies and onsets per arm, and the signature's gap over its permuted control."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ...book import page
from ...measure import metrics as M
from ...measure import onsets
from .design import ARMS
from .readings import per_seed


def e3_rows(sweep, train_acc, test_acc, s_onset) -> list[dict]:
    """Final accuracies (seed means and per seed) and steps to the onset accuracy, per arm."""
    rows = []
    for frozen in (True, False):
        for arm in ARMS:
            ks = sweep.index(arm=arm, frozen=frozen)
            rows.append(
                {
                    "embedding": "frozen" if frozen else "trainable",
                    "arm": arm,
                    "train acc": train_acc[ks].mean(),
                    "held-out acc": test_acc[ks].mean(),
                    "held-out (per seed)": per_seed(test_acc[ks], "{:.3f}"),
                    "steps to 50% train (per seed)": per_seed(s_onset[ks]),
                }
            )
    return rows


@dataclass
class E3Reading:
    """What E3's run and its transplants give: the early arm's R_cos with the signature (per
    seed), the permuted arm's spectrum error, each arm's effective rank (first seed), steps
    to the onset accuracy, final accuracies, how far trainable embeddings moved, the table
    rows, and labelled final accuracies with the signature-permuted gap."""

    R_early: np.ndarray
    spec_err: float
    eff_rank: dict
    s50: np.ndarray
    tr3: np.ndarray
    te3: np.ndarray
    moved: np.ndarray
    trainable: np.ndarray
    rows: list
    acc: dict  # (embedding, arm) -> (train acc, held-out acc), seed means
    te3x: object
    tr3x: object
    frozen_te: dict
    gap: dict  # frozen -> signature minus permuted held-out accuracy, per seed
    random_above: np.ndarray


def read_e3(cfg, e3, tp) -> E3Reading:
    """E3's readings from its run ``e3`` and its transplants ``tp``."""
    sw3, h3, arm_E, inp = e3.sweep, e3.h, tp.arm_E, tp.inp
    seeds = list(cfg.seeds)
    # R_cos of the transplanted early embedding (what the network gets) with the signature.
    R_early = np.array([M.r_cos(E["early"], tp.phi_c) for E in arm_E.values()])
    # Check: the permuted arm keeps the signature arm's spectrum exactly.
    spec_err = max(
        float(
            (torch.linalg.svdvals(E["permuted"]) - torch.linalg.svdvals(E["signature"])).abs().max()
        )
        for E in arm_E.values()
    )
    eff_rank = {arm: float(M.effective_rank(arm_E[seeds[0]][arm])) for arm in ARMS}
    s50 = np.asarray(onsets.onset_step(h3.steps, h3["train_acc"], cfg.e3.onset_acc), dtype=float)
    # Final accuracies: the mean of the last logged points (the curves are noisy).
    last = cfg.e3.final_points
    tr3, te3 = h3["train_acc"][-last:].mean(0), h3["test_acc"][-last:].mean(0)
    # How far a trainable embedding moves from its transplant: |E(T) - E(0)| / |E(0)|.
    E0_3 = e3.E0
    moved = (
        ((e3.params["E"].detach() - E0_3)[:, inp].norm(dim=(1, 2)) / E0_3[:, inp].norm(dim=(1, 2)))
        .cpu()
        .numpy()
    )
    trainable = ~np.array(sw3["frozen"])
    rows3 = e3_rows(sw3, tr3, te3, s50)
    e3_acc = {(r["embedding"], r["arm"]): (r["train acc"], r["held-out acc"]) for r in rows3}
    # Final accuracies, labelled: dims (frozen, arm, seed).
    te3x, tr3x = sw3.dataarray(te3, "held-out acc"), sw3.dataarray(tr3, "train acc")
    frozen_te = {arm: te3x.sel(frozen=True, arm=arm).values for arm in ARMS}
    # Signature against its permuted control, seed by seed.
    gap = {
        frozen: (
            te3x.sel(arm="signature", frozen=frozen) - te3x.sel(arm="permuted", frozen=frozen)
        ).values
        for frozen in (True, False)
    }
    # The expected order's (4) > (3) on held-out pairs: random rows above permuted ones, per seed.
    e3_random_above = frozen_te["random"] > frozen_te["permuted"]
    return E3Reading(
        R_early,
        spec_err,
        eff_rank,
        s50,
        tr3,
        te3,
        moved,
        trainable,
        rows3,
        e3_acc,
        te3x,
        tr3x,
        frozen_te,
        gap,
        e3_random_above,
    )


def e3_numbers(cfg, r3: E3Reading) -> dict:
    """E3's numbers for glue."""
    seeds, e3_acc, gap, frozen_te = list(cfg.seeds), r3.acc, r3.gap, r3.frozen_te
    tr_arms = [e3_acc[("trainable", a)] for a in ARMS]
    out = (
        dict(
            moved=float(r3.moved[r3.trainable].mean()),
            early=cfg.e3.early_step,
            gamma_rest=cfg.e3.gamma_rest,
            R_early=float(r3.R_early.mean()),
            spec_err=r3.spec_err,
            final_points=cfg.e3.final_points,
        )
        | {f"{emb}_{arm}_train": float(a_tr) for (emb, arm), (a_tr, _) in e3_acc.items()}
        | {f"{emb}_{arm}_test": float(a_te) for (emb, arm), (_, a_te) in e3_acc.items()}
    )
    out |= dict(
        sig_test_min=float(frozen_te["signature"].min()),
        gap_frozen=float(gap[True].mean()),
        gap_trainable=float(gap[False].mean()),
        gap_trainable_seeds=page.listing(np.array(seeds)[gap[False] > 0]),
        trainable_test_lo=float(min(a[1] for a in tr_arms)),
        trainable_test_hi=float(max(a[1] for a in tr_arms)),
        trainable_train_lo=float(min(a[0] for a in tr_arms)),
        trainable_train_hi=float(max(a[0] for a in tr_arms)),
        perm_test_max=float(frozen_te["permuted"].max()),
        random_above_seeds=page.listing(np.array(seeds)[r3.random_above]),
    )
    out |= {f"rank_{arm}": v for arm, v in r3.eff_rank.items()}
    return {f"e3_{k}": v for k, v in out.items()}

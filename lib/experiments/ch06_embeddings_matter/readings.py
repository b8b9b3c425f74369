"""E1's and E2's readings: the twins' signature distances, steps to 95% and slow-downs,
T3's plateau, the early pair cosines, and T1's held-out accuracy and anchor geometry."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch
from scipy.stats import spearmanr

from ...book import page
from ...data import signatures as sig
from ...data import tasks
from ...measure import metrics as M
from .design import (
    ORDER,
    SHORT,
    TWIN_SHORT,
    TWINS,
    best_accuracy_without_gate,
    critical_pairs,
    signature_tv,
)

# --------------------------------------------------------------------------- E1


def per_seed(values, fmt: str = "{:.0f}") -> str:
    """Values over seeds in words (:mod:`lib.book.page`), in seed order: ``750, 725 and 700``;
    ``—`` for a run that never got there (an infinite or missing value)."""
    return page.listing(
        [fmt.format(v) if np.isfinite(v) else page.MISSING for v in values], noun=""
    )


def twin_design(cfg, split: dict, V: int) -> tuple[dict, dict]:
    """The mean TV distance between each twin's critical pairs' order-0 signatures, and the
    design's numbers for glue (the largest distance on the full modular table among them)."""
    p = cfg.p
    PAIRS = critical_pairs(p)
    full_mod = tasks.modular_addition(cfg.data_seed, p=p, test_fraction=0.0).train
    phi_full = sig.label_signature(full_mod.X, full_mod.y, p, p)
    tv_full_mod = float(0.5 * (phi_full[:, None] - phi_full[None]).abs().sum(-1).max())
    tv = {name: signature_tv(split[name]["train"], PAIRS[name], V) for name in ORDER}
    n_mod = len(split["modular addition"]["train"])
    numbers = dict(
        train_frac=n_mod / p**2, mod_rows_per_token=2 * n_mod / p, tv_full_mod=tv_full_mod
    )
    numbers |= {"tv_" + name.replace(" ", "_"): v for name, v in tv.items()}
    return tv, numbers


def design_table(split: dict, tv: dict) -> list[dict]:
    """Per task: its order, train and test rows and the mean TV between its pairs' signatures."""
    return [
        {
            "task": n,
            "order": ORDER[n],
            "train rows": len(split[n]["train"]),
            "test rows": len(split[n]["test"]),
            "mean TV between the pairs' order-0 signatures": round(tv[n], 4),
        }
        for n in tv
    ]


def slowdowns(e1, inits: dict) -> dict:
    """Per seed, ``{(order-0 task, order-1 task, init): steps of the order-1 twin / steps of
    the order-0 twin}`` (instances of one seed start from the same weights in every task)."""
    return {
        (o0, o1, init): e1.s95(o1, init) / e1.s95(o0, init) for o0, o1 in TWINS for init in inits
    }


def e1_numbers(cfg, e1, ratio: dict, inits: dict) -> dict:
    """E1's numbers for glue: slow-downs (mean, min, max over seeds), mean steps to 95%,
    final test accuracies of the arithmetic tasks, and the censored runs."""
    sw1, h1, censored = e1.sweep, e1.h, e1.censored
    spread = {"": np.mean, "_min": np.min, "_max": np.max}  # over seeds
    out = {
        f"ratio_{TWIN_SHORT[t0]}_{init}{stat}": float(f(r))
        for (t0, _, init), r in ratio.items()
        for stat, f in spread.items()
    }
    out |= {f"s95_{SHORT[t]}_{init}": np.mean(e1.s95(t, init)) for t in ORDER for init in inits}
    arith = ["plain addition", "modular addition", "halved sum"]
    test_of = {
        (t, init): h1["test_acc"][-1, sw1.index(task=t, init=init)].mean()
        for t in arith
        for init in inits
    }
    out |= {f"e1_test_{SHORT[t]}_{init}": v for (t, init), v in test_of.items()}
    out |= dict(
        n_censored=int(censored[[t in ORDER for t in sw1["task"]]].sum()),
        censored_runs=page.listing(
            [
                f"{t} ({init} init, seed {s})"
                for t, init, s, c in zip(
                    sw1["task"], sw1["init"], sw1["seed"], censored, strict=True
                )
                if c and t in ORDER
            ],
            "",
            none="none of them",
        ),
        p_labels=cfg.p,
        s95_halved_small_list=per_seed(e1.s95("halved sum", "small")),
        e1_steps=cfg.e1.steps,
    )
    return out


def e1_table(sweep, inits, steps95, test_acc) -> pd.DataFrame:
    """Steps to the fit accuracy (per seed and mean) and final test accuracy, per twin and init."""
    rows = []
    for t in ORDER:
        for init in inits:
            ks = sweep.index(task=t, init=init)
            rows.append(
                {
                    "task": t,
                    "order": ORDER[t],
                    "init": init,
                    "steps to 95% (per seed)": per_seed(steps95[ks]),
                    "mean": steps95[ks].mean(),
                    "final test acc": test_acc[ks].mean(),
                }
            )
    return pd.DataFrame(rows)


@dataclass
class T3Plateau:
    """The gate-blind predictor's accuracy on T3 and on its control (counted on the data),
    and T3's accuracy when its control (same seed) first reaches 95%, seed mean per init."""

    order0_acc: float
    ctrl_acc: float
    at_ctrl: dict


def t3_plateau(e1, split: dict, V: int, inits: dict) -> T3Plateau:
    """T3's plateau against the order-0 solution's accuracy."""
    sw1, h1, steps1 = e1.sweep, e1.h, e1.steps
    order0_solution_acc = best_accuracy_without_gate(split["T3 gated"]["train"], V)
    ctrl_without_gate_acc = best_accuracy_without_gate(split["T3 control"]["train"], V)
    at_ctrl_mean = {}
    for init in inits:
        ks3 = sw1.index(task="T3 gated", init=init)
        at_ctrl = [
            h1["train_acc"][np.searchsorted(steps1, min(c95, steps1[-1])), k]
            for k, c95 in zip(ks3, e1.s95("T3 control", init), strict=True)
        ]
        at_ctrl_mean[init] = float(np.mean(at_ctrl))
    return T3Plateau(order0_solution_acc, ctrl_without_gate_acc, at_ctrl_mean)


def plateau_numbers(pl: T3Plateau) -> dict:
    """T3's plateau for glue."""
    return dict(e1_order0_acc=pl.order0_acc, e1_order0_acc_ctrl=pl.ctrl_acc) | {
        f"e1_T3_at_ctrl_{init}": v for init, v in pl.at_ctrl.items()
    }


def slowdown_table(ratio: dict, seeds) -> list[dict]:
    """The slow-down per seed; a ratio of 0 means the order-0 twin never reached 95% (—)."""
    return [
        {"order-1 task": t, "order-0 twin": t0, "init": init}
        | {f"seed {s}": (None if v == 0 else float(v)) for s, v in zip(seeds, r, strict=True)}
        for (t0, t, init), r in ratio.items()
    ]


def early_pair_cosines(cfg, e1, inits: dict) -> tuple[dict, int]:
    """``{(task, init): per-seed mean cosine of the critical pairs' increments}`` at the
    first logged step from E3's early step on, and that step."""
    steps1 = e1.steps
    early_k = int(np.searchsorted(steps1, cfg.e3.early_step))
    pc = e1.h["pair_cos"]
    pc_early = {
        (t, init): pc[early_k, e1.sweep.index(task=t, init=init)] for t in ORDER for init in inits
    }
    return pc_early, int(steps1[early_k])


def pair_cosine_numbers(pc_early: dict, early_step: int) -> dict:
    """The early pair cosines (seed means) for glue."""
    return {f"pc_{SHORT[t]}_{init}": float(v.mean()) for (t, init), v in pc_early.items()} | dict(
        early_step=early_step
    )


def pair_cosine_table(pc_early: dict, inits: dict) -> list[dict]:
    """The mean cosine of the critical pairs' increments, per task and init."""
    return [
        {"task": t, "order": ORDER[t]}
        | {f"{init} init": pc_early[(t, init)].mean() for init in inits}
        for t in ORDER
    ]


# --------------------------------------------------------------------------- E2


def t1_geometry(dE) -> tuple[torch.Tensor, float, float]:
    """Cosines of T1's anchor increments (mean anchor removed; memory anchors first), the
    ordinal score of the reasoning anchors (Spearman correlation of their cosines with
    -|a-a'|) and the mean pairwise cosine of the memory anchors."""
    anchors = tasks.T1_MEMORY + tasks.T1_REASONING
    n = len(tasks.T1_MEMORY)
    A = dE[anchors]
    S = M.cosine_similarity_matrix(A - A.mean(0))
    i, j = torch.triu_indices(n, n, 1)
    ordinal = spearmanr(S[n:, n:][i, j].cpu().numpy(), -(i - j).abs().numpy()).statistic
    return S, float(ordinal), float(S[:n, :n][i, j].mean())


@dataclass
class E2Reading:
    """T1's instances (small, large) in the E1 run, their final held-out, training and
    reasoning-training accuracies, and their anchor geometry per instance."""

    t1_small: list
    t1_large: list
    held_small: np.ndarray
    held_large: np.ndarray
    train_small: np.ndarray
    train_large: np.ndarray
    rsn_small: np.ndarray
    rsn_large: np.ndarray
    geo: dict
    ordinal: dict
    mem_cos: dict


def read_e2(e1, split: dict, device) -> E2Reading:
    """E2's readings from the E1 run's T1 instances."""
    sw1, h1, params1, model = e1.sweep, e1.h, e1.params, e1.model
    t1_small = sw1.index(task="T1 composite", init="small")
    t1_large = sw1.index(task="T1 composite", init="large")
    held_small, held_large = h1["test_acc"][-1, t1_small], h1["test_acc"][-1, t1_large]
    train_small, train_large = h1["train_acc"][-1, t1_small], h1["train_acc"][-1, t1_large]
    # Training accuracy on the reasoning pairs alone (the memory pairs are the slow part).
    t1_tr = split["T1 composite"]["train"]
    is_rsn = t1_tr.X[:, 1] >= tasks.T1_REASONING[0]
    with torch.no_grad():
        P1 = {n: w[t1_small + t1_large] for n, w in params1.items()}
        z1 = model.forward(P1, t1_tr.X[is_rsn].to(device)).argmax(-1)
        acc_rsn = (z1 == t1_tr.y[is_rsn].to(device)).double().mean(-1).cpu().numpy()
    rsn_small, rsn_large = acc_rsn[: len(t1_small)], acc_rsn[len(t1_small) :]
    # The geometry of the anchors' increments: ordinal reasoning anchors, spread memory anchors.
    dE = (params1["E"] - e1.E0).detach().double()
    geo = {k: t1_geometry(dE[k]) for k in t1_small + t1_large}
    t1_ks = {"small": t1_small, "large": t1_large}
    ordinal = {init: np.array([geo[k][1] for k in ks]) for init, ks in t1_ks.items()}
    mem_cos = {init: np.array([geo[k][2] for k in ks]) for init, ks in t1_ks.items()}
    return E2Reading(
        t1_small,
        t1_large,
        held_small,
        held_large,
        train_small,
        train_large,
        rsn_small,
        rsn_large,
        geo,
        ordinal,
        mem_cos,
    )


def e2_numbers(e2: E2Reading) -> dict:
    """E2's numbers for glue (seed means, and the lowest and highest held-out seeds)."""
    out = dict(rsn_small=float(e2.rsn_small.mean()), rsn_large=float(e2.rsn_large.mean()))
    out |= {f"ordinal_{init}": float(v.mean()) for init, v in e2.ordinal.items()}
    out |= {f"memcos_{init}": float(v.mean()) for init, v in e2.mem_cos.items()}
    out |= dict(
        held_small=float(e2.held_small.mean()),
        held_large=float(e2.held_large.mean()),
        held_small_min=float(e2.held_small.min()),
        held_large_max=float(e2.held_large.max()),
        train_small=float(e2.train_small.mean()),
        train_large=float(e2.train_large.mean()),
    )
    return {f"e2_{k}": v for k, v in out.items()}


def e2_table(e2: E2Reading, seeds) -> list[dict]:
    """Per init and seed: T1's accuracies, ordinal score and memory anchors' mean cosine."""
    per_init = {
        "small": (e2.held_small, e2.train_small, e2.rsn_small),
        "large": (e2.held_large, e2.train_large, e2.rsn_large),
    }
    return [
        {
            "init": init,
            "seed": s,
            "held-out pair acc": round(float(held[j]), 3),
            "train acc": round(float(train[j]), 3),
            "train acc (reasoning)": round(float(rsn[j]), 3),
            "ordinal score (reasoning)": round(float(e2.ordinal[init][j]), 2),
            "mean cos (memory)": round(float(e2.mem_cos[init][j]), 2),
        }
        for init, (held, train, rsn) in per_init.items()
        for j, s in enumerate(seeds)
    ]

"""Chapter 6, embedding structure matters: the four experiments' tasks, grids and bookkeeping.

E1 and E2 are one batched run of the Emb-MLP over (task, init, seed); E3 (embedding
transplants) and E4 (injecting synonym groups) one batched run each. The embedding
constructions and the auxiliary-data stream are in :mod:`lib.training.embedstruct`; this module holds
the chapter's constants, its task set, its callbacks and the tables that read the runs.
"""

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
from ...measure import onsets
from .. import ChapterConfig

CHAPTER = "06_embeddings_matter"


@dataclass(frozen=True)
class Config(ChapterConfig):
    """Chapter 6 at book scale.

    d_model, d_hidden: the Emb-MLP's embedding and hidden widths (every experiment).
    lr: Adam's learning rate (every run); smaller at paper scale, where the model is wider
        and the runs ten times longer.
    batch_size: rows per step per instance (E1, E3).
    seeds: the seeds of the initial weights; the data are drawn once (``data_seed``).
    gamma: the small initialization rate (std = d_in^-gamma), 1: the regime in which the
        embeddings first move along their label signatures (Chapters 3-4).
    gamma_large: the large-init comparator, 0.3: weights above the standard scale
        d_in^-1/2, where the leading-order flow no longer describes the first steps
        (Chapter 2 checks the expansion at both rates).
    data_seed: the seed of every data draw (task splits, batch streams, synonym groups).
    eval_seed: the seed of E1's fixed subsample of each training set.
    p: the modulus of the arithmetic twins (operands 0..p-1).
    t3_test_fraction: the share of T3's (key, magnitude) blocks held out.
    fit_acc: the training accuracy at which a task counts as learned (E1, E4).
    e1_steps, e1_log_every: steps of the E1+E2 run and its logging interval.
    e1_eval_rows: rows of each training set on which E1's learning curves are measured.
    order0_tol: how close T3's accuracy must be to the order-0 solution's when its control
        is learned, for T3 to count as on the order-0 plateau.
    e3_early_step: the Adam steps of the small-init run whose embedding is E3's "early"
        arm; also the step at which E1's pair cosines are read.
    e3_gamma_rest: the init rate of the rest of the network in E3 (the standard scale
        0.5), so the arms differ in their embedding only.
    e3_steps, e3_log_every: steps of the E3 run and its logging interval.
    e3_eval_rows: training rows on which E3's training accuracy is measured.
    e3_final_points: E3's final accuracies are the mean of this many last logged points
        (the curves are noisy on 200 test rows).
    e3_onset_acc: the training accuracy whose first step E3's table reports.
    transplant_seed: seed s of E3 draws its permutation and random rows with seed
        ``transplant_seed + s``.
    e4_steps, e4_log_every: steps of the E4 run and its logging interval.
    e4_keep: the share of the (key, member) pairs of trained members that E4 trains on.
    e4_main_batch, e4_aux_batch: downstream and auxiliary rows per step.
    e4_aux_weight: the weight of the auxiliary loss in the arms that have auxiliary data.
    exact_tol: a signature alignment within this of 1 counts as identical signatures.
    """

    d_model: int = 64
    d_hidden: int = 128
    lr: float = 1e-2
    batch_size: int = 128
    seeds: tuple[int, ...] = (0, 1, 2)
    gamma: float = 1.0
    gamma_large: float = 0.3
    data_seed: int = 0
    eval_seed: int = 1
    p: int = 47
    t3_test_fraction: float = 0.2
    fit_acc: float = 0.95
    e1_steps: int = 2000
    e1_log_every: int = 25
    e1_eval_rows: int = 1024
    order0_tol: float = 0.1
    e3_early_step: int = 100
    e3_gamma_rest: float = 0.5
    e3_steps: int = 2000
    e3_log_every: int = 25
    e3_eval_rows: int = 2048
    e3_final_points: int = 5
    e3_onset_acc: float = 0.5
    transplant_seed: int = 100
    e4_steps: int = 800
    e4_log_every: int = 10
    e4_keep: float = 0.5
    e4_main_batch: int = 64
    e4_aux_batch: int = 16
    e4_aux_weight: float = 1.0
    exact_tol: float = 1e-12


OVERRIDES = {
    "ci": dict(seeds=(0, 1), e1_steps=1500, e3_steps=1000, e4_steps=400),
    "paper": dict(
        d_model=128,
        d_hidden=512,
        lr=3e-3,
        batch_size=512,
        seeds=(0, 1, 2, 3, 4),
        p=97,
        e1_steps=20000,
        e1_log_every=50,
        e3_steps=10000,
        e3_early_step=200,
        e4_steps=4000,
        e4_main_batch=256,
        e4_aux_batch=64,
    ),
}

# --------------------------------------------------------------------------- E1 and E2

#: Where each twin's information sits (T1 composite, E2's task, has no twin).
ORDER = {
    "plain addition": 0,
    "modular addition": 1,
    "halved sum": 0,
    "T3 control": 0,
    "T3 gated": 1,
}
#: The matched twins: (order-0 task, order-1 task).
TWINS = [
    ("plain addition", "modular addition"),
    ("halved sum", "modular addition"),
    ("T3 control", "T3 gated"),
]
#: Short names of the tasks in glue keys; and of each twin, by its order-0 task.
SHORT = {
    "plain addition": "plain",
    "modular addition": "modular",
    "halved sum": "halved",
    "T3 control": "ctrl",
    "T3 gated": "T3",
}
TWIN_SHORT = {"plain addition": "modular", "halved sum": "halved", "T3 control": "T3"}
SEQ_LEN = 3  # every task padded to T1's length


def e1_tasks(cfg: Config) -> tuple[dict, dict, int]:
    """E1's twins and E2's T1, their train/test splits padded to one length, and one vocabulary.

    Returns ``(raw, split, V)``: the :class:`lib.data.tasks.Task` of each name, ``{name: {"train",
    "test": TaskData}}`` with every sequence padded by a marker token (the last token of the
    vocabulary) to :data:`SEQ_LEN`, and the vocabulary size V.
    """
    seed, p, tf = cfg.data_seed, cfg.p, cfg.t3_test_fraction
    raw = {
        "plain addition": tasks.plain_addition(seed, p=p),
        "modular addition": tasks.modular_addition(seed, p=p),
        "halved sum": tasks.plain_addition(seed, p=p, halve=True),
        "T3 control": tasks.gated_addition_control(seed, test_fraction=tf),
        "T3 gated": tasks.gated_addition(seed, test_fraction=tf),
        "T1 composite": tasks.composite_addition(seed, noise_keys=False),
    }
    mark = max(d.vocab_size for t in raw.values() for d in (t.train, t.test))
    split = {
        name: {
            part: tasks.with_marker(d, mark, SEQ_LEN) if d.X.shape[1] < SEQ_LEN else d
            for part, d in (("train", t.train), ("test", t.test))
        }
        for name, t in raw.items()
    }
    return raw, split, mark + 1


def critical_pairs(p: int) -> dict:
    """The token pairs each twin's label must tell apart: all operand pairs for the
    arithmetic twins, the magnitude pairs (2m-1, 2m) for T3 and its control."""
    a = tasks.T3_ANCHORS
    t3_pairs = list(zip(a[0::2], a[1::2], strict=True))
    arith = [(i, j) for i in range(p) for j in range(i + 1, p)]
    return {
        "plain addition": arith,
        "modular addition": arith,
        "halved sum": arith,
        "T3 control": t3_pairs,
        "T3 gated": t3_pairs,
    }


def signature_tv(d, pairs, V: int) -> float:
    """Mean total-variation distance between the order-0 signatures of ``pairs`` on ``d``."""
    phi = sig.label_signature(d.X, d.y, V, V)
    i, j = (torch.tensor(c) for c in zip(*pairs, strict=True))
    return float(0.5 * (phi[i] - phi[j]).abs().sum(1).mean())


def eval_sets(split: dict, n_rows: int, seed: int, device) -> tuple[dict, dict]:
    """A fixed subsample of ``n_rows`` of each training set (for the learning curves), and
    each whole test set, on ``device``."""
    gen = torch.Generator().manual_seed(seed)
    train = {}
    for t, parts in split.items():
        d = parts["train"]
        idx = torch.randperm(len(d), generator=gen)[:n_rows]
        train[t] = (d.X[idx].to(device), d.y[idx].to(device))
    test = {
        t: (parts["test"].X.to(device), parts["test"].y.to(device)) for t, parts in split.items()
    }
    return train, test


def pair_masks(pairs: dict, V: int, task_per_instance) -> torch.Tensor:
    """``(K, V, V)`` booleans: the critical pairs of each instance's task (none for T1)."""
    masks = {t: torch.zeros(V, V, dtype=torch.bool) for t in set(task_per_instance)}
    for t, ps in pairs.items():
        if t in masks:
            masks[t][tuple(torch.tensor(ps).T)] = True
    return torch.stack([masks[t] for t in task_per_instance])


def per_task_accuracy(model, sets: dict, task_names, task_of):
    """Callback: each instance's accuracy on its own task's ``sets[task] = (X, y)``."""
    task_of = np.asarray(task_of)

    def acc(step, params):
        out = torch.zeros(len(task_of), dtype=torch.float64)
        for ti, t in enumerate(task_names):
            sel = np.flatnonzero(task_of == ti).tolist()
            P = {n: w[sel] for n, w in params.items()}
            X, y = sets[t]
            out[sel] = (model.forward(P, X).argmax(-1) == y).double().mean(-1).cpu()
        return out

    return acc


def pair_cosine(E0, pair_mask):
    """Callback: the mean cosine between the increments E(t)-E(0) of each instance's pairs."""

    def measure(step, params):
        S = M.cosine_similarity_matrix((params["E"] - E0).double())
        m = pair_mask.double()
        return (S * m).sum((1, 2)) / m.sum((1, 2)).clamp_min(1)

    return measure


def per_seed(values, fmt: str = "{:.0f}") -> str:
    """Values over seeds in words (:mod:`lib.book.page`), in seed order: ``750, 725 and 700``;
    ``—`` for a run that never got there (an infinite or missing value)."""
    return page.listing(
        [fmt.format(v) if np.isfinite(v) else page.MISSING for v in values], noun=""
    )


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


def best_accuracy_without_gate(d, V: int) -> float:
    """The accuracy of the best predictor that sees key and anchor but not the gate, counted
    on the data: the most frequent label of each (key, anchor) context."""
    context = d.X[:, 0] * V + d.X[:, 1]
    counts = torch.zeros(V * V, V).index_put_((context, d.y), torch.ones(len(d)), accumulate=True)
    return float(counts.max(1).values.sum() / len(d))


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


# --------------------------------------------------------------------------- E3

#: The four embeddings of the transplant experiment, in the order of the text.
ARMS = ["early", "signature", "permuted", "random"]


def reasoning_part(t1) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """T1's reasoning rows: ``(X, y)`` of its training split and of its held-out pairs."""
    keep = t1.train.X[:, 1] >= tasks.T1_REASONING[0]
    return t1.train.X[keep], t1.train.y[keep], t1.test.X, t1.test.y


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


# --------------------------------------------------------------------------- E4

#: E4's arms: downstream data only, plus the auxiliary rows, plus a shuffled grouping of them.
A4 = ["none", "aux", "shuffled"]


def e4_rows(h4, sweep, inits, fit_acc: float) -> list[dict]:
    """Final target-structure R and accuracies, and steps to the fit accuracy, per init and arm."""
    rows = []
    for init in inits:
        for arm in A4:
            ks = sweep.index(arm=arm, init=init)
            fit = onsets.onset_step(h4.steps, h4["train_acc"][:, ks], fit_acc)
            rows.append(
                {
                    "init": init,
                    "arm": arm,
                    "R (end)": h4["R"][-1, ks].mean(),
                    "train acc": h4["train_acc"][-1, ks].mean(),
                    "unseen pairs": h4["unseen_acc"][-1, ks].mean(),
                    "held-out member": h4["held_acc"][-1, ks].mean(),
                    "steps to 95% train": np.nanmean(np.asarray(fit, dtype=float)),
                }
            )
    return rows


def reach_steps(steps, curves, levels) -> np.ndarray:
    """Per seed j, the first logged step at which ``curves[:, j]`` reaches ``levels[j]``."""
    return np.array(
        [onsets.onset_step(steps, curves[:, j], levels[j]) for j in range(len(levels))], dtype=float
    )


def stays_above_from(steps, above) -> int:
    """The first logged step from which ``above`` (one bool per logged step) stays true."""
    last_below = np.nonzero(~above)[0]
    if len(last_below) and last_below[-1] + 1 < len(above):
        return int(steps[last_below[-1] + 1])
    return int(steps[0])

"""The chapter's tasks and grids: E1's matched twins and E2's T1 in one vocabulary, the
token pairs each label must tell apart, the evaluation sets, and the arms of E3 and E4."""

from __future__ import annotations

import torch

from ...data import signatures as sig
from ...data import tasks

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


def inits(cfg) -> dict:
    """The two initializations by name: ``{"small": gamma, "large": gamma_large}``."""
    return {"small": cfg.gamma, "large": cfg.gamma_large}


def e1_tasks(cfg) -> tuple[dict, dict, int]:
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


def best_accuracy_without_gate(d, V: int) -> float:
    """The accuracy of the best predictor that sees key and anchor but not the gate, counted
    on the data: the most frequent label of each (key, anchor) context."""
    context = d.X[:, 0] * V + d.X[:, 1]
    counts = torch.zeros(V * V, V).index_put_((context, d.y), torch.ones(len(d)), accumulate=True)
    return float(counts.max(1).values.sum() / len(d))


#: The four embeddings of the transplant experiment, in the order of the text.
ARMS = ["early", "signature", "permuted", "random"]


def reasoning_part(t1) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """T1's reasoning rows: ``(X, y)`` of its training split and of its held-out pairs."""
    keep = t1.train.X[:, 1] >= tasks.T1_REASONING[0]
    return t1.train.X[keep], t1.train.y[keep], t1.test.X, t1.test.y


#: E4's arms: downstream data only, plus the auxiliary rows, plus a shuffled grouping of them.
A4 = ["none", "aux", "shuffled"]

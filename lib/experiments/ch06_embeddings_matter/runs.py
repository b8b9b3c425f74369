"""The chapter's batched training runs: E1+E2 over (task, init, seed), E3's early run and
its transplants over (frozen, arm, seed), E4's injection over (arm, init, seed). Each
returns one results object."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ...data import signatures as sig
from ...data import tasks
from ...measure import metrics as M
from ...measure import onsets
from ...training import embedstruct as ES
from ...training import engine
from ...training.models import EmbMLP, build
from ...training.sweep import Sweep
from .design import critical_pairs, eval_sets, inits, pair_masks, reasoning_part

# --------------------------------------------------------------------------- E1 and E2


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


@dataclass
class E1Run:
    """The E1+E2 run: its model, sweep, initial and final weights, history and steps to 95%."""

    model: EmbMLP
    sweep: Sweep
    tasks: list
    params: dict
    E0: torch.Tensor
    h: object
    steps95: np.ndarray  # nan where a run never got there
    censored: np.ndarray
    steps95_c: np.ndarray  # inf where a run never got there: longer than the whole run

    @property
    def steps(self):
        return self.h.steps

    def s95(self, task: str, init: str) -> np.ndarray:
        """Steps to 95% of ``task`` under ``init``, per seed (inf: never)."""
        return self.steps95_c[self.sweep.index(task=task, init=init)]


def run_e1(cfg, model, split: dict, device) -> E1Run:
    """One batched run of every task of ``split``, both inits and every seed, logging each
    instance's training and test accuracy and the cosine of its critical pairs' increments."""
    TASKS, INITS, seeds = list(split), inits(cfg), list(cfg.seeds)
    V = model.vocab_size
    PAIRS = critical_pairs(cfg.p)  # the token pairs each label must tell apart
    sw1 = Sweep(task=TASKS, init=list(INITS), seed=seeds)  # one instance per (task, init, seed)
    task_of = np.array([TASKS.index(t) for t in sw1["task"]])
    params1 = build(model, sw1["seed"], gamma=[INITS[i] for i in sw1["init"]], device=device)
    E0_1 = params1["E"].detach().clone()
    train_sets = [(split[t]["train"].X.to(device), split[t]["train"].y.to(device)) for t in TASKS]
    stream = engine.instance_batches(train_sets, task_of, cfg.model.batch_size, seed=cfg.data_seed)
    eval_train, eval_test = eval_sets(split, cfg.e1.eval_rows, cfg.e1.eval_seed, device)
    # The collinearity check reads each instance's critical pairs: (K, V, V) masks.
    pair_mask = pair_masks(PAIRS, V, sw1["task"]).to(device)
    h1 = engine.train(
        model,
        params1,
        stream,
        cfg.e1.steps,
        optimizer="adam",
        lr=cfg.model.lr,
        log_at=list(range(0, cfg.e1.steps + 1, cfg.e1.log_every)),
        callbacks={
            "train_acc": per_task_accuracy(model, eval_train, TASKS, task_of),
            "test_acc": per_task_accuracy(model, eval_test, TASKS, task_of),
            "pair_cos": pair_cosine(E0_1, pair_mask),
        },
        desc="E1+E2",
    )
    steps95 = np.asarray(onsets.onset_step(h1.steps, h1["train_acc"], cfg.fit_acc), dtype=float)
    censored = np.isnan(steps95)
    steps95_c = np.where(censored, np.inf, steps95)
    return E1Run(model, sw1, TASKS, params1, E0_1, h1, steps95, censored, steps95_c)


# --------------------------------------------------------------------------- E3


@dataclass
class Transplants:
    """E3's data (T1's reasoning part), its input tokens, the centred order-0 signature, its
    principal components and, per seed, the four arms' embeddings of the input tokens."""

    Xr: torch.Tensor
    yr: torch.Tensor
    Xr_test: torch.Tensor
    yr_test: torch.Tensor
    inp: list
    phi_c: torch.Tensor
    pcs: torch.Tensor
    arm_E: dict  # seed -> {arm: embedding of the input tokens}


def transplants(cfg, model, t1, device) -> Transplants:
    """The four embeddings of every seed; the "early" one from a short small-init run."""
    V, seeds = model.vocab_size, list(cfg.seeds)
    Xr, yr, Xr_test, yr_test = reasoning_part(t1)
    inp = sorted(set(Xr.reshape(-1).tolist()))  # the input tokens: keys and reasoning anchors
    phi_c = sig.centre(
        sig.label_signature(Xr, yr, V, V)[inp], "marginal", sig.label_marginal(Xr, yr, V, V)
    )
    pcs = ES.signature_pcs(phi_c, cfg.model.d_model)
    # A short small-init run gives the "early" embeddings (one per seed).
    p_early = build(model, seeds, gamma=cfg.gamma, device=device)
    engine.train(
        model,
        p_early,
        (Xr.to(device), yr.to(device)),
        cfg.e3.early_step,
        optimizer="adam",
        lr=cfg.model.lr,
        batch_size=cfg.model.batch_size,
        log_at=[0],
        desc="E3 early",
    )
    norm = len(inp) ** 0.5  # rows of unit norm on average
    arm_E = {
        s: ES.transplant_embeddings(
            p_early["E"][i, inp].detach().cpu(), pcs, norm, seed=cfg.e3.transplant_seed + s
        )
        for i, s in enumerate(seeds)
    }
    return Transplants(Xr, yr, Xr_test, yr_test, inp, phi_c, pcs, arm_E)


@dataclass
class E3Run:
    """The transplant run: its sweep, initial and final weights and history."""

    sweep: Sweep
    params: dict
    E0: torch.Tensor
    h: object


def run_e3(cfg, model, tp: Transplants, arms: list, device) -> E3Run:
    """One batched run over (frozen, arm, seed), each embedding set to its transplant; a
    frozen embedding is one whose learning rate is 0."""
    Xr, yr, inp = tp.Xr, tp.yr, tp.inp
    sw3 = Sweep(frozen=[True, False], arm=arms, seed=list(cfg.seeds))
    params3 = build(model, sw3["seed"], gamma=cfg.e3.gamma_rest, device=device)
    with torch.no_grad():
        params3["E"].zero_()
        for k, (arm, s) in enumerate(zip(sw3["arm"], sw3["seed"], strict=True)):
            params3["E"][k, inp] = tp.arm_E[s][arm].to(params3["E"])
    E0_3 = params3["E"].detach().clone()
    emb_lr = torch.tensor([0.0 if frozen else cfg.model.lr for frozen in sw3["frozen"]])
    n_eval = cfg.e3.eval_rows
    h3 = engine.train(
        model,
        params3,
        (Xr.to(device), yr.to(device)),
        cfg.e3.steps,
        optimizer="adam",
        lr=cfg.model.lr,
        group_lr={"embedding": emb_lr},
        batch_size=cfg.model.batch_size,
        log_at=list(range(0, cfg.e3.steps + 1, cfg.e3.log_every)),
        callbacks={
            "train_acc": engine.accuracy_callback(
                model, Xr[:n_eval].to(device), yr[:n_eval].to(device)
            ),
            "test_acc": engine.accuracy_callback(
                model, tp.Xr_test.to(device), tp.yr_test.to(device)
            ),
        },
        desc="E3",
    )
    return E3Run(sw3, params3, E0_3, h3)


# --------------------------------------------------------------------------- E4


@dataclass
class E4Run:
    """The injection run: its task data, target grouping, sweep, model and history."""

    sg: object
    target: torch.Tensor
    sweep: Sweep
    model: EmbMLP
    h: object


def run_e4(cfg, arms: list, device) -> E4Run:
    """One batched run over (arm, init, seed) of the downstream task with auxiliary rows,
    logging the members' target-structure R and the accuracies on every split."""
    INITS = inits(cfg)
    sg = tasks.synonym_groups(cfg.data_seed, keep=cfg.e4.keep)
    V4, n_groups = sg.vocab_size, int(sg.group.max()) + 1
    target = torch.nn.functional.one_hot(sg.group, n_groups).double()  # cos(rows) = same group
    target_rows = target.new_zeros(V4, n_groups).index_copy(0, torch.tensor(sg.members), target)
    sw4 = Sweep(arm=arms, init=list(INITS), seed=list(cfg.seeds))
    aux_y = torch.stack(
        [sg.aux_y_shuffled if arm == "shuffled" else sg.aux_y for arm in sw4["arm"]]
    )
    aux_w = [0.0 if arm == "none" else cfg.e4.aux_weight for arm in sw4["arm"]]
    main = (sg.train[0].to(device), sg.train[1].to(device))
    batches = (cfg.e4.main_batch, cfg.e4.aux_batch)
    data4, loss4 = ES.mixture_stream(
        main, sg.aux_X.to(device), aux_y.to(device), aux_w, *batches, seed=cfg.data_seed
    )
    model4 = EmbMLP(V4, cfg.model.d_model, cfg.model.d_hidden, V4)
    params4 = build(model4, sw4["seed"], gamma=[INITS[i] for i in sw4["init"]], device=device)
    beyond = (
        torch.cat([sg.unseen[0], sg.held_out[0]]),
        torch.cat([sg.unseen[1], sg.held_out[1]]),
    )
    h4 = engine.train(
        model4,
        params4,
        data4,
        cfg.e4.steps,
        optimizer="adam",
        lr=cfg.model.lr,
        loss_fn=loss4,
        log_at=list(range(0, cfg.e4.steps + 1, cfg.e4.log_every)),
        callbacks={
            "R": lambda step, P: M.r_cos(
                P["E"], target_rows, tokens=sg.members, subtract_mean_row=False
            ),
            "train_acc": engine.accuracy_callback(model4, *(t.to(device) for t in sg.train)),
            "unseen_acc": engine.accuracy_callback(model4, *(t.to(device) for t in sg.unseen)),
            "held_acc": engine.accuracy_callback(model4, *(t.to(device) for t in sg.held_out)),
            "beyond_acc": engine.accuracy_callback(model4, *(t.to(device) for t in beyond)),
        },
        desc="E4",
    )
    return E4Run(sg, target, sw4, model4, h4)

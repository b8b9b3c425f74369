"""Chapter 5's model and runs: the decoder, the instances of one batched run, the run
itself, its readings against the targets, the first step's gradient, and the main run's
stairs and chain controls (:class:`Results`)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ...data import windows
from ...measure import lm, ngram
from ...measure import metrics as M
from ...theory import flow
from ...training import engine
from ...training.models import Transformer, build
from ...training.sweep import Instances
from .. import real_lm_stairs as rd
from .targets import TITLE, Run, chain_orders, orthogonal, stair_k


def decoder(cfg, V: int) -> Transformer:
    """The chapter's decoder (pre-RMSNorm, SwiGLU, rotary, one head; token embedding with
    fan-in d, since a lookup reads one row per position)."""
    return Transformer(
        V,
        cfg.model.d_model,
        cfg.model.context_len,
        n_layers=cfg.model.n_layers,
        d_mlp=cfg.model.d_mlp,
        readout="all",
        norm="rms",
        mlp="swiglu",
        positions="rotary",
        emb_fan_in=cfg.model.d_model,
    )


def instances(cfg, sources, gammas=None, seeds=None) -> Instances:
    """Real text at each init scale of ``gammas``, then every chain of ``sources`` at
    ``gamma``; seeds fastest. Labels: ``source``, ``gamma``, ``seed``."""
    seeds = cfg.seeds if seeds is None else seeds
    gammas = cfg.gammas if gammas is None else gammas
    rows = [dict(source="text", gamma=gm, seed=s) for gm in gammas for s in seeds]
    rows += [dict(source=src, gamma=cfg.gamma, seed=s) for src in sources for s in seeds]
    return Instances(rows)


def log_at(cfg) -> np.ndarray:
    return engine.log_steps(cfg.train.steps, cfg.train.n_logs)


def fixed_windows(stream, n: int, L: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` windows of ``L`` tokens evenly spaced over ``stream`` and their next tokens."""
    starts = np.linspace(0, len(stream) - L - 2, n).astype(int)
    X = torch.stack([stream[s : s + L] for s in starts])
    y = torch.stack([stream[s + 1 : s + L + 1] for s in starts])
    return X, y


def train_run(cfg, D: dict, inst: Instances, device, desc: str) -> dict:
    """Train every instance on its own source's stream in one batched run (AdamW). Logs the
    increments' similarities (``S_E``, ``S_U``) and the n-gram picture on the text
    (``kl1`` .. ``kl4``: KL from the text's k-gram predictors, :mod:`lib.measure.ngram`;
    ``chain_loss{o}``: the loss on windows of the order-o chains, o >= 1)."""
    model = decoder(cfg, D["V"])
    params = build(model, inst["seed"], gamma=inst["gamma"], device=device)
    sources = list(dict.fromkeys(inst["source"]))
    stream = torch.stack([D["streams"][s] for s in sources])
    data = windows.window_sampler(
        stream,
        cfg.model.context_len,
        cfg.train.batch_size,
        inst["seed"],
        device=device,
        stream_of=[sources.index(s) for s in inst["source"]],
    )
    callbacks = lm.similarity_callbacks(params, D["tracked"], D["tracked"])
    text = D["streams"]["text"]
    models = ngram.kgram_models(text.cpu(), D["V"], orders=(1, 2, 3, 4))
    X_eval, _ = fixed_windows(text, cfg.train.n_eval_windows, cfg.model.context_len)
    chain = {
        o: fixed_windows(
            D["streams"][f"markov{o}"], cfg.train.n_eval_windows, cfg.model.context_len
        )
        for o in range(1, max(cfg.chains.orders) + 1)
        if f"markov{o}" in D["streams"]
    }
    callbacks |= ngram.ngram_callbacks(model, X_eval, models, chain)
    hist = engine.train(
        model,
        params,
        data,
        cfg.train.steps,
        optimizer="adamw",
        lr=cfg.train.lr,
        weight_decay=cfg.train.weight_decay,
        log_at=log_at(cfg),
        callbacks=callbacks,
        desc=desc,
    )
    return dict(hist=hist, inst=inst)


def read_run(cfg, D: dict, run: dict) -> dict:
    """Every instance against the real text's targets (``emb``: plain R for the next token,
    part R beyond the earlier stairs for the residuals), each chain's model against its
    own chain's targets (``own``), and the real-text instances' unembedding against the
    previous-token signature (``unemb``)."""
    hist, inst, names = run["hist"], run["inst"], D["names"]
    refs = orthogonal(names)
    phi = {n: D["phi"]["text"][n] for n in names}
    emb = lm.alignment_curves(hist["S_E"], phi, n_perm=cfg.readings.n_perm, orthogonal_to=refs)
    own = {}
    for src in dict.fromkeys(inst["source"]):
        if src != "text":
            own[src] = lm.alignment_curves(
                hist["S_E"][:, inst.index(source=src)],
                {n: D["phi"][src][n] for n in names},
                n_perm=cfg.readings.n_perm,
                orthogonal_to=refs,
            )
    text = inst.index(source="text")
    unemb = lm.alignment_curves(
        hist["S_U"][:, text], {"previous": D["phi"]["text"]["previous"]}, n_perm=cfg.readings.n_perm
    )["previous"]
    return dict(run, emb=emb, own=own, unemb=unemb)


def first_gradient(cfg, D: dict, inst: Instances, device) -> np.ndarray:
    """Per instance, the cosine between the step-0 gradient of W^E (autograd, the full
    decoder, the first batch of the real text) and its order-0 term
    :func:`lib.theory.flow.residual_path_gradient`."""
    model = decoder(cfg, D["V"])
    params = build(model, inst["seed"], gamma=inst["gamma"], device=device)
    X, y = windows.window_sampler(
        D["streams"]["text"],
        cfg.model.context_len,
        cfg.train.batch_size,
        inst["seed"],
        device=device,
    )(0)
    (grad,) = torch.autograd.grad(
        engine.cross_entropy(model.forward(params, X), y).sum(), params["E"]
    )
    G0 = flow.residual_path_gradient(params["E"].detach(), params["U"].detach(), X, y)
    return M.field_cosine(grad, G0).cpu().numpy()


def run_title(run: Run, sep: str = ", ") -> str:
    return f"{TITLE[run[0]]}{sep}{'characters' if run[1] == 'char' else 'BPE'}"


def first_step(cfg, D: dict, device) -> dict:
    """The step-0 check at the two init scales: ``cos0`` per instance
    (:func:`first_gradient`) and the rows of the small (``small``) and standard (``std``)
    init instances."""
    first = instances(cfg, [], gammas=(cfg.gamma, cfg.gamma_large))
    cos0 = first_gradient(cfg, D, first, device)
    return dict(
        inst=first,
        cos0=cos0,
        small=first.index(gamma=cfg.gamma),
        std=first.index(gamma=cfg.gamma_large),
    )


@dataclass
class Results:
    """The main run and its readings: the instances, the history, every instance's curves
    against the real text's targets (``emb``), the chains' models against their own
    (``own_curves``), the unembedding's (``unemb``), the stairs (``st``, and per chain
    ``own``), the rows of the arms, each stair's positive and negative chain control and
    the largest resolved stair (``k_res``), and whether each positive control's model learned
    its stair's statistics at all (``learned``: :func:`learned`). The page adds the later
    readings."""

    D: dict
    inst: Instances
    hist: object
    emb: dict
    own_curves: dict
    unemb: dict
    names: list
    ks: list
    sources: list
    st: dict
    own: dict
    small: np.ndarray
    standard: np.ndarray
    ctrl: dict
    positive: dict
    negative: dict
    learned: dict
    k_res: int
    order: dict | None = None
    pairs: dict | None = None
    by_gamma: dict | None = None
    ngram: dict | None = None
    specific: dict | None = None
    plateau: dict | None = None

    @property
    def steps(self):
        return self.hist.steps


def learned(hist, inst: Instances, k: int, step: int | None = None) -> np.ndarray | None:
    """Per seed, the order-k chain's model's loss on windows of its own chain minus the
    order-(k-1) chain's model's loss on the same windows (nats; at the last log, or at the
    log nearest ``step``). Below zero: the model learned order-k statistics that its
    positive control reads. None where either model or the windows are not in the run."""
    name = f"chain_loss{k}"
    sources = set(inst["source"])
    if name not in hist.metrics or not {f"markov{k}", f"markov{k - 1}"} <= sources:
        return None
    loss = hist[name][-1] if step is None else hist.at(name, step)
    return loss[inst.index(source=f"markov{k}")] - loss[inst.index(source=f"markov{k - 1}")]


def main_run(cfg, D: dict, device) -> Results:
    """Train the real text at every init scale and every chain's model in one batched run,
    read the stairs, and each stair k's chain controls: the order-k chain's model climbs
    its own skip-k stair (positive), the order-(k-1) chain's model stays under the
    family-wise floor of the real text's skip-k target and every higher one (negative)."""
    names = D["names"]
    ks = [stair_k(n) for n in names]
    sources = [f"markov{o}" for o in chain_orders(cfg)]
    inst = instances(cfg, sources)
    main = read_run(cfg, D, train_run(cfg, D, inst, device, run_title(cfg.runs[0])))
    hist, emb = main["hist"], main["emb"]
    steps = hist.steps
    st = rd.stairs(steps, emb, names, cfg)
    own = {src: rd.stairs(steps, main["own"][src], names, cfg) for src in sources}
    ctrl = {src: inst.index(source=src) for src in sources}
    positive, negative = {}, {}
    for n, k in zip(names, ks, strict=True):
        positive[k] = rd.climbs(own[f"markov{k}"], slice(None), n)
        scanned = names[names.index(n) :]
        floor, top = rd.familywise(emb, ctrl[f"markov{k - 1}"], scanned, cfg.tests.control_q)
        negative[k] = dict(floor=floor, top=top, quiet=top < floor)
    return Results(
        D=D,
        inst=inst,
        hist=hist,
        emb=emb,
        own_curves=main["own"],
        unemb=main["unemb"],
        names=names,
        ks=ks,
        sources=sources,
        st=st,
        own=own,
        small=inst.index(source="text", gamma=cfg.gamma),
        standard=inst.index(source="text", gamma=cfg.gamma_large),
        ctrl=ctrl,
        positive=positive,
        negative=negative,
        learned={k: learned(hist, inst, k) for k in ks},
        k_res=rd.resolved(positive, cfg),
    )

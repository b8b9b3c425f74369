"""The chapter's models, the settings of its batched runs, the check that uniform attention
is the Emb-MLP, and the stability reruns."""

from __future__ import annotations

import torch

from ...measure import plateaus, stability
from ...training import models
from .. import staircase_runs
from .names import ATTN, ATTN_LARGE, CONTROL, MLP2, MLP3


def chapter_models(two_attn, three, cfg) -> tuple:
    """``(attn, mlp3, attn3)``: the two-stair attention model without value or output
    weights, the three-stair Emb-MLP, and the three-stair attention model
    (:class:`lib.training.models.AttnEmbMLP`)."""
    attn = models.Transformer(
        two_attn.vocab_size,
        cfg.d_model,
        context_len=two_attn.X.shape[1],
        n_out=two_attn.n_labels,
        d_mlp=cfg.d_hidden,
        ov="identity",
    )
    mlp3 = models.EmbMLP(three.vocab_size, cfg.d_model, cfg.d_hidden, three.n_labels, "silu")
    attn3 = models.AttnEmbMLP(
        three.vocab_size, cfg.d_model, cfg.d_hidden, three.n_labels, activation="silu"
    )
    return attn, mlp3, attn3


def uniform_attention_gaps(mlp3, attn3, three, seeds, gamma, device) -> tuple[float, float]:
    """``(uniform_gap, random_gap)``: the largest difference of the attention model's logits
    from the Emb-MLP's, relative to their size, in float64, with W_Q = W_K = 0 and with
    random W_Q, W_K (the control); the same seeds' E, W1, W2 in both models."""
    p_mlp = models.build(mlp3, list(seeds), gamma=gamma, device=device)
    p_att = models.build(attn3, list(seeds), gamma=gamma, device=device)
    f64 = lambda p: {k: v.detach().double() for k, v in p.items()}
    p_qk0 = f64(p_att) | dict(Q=0 * p_att["Q"].double(), K=0 * p_att["K"].double())
    p_rand = models.build(attn3, list(seeds), gamma=0.3, device=device)
    p_qk = f64(p_rand) | f64(p_mlp)  # random W_Q, W_K
    X3 = torch.as_tensor(three.X).to(device)
    with torch.no_grad():
        z_mlp = mlp3.forward(f64(p_mlp), X3)
        gap = lambda p: float((attn3.forward(p, X3) - z_mlp).abs().max() / z_mlp.abs().max())
        uniform_gap, random_gap = gap(p_qk0), gap(p_qk)  # relative to the logits' size
    return uniform_gap, random_gap


def run_specs(cfg, nulls, mlp2, attn, mlp3, two, shuffled, two_attn, three) -> dict:
    """Run name -> what :func:`lib.experiments.staircase_runs.run_bits` needs besides
    seeds, gammas and steps (the reruns reuse it). Each task is ``(data, layout, targets)``
    and each run is read against its own permutation floor (``null``)."""
    attn_kw = dict(
        model=attn,
        data=two_attn[0],
        layout=two_attn[1],
        targets=two_attn[2],
        null=nulls["attn"],
        zero_frozen=("P",),
        group_lr={"qk": cfg.lr * cfg.r},
    )  # eta_QK = r * eta_rest
    bits = lambda task: dict(data=task[0], layout=task[1], targets=task[2])
    return {
        MLP2: dict(model=mlp2, **bits(two), null=nulls["two"]),
        CONTROL: dict(model=mlp2, **bits(shuffled), null=nulls["shuffled"]),
        # an ensemble per seed
        ATTN: attn_kw | dict(copies=cfg.attn.copies, copy_rel=cfg.readings.copy_rel),
        ATTN_LARGE: attn_kw,
        MLP3: dict(model=mlp3, **bits(three), null=nulls["three"]),
    }


def stability_reruns(runs, spec, adam, seeds, gamma, cfg) -> tuple[dict, list]:
    """``(stab, rows)``: per Emb-MLP run, its rerun at small init from an init multiplied by
    ``1 + copy_rel z`` read by :func:`lib.measure.stability.stability` (with ``drift``, the
    loss drift up to the end of the base's bit-1 plateau), and one table row per seed."""
    stab, stab_rows = {}, []
    for name in (MLP2, MLP3):
        base, grid = runs[name].stairs(gamma), runs[name].history.steps
        tol = cfg.readings.stability_tol
        stop = stability.rerun_horizon(grid, base, tol)  # last event + tol logs
        again = staircase_runs.run_bits(
            seeds=seeds,
            gammas=[gamma],
            steps=stop,
            desc="init x (1 + rel z)",
            **spec[name],
            **(adam | dict(log_at=[int(t) for t in grid if t <= stop])),
            perturb_init=cfg.readings.copy_rel,
        )
        read = again.stairs(gamma, levels=runs[name].onset_levels(gamma))
        stab[name] = stability.stability(again.history.steps, base, read, tol=tol)
        # how far the rerun's full-data loss has drifted from its base run's by the end of the
        # base's bit-1 plateau (before the fall, whose timing the shift reads)
        stab[name]["drift"] = stability.rerun_divergence(
            grid,
            runs[name].arm(gamma)[1]["loss_all"],
            again.history.steps,
            again.arm(gamma)[1]["loss_all"],
            until=plateaus.plateau_end(grid, base.plateaus[1]),
        )
        for k, seed in enumerate(seeds):
            stab_rows.append(
                {
                    "run": name,
                    "seed": seed,
                    "largest shift (logged steps)": stab[name]["shift"][k],
                    "loss drift": stab[name]["drift"][k],
                    "same verdict": bool(stab[name]["same_verdict"][k]),
                }
            )
    return stab, stab_rows

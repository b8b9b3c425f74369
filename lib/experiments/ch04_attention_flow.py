"""Chapter 4, the attention flow: the one-layer expansion at init, and QK's quasi-static regime.

The model is a one-layer attention-only transformer (no LayerNorm, no MLP, readout at the
last token) on the gated task T3. Its embedding gradient is checked against autograd at
initialization across the init rate γ, with the default position embedding and with one
as small as the token embedding; then full-batch GD at two init rates follows, on one time
axis, how far attention is from uniform and when the QK weights move. The physics is in
:mod:`lib.theory.flow`; this module holds the constants and the logging callback.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..measure import attention
from ..measure import metrics as M
from ..theory import attention_flow, flow
from .expansion import CI_OVERRIDES, ExpansionCheck

CHAPTER = "04_attention_flow"


@dataclass(frozen=True)
class Config(ExpansionCheck):
    """Chapter 4 at book scale. The check at init (init_gammas, n_init_seeds,
    scale_factors, slope_tol, cos_target) is :class:`lib.experiments.expansion.ExpansionCheck`.

    Init rates (every weight is drawn with std fan_in^-γ; the position embedding has
    fan-in L, so its entries have std L^-γ):
    gamma: the small-init rate (γ = 0.8): the leading term should reach ``cos_target``
        from it on, and the GD run's instances that should stay near uniform attention
        until QK moves.
    gamma_large: the large-init comparator (γ = 0.5): the GD run's control instances,
        where attention starts far from uniform, and the rate at which the three terms
        must beat the leading one.

    The task and the model:
    t3_reps: repetitions of the gated-addition dataset T3.
    d_model: the model's width.
    first_order_tol: the relative error within which the first-order formula must give
        the distance from uniform attention.

    The GD run (full-batch, steps clipped in norm), instances γ_large and γ, each
    ``n_gd_seeds`` times:
    n_gd_seeds: instances per γ. gd_seed0: the seed of the first instance (the others
        follow it), apart from the seeds of the init check.
    gd_steps, gd_lr, gd_clip, gd_n_logs: its length, learning rate, step-norm clip and
        number of (log-spaced) logging steps.
    delta: the stated distance δ from uniform attention (total variation).
    depart_factor: attention has departed from the quasi-static prediction once its
        distance from uniform is this many times D_qs.
    early_steps: the first steps over which the expansion must track the true gradient.

    Where the attention staircase puts the parity (Chapter 2's gated-parity-bit task and its
    training settings, read from Chapter 2's Config at the same scale):
    where_anchors: the two task sizes, 12 anchors (Chapter 2's earlier attention model) and
        24 (its staircase model).
    where_steps: the Adam steps of every run of the section. Chapter 2 trains its attention
        model for fewer (it escapes by step 150); the learned value path escapes later or
        not at all, and the ablations later still, so these runs get their own budget.
    freeze_step: the step from which the embedding is frozen in the ablation: after the
        order-0 stair, while bit 1 is still on its plateau (both checked in the chapter).
    null_perm: the label permutations of every run's floors (:mod:`lib.measure.nulls`; each run is
        read against its own permutation floor, as in Chapter 2).
    copies, copy_rel: the race is measured on an ensemble of the learned-OV 24-anchor model:
        every seed run as ``copies`` instances whose initial weights differ by a relative
        ``copy_rel`` (copy 0: the seed itself), and its rate of escaping per seed.
    """

    t3_reps: int = 1
    d_model: int = 32
    gamma: float = 0.8
    gamma_large: float = 0.5
    first_order_tol: float = 0.05
    n_gd_seeds: int = 2
    gd_seed0: int = 100
    gd_steps: int = 2000
    gd_lr: float = 2.0
    gd_clip: float = 0.01
    gd_n_logs: int = 35
    delta: float = 0.1
    depart_factor: float = 2.0
    early_steps: int = 20
    where_anchors: tuple[int, int] = (12, 24)
    where_steps: int = 800
    freeze_step: int = 40
    null_perm: int = 100
    copies: int = 8
    copy_rel: float = 1e-6


OVERRIDES = {
    "ci": dict(
        **CI_OVERRIDES,
        n_gd_seeds=1,
        gd_steps=1200,
        gd_n_logs=25,
        null_perm=50,
        where_steps=500,
        copies=2,  # the race's ensemble costs a minute per 4 copies of 3 seeds on one core
    ),
    "paper": dict(d_model=64, n_init_seeds=8, n_gd_seeds=8, gd_steps=10000, gd_n_logs=60),
}


DYNAMICS = ("D", "D_qs", "entropy", "dQK", "R0", "R1", "cos_res", "cos_all", "qk_share")


def dynamics_callback(model, X, y, S, centre, p_start, anchors, phi0, inter):
    """A training callback logging, per instance, the (K, 9) quantities ``DYNAMICS``.

    In order: the distance D of the attention from uniform
    (:func:`lib.measure.attention.attention_distance`); the distance D_qs it would have with W_Q, W_K
    frozen at ``p_start`` (the quasi-static prediction); the attention entropy; the
    relative change of W_Q W_K^T since ``p_start``; R_0 and R_1 of the ``anchors``'
    embedding increments with the order-0 signature ``phi0`` and the order-1 signature
    ``inter``; the cosine of the true gradient with the residual term and with all three
    terms (:func:`lib.theory.attention_flow.attention_terms`, centred on ``centre``); and the QK path's
    share of the gradient.
    """
    E0 = p_start["E"]
    QK0 = p_start["Q0"] @ p_start["K0"].transpose(1, 2)

    def stats(step, p):
        grad = flow.neg_grad_E(model, p, X, y)
        T = attention_flow.attention_terms(model, p, S, centre=centre)
        qk = attention_flow.attention_qk_path(model, p, X, y)
        _, A = model.forward(p, X, return_attention=True)
        p_qs = dict(p, Q0=p_start["Q0"], K0=p_start["K0"])
        _, A_qs = model.forward(p_qs, X, return_attention=True)
        QK = p["Q0"] @ p["K0"].transpose(1, 2)
        logged = [
            attention.attention_distance(A[0]),
            attention.attention_distance(A_qs[0]),
            attention.readout_attention_entropy(A[0]),
            (QK - QK0).norm(dim=(1, 2)) / QK0.norm(dim=(1, 2)),
            M.r_cos(p["E"][:, anchors], phi0[anchors], W0=E0[:, anchors]),
            M.r_cos(p["E"][:, anchors], inter, W0=E0[:, anchors]),
            M.field_cosine(grad, T["residual"]),
            M.field_cosine(grad, T["residual"] + T["value"] + T["self"]),
            qk.norm(dim=(1, 2)) / grad.norm(dim=(1, 2)),
        ]
        return torch.stack([v.double().cpu() for v in logged], -1)

    return stats


# The attention models of the section "Where the parity lives", by name: value path and
# task size. The staircase model of Chapter 2 is IDENTITY_24; the others are contrasts.
LEARNED_12, LEARNED_24 = "learned OV, 12 anchors", "learned OV, 24 anchors"
IDENTITY_12, IDENTITY_24 = "no OV, 12 anchors", "no OV, 24 anchors"
WHERE_MODELS = {
    LEARNED_12: ("learned", 0),
    LEARNED_24: ("learned", 1),
    IDENTITY_12: ("identity", 0),
    IDENTITY_24: ("identity", 1),
}
# The ablations, on the main contrast and on the staircase model.
FREEZE_E, FREEZE_ATTN = "embedding frozen", "attention frozen"
ABLATED = (LEARNED_12, IDENTITY_24)


def where_row(stairs, m, seed_index: int, floor1: float) -> dict:
    """One seed of one run of the section: escape, order-1 stair and the probes at the end.

    ``stairs`` is the arm's :class:`lib.measure.staircase.Stairs`, ``m`` its metrics
    (:meth:`lib.measure.staircase.BitRun.arm`).
    """
    k = seed_index
    row = {
        "escape 1": stairs.escapes[1][k],
        "onset 1": stairs.onsets[1][k],
        "stair": bool(stairs.climbs_per_seed()[k]),
        "bit-1 loss, end": m["bit1"][-1, k],
        "R1, end": m["R1"][-1, k],
        "R1 of E W_V W_O, end": m["R1_ov"][-1, k] if "R1_ov" in m else float("nan"),
    }
    for probe in ("probe_E", "probe_attn", "probe_mlp"):
        row[probe + ", end"] = m[probe][-1, k]
    row["R1 floor"] = floor1
    return row

"""The chapter's computations on T3, in the order the page runs them: the task and model,
the expansion against autograd at init, the scaling test, the distance from uniform
attention at init, and the GD run on one time axis with its readings. Each returns a
namespace of its results."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import torch

from ...data import signatures as sig
from ...data import tasks
from ...measure import attention, onsets
from ...measure import metrics as M
from ...theory import attention_flow, flow
from ...training import engine
from ...training.models import Transformer, build

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


def t3_task(cfg, device) -> SimpleNamespace:
    """T3's training set on ``device`` (``X``, ``y``, ``V``, ``n``, context length ``L``), its
    anchors and gates, its counted signatures ``S``, the centring ``u`` and the one-layer
    attention-only ``model``."""
    task = tasks.gated_addition(seed=0, reps=cfg.t3_reps)
    D = task.train
    X, y, V, n = D.X.to(device), D.y.to(device), D.vocab_size, D.n_labels
    L = X.shape[1]
    anchors, gates = D.groups["anchors"], D.groups["gates"]
    S = flow.counted_signatures(X, y, V, n, joint=False)
    u = torch.full((n,), 1 / n, dtype=torch.float64, device=device)  # the centring, on the device
    model = Transformer(V, cfg.d_model, L, n_layers=1, n_out=n)
    return SimpleNamespace(
        X=X, y=y, V=V, n=n, L=L, anchors=anchors, gates=gates, S=S, u=u, model=model
    )


def init_check(cfg, t3, device) -> SimpleNamespace:
    """The true -dL/dE against the three terms at init, per γ and seed, with the default
    position embedding and with one as small as E: ``att_cos`` (cosines) and ``att_size``
    (sizes relative to the residual term; the QK path's relative to the gradient), each
    (P convention, n_gammas, n_seeds); with the init and ``idx`` (γ -> row)."""
    X, y, V, L, S, u, model = t3.X, t3.y, t3.V, t3.L, t3.S, t3.u, t3.model
    gammas = np.array(cfg.init_gammas)
    n_seeds = cfg.n_init_seeds
    gamma_inst = np.tile(np.repeat(gammas, n_seeds), 2)
    gamma_pos = np.where(
        np.arange(len(gamma_inst)) < len(gamma_inst) // 2,
        gamma_inst,
        gamma_inst * np.log(V) / np.log(L),
    )
    p_init = build(
        model,
        list(range(len(gamma_inst))),
        gamma=gamma_inst,
        group_gamma={"position": gamma_pos},
        device=device,
    )
    grad_true = flow.neg_grad_E(model, p_init, X, y)
    T0 = attention_flow.attention_terms(model, p_init, S, centre=u)
    qk0 = attention_flow.attention_qk_path(model, p_init, X, y)
    cum = T0["residual"] + T0["value"] + T0["self"]
    shape = lambda v: v.reshape(2, len(gammas), n_seeds)  # (P convention, gamma, seed)
    # Per instance, over all (V, d) entries:
    cosine = lambda a, b: M.field_cosine(a, b).cpu().numpy()
    size = lambda a, b: M.field_norm_ratio(a, b).cpu().numpy()
    att_cos = {
        "residual": shape(cosine(grad_true, T0["residual"])),
        "residual+value": shape(cosine(grad_true, T0["residual"] + T0["value"])),
        "all three": shape(cosine(grad_true, cum)),
    }
    att_size = {
        "value": shape(size(T0["value"], T0["residual"])),
        "self": shape(size(T0["self"], T0["residual"])),
        "QK path": shape(size(qk0, grad_true)),
    }
    idx = {round(float(gamma_), 2): i for i, gamma_ in enumerate(gammas)}
    return SimpleNamespace(
        gammas=gammas,
        gamma_inst=gamma_inst,
        p_init=p_init,
        shape=shape,
        att_cos=att_cos,
        att_size=att_size,
        idx=idx,
    )


def scaling_test(cfg, t3, init) -> SimpleNamespace:
    """The errors after the residual term and after all three terms, and the QK path's
    share of the gradient, when every weight of a γ = 1 init (default P) is multiplied by t
    (``factors``): ``errs``, their fitted powers ``slopes`` and the ``expected`` ones."""
    X, y, S, u, model = t3.X, t3.y, t3.S, t3.u, t3.model
    factors = np.array(cfg.scale_factors)
    half = len(init.gamma_inst) // 2  # the last gamma = 1 instance with the default P
    base = {k: v.detach().double()[half - 1 : half] for k, v in init.p_init.items()}
    errs = {"residual": [], "all three": [], "QK path": []}
    for t in factors:
        q = {k: v * t for k, v in base.items()}
        grad = flow.neg_grad_E(model, q, X, y)
        T = attention_flow.attention_terms(model, q, S, centre=u)
        errs["residual"].append(float((grad - T["residual"]).norm() / grad.norm()))
        rest = grad - T["residual"] - T["value"] - T["self"]
        errs["all three"].append(float(rest.norm() / grad.norm()))
        errs["QK path"].append(
            float(attention_flow.attention_qk_path(model, q, X, y).norm() / grad.norm())
        )
    slopes = {k: float(np.polyfit(np.log(factors), np.log(v), 1)[0]) for k, v in errs.items()}
    expected = {"residual": 2, "all three": 4, "QK path": 6}
    return SimpleNamespace(factors=factors, base=base, errs=errs, slopes=slopes, expected=expected)


def uniform_at_init(cfg, t3, init, scaling) -> SimpleNamespace:
    """The distance D of the attention from uniform at init against the first-order formula
    computed from the actual scores (``D_meas_g``, ``D_first_g``, (n_gammas, n_seeds), and
    ``rel_first``, their relative difference), and D's fitted power under the scaling test."""
    X, model = t3.X, t3.model
    with torch.no_grad():
        _, A_init = model.forward(
            {k: v.double() for k, v in init.p_init.items()}, X, return_attention=True
        )
    D_meas = attention.attention_distance(A_init[0]).cpu().numpy()
    D_first = (
        attention_flow.first_order_attention_distance(
            attention_flow.attention_scores(model, init.p_init, X)
        )
        .cpu()
        .numpy()
    )
    D_meas_g, D_first_g = init.shape(D_meas)[0], init.shape(D_first)[0]
    D_scale = []
    for t in scaling.factors:
        q = {k: v * t for k, v in scaling.base.items()}
        with torch.no_grad():
            _, Aq = model.forward(q, X, return_attention=True)
        D_scale.append(float(attention.attention_distance(Aq[0])[0]))
    D_slope = float(np.polyfit(np.log(scaling.factors), np.log(D_scale), 1)[0])
    rel_first = np.abs(D_first_g / D_meas_g - 1)
    # The same order seed by seed (independent draws at each gamma): reported, not asserted.
    reversed_steps = (np.diff(D_meas_g, axis=0) >= 0).sum(0)
    return SimpleNamespace(
        D_meas_g=D_meas_g,
        D_first_g=D_first_g,
        D_slope=D_slope,
        rel_first=rel_first,
        reversed_steps=reversed_steps,
    )


def run_gd(cfg, t3, device) -> SimpleNamespace:
    """Full-batch GD at γ_large and γ (``small``: the γ instances), logging ``DYNAMICS`` per
    step and instance (``Dt``, ``Dqs``, ``Ht``, ``dQK``, ``R0``, ``R1``, ``cos_res``,
    ``cos_all``, ``qk_share``, (n_logs, K)), and the steps read from them: QK's move
    ``t_qk``, attention leaving the δ ball ``t_leave`` and the departure ``t_dep``."""
    X, y, V, n, S, u, model = t3.X, t3.y, t3.V, t3.n, t3.S, t3.u, t3.model
    anchors, gates = t3.anchors, t3.gates
    gd_gamma_inst = np.repeat(np.array((cfg.gamma_large, cfg.gamma)), cfg.gd.n_seeds)
    gd_seeds = list(range(cfg.gd.seed0, cfg.gd.seed0 + len(gd_gamma_inst)))
    p_gd = build(model, gd_seeds, gamma=gd_gamma_inst, device=device)
    p_start = {k: v.detach().clone() for k, v in p_gd.items()}
    phi0 = sig.centre(S.phi_y)  # the order-0 label signature
    inter = sig.joint_interaction(X, y, V, n, tokens=anchors)[:, gates]  # order 1: with the gates
    # Logged per instance, in order: D, D_qs, entropy, relative change of W_Q W_K^T, R_0, R_1,
    # cos(residual, gradient), cos(three terms, gradient), QK path / gradient.
    dynamics = dynamics_callback(model, X, y, S, u, p_start, anchors, phi0, inter)
    h = engine.train(
        model,
        p_gd,
        (X, y),
        cfg.gd.steps,
        optimizer="gd",
        lr=cfg.gd.lr,
        clip=cfg.gd.clip,
        log_at=cfg.gd.n_logs,
        callbacks={"s": dynamics},
        desc="attention",
    )
    stats = h["s"]  # per logged step and instance
    Dt, Dqs, Ht, dQK, R0, R1, cos_res, cos_all, qk_share = (stats[..., i] for i in range(9))
    steps = h.steps

    delta = cfg.gd.delta
    small = gd_gamma_inst == cfg.gamma
    # The step at which QK leaves its quasi-static regime: its change equals its initial size.
    t_qk = onsets.onset_step(steps, dQK, 1.0).numpy()
    t_leave = onsets.onset_step(steps, Dt, delta).numpy()
    before = [steps < (t if np.isfinite(t) else np.inf) for t in t_qk]
    D_before = np.array([Dt[b, k].max() for k, b in enumerate(before)])
    Dqs_max = Dqs.max(0)
    # Where the measured distance first departs from the quasi-static one (by a factor 2).
    t_dep = onsets.onset_step(steps, Dt / Dqs, cfg.gd.depart_factor).numpy()
    dQK_at_dep = np.array(
        [
            dQK[np.searchsorted(steps, t), k] if np.isfinite(t) else np.nan
            for k, t in enumerate(t_dep)
        ]
    )
    return SimpleNamespace(
        gd_gamma_inst=gd_gamma_inst,
        steps=steps,
        Dt=Dt,
        Dqs=Dqs,
        Ht=Ht,
        dQK=dQK,
        R0=R0,
        R1=R1,
        cos_all=cos_all,
        small=small,
        t_qk=t_qk,
        t_leave=t_leave,
        D_before=D_before,
        Dqs_max=Dqs_max,
        t_dep=t_dep,
        dQK_at_dep=dQK_at_dep,
    )


def uniform_until_qk_moves(gd, delta: float, k: int) -> bool:
    """The quasi-static claim for GD instance k; a step that never comes fails it."""
    return bool(
        np.isfinite(gd.t_qk[k])
        and np.isfinite(gd.t_leave[k])
        and gd.t_leave[k] >= gd.t_qk[k]
        and gd.Dqs_max[k] < delta
        and gd.D_before[k] <= delta
    )


def quasi_static(cfg, gd) -> np.ndarray:
    """Per GD instance, whether attention stays within δ of uniform until W_Q W_K^T has
    moved by its initial size, and leaves at or after that step."""
    return np.array(
        [uniform_until_qk_moves(gd, cfg.gd.delta, k) for k in range(len(gd.gd_gamma_inst))]
    )

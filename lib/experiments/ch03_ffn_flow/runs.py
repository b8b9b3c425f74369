"""The chapter's computations, in the order the page runs them: the task T3, the expansion
against autograd at init, the scaling test, the hand-over run, the escape run and its
linearized prediction, and the linear model. Each returns a namespace of its results."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import torch

from ...data import tasks
from ...measure import metrics as M
from ...measure import onsets
from ...theory import flow, saddle
from ...training import engine
from ...training.models import EmbMLP, LinearEmb, build
from .callbacks import (
    escape_callback,
    escape_steps,
    exchange_pairs,
    handover_callback,
    seed_asymmetry,
)


def t3_task(cfg, device) -> SimpleNamespace:
    """T3's training set on ``device`` (``D``, ``X``, ``y``, ``V``, ``n``), its anchors,
    gates and the tokens whose geometry the staircase is about, and its counted signatures
    ``S``."""
    task = tasks.gated_addition(seed=0, reps=cfg.t3_reps)
    D = task.train
    X, y, V, n = D.X.to(device), D.y.to(device), D.vocab_size, D.n_labels
    anchors, gates = D.groups["anchors"], D.groups["gates"]
    tokens = anchors + gates  # the tokens whose geometry the staircase is about
    S = flow.counted_signatures(X, y, V, n)
    return SimpleNamespace(
        D=D, X=X, y=y, V=V, n=n, anchors=anchors, gates=gates, tokens=tokens, S=S
    )


def init_check(cfg, t3, device) -> SimpleNamespace:
    """The true -dL/dE against the expansion at init, per γ and seed: ``init_cos`` (cosines,
    term by term and cumulative) and ``init_size`` (each term's size relative to order 0),
    each (n_gammas, n_seeds); with the model, the init and ``idx`` (γ -> row)."""
    X, y, V, n, S = t3.X, t3.y, t3.V, t3.n, t3.S
    gammas = np.array(cfg.init_gammas)
    n_seeds = cfg.n_init_seeds
    model = EmbMLP(V, cfg.model.d_model, cfg.model.d_hidden, n, cfg.model.activation)
    gamma_inst = np.repeat(gammas, n_seeds)
    p_init = build(model, list(range(len(gamma_inst))), gamma=gamma_inst, device=device)
    true0 = flow.neg_grad_E(model, p_init, X, y)
    T0 = flow.emb_mlp_terms(model, p_init, S)
    cum1 = T0["order0"] + T0["order1"]
    cum2 = cum1 + T0["contextual"]
    per_seed = lambda v: v.cpu().numpy().reshape(len(gammas), n_seeds)
    cosine, size = M.field_cosine, M.field_norm_ratio  # per instance, over all (V, d) entries
    init_cos = {
        "order 0": per_seed(cosine(true0, T0["order0"])),
        "order 0+1": per_seed(cosine(true0, cum1)),
        "order 0+1+ctx": per_seed(cosine(true0, cum2)),
        "order 1 alone": per_seed(cosine(true0 - T0["order0"], T0["order1"])),
    }
    init_size = {
        "order 1": per_seed(size(T0["order1"], T0["order0"])),
        "contextual": per_seed(size(T0["contextual"], T0["order0"])),
    }
    idx = {round(float(gamma_), 2): i for i, gamma_ in enumerate(gammas)}
    return SimpleNamespace(
        gammas=gammas,
        model=model,
        p_init=p_init,
        init_cos=init_cos,
        init_size=init_size,
        idx=idx,
    )


def scaling_test(cfg, t3, init) -> SimpleNamespace:
    """The relative error of the truncated expansion when every weight of a γ = 1 init is
    multiplied by t (``factors``), for SiLU and for tanh (``errs``); the largest entry of
    tanh's order-1 term and the nonlinear path's share of the gradient, tanh and SiLU."""
    X, y, V, n, S = t3.X, t3.y, t3.V, t3.n, t3.S
    model = init.model
    factors = np.array(cfg.scale_factors)
    base = {k: v.detach().double()[-1:] for k, v in init.p_init.items()}  # one gamma = 1 instance
    model_tanh = EmbMLP(V, cfg.model.d_model, cfg.model.d_hidden, n, "tanh")
    errs = {"silu: order 0": [], "silu: 0+1": [], "silu: 0+1+ctx": [], "tanh: order 0": []}
    tanh_order1_max, tanh_nonlin = [], []
    for t in factors:
        q = {k: v * t for k, v in base.items()}
        grad = flow.neg_grad_E(model, q, X, y)
        T = flow.emb_mlp_terms(model, q, S)
        err = lambda approx, grad=grad: float((grad - approx).norm() / grad.norm())
        errs["silu: order 0"].append(err(T["order0"]))
        errs["silu: 0+1"].append(err(T["order0"] + T["order1"]))
        errs["silu: 0+1+ctx"].append(err(T["order0"] + T["order1"] + T["contextual"]))
        grad_tanh = flow.neg_grad_E(model_tanh, q, X, y)
        T_tanh = flow.emb_mlp_terms(model_tanh, q, S)
        errs["tanh: order 0"].append(
            float((grad_tanh - T_tanh["order0"]).norm() / grad_tanh.norm())
        )
        tanh_order1_max.append(float(T_tanh["order1"].abs().max()))
        P_tanh = flow.emb_mlp_paths(model_tanh, q, X, y)
        tanh_nonlin.append(float(P_tanh["nonlinear"].norm() / grad_tanh.norm()))
    slopes = {k: float(np.polyfit(np.log(factors), np.log(v), 1)[0]) for k, v in errs.items()}
    expected_slopes = {"silu: order 0": 2, "silu: 0+1": 3, "silu: 0+1+ctx": 5, "tanh: order 0": 3}
    silu_nonlin = float(
        flow.emb_mlp_paths(model, base, X, y)["nonlinear"].norm()
        / flow.neg_grad_E(model, base, X, y).norm()
    )
    return SimpleNamespace(
        factors=factors,
        errs=errs,
        slopes=slopes,
        expected_slopes=expected_slopes,
        tanh_order1_max=tanh_order1_max,
        tanh_nonlin=tanh_nonlin,
        silu_nonlin=silu_nonlin,
    )


def run_handover(cfg, t3, device) -> SimpleNamespace:
    """Full-batch GD at γ_handover, logging the true gradient against the order-0 term under
    three centrings (:func:`handover_callback`): the cosines ``cos_u``, ``cos_pbar``,
    ``cos_pm`` and distances ``dist_u``, ``dist_pbar``, (n_logs, K); the hand-over step
    and the readings around it. ``model_gd`` is the GD model the escape run reuses."""
    X, y, V, n, S = t3.X, t3.y, t3.V, t3.n, t3.S
    model_gd = EmbMLP(V, cfg.model.d_model, cfg.model.gd_hidden, n, cfg.model.activation)
    p_ho = build(model_gd, list(cfg.handover.seeds), gamma=cfg.handover.gamma, device=device)
    h_ho = engine.train(
        model_gd,
        p_ho,
        (X, y),
        cfg.handover.steps,
        optimizer="gd",
        lr=cfg.handover.lr,
        clip=cfg.handover.clip,
        log_at=cfg.handover.n_logs,
        callbacks={"s": handover_callback(model_gd, X, y, S)},
        desc="hand-over",
    )
    st = h_ho["s"]  # (n_logs, K, 5)
    cos_u, cos_pbar, cos_pm, dist_u, dist_pbar = (st[..., i] for i in range(5))
    # The hand-over step: the model's mean prediction is closer to p-bar than to u.
    t_handover = onsets.onset_step(h_ho.steps, (dist_pbar < dist_u).mean(1).astype(float), 1.0)
    u_exact = onsets.onset_step(h_ho.steps, (cos_u.min(1) < cfg.cos_target).astype(float), 1.0)
    handed = bool(np.isfinite(t_handover))  # False: no hand-over within the run
    after = h_ho.steps >= t_handover if handed else np.ones(len(h_ho.steps), dtype=bool)
    pbar_best = float(cos_pbar[after].mean(1).max())
    pbar_best_step = int(h_ho.steps[after][np.argmax(cos_pbar[after].mean(1))])
    u_at_best = float(cos_u[h_ho.steps == pbar_best_step].mean())
    return SimpleNamespace(
        model_gd=model_gd,
        steps=h_ho.steps,
        cos_u=cos_u,
        cos_pbar=cos_pbar,
        cos_pm=cos_pm,
        dist_u=dist_u,
        dist_pbar=dist_pbar,
        t_handover=t_handover,
        u_exact=u_exact,
        handed=handed,
        pbar_best=pbar_best,
        pbar_best_step=pbar_best_step,
        u_at_best=u_at_best,
    )


def run_escape(cfg, t3, model_gd, device) -> SimpleNamespace:
    """The escape run: every seed × seeded asymmetry δ as one batched run of clipped
    full-batch GD in float64. Returns the instances' ``seed_k``, ``delta_k``, the symmetric
    copies ``sym_k``, the starts ``A_start``, the logged ``eta_t``, ``A_norm``, ``S_change``,
    ``acc_esc`` (n_logs, K), ``H_path`` (n_logs, n_sym, Pd, Pd) and the escape steps ``t_esc``."""
    X, y = t3.X, t3.y
    pairs_first, pairs_second = exchange_pairs(t3.anchors, t3.gates)  # 2m-1 <-> 2m, g+ <-> g-
    deltas = [float(d) for d in cfg.esc.deltas]
    esc_seeds = list(cfg.esc.seeds)
    seed_k = np.repeat(esc_seeds, len(deltas))
    delta_k = np.tile(deltas, len(esc_seeds))

    p_esc = build(model_gd, seed_k.tolist(), gamma=cfg.esc.gamma, device=device)
    p_esc = {k: v.detach().double().requires_grad_(True) for k, v in p_esc.items()}
    # E_first = S + delta A_seed, E_second = S - delta A_seed, from each seed's random init
    seed_asymmetry(p_esc["E"], pairs_first, pairs_second, delta_k)
    A_start = saddle.antisymmetric_part(p_esc["E"].detach(), pairs_first, pairs_second).cpu()
    S_start = (p_esc["E"].detach()[:, pairs_first] + p_esc["E"].detach()[:, pairs_second]).cpu() / 2
    sym_k = np.nonzero(delta_k == 0)[0]  # the symmetric trajectory of each seed

    # Logged per instance: effective step size, |A|, |S - S(0)| and accuracy; and H_A along
    # the symmetric trajectories, one (n_sym, Pd, Pd) per logged step.
    escape_stats, H_path = escape_callback(
        model_gd, X, y, pairs_first, pairs_second, sym_k, S_start, cfg.esc.lr, cfg.esc.clip
    )
    h_esc = engine.train(
        model_gd,
        p_esc,
        (X, y),
        cfg.esc.steps,
        optimizer="gd",
        lr=cfg.esc.lr,
        clip=cfg.esc.clip,
        log_at=np.arange(0, cfg.esc.steps + 1, cfg.esc.every),
        callbacks={"s": escape_stats},
        desc="escape",
    )
    steps_esc = h_esc.steps
    eta_t, A_norm, S_change, acc_esc = (h_esc["s"][..., i] for i in range(4))
    H_path = torch.stack(H_path)  # (n_logs, n_sym, Pd, Pd)
    t_esc = escape_steps(steps_esc, acc_esc, cfg.esc.acc)
    return SimpleNamespace(
        deltas=deltas,
        esc_seeds=esc_seeds,
        seed_k=seed_k,
        delta_k=delta_k,
        A_start=A_start,
        sym_k=sym_k,
        steps=steps_esc,
        eta_t=eta_t,
        A_norm=A_norm,
        S_change=S_change,
        acc_esc=acc_esc,
        H_path=H_path,
        t_esc=t_esc,
    )


def predicted_escape(esc, cfg, k):
    """Step at which the linearized mode of instance k reaches A* after its minimum, with
    the propagated norms and A*: ``(step, norms, a_star)``."""
    seed_k, sym_k, steps_esc = esc.seed_k, esc.sym_k, esc.steps
    j = int(np.nonzero(seed_k[sym_k] == seed_k[k])[0][0])  # this seed's symmetric copy
    s = sym_k[j]
    norms = saddle.propagate_linear(
        steps_esc, esc.H_path[:, j], esc.eta_t[:, s], esc.A_start[k], int(steps_esc[-1])
    )
    # A*: the symmetric change at the end of the first stair (accuracy 1/2 on the symmetric run).
    first_stair = int(np.argmax(esc.acc_esc[:, s] >= cfg.esc.first_stair_acc))
    a_star = float(esc.S_change[first_stair, s])
    t_min = int(np.argmin(norms))
    above = np.nonzero(norms[t_min:] >= a_star)[0]
    return (t_min + above[0] if len(above) else np.inf), norms, a_star


def predict_escapes(esc, cfg) -> SimpleNamespace:
    """The linearized prediction of every seeded copy (``pred``: instance -> (step, norms,
    A*)) and the growth rate λ along each seed's symmetric path (``lam_path``, (n_logs,
    n_sym))."""
    pred = {k: predicted_escape(esc, cfg, k) for k in range(len(esc.seed_k)) if esc.delta_k[k] > 0}
    lam_path = np.stack(
        [saddle.growth_rate(esc.H_path[:, j], esc.eta_t[:, s]) for j, s in enumerate(esc.sym_k)],
        1,
    )
    return SimpleNamespace(pred=pred, lam_path=lam_path)


def run_linear(cfg, t3, device) -> SimpleNamespace:
    """The linear model under GD against the closed form of its modes: the top singular
    values ``s_k`` of the signature matrix, predicted and measured onsets ``t_pred``,
    ``t_meas`` (seeds, k), the mode strengths ``mu`` (n_logs, seeds, k) with the early closed
    form of the first seed, and the final weights' Gram matrices."""
    X, y, V, n, S = t3.X, t3.y, t3.V, t3.n, t3.S
    M_sig = flow.signature_matrix(S)
    U_m, s_m, Vh_m = torch.linalg.svd(M_sig)
    k_modes = cfg.lin.modes
    s_k = s_m[:k_modes].numpy()
    Uk, Vk = U_m[:, :k_modes], Vh_m[:k_modes].T
    lin = LinearEmb(V, cfg.lin.d, n)
    p_lin = build(lin, list(cfg.lin.seeds), gamma=cfg.lin.gamma, device=device)
    E0_lin, W0_lin = p_lin["E"].detach().double(), p_lin["W"].detach().double()
    a0 = torch.einsum("vk,svd->skd", Uk, E0_lin).numpy()
    b0 = torch.einsum("sdn,nk->skd", W0_lin, Vk).numpy()
    theta = cfg.lin.theta
    eta = cfg.lin.lr
    t_pred = (
        np.stack([flow.linear_mode_onset(s_k, a0[i], b0[i], theta) for i in range(len(a0))]) / eta
    )

    mode_strength = lambda step, p: torch.einsum(
        "vk,svn,nk->sk", Uk, p["E"].double() @ p["W"].double(), Vk
    )
    log_lin = np.arange(0, cfg.lin.steps + 1, cfg.lin.every)
    h_lin = engine.train(
        lin,
        p_lin,
        (X, y),
        cfg.lin.steps,
        optimizer="gd",
        lr=eta,
        log_at=log_lin,
        callbacks={"mu": mode_strength},
        desc="linear model",
    )
    mu = h_lin["mu"]  # (n_logs, seeds, k)
    t_meas = np.stack(
        [onsets.onset_step(h_lin.steps, mu[:, :, j], theta).numpy() for j in range(k_modes)], 1
    )
    early = flow.linear_mode_strength_early(s_k, a0[0], b0[0], h_lin.steps * eta)

    # Final Gram matrix: the conservation law and the signature geometry.
    E_fin, W_fin = p_lin["E"].detach().double(), p_lin["W"].detach().double()
    Q_fin = E_fin @ W_fin
    G_meas = E_fin @ E_fin.transpose(1, 2)
    G_bal = flow.psd_sqrt(Q_fin @ Q_fin.transpose(1, 2))
    return SimpleNamespace(
        M_sig=M_sig,
        k_modes=k_modes,
        s_k=s_k,
        Uk=Uk,
        theta=theta,
        steps=h_lin.steps,
        t_pred=t_pred,
        mu=mu,
        t_meas=t_meas,
        early=early,
        G_meas=G_meas,
        G_bal=G_bal,
    )

"""Chapter 7's identities checked numerically on the network: the library's forward pass
against the model written out position by position, and the implicit-rescaling formula
``eq-qkov-factor-flow`` against autograd."""

from __future__ import annotations

import torch

from ...data import tasks
from ...theory import qkov_flow
from ...training import engine, qkov
from ...training.init import init_params
from ..qkov_training import snapshots


def written_out(p, X, V=tasks.ScanSnap.VOCAB):
    """Logits from the factors, one position at a time: s_t = (W_Q e_q).(W_K e_t)/sqrt(V)
    (or e_q^T W_QK e_t), a = softmax over positions, z = W_O W_V sum_t a_t e_t (or W_OV)."""
    E = torch.nn.functional.one_hot(X, V).to(torch.float64)  # (B, T, V)
    if "W_QK" in p:
        s = torch.einsum("bu,kuv,btv->kbt", E[:, -1], p["W_QK"], E)
    else:
        q = torch.einsum("kdu,bu->kbd", p["W_Q"], E[:, -1])
        s = torch.einsum("kbd,kdv,btv->kbt", q, p["W_K"], E)
    h = torch.einsum("kbt,btv->kbv", torch.softmax(s / V**0.5, -1), E)
    if "W_OV" in p:
        return torch.einsum("kov,kbv->kbo", p["W_OV"], h)
    return torch.einsum("kod,kdv,kbv->kbo", p["W_O"], p["W_V"], h)


def forward_error(cfg, names, device) -> float:
    """The largest difference between the library's logits and :func:`written_out`'s, over
    the parameterizations ``names`` (two float64 inits each) on ``cfg.check_n`` sequences."""
    forward_batch = tasks.scan_snap_batch(
        cfg.check_n,
        seq_len=cfg.runs.seq_len,
        generator=torch.Generator().manual_seed(cfg.check_seed),
        device=device,
    )
    param_err = 0.0
    for name in names:
        m = qkov.SingleQueryAttention.named(name)
        p = init_params(m.specs(), [0, 1], gamma=cfg.runs.gamma, dtype=torch.float64, device=device)
        with torch.no_grad():
            diff = m.forward(p, forward_batch.X) - written_out(p, forward_batch.X)
        param_err = max(param_err, float(diff.abs().max()))
    return param_err


def flow_error(cfg, m_fafo, h_fafo, device) -> float:
    """The relative miss of the predicted change of W_QK and W_OV
    (:func:`lib.theory.qkov_flow.collapsed_flow`) against one small SGD step of size
    ``cfg.flow_check_step`` on the factors of the trained FAFO model, the larger of the
    two."""
    ref = qkov.SingleQueryAttention.named("CACO")  # the collapsed model: G = dL/dW_QK, dL/dW_OV
    p_end = {
        n: v.to(torch.float64).requires_grad_()
        for n, v in snapshots(h_fafo, m_fafo, -1, device).items()
    }
    bb = tasks.scan_snap_batch(
        cfg.flow_check_n,
        seq_len=cfg.runs.seq_len,
        generator=torch.Generator().manual_seed(cfg.flow_check_seed),
        device=device,
    )
    Wc = {
        "W_QK": m_fafo.qk_matrix(p_end).detach().requires_grad_(),
        "W_OV": m_fafo.ov_matrix(p_end).detach().requires_grad_(),
    }
    grad_qk, grad_ov = torch.autograd.grad(
        engine.cross_entropy(ref.forward(Wc, bb.X), bb.y).sum(), list(Wc.values())
    )
    v_qk, v_ov = qkov_flow.collapsed_flow(m_fafo, p_end, grad_qk, grad_ov)
    grads = torch.autograd.grad(
        engine.cross_entropy(m_fafo.forward(p_end, bb.X), bb.y).sum(), list(p_end.values())
    )
    eta_chk = cfg.flow_check_step
    p_step = {
        n: (w - eta_chk * gw).detach() for (n, w), gw in zip(p_end.items(), grads, strict=True)
    }
    with torch.no_grad():
        dqk = (m_fafo.qk_matrix(p_step) - m_fafo.qk_matrix(p_end)) / eta_chk
        dov = (m_fafo.ov_matrix(p_step) - m_fafo.ov_matrix(p_end)) / eta_chk
        flow_err = max(
            float((dqk - v_qk).norm() / v_qk.norm()), float((dov - v_ov).norm() / v_ov.norm())
        )
    return flow_err

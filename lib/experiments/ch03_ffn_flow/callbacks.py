"""The training callbacks of the hand-over and escape runs, and the escape's bookkeeping:
the exchange pairs of T3, the seeded asymmetry, the escape steps and their log-δ slopes."""

from __future__ import annotations

import numpy as np
import torch

from ...measure import metrics as M
from ...theory import flow, saddle
from ...training import engine

# ----------------------------------------------------------------------------- hand-over


def handover_callback(model, X, y, S):
    """A training callback logging, per instance, (K, 5): the cosine of the true gradient
    with the order-0 term centred on u, on p-bar and on the model's mean prediction, and
    the distances of that mean prediction from u and from p-bar."""
    n = S.n_labels

    def stats(step, p):
        grad = flow.neg_grad_E(model, p, X, y)
        pm = flow.mean_prediction(model, p, X)
        return torch.stack(
            [
                M.field_cosine(grad, flow.emb_mlp_order0(model, p, S, "uniform")),
                M.field_cosine(grad, flow.emb_mlp_order0(model, p, S, "marginal")),
                M.field_cosine(grad, flow.emb_mlp_order0(model, p, S, pm)),
                (pm - 1 / n).norm(dim=-1),
                (pm - S.pbar).norm(dim=-1),
            ],
            -1,
        )

    return stats


# ----------------------------------------------------------------------------- escape


def exchange_pairs(anchors, gates):
    """The token pairs the exchange symmetry of T3 swaps: odd anchor 2m-1 with 2m, g+ with g-.

    Returns ``(first, second)``, two lists of token ids.
    """
    first = [a for a in anchors if a % 2 == 1] + [gates[0]]
    second = [a + 1 for a in anchors if a % 2 == 1] + [gates[1]]
    return first, second


def seed_asymmetry(E, first, second, delta_k) -> None:
    """Rewrite the paired rows of ``E`` (K, V, d) in place as S + δ_k A_seed and S - δ_k A_seed,
    with S and A_seed the symmetric and antisymmetric parts of instance k's random init."""
    with torch.no_grad():
        S_pair = (E[:, first] + E[:, second]) / 2
        A_seed = (E[:, first] - E[:, second]) / 2
        dlt = torch.as_tensor(delta_k, dtype=torch.float64, device=E.device)[:, None, None]
        E[:, first] = S_pair + dlt * A_seed
        E[:, second] = S_pair - dlt * A_seed


def escape_callback(model, X, y, first, second, sym_k, S_start, lr, clip):
    """A training callback for the escape run, and the list it fills with H_A.

    The callback logs, per instance, (K, 4): the effective step size (``lr`` times the
    clip factor), |A|, |S - S(0)| and the training accuracy. On the symmetric instances
    ``sym_k`` it also appends H_A (:func:`lib.theory.saddle.antisymmetric_hessian`, (n_sym, Pd, Pd))
    to the returned list, one entry per logged step.
    """
    H_path = []

    def stats(step, p):
        with torch.enable_grad():
            loss = engine.cross_entropy(model.forward(p, X), y).sum()
            grads = torch.autograd.grad(loss, list(p.values()))
        gnorm = torch.sqrt(sum(gr.flatten(1).pow(2).sum(1) for gr in grads))
        sub = {k: v.detach()[sym_k] for k, v in p.items()}
        H_path.append(saddle.antisymmetric_hessian(model, sub, X, y, first, second).cpu())
        E_now = p["E"].detach()
        S_now = (E_now[:, first] + E_now[:, second]).cpu() / 2
        return torch.stack(
            [
                lr * torch.clamp(clip / (gnorm + 1e-12), max=1.0).cpu(),
                saddle.antisymmetric_part(E_now, first, second).norm(dim=(1, 2)).cpu(),
                (S_now - S_start).norm(dim=(1, 2)),
                (model.forward(p, X).argmax(-1) == y).double().mean(-1).cpu(),
            ],
            -1,
        )

    return stats, H_path


def escape_steps(steps, acc, threshold: float) -> np.ndarray:
    """The first logged step at which each instance's accuracy exceeds ``threshold`` (inf: never).

    ``acc`` is (n_logs, K); returns (K,).
    """
    return np.array(
        [
            steps[np.argmax(acc[:, k] > threshold)] if (acc[:, k] > threshold).any() else np.inf
            for k in range(acc.shape[1])
        ]
    )


def escape_slopes(pred, seed_k, delta_k, t_esc, seeds):
    """The log-δ slope of the escape step, measured and predicted, per seed (least squares
    over δ > 0): two lists, one value per seed."""
    slopes_meas, slopes_pred = [], []
    for s in seeds:
        ks = [k for k in pred if seed_k[k] == s]
        ld = np.log([delta_k[k] for k in ks])
        slopes_meas.append(np.polyfit(ld, [t_esc[k] for k in ks], 1)[0])
        slopes_pred.append(np.polyfit(ld, [pred[k][0] for k in ks], 1)[0])
    return slopes_meas, slopes_pred

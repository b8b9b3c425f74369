"""What Chapters 7 and 8 read from their runs: effective rates and the balancedness drift
(Chapter 7); attention at a matched loss, the Fig 2 and Fig 3 comparisons with the
official code, the projection onto the reduced model, and the Shakespeare run's validation
metrics (Chapter 8).

Functions return numbers and tables, never sentences: the chapter's prose says what they
mean. The runs are :mod:`lib.experiments.qkov_training`; the official code's saved outputs
:mod:`lib.experiments.qkov_official`; generic metrics (the matched-loss reading,
attention entropy, faithfulness) :mod:`lib.measure.metrics`.
"""

from __future__ import annotations

import numpy as np
import torch

from ..measure import attention, matched_loss
from ..theory import qkov_flow
from ..training import engine
from . import qkov_official as official
from .qkov_training import snapshots

# ---------------------------------------------------------------------------
# Attention over training and at a matched loss (Chapter 8, ``sec-qkov-similar-loss`` and ``sec-qkov-ratio``)
# ---------------------------------------------------------------------------


@torch.no_grad()
def stats_over_training(history, model, batch) -> dict[str, np.ndarray]:
    """attention_stats on a held-out ``batch`` at every logged step; sample means of each
    metric (n_logs, K) plus the per-sample arrays under ``"samples"`` (n_logs, K, B).
    The weights are evaluated on the batch's device."""
    X, y, _, dm = batch
    out: dict[str, list] = {}
    for i in range(len(history.steps)):
        st = attention.attention_stats(model, snapshots(history, model, i, X.device), X, y, dm)
        for key, v in st.items():
            v = v.cpu()
            out.setdefault(key, []).append(v.numpy() if v.dim() == 1 else v.mean(-1).numpy())
            if key in ("distinct", "p_true"):
                out.setdefault(key + "_samples", []).append(v.numpy())
    return {k: np.stack(v) for k, v in out.items()}


def means_at_matched_loss(stats, groups, loss_star, keys) -> dict[str, dict[str, float]]:
    """Per group ``label -> (run name, instance selection)``: the seed mean of each metric
    in ``keys``, each instance read where its held-out loss first falls to ``loss_star``."""
    out = {}
    for label, (name, sel) in groups.items():
        s = stats[name]
        out[label] = {
            key: float(
                np.mean(matched_loss.at_matched_loss(s["loss"][:, sel], s[key][:, sel], loss_star))
            )
            for key in keys
        }
    return out


def group_by(values, labels, keys) -> np.ndarray:
    """``values`` of instances (K,) stacked by label: (len(keys), instances per key)."""
    values, labels = np.asarray(values), np.asarray(labels)
    return np.stack([values[labels == k] for k in keys])


# ---------------------------------------------------------------------------
# Fig 2: the panels at the matched loss and at the code's reading (Chapter 8, ``sec-qkov-similar-loss``)
# ---------------------------------------------------------------------------


def distinct_mass_percent(samples) -> np.ndarray:
    """Percentage of samples in each of the official heatmaps' five distinct-mass bins
    ``[0, .2), ..., [.8, 1]`` (Chapter 8, ``sec-qkov-similar-loss``)."""
    h, _ = np.histogram(np.asarray(samples).ravel(), bins=official.DISTINCT_BIN_EDGES)
    return 100.0 * h / max(h.sum(), 1)


def modal_bin_status(percent, official_modal: int | None) -> str:
    """The reproduction status of one Fig 2 panel: "reproduced" when our modal
    distinct-mass bin is the official one, "not reproduced" when it is not, and
    "not comparable" when the official run saved no output."""
    if official_modal is None:
        return "not comparable"
    return "reproduced" if int(np.argmax(percent)) == official_modal else "not reproduced"


def reading_index(stats_run, history, sel, reading, loss_star, lr, fixed_flow=None):
    """Per instance, the logging index a panel is read at: where the held-out loss first
    reaches ``loss_star`` (``reading == "matched loss"``); or the code's reading: the first
    log at OV flow time ``lr * step >= fixed_flow`` if given (a fixed-length run of the
    code), else where the logged training loss first reaches the code's stopping loss (the
    lowest logged training loss if never)."""
    if reading == "matched loss":
        return matched_loss.first_log_below(stats_run["loss"][:, sel], loss_star)
    if fixed_flow is not None:
        i = int(np.nonzero(lr * history.steps >= fixed_flow)[0][0])
        return np.full(history["loss"][:, sel].shape[1], i)
    train = history["loss"][:, sel]
    idx = matched_loss.first_log_below(train, official.FIG2_STOP_LOSS)
    return np.where(idx >= 0, idx, train.argmin(0))


def read_samples(stats_run, sel, idx):
    """Pooled per-sample distinct mass and p(right token) of the instances at log idx."""
    ks = np.arange(stats_run["loss"].shape[1])[sel]

    def pick(key):
        return np.concatenate([stats_run[key][i, k] for i, k in zip(idx, ks, strict=True)])

    return pick("distinct_samples"), pick("p_true_samples")


def fig2_rows(stats, runs, panels, loss_star, lr):
    """The Fig 2 comparison: one row per panel and reading (the matched loss, the code's
    reading) with the steps read, the largest training loss there, our percentage per
    distinct-mass bin, our and the official modal bin and the status; and the panels that
    never reached the code's stopping loss."""
    rows, not_reached = [], []
    bins = official.BIN_NAMES
    for panel, (name, sel) in panels.items():
        h = runs[name][1]
        train = h["loss"][:, sel]
        fixed_flow = official.FIG2_CACO_FLOW_TIME if panel == "CACO, r=5" else None
        reached = bool((matched_loss.first_log_below(train, official.FIG2_STOP_LOSS) >= 0).all())
        if not reached and fixed_flow is None:
            not_reached.append(panel)
        for reading in ("matched loss", "code's reading"):
            idx = reading_index(stats[name], h, sel, reading, loss_star, lr, fixed_flow)
            pct = distinct_mass_percent(read_samples(stats[name], sel, idx)[0])
            modal = official.FIG2_MODAL_BIN[panel]
            label = reading if reading == "matched loss" else "code: train loss ≤ 1e-3"
            if reading != "matched loss" and fixed_flow is not None:
                label = f"code: flow time {fixed_flow:g}"
            elif reading != "matched loss" and not reached:
                label = "code: lowest train loss"
            rows.append(
                {
                    "panel": panel,
                    "reading": label,
                    "steps": ", ".join(str(int(h.steps[i])) for i in idx),
                    "train loss": float(train[idx, np.arange(len(idx))].max()),
                    **dict(zip(bins, pct.round(1), strict=True)),
                    "our mode": bins[int(np.argmax(pct))],
                    "official mode": "no output" if modal is None else bins[modal],
                    "status": modal_bin_status(pct, modal),
                }
            )
    return rows, not_reached


# ---------------------------------------------------------------------------
# Effective rates and the balancedness drift (Chapter 7, ``sec-qkov-rescaling``)
# ---------------------------------------------------------------------------


def effective_rate_gains(model, history, device) -> dict[str, np.ndarray]:
    """Effective-rate multipliers of QK and OV at every logged step, (n_logs, K) each:
    sigma_max(W_Q)^2 + sigma_max(W_K)^2 for a factorized QK (and the OV analogue), 1 for a
    collapsed circuit."""

    def sv(W):
        return torch.linalg.matrix_norm(W.double(), ord=2) ** 2

    gains = {"qk": [], "ov": []}
    for i in range(len(history.steps)):
        p = snapshots(history, model, i, device)
        one = torch.ones(p[next(iter(p))].shape[0], dtype=torch.float64, device=device)
        gains["qk"].append(sv(p["W_Q"]) + sv(p["W_K"]) if model.qk == "factorized" else one)
        gains["ov"].append(sv(p["W_O"]) + sv(p["W_V"]) if model.ov == "factorized" else one)
    return {k: torch.stack(v).cpu().numpy() for k, v in gains.items()}


def gram_matrices(p) -> dict[str, torch.Tensor]:
    """The Gram matrices whose differences gradient flow conserves (K, d, d):
    W_Q W_Q^T, W_K W_K^T, W_O^T W_O, W_V W_V^T."""
    W_Q, W_K, W_O, W_V = p["W_Q"], p["W_K"], p["W_O"], p["W_V"]
    return {"Q": W_Q @ W_Q.mT, "K": W_K @ W_K.mT, "O": W_O.mT @ W_O, "V": W_V @ W_V.mT}


def unbalanced_fraction_callback(p0):
    """An engine callback ``(step, p) -> (K, 2)``: for QK and OV, the fraction of the change
    of the Gram matrices since ``p0`` that is not balanced,
    ``||D(t) - D(0)||_F / (||dG_Q||_F + ||dG_K||_F)`` with ``D = G_Q - G_K`` (OV alike)."""
    G0 = {k: v.detach().clone() for k, v in gram_matrices(p0).items()}

    def nrm(A):
        return A.flatten(1).norm(dim=1)

    def drift(step, p):
        G = gram_matrices(p)

        def d(a, b):
            return nrm((G[a] - G[b]) - (G0[a] - G0[b])) / (
                nrm(G[a] - G0[a]) + nrm(G[b] - G0[b]) + 1e-30
            )

        return torch.stack([d("Q", "K"), d("O", "V")], -1)

    return drift


# ---------------------------------------------------------------------------
# The network projected onto the reduced model (Chapter 8, ``sec-qkov-bridge``)
# ---------------------------------------------------------------------------


def project_run(model, history, device) -> tuple[np.ndarray, np.ndarray]:
    """(mu_qk, mu_ov), each (n_logs, K): every logged CACO weight projected onto the
    symmetric ansatz (:func:`lib.theory.qkov_flow.symmetric_projection`)."""
    mu_qk, mu_ov = [], []
    for i in range(len(history.steps)):
        p = snapshots(history, model, i, device)
        a, o = qkov_flow.symmetric_projection(p["W_QK"], p["W_OV"], model.scale)
        mu_qk.append(a)
        mu_ov.append(o)
    return np.array(mu_qk), np.array(mu_ov)


def fit_lines(dG: np.ndarray, dO: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per instance (column), the least-squares slope k of ``dG = k dO`` through the origin
    and its R^2 (against the mean of dG)."""
    K = dG.shape[1]
    k_fit = np.array([(dG[:, k] @ dO[:, k]) / (dO[:, k] @ dO[:, k]) for k in range(K)])
    r2 = np.array(
        [
            1
            - np.sum((dG[:, k] - k_fit[k] * dO[:, k]) ** 2)
            / np.sum((dG[:, k] - dG[:, k].mean()) ** 2)
            for k in range(K)
        ]
    )
    return k_fit, r2


# ---------------------------------------------------------------------------
# Fixed attention: ours beside the code's Fig 3 (Chapter 8, ``sec-qkov-fixed``)
# ---------------------------------------------------------------------------


def code_fig3(alphas) -> dict[str, np.ndarray]:
    """The official code's final loss at each of ``alphas`` (NaN where it has none)."""
    at = dict(zip(official.FIG3_ALPHAS, range(len(official.FIG3_ALPHAS)), strict=True))
    return {
        ov: np.array([v[at[a]] if a in at else np.nan for a in alphas], dtype=float)
        for ov, v in official.FIG3_FINAL_LOSS.items()
    }


def fig3_table(alphas, final_loss: dict[str, np.ndarray]):
    """Our final held-out loss per alpha beside the official code's, and the ratio
    collapsed/factorized of both (a pandas DataFrame)."""
    import pandas as pd

    code = code_fig3(alphas)
    return pd.DataFrame(
        {
            "alpha": list(alphas),
            "collapsed, ours": final_loss["collapsed"],
            "collapsed, code": code["collapsed"],
            "factorized, ours": final_loss["factorized"],
            "factorized, code": code["factorized"],
            "ratio, ours": final_loss["collapsed"] / final_loss["factorized"],
            "ratio, code": code["collapsed"] / code["factorized"],
        }
    )


# ---------------------------------------------------------------------------
# The Shakespeare model (Chapter 8, ``sec-qkov-shakespeare``)
# ---------------------------------------------------------------------------


def log_positions(context_len: int, device) -> torch.Tensor:
    """log(i + 1) for positions i = 0..context_len-1: the entropy of a causal attention row
    uniform over its visible prefix."""
    return torch.log(torch.arange(1, context_len + 1, dtype=torch.float32, device=device))


def shk_val_metrics(model, Xv, yv):
    """An engine callback ``(step, params) -> (K, 4)``: per instance, the validation loss,
    the attention entropy (nats), the normalized entropy H_i / log(i+1) (i >= 1) and the
    attention mass on the previous character, averaged over layers, windows and positions."""
    log_i = log_positions(Xv.shape[-1], Xv.device)

    @torch.no_grad()
    def callback(step, params):
        z, att = model.forward(params, Xv, return_attention=True)
        A = torch.stack(att)  # (layers, K, B, L, L); a head's causal rows
        H = -torch.special.xlogy(A, A).sum(-1)  # (layers, K, B, L)
        H_norm = H[..., 1:] / log_i[1:]
        prev = torch.diagonal(A, -1, -2, -1)  # a_{i,i-1}
        return torch.stack(
            [
                engine.cross_entropy(z, yv),
                H.mean((0, 2, 3)),
                H_norm.mean((0, 2, 3)),
                prev.mean((0, 2, 3)),
            ],
            1,
        )

    return callback


def unigram_loss(stream: torch.Tensor, val_stream: torch.Tensor, vocab_size: int) -> float:
    """A context-free baseline: the training text's character frequencies (add-one
    smoothed), scored on the validation text in nats per character."""
    freq = torch.bincount(stream, minlength=vocab_size).double() + 1
    return float(-torch.log(freq / freq.sum())[val_stream].mean())


def shk_table(at: dict[str, np.ndarray], r_inst, r_grid) -> list[dict]:
    """The Shakespeare table, one row per QK multiplier: the seed mean and range
    ``(mean, min, max)`` of each quantity read at the matched loss (for
    :func:`lib.book.page.table`, which writes them as intervals)."""
    columns = {
        "entropy (nats)": "H",
        "normalized entropy": "Hn",
        "previous-char mass": "prev",
        "step at matched loss": "step",
        "final val. loss": "final loss",
    }
    rows = []
    for r in r_grid:
        sel = np.asarray(r_inst) == r
        row = {"QK multiplier": float(r)}
        for name, key in columns.items():
            v = np.asarray(at[key])[sel]
            row[name] = (float(v.mean()), float(v.min()), float(v.max()))
        rows.append(row)
    return rows

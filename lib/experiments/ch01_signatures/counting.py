"""Chapter 1's tools: a task on the device, similarity matrices and their agreement, the
signatures' definitions as a plain loop over samples, and the order-1-only check."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import torch

from ...data import signatures as sig
from ...data.tasks import TaskData
from ...measure import metrics as M


def on_device(d: TaskData, device) -> TaskData:
    """A task split with its tokens and labels on ``device``."""
    return replace(d, X=d.X.to(device), y=d.y.to(device))


def similarity(T: torch.Tensor) -> np.ndarray:
    """Cosine similarity of the rows of ``T`` (each flattened), as a numpy array."""
    return M.cosine_similarity_matrix(T.flatten(1)).cpu().numpy()


def upper(S) -> np.ndarray:
    """The strict upper triangle of a similarity matrix, as a numpy vector."""
    return M.upper_triangle(torch.as_tensor(S)).cpu().numpy()


def agreement(S, T) -> float:
    """Pearson correlation of the upper triangles of two similarity matrices."""
    return float(np.corrcoef(upper(S), upper(T))[0, 1])


def brute_force(Xs, ys, s, mu, n_lab):
    """The definitions ``eq-sig-orders`` and ``eq-sig-joint``, one sample at a time: the label
    signature of ``s``, its contextual signature at ``mu`` and its joint signature at ``mu``."""
    lab, ctx, joint, n_s = np.zeros(n_lab), 0.0, np.zeros(n_lab), 0
    for x, y in zip(Xs.tolist(), ys.tolist(), strict=True):
        cs, cmu = x.count(s), x.count(mu)
        n_s += cs
        lab[y] += cs
        ctx += cs * cmu
        joint[y] += cs * cmu
    return lab / n_s, ctx / n_s, joint / n_s


def estimator_error(D: TaskData, n: int):
    """The largest difference between the vectorized estimators and :func:`brute_force` on
    the first ``n`` samples of ``D``, for the first two tokens of its first sample."""
    V, n_lab = D.vocab_size, D.n_labels
    Xs, ys = D.X[:n], D.y[:n]
    s, mu = int(Xs[0, 0]), int(Xs[0, 1])
    lab, ctx, joint = brute_force(Xs, ys, s, mu, n_lab)
    return max(
        np.abs(sig.label_signature(Xs, ys, V, n_lab)[s].cpu().numpy() - lab).max(),
        abs(sig.contextual_signature(Xs, V)[s, mu].item() - ctx),
        np.abs(
            sig.joint_signature(Xs, ys, V, n_lab, tokens=[s])[0, mu].cpu().numpy() - joint
        ).max(),
    )


def order1_only(d: TaskData, eps: float) -> dict:
    """Gates and anchor pairs identical at order 0 (largest signature difference ``gap0``) and
    opposite at order 1 (largest interaction cosine ``cos1``, anchors vs gates and back);
    ``holds``: both, with "identical" meaning below ``eps``."""
    cos = similarity
    an, gt = d.groups["anchors"], d.groups["gates"]
    pairs = [(an[2 * m], an[2 * m + 1]) for m in range(len(an) // 2)]
    gap0 = sig.label_signature_gap(d.X, d.y, d.vocab_size, d.n_labels, pairs + [tuple(gt)])
    inter = sig.joint_interaction(d.X, d.y, d.vocab_size, d.n_labels, tokens=an + gt)
    c_an, c_gt = cos(inter[: len(an)][:, gt]), cos(inter[len(an) :][:, an])
    cos1 = max(max(c_an[2 * m, 2 * m + 1] for m in range(len(pairs))), c_gt[0, 1])
    return {"gap0": gap0, "cos1": float(cos1), "holds": gap0 < eps and cos1 < 0}

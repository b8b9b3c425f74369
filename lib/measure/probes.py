r"""Linear probes that generalize across tokens: where a feature lives (Chapter 4).

:func:`heldout_probe` fits a ridge regression of a :math:`\pm 1` label on a representation and
scores it on *held-out groups* (here: held-out anchors). A feature that the representation
carries along a shared direction is read off an anchor the probe never saw; a feature that is
only memorized anchor by anchor (twelve random vectors, which any linear map can label at will)
is not, and scores at chance. :func:`bit_probe_callbacks` logs where bit 1 of the
gated-parity-bit task lives during training (:func:`lib.measure.staircase_callbacks.bit_callbacks` logs the rest);
:func:`anchor_probe_callbacks` reads, from the anchor rows alone, the anchor feature of each
bit (Chapter 2: whether a model that learned bit 2 put it in its embeddings).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ..env import cpu_threads
from ..training.engine import cached_callbacks
from .staircase import increment, order_partials

__all__ = [
    "heldout_probe",
    "bit_probe_callbacks",
    "anchor_probe_callbacks",
]


def heldout_probe(Z, labels, groups, ridge: float = 1.0) -> torch.Tensor:
    r"""Held-out-group accuracy of a ridge probe of ``labels`` (:math:`\pm1`) on ``Z``.

    ``Z`` is ``(K, N, f)`` (or ``(N, f)``), ``labels`` and ``groups`` are ``(N,)``. For each
    group, the probe is fitted on the other groups (features centred on them; ridge ``ridge``
    times the mean eigenvalue of their covariance; no label intercept, which leave-one-out
    would bias against the held-out label) and predicts the group's labels by sign. Every
    group's probe is fitted at once, from the totals less the group's own sums. Returns ``(K,)`` accuracies over all N points; 0.5 is chance for balanced labels.
    """
    Z = torch.as_tensor(Z, dtype=torch.float64)
    Z = Z[None] if Z.dim() == 2 else Z
    y = torch.as_tensor(labels, dtype=torch.float64, device=Z.device)
    grp = torch.as_tensor(groups, device=Z.device)
    if y.shape != grp.shape or y.shape[0] != Z.shape[1]:
        raise ValueError(
            f"labels {tuple(y.shape)} and groups {tuple(grp.shape)} must both be (N,) with "
            f"N = {Z.shape[1]} rows of Z"
        )
    if not torch.all(y.abs() == 1):
        raise ValueError("labels must be +1 or -1")
    N, f = Z.shape[1:]
    if N < f:
        # Fewer points than features: every centred point, mean and fitted weight lies in
        # the span of the N rows, so the probe is fitted in an orthonormal basis of it (N
        # coordinates instead of f; the ridge keeps its scale, the mean over all f).
        Z = Z @ torch.linalg.qr(Z.mT)[0]
    ids, g_of = torch.unique(grp, return_inverse=True)
    sizes = torch.bincount(g_of)
    if bool((sizes == sizes[0]).all()) and int(sizes[0]) < Z.shape[-1]:
        return _equal_groups(Z, y, g_of, len(ids), ridge, f)
    # Every group at once: the other groups' sums are the totals less the group's own.
    member = F.one_hot(g_of, len(ids)).to(Z.dtype).T  # (G, N)
    n_tr = (N - member.sum(1))[None, :, None]  # (1, G, 1)
    Zy = Z * y[:, None]
    mu = (Z.sum(1, keepdim=True) - member @ Z) / n_tr  # (K, G, f): the other groups' mean
    zy_tr = Zy.sum(1, keepdim=True) - member @ Zy
    y_tr = (y.sum() - member @ y)[None, :, None]
    own = torch.stack([Z[:, g_of == i].mT @ Z[:, g_of == i] for i in range(len(ids))], 1)
    C = (Z.mT @ Z)[:, None] - own - n_tr[..., None] * mu[..., :, None] * mu[..., None, :]
    trace = torch.diagonal(C, dim1=-2, dim2=-1).sum(-1)
    lam = ridge * (trace / f).clamp_min(1e-300) + 1e-300  # ridge x the mean eigenvalue
    rhs = (zy_tr - mu * y_tr)[..., None]  # the centred features against the labels
    eye = torch.eye(Z.shape[-1], dtype=Z.dtype, device=Z.device)
    # One thread: torch's batched LU on several CPU threads fails inside MKL (DLASWP) at
    # paper width (f = 256, K >= 3); below that its results equal the one-thread ones.
    with cpu_threads(1):
        w = torch.linalg.solve(C + lam[..., None, None] * eye, rhs)[..., 0]  # (K, G, f)
    pred = ((Z - mu[:, g_of]) * w[:, g_of]).sum(-1)  # each point by its group's probe
    return (torch.sign(pred) == y).sum(-1).to(Z.dtype) / N


def _equal_groups(Z, y, g_of, n_groups: int, ridge: float, f: int) -> torch.Tensor:
    """:func:`heldout_probe` for groups of one size n_g: each group's covariance is the
    centred total's less a rank n_g + 1 term, so every group's probe is solved from one
    eigendecomposition of the total (Woodbury) instead of one f x f system per group.
    ``f``: the number of features the ridge is scaled by."""
    N = Z.shape[1]
    n_g = N // n_groups
    n_t = N - n_g
    order = torch.argsort(g_of, stable=True)
    m = Z.mean(1, keepdim=True)
    lam_all, Q = torch.linalg.eigh((Z - m).mT @ (Z - m))  # the centred total scatter
    Zt = Z @ Q  # every point in its eigenbasis, where that scatter is diagonal
    Zg = Zt[:, order].unflatten(1, (n_groups, n_g))  # (K, G, n_g, f)
    yg = y[order].view(n_groups, n_g)
    mbar = Zg.mean(2)  # (K, G, f): each group's own mean
    mu = (Zt.sum(1, keepdim=True) - n_g * mbar) / n_t  # and the other groups' mean
    dev, d, c = Zg - mbar[:, :, None], mu - mbar, n_t * n_g / N
    # The other groups' covariance: the total's less dev^T dev + c d d^T.
    U = torch.cat([dev.mT, c**0.5 * d[..., None]], -1)  # (K, G, f, n_g + 1)
    trace = lam_all.sum(-1, keepdim=True) - dev.pow(2).sum((2, 3)) - c * d.pow(2).sum(-1)
    lam = ridge * (trace / f).clamp_min(1e-300) + 1e-300  # ridge x the mean eigenvalue
    zy = (Zt * y[:, None]).sum(1, keepdim=True) - (Zg * yg[..., None]).sum(2)
    rhs = zy - mu * (y.sum() - yg.sum(1))[None, :, None]  # (K, G, f)
    D = 1 / (lam_all[:, None, :] + lam[..., None])  # the total's ridge inverse, diagonal
    DU = D[..., None] * U
    S = torch.eye(U.shape[-1], dtype=Z.dtype, device=Z.device) - U.mT @ DU
    with cpu_threads(1):  # as in heldout_probe
        corr = torch.linalg.solve(S, U.mT @ (D * rhs)[..., None])
    w = D * rhs + (DU @ corr)[..., 0]  # (K, G, f): each group's probe
    pred = ((Zg - mu[:, :, None]) * w[:, :, None]).sum(-1)  # (K, G, n_g)
    return (torch.sign(pred) == yg).sum((1, 2)).to(Z.dtype) / N


def bit_probe_callbacks(model, data, layout, targets, params0, instances=None) -> dict:
    """Callbacks, per instance ``(K,)``, locating bit 1 of the gated-parity-bit task.

    ``instances`` (indices): read only these, NaN on the others (an ensemble run reads its
    seeds themselves, copy 0, and spends no probes on their perturbed copies).

    Held-out-anchor probes (every probe is scored on anchors it was not fitted on, so it
    reads only a code that the anchors share):

    * ``probe_E``: the anchor's parity (its half of bit 1) from the anchor embedding rows;
    * ``probe_attn``: the sequence's anchor parity from the attention's contribution at the
      readout position (``attention0`` of :meth:`lib.training.models.Transformer.forward`);
    * ``probe_mlp``: bit 1 itself (the XNOR of gate and parity) from the MLP's hidden layer
      at the readout position.

    Near 1: a parity code shared by the anchors. Near 0.5: none. Below 0.5: an ordinal code
    (the order-0 geometry orders the anchors, and a held-out anchor then resembles its
    neighbours, whose parity is the opposite).

    ``R1_ov`` (models with learned ``V0``, ``O0``): the order-1 partial R of the anchors'
    *value-transformed* embedding increment, ``E W_V W_O`` at t minus at 0: the parity
    geometry where the value path, not the embedding, holds it.
    """
    X = data.X
    a_seq = X[:, 1]  # [z, a, ..., g]
    anchors = list(layout.anchors)
    if not torch.isin(a_seq, torch.as_tensor(anchors)).all():
        raise ValueError("every sequence must hold its anchor at position 1 ([z, a, ..., g])")
    parity_a = torch.as_tensor([1.0 if a % 2 else -1.0 for a in anchors])
    parity_seq = torch.where(a_seq % 2 == 1, 1.0, -1.0)
    s1 = torch.where((X[:, -1] == layout.gates[0]) == (a_seq % 2 == 1), 1.0, -1.0)
    learned_ov = "V0" in params0
    K = params0["E"].shape[0]
    sub = list(range(K)) if instances is None else [int(k) for k in instances]
    if learned_ov:
        EV0 = (params0["E"] @ params0["V0"] @ params0["O0"]).detach()[sub].clone()

    def measure(step, params):
        if instances is None:
            return read(params)
        v = read({n: p[sub] for n, p in params.items()})
        full = {
            n: torch.full((K,), torch.nan, dtype=x.dtype, device=x.device) for n, x in v.items()
        }
        for n, x in v.items():
            full[n][sub] = x
        return full

    def read(params):
        _, hid = model.forward(params, X.to(params["E"].device), return_hidden=True)
        v = {
            "probe_E": heldout_probe(params["E"][:, anchors], parity_a, range(len(anchors))),
            "probe_attn": heldout_probe(hid["attention0"][:, :, -1], parity_seq, a_seq),
            "probe_mlp": heldout_probe(hid["mlp0"][:, :, -1], s1, a_seq),
        }
        if learned_ov:
            EV = params["E"] @ params["V0"] @ params["O0"]
            dEV = increment(EV, EV0, targets.tokens, subtract_mean_row=True)
            v["R1_ov"] = order_partials(dEV, targets)[1]
        return v

    names = ["probe_E", "probe_attn", "probe_mlp"] + (["R1_ov"] if learned_ov else [])
    return cached_callbacks(measure, names)


def anchor_features(layout) -> dict:
    """The anchor feature each bit of :func:`lib.data.tasks.gated_parity_bits` reads, +-1 per anchor:
    ``{1: a odd}``, and ``{2: ceil(a/2) odd}`` when the task has bit 2."""
    a = torch.as_tensor(list(layout.anchors))
    out = {1: torch.where(a % 2 == 1, 1.0, -1.0)}
    if layout.bit2 is not None:
        out[2] = torch.where(((a + 1) // 2) % 2 == 1, 1.0, -1.0)
    return out


def anchor_probe_callbacks(layout, emb: str = "E") -> dict:
    """Callbacks ``probe_E{j}``, per instance ``(K,)``: the held-out-anchor probe
    (:func:`heldout_probe`, each anchor its own group) of bit j's anchor feature
    (:func:`anchor_features`) from the anchors' rows of ``params[emb]``.

    Near 1: the rows share a code of the feature, the geometry of stair j. Near 0.5 or
    below: none (below: an ordinal code, see :func:`bit_probe_callbacks`).
    """
    anchors = list(layout.anchors)
    feats = anchor_features(layout)

    def measure(step, params):
        rows = params[emb][:, anchors]
        return {
            f"probe_E{j}": heldout_probe(rows, f.to(rows.device), range(len(anchors)))
            for j, f in feats.items()
        }

    return cached_callbacks(measure, [f"probe_E{j}" for j in feats])

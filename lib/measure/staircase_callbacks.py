r"""What a staircase run logs: callbacks for :func:`lib.training.engine.train`.

:func:`bit_callbacks` logs, per instance, each order's partial :math:`R_{\cos}` on the
anchors' embedding increment (:func:`lib.measure.staircase.order_partials`), its
permutation null, and the sign-bit losses whose plateaus place the stairs;
:func:`raw_alignment_callbacks` reads the rows of E themselves instead of their increment;
:func:`leading_term_callback` compares the embedding's gradient with the Emb-MLP's
leading-order term (Chapter 2).
"""

from __future__ import annotations

import torch

from ..data.signatures import label_signature, token_rate
from ..training.engine import cached_callbacks, cross_entropy
from .staircase import OrderTargets, increment, order_partials

__all__ = [
    "bit_callbacks",
    "raw_alignment_callbacks",
    "leading_term_callback",
    "signature_callbacks",
]


def bit_callbacks(
    model, data, layout, targets: OrderTargets, E0, emb: str = "E", null=None
) -> dict:
    r"""Callbacks logging the staircase of the gated-parity-bit task, per instance (K,).

    * ``R{o}``: the partial :math:`R_{\cos}` of order ``o`` on the anchors' increment;
    * with ``null`` (a :class:`lib.measure.nulls.PermutationNull` of ``targets``), ``null{o}``:
      ``(K, n_perm)``, the same reading against each label-permuted signature;
    * ``loss``-like curves on the whole of ``data``: ``loss_all`` (cross-entropy), ``acc``,
      and for each bit ``j`` the **sign-bit loss**
      :math:`-\log\frac{p(y)}{p(y)+p(y')}`, with :math:`y'` the label with bit ``j``
      flipped: ``ln 2`` while the bit is unknown, 0 once it is learned. Each plateau of the
      staircase is a stretch where one sign-bit loss sits at ``ln 2``.
    """
    E0 = E0.detach().clone()
    tok = list(targets.tokens)
    X, y = data.X.to(E0.device), data.y.to(E0.device)  # (N, L) shared or (K, N, L)
    # Bit j of a label is read off the label itself (its block), so the flip stays in the
    # label space even when the labels are shuffled (the negative control).
    flips = {}
    for j in (1, 2) if layout.bit2 is not None else (1,):
        shift = layout.block * 2 ** (j - 1)
        flips[j] = torch.where((y // shift) % 2 == 0, y + shift, y - shift)

    def measure(step, params):
        dE = increment(params[emb], E0, tok, subtract_mean_row=True)
        v = {f"R{o}": r for o, r in order_partials(dE, targets).items()}
        if null is not None:
            v.update({f"null{o}": r for o, r in null(dE).items()})
        lp = torch.log_softmax(model.forward(params, X).double(), -1)  # (K, N, n)
        at = lambda labels: lp.gather(-1, labels.expand(lp.shape[:-1])[..., None])[..., 0]
        ly = at(y)
        v["loss_all"] = -ly.mean(-1)
        v["acc"] = (lp.argmax(-1) == y).double().mean(-1)
        for j, yf in flips.items():
            two = torch.logaddexp(ly, at(yf))
            v[f"bit{j}"] = -(ly - two).mean(-1)
        return v

    names = [f"R{o}" for o in targets.orders] + ["loss_all", "acc"]
    names += [f"bit{j}" for j in flips] + ([f"null{o}" for o in null.orders] if null else [])
    return cached_callbacks(measure, names)


def raw_alignment_callbacks(targets: OrderTargets, emb: str = "E", null=None) -> dict:
    """Callbacks ``rawR{o}``: each order's partial R on the tracked rows of E itself.

    The increment (:func:`increment`) moves along the order-0 signature from the first
    step, so its ``R0`` is high at once; the rows themselves, ``E(t)`` with the mean row
    removed, align only as the increment outgrows the random init. Both sides centred the
    same way. Per instance ``(K,)``. With ``null`` (a
    :class:`lib.measure.nulls.PermutationNull` of ``targets``), also ``rawnull{o}``,
    ``(K, n_perm)``: the rows read against each label-permuted signature, for the rows' own
    floor (:func:`lib.measure.nulls.run_floors` with ``prefix="raw"``).
    """
    tok = list(targets.tokens)

    def measure(step, params):
        rows = params[emb][:, tok].double()
        rows = rows - rows.mean(-2, keepdim=True)
        out = {f"rawR{o}": r for o, r in order_partials(rows, targets).items()}
        if null is not None:
            out.update({f"rawnull{o}": r for o, r in null(rows).items()})
        return out

    names = [f"rawR{o}" for o in targets.orders]
    return cached_callbacks(measure, names + ([f"rawnull{o}" for o in null.orders] if null else []))


def leading_term_callback(model, data, tokens, c1: float):
    r"""A callback: per instance, the smallest cosine over ``tokens`` between the embedding's
    negative gradient and the Emb-MLP's leading-order term
    :math:`c_1 r_s(\phi^y_s-u)W_2^\top W_1^\top` at the *current* weights (Chapter 2).
    """
    tok = list(tokens)
    V, n = data.vocab_size, data.n_labels
    r_s = token_rate(data.X, V)[tok]
    phi_u = label_signature(data.X, data.y, V, n)[tok] - 1.0 / n

    def lead(step, params):
        X, y = data.X.to(params["E"].device), data.y.to(params["E"].device)
        with torch.enable_grad():
            q = {k: v.detach().requires_grad_(True) for k, v in params.items()}
            (gE,) = torch.autograd.grad(cross_entropy(model.forward(q, X), y).sum(), [q["E"]])
        W1, W2 = params["W1"].double(), params["W2"].double()
        phi = phi_u.to(W1.device, torch.float64)
        pred = c1 * r_s.to(W1.device)[None, :, None] * torch.einsum("tn,khn,kdh->ktd", phi, W2, W1)
        return (
            torch.nn.functional.cosine_similarity(-gE[:, tok].double(), pred, dim=-1).min(1).values
        )

    return lead


def signature_callbacks(targets: OrderTargets, null, E0, prefix: str) -> dict:
    """Callbacks ``{prefix}R{o}`` and ``{prefix}null{o}``: the partial R of each order of
    ``targets`` on the anchors' embedding increment and its permutation null ``null`` (as
    :func:`bit_callbacks` logs them), for reading one run against a second set of
    signatures."""
    E0, tok = E0.detach().clone(), list(targets.tokens)

    def measure(step, params):
        dE = increment(params["E"], E0, tok, subtract_mean_row=True)
        out = {f"{prefix}R{o}": v for o, v in order_partials(dE, targets).items()}
        return out | {f"{prefix}null{o}": v for o, v in null(dE).items()}

    orders = targets.orders
    return cached_callbacks(
        measure, [f"{prefix}R{o}" for o in orders] + [f"{prefix}null{o}" for o in orders]
    )

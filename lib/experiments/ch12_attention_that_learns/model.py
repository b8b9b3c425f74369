"""The chapter's task, model and readings of one run: the selective task and its targets, the
attention model with no value or output weights, the callbacks every arm logs, the bit's
accuracy and trap, and the identities of the derivation (``eq-sel-contrast``)."""

from __future__ import annotations

import numpy as np
import torch

from ...data import tasks
from ...measure import onsets
from ...measure import staircase as st
from ...training import engine, models
from .. import ChapterConfig

# Positions of a selective sequence [z, g, g', a]; the readout is the anchor's row.
KEY, OTHER, GATE = 0, 1, 2


def task(cfg: ChapterConfig):
    """The selective task, its layout and its order-0/1 targets on the anchors."""
    data, layout = tasks.selective_parity_bits(cfg.task.n_keys, cfg.task.n_anchors, cfg.task.width)
    return data, layout, st.selective_targets(data, layout)


def model(cfg: ChapterConfig, data, qk: str = "factorized") -> models.Transformer:
    """The chapter's attention model on ``data``."""
    return models.Transformer(
        data.vocab_size,
        cfg.d_model,
        context_len=data.X.shape[1],
        n_out=data.n_labels,
        d_mlp=cfg.d_mlp,
        ov="identity",
        qk=qk,
        readout_sees_self=False,
    )


def readout_row(mdl, params, X) -> torch.Tensor:
    """The readout (anchor) row's attention on the three context positions, (K, N, 3)."""
    with torch.no_grad():
        _, A = mdl.forward(params, X, return_attention=True)
    return A[-1][..., -1, :-1].double()


def arm_callbacks(mdl, X, P, layout, targets, E0, null=None) -> dict:
    """Per instance, from one forward pass on the distinct sequences ``X`` (M, L), each
    weighted as often as it occurs in the task: ``bit1``, the task's sign-bit loss read
    against its label distributions ``P`` (M, C), and ``loss_all``, the cross-entropy; the
    readout row's attention on the key, the other gate and the counting gate (``A_key``,
    ``A_other``, ``A_gate``), the gate contrast mean ``|A_2 - A_1|`` (``contrast``) and
    ``gate_diff`` = ``|E_g+ - E_g-|``. The first ``len(E0)`` instances also log the
    staircase readings ``R0``, ``R1`` of the anchors' increment from ``E0`` (and, given
    ``null``, their permutation nulls ``null0``, ``null1``)."""
    labels = torch.arange(P.shape[1], device=P.device)
    flip = torch.where(labels // layout.block % 2 == 0, labels + layout.block,
                       labels - layout.block)  # fmt: skip
    tok, E0 = list(targets.tokens), E0.detach().clone()
    S, (gp, gm) = E0.shape[0], layout.gates

    def measure(step, params):
        with torch.no_grad():
            z, A = mdl.forward(params, X, return_attention=True)
            lp = torch.log_softmax(z.double(), -1)
            row = A[-1][..., -1, :-1].double()
            E = params["E"].double()
            v = dict(
                bit1=(P * (torch.logaddexp(lp, lp[..., flip]) - lp)).sum(-1).mean(-1),
                loss_all=-(P * lp).sum(-1).mean(-1),
                A_key=row[..., KEY].mean(1),
                A_other=row[..., OTHER].mean(1),
                A_gate=row[..., GATE].mean(1),
                contrast=(row[..., GATE] - row[..., OTHER]).abs().mean(1),
                gate_diff=(E[:, gp] - E[:, gm]).norm(dim=-1),
            )
            dE = st.increment(params["E"][:S], E0, tok, subtract_mean_row=True)
            v.update({f"R{o}": r for o, r in st.order_partials(dE, targets).items()})
            if null is not None:
                v.update({f"null{o}": r for o, r in null(dE).items()})
        return v

    names = ["bit1", "loss_all", "A_key", "A_other", "A_gate", "contrast", "gate_diff"]
    names += ["R0", "R1"] + (["null0", "null1"] if null else [])
    return engine.cached_callbacks(measure, names)


def bit_accuracy(mdl, params, data, layout) -> np.ndarray:
    """Per instance, the share of sequences whose label beats the same label with the bit
    flipped (a tie counts one half): 1/2 exactly when the logits of the two gate orders
    agree, since the two sequences of a pair then have the same logits and opposite bits."""
    X, y = data.X.to(params["E"].device), data.y.to(params["E"].device)
    flip = torch.where(y // layout.block % 2 == 0, y + layout.block, y - layout.block)
    with torch.no_grad():
        z = mdl.forward(params, X)
    zy = z.gather(-1, y.expand(z.shape[:-1])[..., None])[..., 0]
    zf = z.gather(-1, flip.expand(z.shape[:-1])[..., None])[..., 0]
    return ((zy > zf).double() + 0.5 * (zy == zf).double()).mean(-1).cpu().numpy()


def first_step(steps, curves, level: float) -> np.ndarray:
    """Per instance, the first logged step at which a curve reaches ``level`` (inf: never)."""
    on = onsets.onset_step(steps, curves, level)
    on = on.numpy() if torch.is_tensor(on) else np.asarray(on, dtype=float)
    return np.where(np.isnan(on), np.inf, on)


def trapped_flag(steps, bit_loss, trap_frac: float = 0.1) -> np.ndarray:
    """Per instance, whether the bit *stopped partway*: at the run's last logged step its
    sign-bit loss lies between ``trap_frac`` and ``1 - trap_frac`` (times ln 2), and over the
    second half of the run it fell by less than ``trap_frac * ln 2``. A bit still at ln 2
    has not left its plateau (censored, not trapped); one still falling is slow, not
    trapped. ``bit_loss`` is ``(n_logs, K)`` on the logged ``steps``."""
    v = np.asarray(bit_loss, dtype=float) / np.log(2)
    steps = np.asarray(steps, dtype=float)
    half = int(np.argmin(np.abs(steps - steps[-1] / 2)))
    end = v[-1]
    return (end >= trap_frac) & (end <= 1 - trap_frac) & (v[half] - end < trap_frac)


def excess_loss(loss, width: int) -> np.ndarray:
    """The loss above the task's own floor, ln(width): the label offset no token names."""
    return np.asarray(loss, dtype=float) - np.log(width)


def init_params(cfg: ChapterConfig, mdl, seeds=None, device="cpu") -> dict:
    """The seeds' initial weights at the chapter's init rate (every arm draws its embeddings
    this way; only the query-key group's rate differs between arms)."""
    seeds = list(cfg.seeds if seeds is None else seeds)
    return models.build(mdl, seeds, gamma=cfg.gamma, device=device)


def contrast_formula(mdl, params, data, layout) -> torch.Tensor:
    """The attention's contribution to the readout row from the gates' sum and difference
    terms, the chapter's equation ``eq-sel-contrast`` (K, N, d)."""
    A = readout_row(mdl, params, data.X)  # (K, N, 3)
    E, P = params["E"], params["P"]
    gp, gm = layout.gates
    sigma = torch.where(data.X[:, 2] == gp, 1.0, -1.0).to(A.dtype)[None, :, None]
    x0 = E[:, data.X[:, 0]] + P[:, None, 0]
    A0, A1, A2 = (A[..., j : j + 1] for j in range(3))
    even = A0 * x0 + A1 * P[:, None, 1] + A2 * P[:, None, 2]
    even = even + 0.5 * (A1 + A2) * (E[:, gp] + E[:, gm])[:, None]
    return even + 0.5 * sigma * (A2 - A1) * (E[:, gp] - E[:, gm])[:, None]


def derivation_checks(mdl, learned, uniform, data, layout) -> dict:
    """The chapter's identities on trained weights (pass float64 ones): ``formula_err``, the
    relative error of :func:`contrast_formula` against the forward pass; ``order_gap``,
    the largest logit change when the two gates of every sequence swap at uniform
    attention, and ``order_gap_learned``, the same for the learned weights (its control);
    ``uniform_acc``, the bit accuracy at uniform attention per instance, and its largest
    distance from 1/2, ``uniform_acc_max``."""
    swapped = data.X[:, [0, 2, 1, 3]]
    with torch.no_grad():
        _, hidden = mdl.forward(learned, data.X, return_hidden=True)
        mix = hidden["attention0"][:, :, 0]
        err = (mix - contrast_formula(mdl, learned, data, layout)).norm() / mix.norm()
        gap = lambda p: float((mdl.forward(p, swapped) - mdl.forward(p, data.X)).abs().max())
        out = dict(formula_err=float(err), order_gap=gap(uniform), order_gap_learned=gap(learned))
    acc = bit_accuracy(mdl, uniform, data, layout)
    return dict(out, uniform_acc=acc, uniform_acc_max=float(np.abs(acc - 0.5).max() + 0.5))

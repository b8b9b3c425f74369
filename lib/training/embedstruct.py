r"""Tools of Chapter 6: does embedding structure matter for learning?

* :func:`signature_pcs`, :func:`transplant_embeddings`: embeddings built from a signature
  matrix (its top principal components), the same rows permuted across tokens (same
  spectrum, structure destroyed), and random rows of the same norm.
* :func:`mixture_stream`: batches of a main task plus auxiliary rows, with a per-instance
  weight on the auxiliary loss, so that arms with and without auxiliary data see the
  *same* main-task batches at the same loss scale, in one batched run.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F

from ..env import ConfigError

F64 = torch.float64


def signature_pcs(phi: torch.Tensor, d: int) -> torch.Tensor:
    """Top-``d`` principal components of a signature matrix (rows = tokens): ``U_d S_d``.

    ``phi`` is ``(n_tokens, n_features)``; the rows are centred across tokens first (the
    principal components of the token cloud). Returns ``(n_tokens, d)`` on ``phi``'s
    device; columns beyond the rank are zero.
    """
    phi = torch.as_tensor(phi).to(F64)
    phi = phi - phi.mean(0, keepdim=True)
    U, S, _ = torch.linalg.svd(phi, full_matrices=False)
    k = min(d, S.numel())
    out = torch.zeros(phi.shape[0], d, dtype=F64, device=phi.device)
    out[:, :k] = U[:, :k] * S[:k]
    return out


def transplant_embeddings(
    early: torch.Tensor, pcs: torch.Tensor, norm: float, seed: int
) -> dict[str, torch.Tensor]:
    """The four embeddings of the transplant experiment, rows = tokens, one Frobenius norm.

    * ``early``: a learned early embedding (rows centred);
    * ``signature``: the signature's principal components ``pcs``;
    * ``permuted``: ``pcs`` with its rows permuted across tokens (same singular values);
    * ``random``: i.i.d. Gaussian rows.

    Every matrix is scaled to Frobenius norm ``norm``, so the arms differ in structure
    only. ``seed`` draws the permutation and the random rows (on the CPU, so that the arms
    do not depend on the device); the arms live on ``pcs``'s device.
    """
    pcs = torch.as_tensor(pcs).to(F64)
    early = torch.as_tensor(early).to(device=pcs.device, dtype=F64)
    if early.shape != pcs.shape:
        raise ValueError(f"early {tuple(early.shape)} and pcs {tuple(pcs.shape)} differ in shape")
    gen = torch.Generator().manual_seed(int(seed))
    perm = torch.randperm(pcs.shape[0], generator=gen).to(pcs.device)
    arms = {
        "early": early - early.mean(0, keepdim=True),
        "signature": pcs,
        "permuted": pcs[perm],
        "random": torch.randn(pcs.shape, generator=gen, dtype=F64).to(pcs.device),
    }
    for name, E in arms.items():
        n = E.norm()
        if not n > 0:
            raise ValueError(f"the {name} embedding is zero; cannot scale it to norm {norm}")
        arms[name] = E * (norm / n)
    return arms


def mixture_stream(
    main: tuple[torch.Tensor, torch.Tensor],
    aux_X: torch.Tensor,
    aux_y: torch.Tensor,
    aux_weight: Sequence[float] | torch.Tensor,
    main_batch: int,
    aux_batch: int,
    seed: int = 0,
):
    """``(data, loss_fn)`` for :func:`lib.training.engine.train`: main batches plus auxiliary rows.

    Every step draws ``main_batch`` rows of ``main`` (the same rows for every instance)
    and ``aux_batch`` rows of ``aux_X``; instance ``k`` labels them with ``aux_y[k]``
    (shape ``(K, n_aux)``: e.g. the true grouping or a shuffled control). The loss of
    instance ``k`` is ``mean CE(main rows) + aux_weight[k] * mean CE(aux rows)``; weight 0
    is the arm without auxiliary data, whose main-task gradient is then exactly that of a
    run on the main task alone.
    """
    Xm, ym = main
    aux_y = torch.as_tensor(aux_y)
    w = torch.as_tensor(aux_weight, dtype=torch.float32).flatten()
    if aux_y.dim() != 2 or aux_y.shape[1] != aux_X.shape[0]:
        raise ConfigError(f"aux_y must be (K, {aux_X.shape[0]}), got {tuple(aux_y.shape)}")
    if w.numel() != aux_y.shape[0]:
        raise ConfigError(f"{w.numel()} aux weights for K={aux_y.shape[0]} instances")
    if Xm.shape[1] != aux_X.shape[1]:
        raise ConfigError(f"main rows have length {Xm.shape[1]}, aux rows {aux_X.shape[1]}")
    K = aux_y.shape[0]
    gen = torch.Generator().manual_seed(int(seed))

    def data(step):
        i = torch.randint(0, Xm.shape[0], (main_batch,), generator=gen)
        j = torch.randint(0, aux_X.shape[0], (aux_batch,), generator=gen)
        X = torch.cat([Xm[i], aux_X[j]]).expand(K, -1, -1)
        y = torch.cat([ym[i].expand(K, -1), aux_y[:, j]], 1)
        return X, y

    def loss_fn(logits, y):
        ce = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1), reduction="none")
        ce = ce.view(K, -1)
        return ce[:, :main_batch].mean(1) + w.to(ce.device) * ce[:, main_batch:].mean(1)

    return data, loss_fn

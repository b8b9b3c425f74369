"""The staircase's training runs: the gated-parity-bit task over every (gamma, seed), batched.

:func:`train_bits` trains one batched model of every (gamma, seed) pair (and, for an
ensemble, perturbed copies of each seed) on the task of :func:`lib.data.tasks.gated_parity_bits`
or its selective variant, logging the staircase's readings
(:func:`lib.measure.staircase_callbacks.bit_callbacks`); :func:`run_bits` returns the run as
a labelled :class:`lib.measure.staircase.BitRun`, which reads the stairs off it.

The library starts training runs here, in :mod:`lib.experiments`, and nowhere below: the
measurement layer defines what a run logs and reads, not when a run happens.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from ..env import cpu_threads
from ..measure.nulls import floor_of
from ..measure.probes import bit_probe_callbacks
from ..measure.staircase import BitRun, OrderTargets
from ..measure.staircase_callbacks import bit_callbacks
from ..training.engine import History, train
from ..training.init import perturb
from ..training.models import build
from ..training.sweep import Sweep

__all__ = ["COPY_NOISE_SEED", "copy_params", "train_bits", "run_bits"]


def _gamma_seed_sweep(seeds, gammas, who: str, copies: int = 1) -> Sweep:
    """The gamma-major grid of a run (seed, then copy, fastest), as a :class:`lib.training.sweep.Sweep`.

    With ``copies > 1`` the grid has a third axis, ``copy``: the perturbed copies of a seed.
    """
    if len(seeds) == 0 or len(gammas) == 0:
        raise ValueError(f"{who} needs at least one seed and one gamma")
    if copies < 1:
        raise ValueError(f"{who} needs copies >= 1, got {copies}")
    axes = dict(gamma=[float(x) for x in gammas], seed=[int(s) for s in seeds])
    return Sweep(**axes, **({"copy": list(range(copies))} if copies > 1 else {}))


COPY_NOISE_SEED = (
    11  # the generator family of the copies' perturbations (lib.training.init.perturb)
)


def copy_params(model, sweep: Sweep, copy_rel: float, device="cpu") -> dict:
    """The initial weights of every instance of ``sweep`` (axes gamma, seed and maybe copy).

    Copy 0 of a seed is the seed's own init; copy ``c > 0`` multiplies every weight by
    ``1 + copy_rel * z`` with noise of its own, drawn from (seed, copy) alone
    (:func:`lib.training.init.perturb`), so a copy is the same whatever else shares the batch.
    """
    seed_k = [int(s) for s in sweep["seed"]]
    params = build(model, seed_k, gamma=[float(gamma) for gamma in sweep["gamma"]], device=device)
    if "copy" not in sweep.axes:
        return params
    copy_k = np.array(sweep["copy"])
    keys = [s * 10_007 + int(c) for s, c in zip(seed_k, copy_k, strict=True)]
    return perturb(params, (copy_k > 0) * float(copy_rel), seed=COPY_NOISE_SEED, keys=keys)


def train_bits(
    model,
    data,
    layout,
    targets: OrderTargets,
    seeds: Sequence[int],
    gammas: Sequence[float],
    steps: int,
    device="cpu",
    zero_frozen: Sequence[str] = (),
    perturb_init: float = 0.0,
    threads: int | None = None,
    probes: bool = False,
    copies: int = 1,
    copy_rel: float = 1e-6,
    null=None,
    fit_data=None,
    params_out: dict | None = None,
    **train_kwargs,
) -> tuple[History, np.ndarray, np.ndarray]:
    """One batched run of the gated-parity-bit task over every (gamma, seed) pair.

    Instances are gamma-major (seed, then copy, fastest). With ``copies > 1`` each seed is
    an ensemble: copy 0 is the seed's own init, and every other copy multiplies it by
    ``1 + copy_rel * z`` (:func:`copy_params`): a verdict's odds under rounding-sized
    changes are read off the copies (:mod:`lib.measure.rates`). ``null`` (a
    :class:`lib.measure.nulls.PermutationNull`) logs the permutation null of every order.
    ``fit_data`` (an ``(X, target)`` pair, with its ``loss_fn``) is what the run trains on
    instead of ``(data.X, data.y)``, e.g. :func:`lib.data.tasks.label_distributions` with
    :func:`lib.training.engine.soft_cross_entropy`; the callbacks still read ``data``. ``params_out``
    (a dict) receives the trained weights. Weights named in
    ``zero_frozen`` are set to zero and not trained (e.g. ``("P",)``: an attention model
    without position embeddings). ``perturb_init`` multiplies every initial weight by
    ``1 + perturb_init * z`` (:func:`lib.training.init.perturb`, seed 1): the rerun of the stability
    checks; ``threads`` runs it on that many CPU threads (:func:`lib.env.cpu_threads`), the
    other rerun. ``probes`` adds the callbacks of :func:`lib.measure.probes.bit_probe_callbacks`
    (an attention model: where bit 1 lives), read on copy 0 of each seed (NaN on the
    others). The callbacks of :func:`bit_callbacks` are added; other keyword arguments go
    to :func:`lib.training.engine.train`. Returns
    ``(history, gamma_k, seed_k)``.
    """
    sweep = _gamma_seed_sweep(seeds, gammas, "train_bits", copies)
    gamma_k, seed_k = np.array(sweep["gamma"]), np.array(sweep["seed"])
    params = copy_params(model, sweep, copy_rel, device=device)
    if perturb_init:
        params = perturb(params, perturb_init, seed=1)
    with torch.no_grad():
        for name in zero_frozen:
            params[name].zero_()
    callbacks = dict(train_kwargs.pop("callbacks", None) or {})
    callbacks.update(bit_callbacks(model, data, layout, targets, params["E"], null=null))
    if probes:  # in an ensemble, on copy 0 of each seed (the seed itself) only
        seeds_only = np.flatnonzero(np.array(sweep["copy"]) == 0) if copies > 1 else None
        callbacks.update(bit_probe_callbacks(model, data, layout, targets, params, seeds_only))
    frozen = tuple(train_kwargs.pop("frozen", ())) + tuple(zero_frozen)
    X, y = (data.X, data.y) if fit_data is None else fit_data
    X, y = X.to(device), y.to(device)
    with cpu_threads(threads):
        history = train(
            model, params, (X, y), steps, callbacks=callbacks, frozen=frozen, **train_kwargs
        )
    if params_out is not None:
        params_out.update({n: p.detach() for n, p in params.items()})
    return history, gamma_k, seed_k


def run_bits(model, data, layout, targets: OrderTargets, seeds, gammas, steps, floor=None, **kw):
    """:func:`train_bits` over every (gamma, seed), returned as a labelled :class:`BitRun`.

    The arguments are those of :func:`train_bits`, and ``floor`` (a dict), the floor the
    run's stairs are read against. With ``null`` (a :class:`lib.measure.nulls.PermutationNull`)
    and no ``floor``, the floor is the run's own permutation floor
    (:func:`lib.measure.nulls.floor_of` at ``null_q``, default 0.95, over every instance of the
    run). Every other keyword argument goes to :func:`train_bits`.
    """
    q = kw.pop("null_q", 0.95)
    if (floor is None) == (kw.get("null") is None):
        raise ValueError("run_bits needs a floor or a null (a PermutationNull), not both")
    params: dict = {}
    history, _, _ = train_bits(
        model, data, layout, targets, seeds, gammas, steps, params_out=params, **kw
    )
    if floor is None:
        floor = {o: floor_of(history[f"null{o}"], q) for o in targets.orders}
    sweep = _gamma_seed_sweep(seeds, gammas, "run_bits", kw.get("copies", 1))
    return BitRun(history, sweep, targets, floor, params)

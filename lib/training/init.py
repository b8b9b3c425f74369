"""The one initialization function every model goes through.

A weight with fan-in ``d_in`` is drawn from N(0, d_in^(-2 gamma)): gamma is the
*initialization rate* of Zhang et al. (NeurIPS 2024) and Yao et al. (ICML 2025).
gamma = 0.5 is the standard (LeCun) scale; gamma > 0.5 is small initialization.

Weights are stacked on a leading *instance* dimension K, so that one batched
model holds a whole sweep (seeds x gamma x ...). Instance k is drawn from its own
generator seeded with ``seeds[k]``, so an instance's weights do not depend on
which other instances share the batch: a batched run and the same instances run
one after another start from identical weights.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import torch

from ..env import ConfigError

GROUPS = ("embedding", "position", "qk", "ov", "mlp", "unembedding")


@dataclass(frozen=True)
class ParamSpec:
    """Shape (without the instance dimension), fan-in and parameter group of one weight."""

    shape: tuple[int, ...]
    fan_in: int
    group: str

    def __post_init__(self):
        if self.group not in GROUPS:
            raise ValueError(f"unknown parameter group {self.group!r}; valid groups: {GROUPS}")
        if self.fan_in <= 0:
            raise ValueError(f"fan_in must be positive, got {self.fan_in}")


def per_instance(
    value, K: int, name: str, dtype=torch.float64, device=None, nonnegative: bool = False
) -> torch.Tensor:
    """A scalar or K values as a (K,) tensor: the one broadcast of a hyperparameter over
    instances (the init rate here, learning rates in :mod:`lib.training.engine`)."""
    t = torch.as_tensor(value, dtype=dtype, device=device).flatten()
    if t.numel() == 1:
        t = t.expand(K).clone()
    if t.numel() != K:
        raise ConfigError(f"{name} has {t.numel()} values but there are K={K} instances")
    if nonnegative and (not torch.isfinite(t).all() or (t < 0).any()):
        raise ConfigError(f"{name} must be finite and >= 0, got {t.tolist()}")
    return t


def init_params(
    specs: Mapping[str, ParamSpec],
    seeds: Sequence[int] | int,
    gamma: float | Sequence[float] | torch.Tensor = 1.0,
    group_gamma: Mapping[str, float | Sequence[float]] | None = None,
    device: torch.device | str = "cpu",
    dtype: torch.dtype = torch.float32,
) -> dict[str, torch.Tensor]:
    """Draw every weight of a model: ``W[k] ~ N(0, fan_in^(-2 gamma_k))``.

    Args:
        specs: name -> ParamSpec, in the order the weights are drawn.
        seeds: one seed per instance (an int means a single instance).
        gamma: the initialization rate, a scalar or one value per instance.
        group_gamma: per parameter group overrides of gamma (scalar or per instance),
            e.g. ``{"qk": 1.5}`` to start attention scores smaller than the rest.

    Returns:
        name -> tensor of shape ``(K, *spec.shape)``, with ``requires_grad`` set.
    """
    seeds = [seeds] if isinstance(seeds, int) else list(seeds)
    K = len(seeds)
    if K == 0:
        raise ValueError("init_params needs at least one seed")
    group_gamma = dict(group_gamma or {})
    for group in group_gamma:
        if group not in GROUPS:
            raise ValueError(f"group_gamma names unknown group {group!r}; valid groups: {GROUPS}")
    base = per_instance(gamma, K, "gamma")
    gammas = {
        group: per_instance(v, K, f"group_gamma[{group!r}]") for group, v in group_gamma.items()
    }
    out = {name: torch.empty((K, *spec.shape), dtype=dtype) for name, spec in specs.items()}
    for k, seed in enumerate(seeds):
        gen = torch.Generator().manual_seed(int(seed))
        for name, spec in specs.items():
            gamma = gammas.get(spec.group, base)[k]
            std = float(spec.fan_in) ** (-float(gamma))
            out[name][k] = (
                torch.randn(spec.shape, generator=gen, dtype=torch.float64).to(dtype) * std
            )
    return {n: p.to(device).requires_grad_(True) for n, p in out.items()}


def perturb(
    params: Mapping[str, torch.Tensor],
    rel: float | Sequence[float],
    seed: int = 0,
    keys: Sequence[int] | None = None,
) -> dict[str, torch.Tensor]:
    """A copy of ``params`` with every entry multiplied by ``1 + rel * z``, ``z ~ N(0, 1)``.

    A relative ``rel = 1e-6`` changes an init by about its float32 rounding: a verdict that
    flips under it is a coin, whose odds an ensemble of such copies measures
    (:func:`lib.experiments.staircase_runs.train_bits` with ``copies``). ``rel`` is one value or one per
    instance (0 leaves an instance as it is). Instance k's noise comes from its own
    generator, seeded with ``(seed, keys[k])`` (default ``keys[k] = k``), so an instance's
    noise does not depend on which other instances share the batch when ``keys`` names it.
    The copy is a new leaf with ``requires_grad`` set.
    """
    K = next(iter(params.values())).shape[0]
    rel_k = per_instance(rel, K, "rel", nonnegative=True)
    keys = list(range(K)) if keys is None else [int(k) for k in keys]
    if len(keys) != K:
        raise ValueError(f"keys has {len(keys)} values but there are K={K} instances")
    gens = [torch.Generator().manual_seed(int(seed) * 1_000_003 + k) for k in keys]
    out = {}
    for name, p in params.items():
        z = torch.stack(
            [torch.randn(p.shape[1:], generator=gen, dtype=torch.float64) for gen in gens]
        )
        scale = 1 + rel_k.view(-1, *([1] * (p.dim() - 1))) * z
        q = p.detach().double() * scale.to(p.device)
        out[name] = q.to(p.dtype).requires_grad_(True)
    return out

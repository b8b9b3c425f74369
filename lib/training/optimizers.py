"""The optimizers of :func:`lib.training.engine.train`, one learning rate per instance.

Written out (GD, SGD with momentum, Adam, AdamW) because ``torch.optim`` takes one scalar
learning rate per parameter group, not one per instance. A step updates one weight of
every instance in place: ``eta`` is the per-instance rate already shaped to broadcast over
the weight (:func:`per_instance_view`), and ``state`` the weight's own optimizer state.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

__all__ = [
    "OPTIMIZERS",
    "Hyper",
    "STEP",
    "sgd_step",
    "adam_step",
    "clip_per_instance",
    "per_instance_view",
]

OPTIMIZERS = ("gd", "sgd", "adam", "adamw")


def per_instance_view(t: torch.Tensor, p: torch.Tensor) -> torch.Tensor:
    return t.view(-1, *([1] * (p.dim() - 1)))


def clip_per_instance(grads: list[torch.Tensor], clip: float) -> list[torch.Tensor]:
    """Scale each instance's gradient so that its global norm is at most ``clip``."""
    gnorm = torch.sqrt(sum(grad.flatten(1).pow(2).sum(1) for grad in grads))
    scale = torch.clamp(clip / (gnorm + 1e-12), max=1.0)
    return [grad * per_instance_view(scale, grad) for grad in grads]


@dataclass(frozen=True)
class Hyper:
    momentum: float
    betas: tuple[float, float]
    eps: float
    weight_decay: float
    decoupled: bool  # AdamW: decay the weights, not the gradient


def sgd_step(p, grad, st: dict, eta, t: int, h: Hyper) -> None:
    """Plain (or heavy-ball momentum) SGD, L2 weight decay in the gradient."""
    if h.weight_decay:
        grad = grad + h.weight_decay * p
    if h.momentum:
        buf = st.get("m")
        buf = grad.clone() if buf is None else buf.mul_(h.momentum).add_(grad)
        st["m"], grad = buf, buf
    p.sub_(eta * grad)


def adam_step(p, grad, st: dict, eta, t: int, h: Hyper) -> None:
    """Adam (L2 decay in the gradient) or AdamW (decoupled decay), bias-corrected."""
    b1, b2 = h.betas
    if not h.decoupled and h.weight_decay:
        grad = grad + h.weight_decay * p
    if "m" not in st:
        st["m"], st["v"] = torch.zeros_like(p), torch.zeros_like(p)
    st["m"].mul_(b1).add_(grad, alpha=1 - b1)
    st["v"].mul_(b2).addcmul_(grad, grad, value=1 - b2)
    if h.decoupled and h.weight_decay:
        p.mul_(1 - eta * h.weight_decay)
    # p -= eta * mhat / (sqrt(vhat) + eps), in as few passes as possible
    denom = st["v"].sqrt().div_((1 - b2**t) ** 0.5).add_(h.eps)
    p.addcdiv_(st["m"] * (eta / (1 - b1**t)), denom, value=-1.0)


STEP = {"gd": sgd_step, "sgd": sgd_step, "adam": adam_step, "adamw": adam_step}

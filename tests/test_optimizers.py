"""The hand-written optimizers against torch.optim, at one learning rate for every instance.

:mod:`lib.training.optimizers` writes Adam out because ``torch.optim`` takes one learning rate
per parameter group, not one per instance. At a uniform rate the two must take the same
steps, for shared data ``(B, L)`` and per-instance data ``(K, B, L)``.
"""

import pytest
import torch

from lib.training import engine, models

pytestmark = pytest.mark.usefixtures("one_thread")


def _model():
    return models.Transformer(12, 8, context_len=4, n_out=5, d_mlp=8)


def _reference(mdl, params, data, steps, opt_cls, **kw):
    """The same run with torch.optim on the stacked weights (each instance's loss is its own,
    so the summed loss gives each instance its own gradient, and Adam is elementwise)."""
    p = {k: v.detach().clone().requires_grad_(True) for k, v in params.items()}
    opt = opt_cls(p.values(), **kw)
    X, y = data
    for _ in range(steps):
        opt.zero_grad()
        engine.cross_entropy(mdl.forward(p, X), y).sum().backward()
        opt.step()
    return p


@pytest.mark.parametrize("per_instance", [False, True], ids=["(B, L)", "(K, B, L)"])
@pytest.mark.parametrize(
    ("optimizer", "opt_cls", "decay"),
    [
        ("adam", torch.optim.Adam, 0.0),
        ("adam", torch.optim.Adam, 0.01),
        ("adamw", torch.optim.AdamW, 0.01),
    ],  # fmt: skip
)
def test_hand_written_adam_takes_torch_adams_steps(per_instance, optimizer, opt_cls, decay):
    K, B, steps, lr = 3, 16, 25, 1e-2
    gen = torch.Generator().manual_seed(0)
    shape = (K, B, 4) if per_instance else (B, 4)
    X = torch.randint(0, 12, shape, generator=gen)
    y = torch.randint(0, 5, shape[:-1], generator=gen)
    mdl = _model()
    params = models.build(mdl, list(range(K)), gamma=0.5)
    ref = _reference(mdl, params, (X, y), steps, opt_cls, lr=lr, weight_decay=decay)
    engine.train(mdl, params, (X, y), steps, optimizer=optimizer, lr=lr, weight_decay=decay,
                 log_at=[0, steps], desc="adam")  # fmt: skip
    for name, p in params.items():
        torch.testing.assert_close(p, ref[name], rtol=1e-4, atol=1e-6, msg=name)

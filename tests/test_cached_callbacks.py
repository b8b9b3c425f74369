"""lib.training.engine.cached_callbacks: several logged fields read off one measurement per step."""

import numpy as np
import pytest
import torch

from lib.training.engine import cached_callbacks, train
from lib.training.models import EmbMLP, build


def _data(V=11, L=4, N=32, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, V, (N, L), generator=g), torch.randint(0, V, (N,), generator=g)


@pytest.mark.parametrize("per_instance", [False, True])
def test_one_measurement_per_logged_step_feeds_every_field(per_instance):
    model = EmbMLP(11, 8, 16, 11)
    params = build(model, [0, 1, 2], gamma=0.5)
    X, y = _data()
    if per_instance:  # (K, N, L) inputs: one data set per instance
        X, y = torch.stack([X, X.flip(0), X]), torch.stack([y, y.flip(0), y])
    calls = []

    def measure(step, p):
        calls.append(step)
        logits = model.forward(p, X)
        return {"top": logits.max(-1).values.mean(-1), "norm": p["E"].flatten(1).norm(dim=1)}

    log_at = [0, 1, 5, 10]
    h = train(
        model,
        params,
        (X, y),
        10,
        lr=1e-2,
        log_at=log_at,
        callbacks=cached_callbacks(measure, ["top", "norm"]),
    )
    assert calls == log_at  # measured once per logged step, not once per field
    assert h["top"].shape == h["norm"].shape == (4, 3)
    np.testing.assert_allclose(
        h["norm"][-1], params["E"].detach().flatten(1).norm(dim=1).numpy(), rtol=1e-6
    )
    with torch.no_grad():
        np.testing.assert_allclose(
            h["top"][-1], model.forward(params, X).max(-1).values.mean(-1).numpy(), rtol=1e-6
        )


def test_a_new_params_object_at_the_same_step_is_measured_again():
    seen = []
    cb = cached_callbacks(lambda step, p: seen.append(step) or {"v": p["w"].sum()}, ["v"])
    a, b = {"w": torch.ones(2)}, {"w": torch.zeros(2)}
    assert float(cb["v"](0, a)) == 2.0 and float(cb["v"](0, a)) == 2.0
    assert float(cb["v"](0, b)) == 0.0  # another run's weights at the same step
    assert seen == [0, 0]


def test_a_field_the_measurement_lacks_is_named():
    cb = cached_callbacks(lambda step, p: {"a": 1.0}, ["a", "b"])
    with pytest.raises(KeyError, match=r"no \['b'\]"):
        cb["a"](0, {})

"""lib/training/sweep.py: the labelled grid matches the instance order the engine trains."""

import numpy as np
import pytest
import torch

from lib.env import ConfigError
from lib.training import engine
from lib.training.models import EmbMLP, build
from lib.training.sweep import Sweep


def test_grid_order_and_selection():
    sw = Sweep(seed=[0, 1, 2], gamma=[1.0, 0.3])
    assert sw.K == 6 and sw.shape == (3, 2)
    assert sw["seed"] == [0, 0, 1, 1, 2, 2] and sw["gamma"] == [1.0, 0.3] * 3
    assert sw.index(gamma=0.3) == [1, 3, 5] and sw.label(3) == {"seed": 1, "gamma": 0.3}
    assert torch.equal(sw.tensor("gamma"), torch.tensor([1.0, 0.3] * 3))
    with pytest.raises(KeyError, match="axes"):
        sw["lr"]
    with pytest.raises(ConfigError, match="repeats"):
        Sweep(seed=[0, 0])


@pytest.mark.parametrize("layout", ["shared", "per_instance"])
def test_dataset_labels_each_instance_with_its_own_run(layout):
    """Instance (seed, gamma) of one batched run equals the same instance trained alone."""
    sw = Sweep(seed=[3, 4], gamma=[1.0, 0.5])
    model = EmbMLP(11, 6, 8, 7)
    g = torch.Generator().manual_seed(0)
    X, y = torch.randint(0, 11, (32, 4), generator=g), torch.randint(0, 7, (32,), generator=g)
    if layout == "per_instance":
        X, y = X.expand(sw.K, *X.shape).contiguous(), y.expand(sw.K, *y.shape).contiguous()
    E0 = lambda s, p: p["E"].flatten(1).norm(dim=1)  # noqa: E731
    p = build(model, sw["seed"], gamma=sw["gamma"])
    h = engine.train(model, p, (X, y), 5, lr=1e-2, log_at=[0, 5], callbacks={"E": E0})
    ds = sw.dataset(h)
    assert ds["loss"].dims == ("step", "seed", "gamma") and list(ds["step"]) == [0, 5]
    alone = build(model, [4], gamma=0.5)
    Xa, ya = (X[3:4], y[3:4]) if layout == "per_instance" else (X, y)
    ha = engine.train(model, alone, (Xa, ya), 5, lr=1e-2, log_at=[0, 5], callbacks={"E": E0})
    np.testing.assert_allclose(ds["E"].sel(seed=4, gamma=0.5).values, ha["E"][:, 0], rtol=1e-5)
    assert ds["loss"].mean("seed").dims == ("step", "gamma")
    with pytest.raises(ConfigError, match="K=4"):
        sw.dataarray(np.zeros((2, 3)), "bad", lead=("step",))

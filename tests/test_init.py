"""lib/training/init.py: the relative perturbation of the stability checks."""

import pytest
import torch

from lib.training import init, models


def test_perturb_is_relative_per_instance_and_a_fresh_leaf():
    model = models.EmbMLP.example()
    params = models.build(model, [0, 1, 2], gamma=1.0)
    out = init.perturb(params, 1e-3, seed=5)
    for name, p in params.items():
        q = out[name]
        assert q.shape == p.shape and q.requires_grad and q.is_leaf
        rel = ((q - p) / p).detach()
        assert 0.3e-3 < rel.std() < 3e-3  # the size asked for, relative to each entry
    # instance k's noise does not depend on its batch companions
    alone = init.perturb({n: p[:1] for n, p in params.items()}, 1e-3, seed=5)
    assert torch.equal(alone["E"][0], out["E"][0])
    assert torch.equal(init.perturb(params, 0.0)["E"], params["E"])
    with pytest.raises(ValueError, match="rel"):
        init.perturb(params, -1.0)


def test_perturb_per_instance_rel_and_keys():
    model = models.EmbMLP.example()
    params = models.build(model, [0, 0, 0], gamma=1.0)  # three copies of one init
    out = init.perturb(params, [0.0, 1e-3, 1e-3], seed=2, keys=[7, 8, 9])
    assert torch.equal(out["E"][0], params["E"][0])  # rel 0: left as it is
    assert not torch.equal(out["E"][1], out["E"][2])  # each copy its own noise
    # the noise follows the key, not the position in the batch
    moved = init.perturb({n: p[1:2] for n, p in params.items()}, 1e-3, seed=2, keys=[9])
    assert torch.equal(moved["E"][0], out["E"][2])
    with pytest.raises(ValueError, match="keys"):
        init.perturb(params, 1e-3, keys=[1, 2])

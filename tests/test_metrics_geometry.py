"""The field geometry of lib.measure.metrics: cosine and size ratio of two (V, d) fields, with and
without a leading instance dimension K (Chapters 3 and 4 compare gradients this way)."""

import numpy as np
import pytest
import torch

from lib.measure import metrics as M


def fields(K=3, V=5, d=4, seed=0):
    gen = torch.Generator().manual_seed(seed)
    a = torch.randn(K, V, d, dtype=torch.float64, generator=gen)
    b = torch.randn(K, V, d, dtype=torch.float64, generator=gen)
    return a, b


def test_field_cosine_without_K_is_the_flattened_cosine():
    a, b = fields()
    c = M.field_cosine(a[0], b[0])
    assert isinstance(c, float)
    assert c == pytest.approx(
        float(torch.nn.functional.cosine_similarity(a[0].flatten(), b[0].flatten(), dim=0))
    )
    assert M.field_cosine(a[0], a[0]) == pytest.approx(1.0)
    assert M.field_cosine(a[0], -3 * a[0]) == pytest.approx(-1.0)


def test_field_cosine_with_K_is_per_instance():
    a, b = fields()
    c = M.field_cosine(a, b)
    assert torch.is_tensor(c) and c.shape == (3,)
    for k in range(3):
        assert float(c[k]) == pytest.approx(M.field_cosine(a[k], b[k]), rel=1e-14)
    # the same expression the chapters used before, bit for bit
    old = (a * b).sum((1, 2)) / (a.norm(dim=(1, 2)) * b.norm(dim=(1, 2)))
    assert torch.equal(c, old)
    # invariant to a positive scale per instance
    s = torch.tensor([2.0, 0.5, 7.0], dtype=torch.float64)[:, None, None]
    assert torch.allclose(M.field_cosine(s * a, b), c)


def test_field_norm_ratio_with_and_without_K():
    a, b = fields(seed=1)
    r = M.field_norm_ratio(a, b)
    assert r.shape == (3,)
    assert torch.equal(r, a.norm(dim=(1, 2)) / b.norm(dim=(1, 2)))
    r0 = M.field_norm_ratio(a[0], b[0])
    assert isinstance(r0, float) and r0 == pytest.approx(float(r[0]), rel=1e-14)
    assert M.field_norm_ratio(2 * a[1], a[1]) == pytest.approx(2.0)


def test_field_geometry_accepts_numpy_float32_and_detaches():
    a, b = fields(K=2, seed=2)
    a_np, b32 = a.numpy(), b.float()
    c = M.field_cosine(a_np, b32)
    assert c.dtype == torch.float64
    np.testing.assert_allclose(c.numpy(), M.field_cosine(a, b).numpy(), rtol=1e-6)
    w = a.clone().requires_grad_(True)
    assert not M.field_norm_ratio(w, b).requires_grad

"""lib/measure/nulls.py: label-permutation floors, checked on planted structure and on pure noise."""

import numpy as np
import pytest
import torch

from lib.data import tasks
from lib.measure import nulls
from lib.measure import staircase as st

pytestmark = pytest.mark.usefixtures("one_thread")

DATA, LAY = tasks.gated_parity_bits(n_keys=4, n_anchors=12)
TG = st.parity_targets(DATA, LAY)
NULL = st.label_null(DATA, LAY, n_perm=60, seed=3)


def _planted(order, strength, K=8, d=32, seed=0):
    """Increments (K, T, d): the order's signature through a random map, plus noise."""
    g = torch.Generator().manual_seed(seed)
    phi = TG.phis[order]
    dE = torch.stack([phi @ torch.randn(phi.shape[1], d, generator=g, dtype=torch.float64)
                      for _ in range(K)])  # fmt: skip
    dE = strength * dE / dE.norm(dim=(1, 2), keepdim=True)
    dE = dE + torch.randn(dE.shape, generator=g, dtype=torch.float64) / dE[0].numel() ** 0.5
    return dE - dE.mean(-2, keepdim=True)


def test_real_reading_is_order_partials():
    dE = _planted(1, 1.0)
    got, want = NULL.real(dE), st.order_partials(dE, TG)
    for o in TG.orders:
        torch.testing.assert_close(got[o], want[o], rtol=0, atol=1e-12)


def test_permutations_differ_and_are_reproducible():
    ys = nulls.permuted_labels(DATA.y, 5, seed=1)
    assert all(sorted(y.tolist()) == sorted(DATA.y.tolist()) for y in ys)
    assert not torch.equal(ys[0], ys[1])
    again = nulls.permuted_labels(DATA.y, 5, seed=1)
    assert all(torch.equal(a, b) for a, b in zip(ys, again, strict=True))
    assert NULL.n_perm == 60 and NULL(_planted(0, 1.0))[1].shape == (8, 60)


def _floor(curves, q=0.95):
    """A floor from a few logged steps of increments: (n_logs, K, T, d) -> {order: floor}."""
    logged = {o: np.stack([NULL(dE)[o].numpy() for dE in curves]) for o in TG.orders}
    return {o: nulls.floor_of(v, q) for o, v in logged.items()}


@pytest.mark.parametrize("order", [0, 1])
def test_a_planted_alignment_is_found_above_the_floor(order):
    steps = [_planted(order, s, seed=i) for i, s in enumerate((0.5, 1.0, 2.0))]
    floor = _floor(steps)
    R = NULL.real(steps[-1])[order]
    assert (R > floor[order]).all(), (R, floor)


def test_pure_noise_is_not():
    g = torch.Generator().manual_seed(7)
    noise = [torch.randn(40, len(TG.tokens), 32, generator=g, dtype=torch.float64)
             for _ in range(3)]  # fmt: skip
    noise = [n - n.mean(-2, keepdim=True) for n in noise]
    floor = _floor(noise)
    for o in TG.orders:
        peak = np.max(np.stack([NULL.real(n)[o].numpy() for n in noise]), 0)
        assert np.mean(peak > floor[o]) <= 0.2, (o, peak, floor[o])  # about 5% by design
    # a null that knows the increment: a structured increment raises the floor of order 1
    structured = [_planted(0, s, K=40, seed=i) for i, s in enumerate((1.0, 2.0, 4.0))]
    assert _floor(structured)[0] > 0 and np.isfinite(_floor(structured)[1])


def test_floor_of_reads_the_peak_over_steps_and_ignores_nan():
    v = np.zeros((3, 2, 4))
    v[0] = np.nan
    v[2, 1, :] = [0.1, 0.2, 0.3, 0.4]
    v[1, 0, :] = [0.5, 0, 0, 0]  # each instance and permutation is read at its own peak
    peaks = [0.5, 0, 0, 0, 0.1, 0.2, 0.3, 0.4]
    assert nulls.floor_of(v, 0.9) == pytest.approx(np.quantile(peaks, 0.9))
    with pytest.raises(ValueError, match="n_logs"):
        nulls.floor_of(v[0], 0.9)
    with pytest.raises(ValueError, match="q"):
        nulls.floor_of(v, 1.0)


def test_label_null_permutes_whole_labels_for_order_0_and_blocks_above():
    seen = []

    def targets(data, layout, **reuse):
        seen.append(data.y.clone())
        return st.parity_targets(data, layout, **reuse)

    st.label_null(DATA, LAY, n_perm=4, seed=2, targets=targets)
    y, B = DATA.y, LAY.block
    real, perms = seen[-1], seen[:-1]  # the real signatures are counted last
    assert torch.equal(real, y) and len(perms) == 8  # a whole and a block permutation each
    whole, blocks = perms[0::2], perms[1::2]
    for w, b in zip(whole, blocks, strict=True):
        assert sorted(w.tolist()) == sorted(y.tolist()) and not torch.equal(w, y)
        assert torch.equal(b % B, y % B)  # order 0 stays where it was
        assert sorted((b // B).tolist()) == sorted((y // B).tolist())
        assert not torch.equal(b, y)

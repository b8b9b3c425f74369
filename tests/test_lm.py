"""The stream sampler and the alignment curves of lib/measure/lm.py."""

import math

import numpy as np
import pytest
import torch

from lib.data import chains, windows
from lib.measure import lm
from lib.measure import metrics as M
from lib.theory import flow
from lib.training import engine, layers

pytestmark = pytest.mark.usefixtures("one_thread")


def test_window_sampler_shapes_targets_and_determinism():
    stream = torch.arange(1000) % 97
    data = windows.window_sampler(stream, context_len=8, batch_size=5, seeds=[0, 1, 0])
    X, y = data(3)
    assert X.shape == y.shape == (3, 5, 8)
    # targets are the windows shifted by one token of the stream
    assert torch.equal(y[..., :-1], X[..., 1:])
    assert torch.equal(y[..., -1], (X[..., -1] + 1) % 97)
    # a function of (seed, step) only: repeatable, equal for equal seeds, different otherwise
    assert torch.equal(data(3)[0], X)
    assert torch.equal(X[0], X[2]) and not torch.equal(X[0], X[1])
    assert not torch.equal(data(4)[0], X)
    one = windows.window_sampler(stream, 8, 5, [1])(3)[0]
    assert torch.equal(one[0], X[1])


def test_window_sampler_rejects_bad_input():
    with pytest.raises(ValueError, match="too short"):
        windows.window_sampler(torch.arange(5), 8, 2, [0])
    with pytest.raises(ValueError, match="seed"):
        windows.window_sampler(torch.arange(50), 8, 2, [])


def test_alignment_curves_match_metrics():
    g = torch.Generator().manual_seed(0)
    T, V, d = 12, 9, 5
    phis = {n: torch.rand(T, V, generator=g, dtype=torch.float64) for n in ("a", "b")}
    E0 = torch.randn(2, T, d, generator=g, dtype=torch.float64)
    Es = [E0 + torch.randn(2, T, d, generator=g, dtype=torch.float64) for _ in range(3)]
    S = torch.stack([lm.increment_similarity(E, E0, range(T)) for E in Es])  # (3, 2, T, T)
    out = lm.alignment_curves(S, phis, control="a", n_perm=50)
    plain = lm.alignment_curves(S, phis, n_perm=50)
    for t, E in enumerate(Es):
        r_a = M.r_cos(E, phis["a"], W0=E0)
        r_b = M.r_cos(E, phis["b"], W0=E0)
        rp_b = M.r_cos_partial(E, phis["b"], phis["a"], W0=E0)
        np.testing.assert_allclose(out["a"]["R"][t], r_a, atol=1e-10)
        np.testing.assert_allclose(plain["b"]["R"][t], r_b, atol=1e-10)
        np.testing.assert_allclose(out["b"]["R"][t], rp_b, atol=1e-10)
    # the null is the same statistic against a signature with permuted token labels
    perm = torch.randperm(T, generator=torch.Generator().manual_seed(0))
    assert out["b"]["null"].shape == (3, 2, 50)
    E = Es[0]
    r_perm = M.r_cos_partial(E, phis["b"][perm], phis["a"][perm], W0=E0)
    np.testing.assert_allclose(out["b"]["null"][0, :, 0], r_perm, atol=1e-10)
    assert np.all(out["b"]["null_lo"] <= out["b"]["null_hi"])


def test_alignment_curves_null_by_chunks_of_permutations_is_the_same_null(monkeypatch):
    """The permutation null is made a few permutations at a time (its memory is bounded at
    paper scale, T=1000 and 1000 permutations); plain, partial and part R give the same
    numbers as in one chunk."""
    g = torch.Generator().manual_seed(1)
    T = 10
    phis = {n: torch.rand(T, 6, generator=g, dtype=torch.float64) for n in ("a", "b", "c")}
    S = torch.randn(3, 2, T, T, generator=g, dtype=torch.float64)
    S = S + S.transpose(-1, -2)
    kinds = [dict(), dict(control="a"), dict(orthogonal_to="a")]
    whole = [lm.alignment_curves(S, phis, n_perm=23, **kw) for kw in kinds]
    monkeypatch.setattr(lm, "_NULL_CHUNK", 7 * (T * (T - 1) // 2))  # 7 permutations a chunk
    for kw, ref in zip(kinds, whole, strict=True):
        out = lm.alignment_curves(S, phis, n_perm=23, **kw)
        for n in phis:
            assert out[n]["null"].shape == (3, 2, 23)
            for key in ("R", "null", "null_lo", "null_hi"):
                np.testing.assert_allclose(out[n][key], ref[n][key], rtol=0, atol=1e-12)


def test_alignment_curves_reject_mismatch():
    S = torch.zeros(1, 1, 4, 4)
    with pytest.raises(ValueError, match="rows"):
        lm.alignment_curves(S, {"a": torch.rand(5, 3)})
    with pytest.raises(ValueError, match="control"):
        lm.alignment_curves(S, {"a": torch.rand(4, 3)}, control="b")
    bad = torch.rand(4, 3)
    bad[0] = float("nan")
    with pytest.raises(ValueError, match="non-finite"):
        lm.alignment_curves(S, {"a": bad})


def _curves_inputs():
    g = torch.Generator().manual_seed(1)
    T, V, d = 10, 7, 4
    phis = {n: torch.rand(T, V, generator=g, dtype=torch.float64) for n in ("a", "b")}
    E0 = torch.randn(2, T, d, generator=g, dtype=torch.float64)
    E = E0 + torch.randn(2, T, d, generator=g, dtype=torch.float64)
    return lm.increment_similarity(E, E0, range(T))[None], phis  # (1, 2, T, T)


def test_alignment_curves_accept_numpy_and_tensors_alike():
    S, phis = _curves_inputs()
    ref = lm.alignment_curves(S, phis, control="a", n_perm=20)
    out = lm.alignment_curves(S.numpy(), {n: p.numpy() for n, p in phis.items()}, "a", 20)
    for n in phis:
        np.testing.assert_array_equal(out[n]["R"], ref[n]["R"])
        np.testing.assert_array_equal(out[n]["null"], ref[n]["null"])


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_alignment_curves_take_device_tensors():
    S, phis = _curves_inputs()
    ref = lm.alignment_curves(S, phis, control="a", n_perm=20)
    out = lm.alignment_curves(S.cuda(), {n: p.cuda() for n, p in phis.items()}, "a", 20)
    for n in phis:
        np.testing.assert_allclose(out[n]["R"], ref[n]["R"], atol=1e-12)


def test_lm_signatures_are_the_centred_estimators():
    from lib.data import signatures as sig

    stream = torch.randint(0, 9, (500,), generator=torch.Generator().manual_seed(0))
    tracked = [0, 3, 5]
    phi, pre = chains.lm_signatures(stream, 9, tracked, context_len=6, skip_offsets=(2, 5))
    assert list(phi) == ["next", "skip2", "skip5", "window"] and list(pre) == ["previous"]
    expect = {
        "next": sig.next_token_signature(stream, 9, rows=tracked),
        "skip5": sig.skip_signature(stream, 9, 5, rows=tracked),
        "window": sig.window_signature(stream, 9, 6, rows=tracked),
    }
    for n, p in expect.items():
        torch.testing.assert_close(phi[n], sig.centre(p), rtol=0, atol=0)
        assert phi[n].shape == (3, 9) and abs(float(phi[n].sum(-1).abs().max())) < 1e-12
    prev = sig.centre(sig.previous_token_signature(stream, 9, rows=tracked))
    torch.testing.assert_close(pre["previous"], prev, rtol=0, atol=0)


def test_alignment_is_blind_to_a_row_common_to_every_signature():
    """Both sides are centred alike: adding one row to every signature changes no R, as
    adding one row to every embedding increment changes none (the increments are centred)."""
    gen = torch.Generator().manual_seed(3)
    T, V, d = 10, 7, 4
    E0 = torch.randn(1, T, d, generator=gen, dtype=torch.float64)
    E = E0 + torch.randn(1, T, d, generator=gen, dtype=torch.float64)
    S = lm.increment_similarity(E, E0, range(T))[None]
    phis = {n: torch.rand(T, V, generator=gen, dtype=torch.float64) for n in ("a", "b")}
    common = 5 * torch.rand(V, generator=gen, dtype=torch.float64)
    shifted = {n: p + common for n, p in phis.items()}
    for control in (None, "a"):
        ref = lm.alignment_curves(S, phis, control=control, n_perm=20)
        out = lm.alignment_curves(S, shifted, control=control, n_perm=20)
        for n in phis:
            np.testing.assert_allclose(out[n]["R"], ref[n]["R"], atol=1e-12)
            np.testing.assert_allclose(out[n]["null"], ref[n]["null"], atol=1e-12)
        # the rows taken as given (the old measurement) are not blind to it
        raw = lm.alignment_curves(S, shifted, control=control, n_perm=20, subtract_mean_row=False)
        assert np.abs(raw["b"]["R"] - ref["b"]["R"]).max() > 0.05
    # and the same holds of lib.measure.metrics.r_cos, which the synthetic chapters use
    r_ref = M.r_cos(E[0], phis["a"], W0=E0[0])
    assert math.isclose(M.r_cos(E[0], shifted["a"], W0=E0[0]), r_ref, abs_tol=1e-12)


def test_alignment_of_a_planted_geometry_is_one():
    """Positive control: increments built from a signature's own centred geometry give R = 1."""
    gen = torch.Generator().manual_seed(4)
    T, V = 12, 9
    phi = torch.rand(T, V, generator=gen, dtype=torch.float64) + 3 * torch.rand(V, generator=gen)
    E0 = torch.zeros(1, T, V, dtype=torch.float64)
    S = lm.increment_similarity(phi[None], E0, range(T))[None]
    R = lm.alignment_curves(S, {"phi": phi}, n_perm=10)["phi"]["R"]
    np.testing.assert_allclose(R, 1.0, atol=1e-12)
    R_raw = lm.alignment_curves(S, {"phi": phi}, n_perm=10, subtract_mean_row=False)["phi"]["R"]
    assert R_raw.max() < 0.99


def test_signature_agreement_is_the_alignment_of_a_signature_with_another():
    gen = torch.Generator().manual_seed(5)
    T, V = 11, 8
    a = torch.rand(T, V, generator=gen, dtype=torch.float64)
    b = a + 0.5 * torch.rand(T, V, generator=gen, dtype=torch.float64)
    assert math.isclose(lm.signature_agreement(a, a), 1.0, abs_tol=1e-12)
    r = lm.signature_agreement(a, b)
    assert 0.0 < r < 1.0
    assert math.isclose(lm.signature_agreement(b, a), r, abs_tol=1e-12)
    common = 3 * torch.rand(V, generator=gen, dtype=torch.float64)
    assert math.isclose(lm.signature_agreement(a + common, b + 2 * common), r, abs_tol=1e-12)
    assert math.isclose(lm.signature_agreement(a.numpy(), b), r, abs_tol=1e-12)
    # the logged similarity built from b's mean-removed cosines gives alignment_curves' R
    S = lm.increment_similarity(b[None], torch.zeros(1, T, V, dtype=torch.float64), range(T))
    R = lm.alignment_curves(S[None], {"a": a}, n_perm=5)["a"]["R"]
    np.testing.assert_allclose(R, r, atol=1e-12)
    raw = lm.signature_agreement(a + common, b, subtract_mean_row=False)
    assert abs(raw - r) > 1e-3


def test_signature_agreement_rejects_bad_input():
    a = torch.rand(5, 3)
    with pytest.raises(ValueError, match="rows"):
        lm.signature_agreement(a, torch.rand(4, 3))
    with pytest.raises(ValueError, match="3 tracked"):
        lm.signature_agreement(a[:2], a[:2])
    bad = a.clone()
    bad[1, 0] = float("nan")
    with pytest.raises(ValueError, match="non-finite"):
        lm.signature_agreement(a, bad)


def test_split_half_and_residual_signatures():
    from lib.data import signatures as sig

    stream = torch.randint(0, 9, (4000,), generator=torch.Generator().manual_seed(0))
    tracked = [0, 3, 5, 7, 8]
    phi, pre = chains.lm_signatures(stream, 9, tracked, 6, (2, 5), residual=True)
    assert list(phi) == ["next", "skip2", "skip5", "window", "res_skip2", "res_skip5", "res_window"]
    base, _ = chains.lm_signatures(stream, 9, tracked, 6, (2, 5))
    for n, p in base.items():
        assert torch.equal(phi[n], p)
    expect = {
        "res_skip2": chains.residual_skip_signature(stream, 9, 2, rows=tracked),
        "res_skip5": chains.residual_skip_signature(stream, 9, 5, rows=tracked),
        "res_window": chains.residual_window_signature(stream, 9, 6, rows=tracked),
    }
    for n, p in expect.items():
        torch.testing.assert_close(phi[n], p, rtol=0, atol=1e-15)  # rows sum to 0
        assert phi[n].shape == (5, 9)

    a, b = stream[:2000], stream[2000:]
    fn = lambda s, V, t: sig.next_token_signature(s, V, rows=t)
    r = lm.split_half(a, b, 9, tracked, fn)
    assert math.isclose(r, lm.signature_agreement(fn(a, 9, tracked), fn(b, 9, tracked)))
    both = lm.split_half(a, b, 9, tracked, lambda s, V, t: chains.lm_signatures(s, V, t, 6)[0])
    assert set(both) == {"next", "skip2", "skip3", "skip4", "window"}
    assert math.isclose(both["next"], r, abs_tol=1e-12)


@pytest.mark.parametrize("per_instance", [False, True])
def test_residual_path_gradient_is_autograd_of_the_block_free_decoder(per_instance):
    """The order-0 term equals autograd of CE(rmsnorm(E[x]) U), for (B, L) and (K, B, L)."""
    gen = torch.Generator().manual_seed(0)
    K, V, d, B, L = 3, 9, 6, 4, 5
    E = (torch.randn(K, V, d, generator=gen, dtype=torch.float64) * 0.1).requires_grad_(True)
    U = torch.randn(K, d, V, generator=gen, dtype=torch.float64) * 0.1
    shape = (K, B, L) if per_instance else (B, L)
    X = torch.randint(0, V, shape, generator=gen)
    y = torch.randint(0, V, shape, generator=gen)
    h = layers.embed(E, X)
    n = h / torch.sqrt((h * h).mean(-1, keepdim=True) + 1e-6)
    loss = engine.cross_entropy(torch.einsum("kbld,kdv->kblv", n, U), y)
    (grad,) = torch.autograd.grad(loss.sum(), E)
    G0 = flow.residual_path_gradient(E.detach(), U, X, y)
    assert torch.allclose(G0, grad, atol=1e-12, rtol=1e-9)
    # and it is not trivially so: another batch's targets give another gradient
    assert not torch.allclose(flow.residual_path_gradient(E.detach(), U, X, y.flip(-1)), grad)


def test_residual_path_gradient_refuses_mismatched_shapes():
    E, U = torch.zeros(2, 5, 3), torch.zeros(2, 3, 5)
    with pytest.raises(ValueError, match="X and y"):
        flow.residual_path_gradient(
            E, U, torch.zeros(2, 4, dtype=torch.long), torch.zeros(2, 3, dtype=torch.long)
        )


@pytest.mark.parametrize("K", [1, 3])
def test_part_correlation_scores_zero_for_the_reference_geometry_and_finds_a_planted_one(K):
    """orthogonal_to: an embedding that carries only the reference's geometry (at any size)
    scores ~0 against a target that shares geometry with the reference, while plain R is
    clearly positive; one that carries the target's own geometry scores clearly above the
    null; and it equals the part correlation computed by hand."""
    gen = torch.Generator().manual_seed(3)
    T, V = 30, 12
    ref = torch.randn(T, V, generator=gen, dtype=torch.float64)
    own = torch.randn(T, V, generator=gen, dtype=torch.float64)
    target = ref + own  # shares geometry with the reference
    sim = lambda p: M.cosine_similarity_matrix(p - p.mean(0))  # noqa: E731
    S = torch.stack([sim(ref), sim(own)])[:, None].expand(2, K, T, T)  # (n_logs, K, T, T)
    phi = {"ref": ref, "target": target}
    plain = lm.alignment_curves(S, phi, n_perm=50)["target"]["R"]
    part = lm.alignment_curves(S, phi, n_perm=50, orthogonal_to="ref")["target"]
    assert (plain[0] > 0.3).all() and (np.abs(part["R"][0]) < 1e-9).all()
    assert (part["R"][1] > part["null_hi"][1]).all()
    i, j = torch.triu_indices(T, T, offset=1)
    x, y, z = (m[i, j] for m in (sim(own), sim(target), sim(ref)))
    yn, zn = y.numpy(), z.numpy()
    y_res = yn - np.polyval(np.polyfit(zn, yn, 1), zn)
    by_hand = np.corrcoef(x.numpy(), y_res)[0, 1]
    assert np.allclose(part["R"][1], by_hand, atol=1e-10)
    with pytest.raises(ValueError, match="not both"):
        lm.alignment_curves(S, phi, control="ref", orthogonal_to="ref")


def test_window_sampler_draws_each_instance_from_its_own_stream():
    streams = torch.stack([torch.arange(500), 1000 + torch.arange(500)])
    data = windows.window_sampler(streams, 8, 4, [0, 0, 1], stream_of=[0, 1, 1])
    X, y = data(5)
    assert bool((X[0] < 1000).all()) and bool((X[1:] >= 1000).all())
    # the same seed starts its windows at the same places of each stream
    assert torch.equal(X[1] - 1000, X[0]) and not torch.equal(X[2] - 1000, X[0])
    assert torch.equal(y[1] - 1000, y[0])
    assert torch.equal(windows.window_sampler(streams[0], 8, 4, [0])(5)[0][0], X[0])
    with pytest.raises(ValueError, match="stream_of"):
        windows.window_sampler(streams, 8, 4, [0, 1], stream_of=[0])
    with pytest.raises(ValueError, match="outside"):
        windows.window_sampler(streams, 8, 4, [0], stream_of=[2])


def test_part_correlation_beyond_several_references_and_its_split_half():
    """orthogonal_to as a mapping: a target made orthogonal to two references scores ~0 for
    an embedding with either reference's geometry (or both) and finds its own; a target not
    in the mapping gets plain R; part_agreement is the same statistic between signatures."""
    gen = torch.Generator().manual_seed(4)
    T, V = 30, 12
    a, b, own = (torch.randn(T, V, generator=gen, dtype=torch.float64) for _ in range(3))
    target = a + b + own
    sim = lambda p: M.cosine_similarity_matrix(p - p.mean(0))  # noqa: E731
    S = torch.stack([sim(a), sim(b), 0.7 * sim(a) - 0.3 * sim(b), sim(own)])[:, None]
    phi = {"a": a, "b": b, "target": target}
    out = lm.alignment_curves(S, phi, n_perm=40, orthogonal_to={"target": ("a", "b")})
    assert np.abs(out["target"]["R"][:3, 0]).max() < 1e-9
    assert out["target"]["R"][3, 0] > out["target"]["null_hi"][3]
    plain = lm.alignment_curves(S, phi, n_perm=40)
    np.testing.assert_allclose(out["a"]["R"], plain["a"]["R"], atol=1e-12)
    one = lm.alignment_curves(S, phi, n_perm=40, orthogonal_to={"target": ("a",)})
    two = lm.alignment_curves(S, phi, n_perm=40, orthogonal_to="a")
    np.testing.assert_allclose(one["target"]["R"], two["target"]["R"], atol=1e-12)
    # the split-half of a part: itself 1, blind to the references' geometry
    assert lm.part_agreement(target, target, [a, b], [a, b]) == pytest.approx(1.0)
    noisy = target + 0.5 * torch.randn(T, V, generator=gen, dtype=torch.float64)
    i, j = torch.triu_indices(T, T, offset=1)

    def resid(p, refs):  # the pair similarities of p, least-squares residual on the refs'
        y = sim(p)[i, j].numpy()
        Z = np.column_stack([np.ones_like(y)] + [sim(r)[i, j].numpy() for r in refs])
        return y - Z @ np.linalg.lstsq(Z, y, rcond=None)[0]

    by_hand = np.corrcoef(resid(target, [a, b]), resid(noisy, [a, b]))[0, 1]
    assert lm.part_agreement(target, noisy, [a, b], [a, b]) == pytest.approx(by_hand, abs=1e-10)
    assert lm.part_agreement(target, target) == pytest.approx(
        lm.signature_agreement(target, target)
    )
    with pytest.raises(ValueError, match="itself"):
        lm.alignment_curves(S, phi, orthogonal_to={"target": ("target",)})
    with pytest.raises(ValueError, match="not one of"):
        lm.alignment_curves(S, phi, orthogonal_to={"target": ("c",)})
    with pytest.raises(ValueError, match="as many"):
        lm.part_agreement(target, target, [a], [])

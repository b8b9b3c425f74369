r"""A language model's embeddings against its signatures, over training.

Chapter 5 trains a small decoder (:class:`lib.training.models.Transformer` with ``readout="all"``)
on real text and asks *when* its token embeddings :math:`W^E` line up with each
language-model signature (:mod:`lib.data.signatures`): the next-token signature
:math:`\phi^{\rm next}`, the skip-:math:`k` signatures :math:`\phi^{(k)}` and the causal
window signature :math:`\bar\phi^W`; and its unembedding :math:`W^U` with the
previous-token signature :math:`\varphi^{\rm pre}`.

* :func:`similarity_callbacks` logs, during training, the cosine-similarity matrices of
  the increments :math:`W(t)-W(0)` (mean row removed) on a set of tracked tokens.
* :func:`alignment_curves` turns those logged matrices into :math:`R_{\cos}`, partial
  :math:`R_{\cos}` and a permutation null, all vectorized over steps and instances.
* :func:`signature_agreement` is the same :math:`R_{\cos}` between two signatures, and
  :func:`split_half` its split-half ceiling (a target estimated on two halves of a corpus).

The targets themselves are counted by :mod:`lib.data.signatures` and
:mod:`lib.data.chains` (:func:`lib.data.chains.lm_signatures`), and the windows a model
trains on are :mod:`lib.data.windows`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np
import torch

from . import metrics as M
from . import onsets
from .statistics import curve_level

F64 = torch.float64


def increment_similarity(W: torch.Tensor, W0: torch.Tensor, tokens: Sequence[int]) -> torch.Tensor:
    r"""Cosine similarity of the increments :math:`\Delta W_s = W_s(t)-W_s(0)` of the tracked rows,
    after removing their mean row: ``(K, V, d)`` -> ``(K, T, T)`` float64.

    The mean row is removed because every token's embedding first moves along a common
    direction (the unigram distribution is learned first); that shared move would make
    all cosines near one and hide which tokens move together.
    """
    idx = torch.as_tensor(list(tokens), dtype=torch.long, device=W.device)
    dW = (W.detach() - W0.to(W.device))[..., idx, :].to(F64)
    dW = dW - dW.mean(-2, keepdim=True)
    return M.cosine_similarity_matrix(dW)


def similarity_callbacks(
    params: Mapping[str, torch.Tensor], emb_tokens: Sequence[int], unemb_tokens: Sequence[int]
) -> dict[str, Callable]:
    """Callbacks for :func:`lib.training.engine.train` logging ``S_E`` and ``S_U`` (``(K, T, T)`` each).

    ``S_E`` is :func:`increment_similarity` of the token embedding ``E`` (rows = tokens);
    ``S_U`` that of the unembedding ``U`` read as one vector per output token (``U^T``).
    Call before training: the current weights are taken as ``W(0)``.
    """
    E0 = params["E"].detach().clone()
    UT0 = params["U"].detach().transpose(1, 2).clone()
    return {
        "S_E": lambda step, p: increment_similarity(p["E"], E0, emb_tokens),
        "S_U": lambda step, p: increment_similarity(p["U"].transpose(1, 2), UT0, unemb_tokens),
    }


def _cpu(x) -> torch.Tensor:
    """A numpy array or a tensor on any device, as a float64 CPU tensor."""
    return (x.detach() if torch.is_tensor(x) else torch.as_tensor(np.asarray(x))).to("cpu", F64)


def _standardize(x: torch.Tensor) -> torch.Tensor:
    """Zero mean, unit norm along the last axis, so that a dot product is a Pearson r."""
    x = x - x.mean(-1, keepdim=True)
    return x / x.norm(dim=-1, keepdim=True)


def _signature_cosines(phi: torch.Tensor, subtract_mean_row: bool = True) -> torch.Tensor:
    """Row cosines ``(T, T)`` of a ``(T, ...)`` signature, its mean row over the tracked tokens
    removed first (as :func:`increment_similarity` removes it from the increments), so that a
    row common to every signature changes nothing."""
    phi = phi.reshape(phi.shape[0], -1)
    if subtract_mean_row:
        phi = phi - phi.mean(0, keepdim=True)
    return M.cosine_similarity_matrix(phi)


def _check_signature(name: str, phi: torch.Tensor, T: int, other: str = "the logs track") -> None:
    """One-line ValueErrors for a signature whose rows are not ``T`` finite rows."""
    if phi.shape[0] != T:
        raise ValueError(f"signature {name!r} has {phi.shape[0]} rows, {other} {T}")
    if not torch.isfinite(phi).all():
        raise ValueError(f"signature {name!r} has non-finite rows: drop those tokens")


_NULL_CHUNK = 2**25  # permuted pair values made at once by alignment_curves (256 MB of floats)


def alignment_curves(
    S_logged,
    signatures: Mapping[str, torch.Tensor],
    control: str | None = None,
    n_perm: int = 200,
    seed: int = 0,
    quantiles: tuple[float, float] = (0.05, 0.95),
    subtract_mean_row: bool = True,
    orthogonal_to: str | Mapping[str, Sequence[str]] | None = None,
) -> dict[str, dict[str, np.ndarray]]:
    r""":math:`R_{\cos}` (or partial, or part :math:`R_{\cos}`) of logged similarity matrices
    with each signature, and a permutation null.

    ``S_logged`` is ``(n_logs, K, T, T)`` (from :func:`similarity_callbacks`);
    ``signatures`` maps a name to a centred ``(T, V)`` signature of the same tracked
    tokens. Each signature has its mean row over the tracked tokens removed before its
    cosines, as the logged increments have (:func:`increment_similarity`), so both sides
    of :math:`R_{\cos}` are centred alike; ``subtract_mean_row=False`` takes the rows as
    given (the book's measurement before that was fixed, kept to show the difference).
    Either may be a numpy array or a tensor on any device: the logs of
    :func:`lib.training.engine.train` are numpy arrays, so everything is computed on the CPU.
    With ``control`` (a key of ``signatures``), every other signature's R is the
    partial correlation controlling for the control signature's similarities (the control
    itself gets plain R), computed as :math:`r_{xy\cdot z}` from the three pairwise
    correlations (equal to :func:`lib.measure.metrics.r_cos_partial`; tested).

    With ``orthogonal_to`` (a key of ``signatures``), every other signature's pair
    similarities are first made orthogonal (over pairs, least squares) to that signature's,
    and R is the *part* (semi-partial) correlation :math:`r_{x(y\cdot z)}`: the logged side
    is left as it is, and only the static target loses what it shares with the reference
    (the reference itself gets plain R). An embedding carrying only the reference's
    geometry then scores zero, whatever its size. Its null permutes the target's token
    labels and then projects out the *unpermuted* reference, which is the null of a part
    correlation whose reference is fixed. ``orthogonal_to`` may also map a target's name
    to the names of several references (``{"res_skip3": ("next", "res_skip2")}``): that
    target is made orthogonal to all of them at once, and a target not in the mapping gets
    plain R.

    The null permutes the token labels of the signatures: :math:`S^{\rm sig}_{\pi(s)\pi(t)}`
    for a random permutation :math:`\pi` (the control permuted with it), ``n_perm``
    times. Returns ``name -> {"R": (n_logs, K), "null": (n_logs, K, n_perm),
    "null_lo": (n_logs,), "null_hi": (n_logs,)}``; the band pools all instances' nulls.
    """
    S = _cpu(S_logged)
    if S.dim() != 4 or S.shape[-1] != S.shape[-2]:
        raise ValueError(f"S_logged must be (n_logs, K, T, T), got {tuple(S.shape)}")
    T = S.shape[-1]
    if control is not None and control not in signatures:
        raise ValueError(f"control {control!r} is not one of the signatures {list(signatures)}")
    if control is not None and orthogonal_to is not None:
        raise ValueError("give control (partial R) or orthogonal_to (part R), not both")
    refs = _references(orthogonal_to, signatures)
    signatures = {name: _cpu(phi) for name, phi in signatures.items()}
    for name, phi in signatures.items():
        _check_signature(name, phi, T)
    i, j = torch.triu_indices(T, T, offset=1)
    gen = torch.Generator().manual_seed(seed)
    perms = torch.stack([torch.randperm(T, generator=gen) for _ in range(n_perm)])
    x = _standardize(S[..., i, j])  # (n_logs, K, P)
    cos = {n: _signature_cosines(phi, subtract_mean_row) for n, phi in signatures.items()}
    pairs = {n: _standardize(c[i, j]) for n, c in cos.items()}
    # The permuted pairs are made a chunk of permutations at a time: all of them at once
    # are (n_perm, P) floats and two (n_perm, P) indices per signature, 12 GB at T=1000.
    chunk = max(1, _NULL_CHUNK // max(len(i), 1))

    def permuted(name, sl):  # (perms in sl, P): the permuted signature's standardized pairs
        p = perms[sl]
        return _standardize(cos[name][p[:, i], p[:, j]])

    basis = {n: _basis([pairs[z] for z in zs]) for n, zs in refs.items() if zs}
    out = {}
    for name, y in pairs.items():
        r = x @ y  # (n_logs, K)
        rn = []  # (n_logs, K, n_perm), by chunks
        for start in range(0, n_perm, chunk):
            sl = slice(start, start + chunk)
            yp = permuted(name, sl)
            if control is not None and name != control:
                zp = permuted(control, sl)
                rn.append(M.partial_from_correlations(x @ yp.T, x @ zp.T, (yp * zp).sum(-1)))
            elif refs.get(name):
                rn.append(x @ _orthogonal(yp, basis[name]).T)
            else:
                rn.append(x @ yp.T)
        rn = torch.cat(rn, -1)
        if control is not None and name != control:
            z = pairs[control]
            r = M.partial_from_correlations(r, x @ z, y @ z)
        if refs.get(name):
            r = x @ _orthogonal(y, basis[name])
        flat = rn.flatten(1)
        out[name] = {
            "R": r.numpy(),
            "null": rn.numpy(),
            "null_lo": torch.quantile(flat, quantiles[0], 1).numpy(),
            "null_hi": torch.quantile(flat, quantiles[1], 1).numpy(),
        }
    return out


def _references(orthogonal_to, signatures) -> dict[str, tuple[str, ...]]:
    """``orthogonal_to`` as ``{target: (reference, ...)}``; a name alone applies to every
    other signature. Unknown names raise one ValueError."""
    if orthogonal_to is None:
        return {}
    if isinstance(orthogonal_to, str):
        refs = {n: (orthogonal_to,) for n in signatures if n != orthogonal_to}
        names = [orthogonal_to]
    else:
        refs = {n: tuple(zs) for n, zs in orthogonal_to.items()}
        names = [*refs, *(z for zs in refs.values() for z in zs)]
    for n in names:
        if n not in signatures:
            raise ValueError(f"orthogonal_to {n!r} is not one of the signatures {list(signatures)}")
    for n, zs in refs.items():
        if n in zs:
            raise ValueError(f"orthogonal_to makes {n!r} orthogonal to itself")
    return refs


def _basis(zs: Sequence[torch.Tensor]) -> torch.Tensor:
    """An orthonormal basis ``(m, P)`` of the span of the standardized references ``zs``."""
    q, _ = torch.linalg.qr(torch.stack(zs).T)
    return q.T


def _orthogonal(y: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
    """Standardized rows ``y`` (..., P) made orthogonal to the standardized ``z`` (P,), or to
    the span of an orthonormal basis ``z`` (m, P), and renormalized: a dot product with a
    standardized x is then a part correlation. The result stays centred (every reference is)."""
    z = z[None] if z.dim() == 1 else z
    y = y - (y @ z.T) @ z
    return y / y.norm(dim=-1, keepdim=True)


def signature_agreement(phi_a, phi_b, subtract_mean_row: bool = True) -> float:
    r""":math:`R_{\cos}` between two signatures of the same tracked tokens, as :func:`alignment_curves` measures it.

    Each signature (``(T, ...)``, numpy or a tensor on any device) has its mean row over
    the tracked tokens removed, then its row cosines are taken, and the result is the
    Pearson r of the two cosine matrices over the pairs :math:`s < t`: the same code as
    :func:`alignment_curves`, with the second signature's centred cosines in place of the
    logged similarities. So it is 1 for a signature with itself, blind to a row added to
    every token's signature, and it is the split-half *ceiling* of an alignment: the R
    that the target estimated on one half of a corpus reaches against the same target
    estimated on the other half (:func:`split_half`).
    """
    a, b = _cpu(phi_a), _cpu(phi_b)
    T = a.shape[0] if a.dim() else 0
    if T < 3:
        raise ValueError(f"signature_agreement needs >= 3 tracked tokens (rows), got {T}")
    _check_signature("phi_a", a, T, "phi_a has")
    _check_signature("phi_b", b, T, "phi_a has")
    i, j = torch.triu_indices(T, T, offset=1)
    ya = _standardize(_signature_cosines(a, subtract_mean_row)[i, j])
    yb = _standardize(_signature_cosines(b, subtract_mean_row)[i, j])
    return float(ya @ yb)


def part_agreement(phi_a, phi_b, refs_a=(), refs_b=()) -> float:
    r"""The part :math:`R_{\cos}` between two estimates of a target, each made orthogonal to
    its own estimates of the references (``refs_a``, ``refs_b``: sequences of signatures of
    the same tracked tokens): :func:`signature_agreement` for the quantity that
    :func:`alignment_curves` measures with ``orthogonal_to``. With the target estimated on
    two halves of a corpus it is the split-half agreement of that part (:func:`split_half`
    for the plain one)."""

    def part(phi, refs):
        phis = [_cpu(p) for p in (phi, *refs)]
        T = phis[0].shape[0]
        for n, p in enumerate(phis):
            _check_signature(f"signature {n}", p, T, "the first has")
        i, j = torch.triu_indices(T, T, offset=1)
        y, *zs = (_standardize(_signature_cosines(p)[i, j]) for p in phis)
        return _orthogonal(y, _basis(zs)) if zs else y

    if len(refs_a) != len(refs_b):
        raise ValueError(
            f"give as many references for each estimate, got {len(refs_a)} and {len(refs_b)}"
        )
    return float(part(phi_a, refs_a) @ part(phi_b, refs_b))


def split_half(stream_a, stream_b, V: int, tracked: Sequence[int], fn: Callable):
    """Split-half agreement of a target: ``signature_agreement(fn(a, V, tracked), fn(b, V, tracked))``.

    ``fn(stream, V, tracked)`` estimates the target's rows on one stream (e.g.
    ``lambda s, V, t: sig.residual_skip_signature(s, V, 2, rows=t)``); it may return a
    mapping of names to signatures (e.g. the ``phi`` of :func:`lib.data.chains.lm_signatures`), and then
    the result maps each name to its agreement. Splitting the corpus (two halves of the
    documents, or of the stream) is the caller's choice.
    """
    phi_a, phi_b = fn(stream_a, V, tracked), fn(stream_b, V, tracked)
    if isinstance(phi_a, Mapping):
        return {n: signature_agreement(phi_a[n], phi_b[n]) for n in phi_a}
    return signature_agreement(phi_a, phi_b)


__all__ = [
    "increment_similarity",
    "similarity_callbacks",
    "alignment_curves",
    "signature_agreement",
    "part_agreement",
    "split_half",
    "curve_stairs",
]


def curve_stairs(steps, curves: dict, previous: dict, frac: float, end_logs: int) -> dict:
    """The stairs of several targets read off their alignment curves, per instance.

    ``curves`` maps each target to its :func:`alignment_curves` reading (``R``, ``null_lo``,
    ``null_hi``); ``previous`` maps each target to the target whose stair comes before it
    (``None`` for the first). The first stair's onset is where its curve reaches ``frac`` of
    its maximum, above its null (:func:`lib.measure.onsets.relative_onset`); every later
    one's is where its largest climb since the first logged step is ``frac`` done
    (:func:`lib.measure.onsets.rise_onset`), with its size ``{n}_rise``, its base ``{n}_base``
    and its floor ``{n}_floor``. Every onset is searched from the first step, so the order
    of two onsets is evidence, not built into the reading. No stair: a climb within the half-width of the target's null
    band, or a peak within one half-width above the band. Every target also has its level
    at the end, ``{n}_end`` (:func:`lib.measure.statistics.curve_level`)."""
    steps = np.asarray(steps, dtype=float)
    first = next(n for n, before in previous.items() if before is None)
    c = curves[first]
    floor = float(np.nanmax(c["null_hi"]))
    out = {first: onsets.relative_onset(steps, c["R"], frac=frac, floor=floor)[0]}
    for n, before in previous.items():
        out[f"{n}_end"] = curve_level(curves[n]["R"], len(steps) - 1, end_logs)
        if before is None:
            continue
        c = curves[n]
        hi = float(np.nanmax(c["null_hi"]))
        half_width = (hi - float(np.nanmin(c["null_lo"]))) / 2
        on, rise, base = onsets.rise_onset(
            steps, c["R"], steps[0], frac=frac, min_rise=half_width, floor=hi + half_width
        )
        out[n], out[f"{n}_rise"], out[f"{n}_base"] = on, rise, base
        out[f"{n}_floor"] = hi + half_width
    return out

"""Chapter 5's readings of its runs: the stairs over k (every onset searched from step 1),
the chain controls of each stair (positive: the order-k chain's model climbs its own
skip-k stair; negative: the order-(k-1) chain's model stays under a family-wise floor),
the seed-level test of the onset order, the init-scale summaries, the paired and plateau
tests, the specificity targets, the corpora's conditional entropies, the pretrained
model's token classes, the figures' layouts and a few words.
"""

from __future__ import annotations

import itertools

import numpy as np
import scipy.stats

from ..book.page import share
from ..book.style import COLORS, curve_bands, median_lines
from ..data import tokenizers
from ..measure import lm, ngram, onsets, plateaus, statistics
from ..measure import metrics as M

COLOR = {
    "next": COLORS["next"],
    "res_skip2": COLORS["skip2"],
    "res_skip3": COLORS["skip3"],
    "res_skip4": COLORS["skip4"],
    "previous": COLORS["previous"],
}
LABEL = {
    "next": "next token (k = 1)",
    "previous": "previous token",
    **{f"res_skip{k}": f"skip-{k} residual" for k in range(2, 6)},
}


def of_n(k, n, noun="seed", plural=None) -> str:
    """``2 of 3 seeds``; ``no seed`` where ``k`` is 0, ``the one seed`` where ``n`` is 1."""
    k, n = int(k), int(n)
    if not k:
        return f"no {noun}"
    return f"the one {noun}" if n == 1 else f"{share(k, n)} {plural or noun + 's'}"


# --- the stairs --------------------------------------------------------------------------


def stairs(steps, curves: dict, names, cfg) -> dict:
    """Per instance, the stairs of ``names`` (:func:`lib.measure.lm.curve_stairs`: the
    first's onset where it reaches half its maximum above the null, every later one's where
    its largest climb since step 1 is half done; every onset searched from step 1)."""
    previous = {n: (names[i - 1] if i else None) for i, n in enumerate(names)}
    return lm.curve_stairs(
        steps,
        {n: curves[n] for n in names},
        previous,
        cfg.readings.onset_frac,
        cfg.readings.end_logs,
    )


def climbs(st: dict, rows, name: str) -> np.ndarray:
    """Per instance of ``rows``: the stair of ``name`` has an onset (no order required)."""
    return np.isfinite(np.asarray(st[name], float)[rows])


def familywise(curves: dict, rows, names, q: float) -> tuple[float, np.ndarray]:
    """A negative control's family-wise test: every target of ``names`` standardized per
    log by its null (mean and sd over the permutations of the instances ``rows``), the max
    over targets and logged steps (from step 1) per instance, and the ``q`` quantile of the
    same max under the null (per permutation, pooled over the instances). Returns
    ``(floor, max per instance)``: a control climbs nothing where its max stays below."""
    z_obs, z_null = [], []
    for n in names:
        R, null = curves[n]["R"][1:, rows], curves[n]["null"][1:, rows]
        mu, sd = null.mean((1, 2)), null.std((1, 2))
        z_obs.append((R - mu[:, None]) / sd[:, None])
        z_null.append((null - mu[:, None, None]) / sd[:, None, None])
    obs = np.max([z.max(0) for z in z_obs], 0)
    null = np.max([z.max(0) for z in z_null], 0)  # (K, n_perm)
    return float(np.quantile(null, q)), obs


def resolved(positive: dict, cfg) -> int:
    """The largest k such that, for every stair up to k, the share of seeds whose positive
    control climbs is at least ``tests.positive_min``."""
    k_max = 0
    for k in sorted(positive):
        if np.mean(positive[k]) < cfg.tests.positive_min:
            break
        k_max = k
    return k_max


def order_test(onset: np.ndarray, n_perm: int, seed: int = 0) -> dict:
    """The seed-level test of the onset order over k: per seed, Kendall's tau-b between k and
    its onset (a missing onset counts as later than every onset seen: past the horizon;
    a seed with fewer than two onsets gives no tau); the statistic is the mean over seeds,
    its null the same mean with the k labels permuted within each seed (exactly, when the
    permutations are few). ``onset`` is (seeds, k). Returns ``tau`` per seed, ``mean``, ``p``
    (one-sided: onsets rise with k) and ``p_min``, the smallest p the design can give."""
    x = np.where(np.isfinite(onset), onset, np.inf)
    ok = np.isfinite(onset).sum(1) >= 2
    ks = np.arange(x.shape[1])

    def taus(rows):
        return np.array(
            [scipy.stats.kendalltau(ks, np.where(np.isinf(r), 1e18, r))[0] for r in rows]
        )

    tau = np.full(len(x), np.nan)
    tau[ok] = taus(x[ok])
    if not ok.any():
        return dict(tau=tau, mean=np.nan, p=np.nan, p_min=np.nan)
    mean = float(np.nanmean(tau))
    perms = list(itertools.permutations(ks))
    per_seed = {tuple(r): taus([r[list(p)] for p in perms]) for r in x[ok]}
    tables = [per_seed[tuple(r)] for r in x[ok]]
    hits = 0
    if len(perms) ** len(tables) <= n_perm:  # exact: the observed labels are one of them
        null = np.array([np.mean(c) for c in itertools.product(*tables)])
    else:
        gen = np.random.default_rng(seed)
        null = np.mean([t[gen.integers(0, len(t), n_perm)] for t in tables], 0)
        hits = 1
    p = float((hits + np.sum(null >= mean - 1e-12)) / (hits + len(null)))
    p_min = float((hits + np.sum(null >= null.max() - 1e-12)) / (hits + len(null)))
    return dict(tau=tau, mean=mean, p=p, p_min=p_min)


def by_gamma(st: dict, inst, name: str, cfg) -> list[dict]:
    """Per init scale, over its seeds: the share that climbs ``name``, the median onset
    and the mean level at the end, each with its seed-bootstrap interval."""
    out = []
    for gm in cfg.gammas:
        rows = inst.index(source="text", gamma=gm)
        on, end = np.asarray(st[name], float)[rows], np.asarray(st[f"{name}_end"])[rows]

        def median_onset(i, on=on):
            return float(np.median(on[i])) if np.isfinite(on[i]).all() else np.nan

        out.append(
            dict(
                gamma=gm,
                climbed=int(np.isfinite(on).sum()),
                n=len(rows),
                onsets=on,
                end=end,
                onset=statistics.seed_bootstrap(median_onset, len(rows), cfg.readings.n_boot),
                level=statistics.seed_bootstrap(
                    lambda i, end=end: float(end[i].mean()), len(rows), cfg.readings.n_boot
                ),
            )
        )
    return out


def paired(curves: dict, target: str, a, b, cfg) -> dict:
    """The paired test of ``target``'s end levels, instance ``a[k]`` against ``b[k]``
    (:func:`lib.measure.statistics.paired_test` at ``tests.paired_q``)."""
    return statistics.paired_test(curves[target], a, b, cfg.readings.end_logs, cfg.tests.paired_q)


def plateau_two_sided(steps, curve: dict, rows, after, onset) -> np.ndarray:
    """The plateau test inside the null band on *both* sides: wait / rise per instance
    (:func:`lib.measure.plateaus.plateau_and_rise` on the distance from the band's middle
    against its half-width), so that a dip below the band is no plateau."""
    mid = (curve["null_hi"] + curve["null_lo"]) / 2
    half = (curve["null_hi"] - curve["null_lo"]) / 2
    dist = np.abs(curve["R"][:, rows] - mid[:, None])
    wait, rise = plateaus.plateau_and_rise(steps, dist, half, after, onset)
    return wait / rise


def smooth_controls(steps, curve: dict, st: dict, rows, name: str, after) -> dict:
    """The plateau test of the smooth rises from step 1 with each seed's end level
    (:func:`lib.measure.plateaus.smooth_rises`), read like the measured curve."""
    out = {}
    for kind, c in plateaus.smooth_rises(steps, st[f"{name}_end"][rows], st[name][rows]).items():
        band = dict(curve, R=c)
        out[kind] = plateau_two_sided(steps, band, slice(None), after, onsets.half_onset(steps, c))
    return out


def separation(st: dict, rows, name: str = "res_skip2") -> np.ndarray:
    """Decades of training between the next-token onset and ``name``'s (NaN where either
    stair is missing)."""
    return np.log10(np.asarray(st[name], float)[rows] / np.asarray(st["next"], float)[rows])


def nearest(hist, rows, orders=(1, 2, 3, 4)) -> dict:
    """Per k-gram order and instance of ``rows``: the logged step of the model's nearest
    pass to the k-gram predictor (:func:`lib.measure.ngram.nearest_steps`)."""
    return ngram.nearest_steps(hist.steps, {k: hist[f"kl{k}"][:, rows] for k in orders})


# --- the corpora -------------------------------------------------------------------------


def conditional_entropies(stream, V: int, orders=(1, 2, 3, 4)) -> dict[int, float]:
    """H(x_t | the k - 1 tokens before), in bits, for each k of ``orders``, from the
    stream's own k-gram counts (:func:`lib.measure.ngram.kgram_models`)."""
    out = {}
    for k, m in ngram.kgram_models(stream, V, orders).items():
        c = m.counts.astype(float)
        p = c / c.sum(1, keepdims=True)
        with np.errstate(divide="ignore", invalid="ignore"):
            out[k] = float(-np.nansum(c * np.log2(p)) / c.sum())
    return out


# --- the pretrained model ---------------------------------------------------------------


def token_class(s: str) -> str:
    """A token's class from its text (``Ġ`` a leading space): space-led or not, then
    digit, punctuation, capitalized word, lower-case word or other."""
    lead = s.startswith("Ġ") or s.startswith(" ")
    body = s.lstrip("Ġ ").strip()
    if not body:
        kind = "space"
    elif body.isdigit():
        kind = "digit"
    elif not any(ch.isalnum() for ch in body):
        kind = "punct"
    elif body[0].isupper():
        kind = "upper"
    elif body.isalpha():
        kind = "lower"
    else:
        kind = "other"
    return f"{'space-' if lead else ''}{kind}"


def within_class(x: np.ndarray, classes) -> np.ndarray:
    """Rows of ``x`` with their class's mean row removed (every class indicator partialled
    out of the rows: what a reading then sees is not the token classes' geometry)."""
    x = np.array(x, dtype=float)
    classes = np.asarray(classes)
    for c in np.unique(classes):
        x[classes == c] -= x[classes == c].mean(0)
    return x


def static_readout(E: np.ndarray, phi: dict, cfg, refs: dict) -> dict:
    """R of a static embedding ``E`` (rows = tokens) with each target (part R beyond
    ``refs``), and its null's upper quantile."""
    S = M.cosine_similarity_matrix(np.asarray(E) - np.asarray(E).mean(0))[None, None]
    res = lm.alignment_curves(
        S, phi, n_perm=cfg.readings.n_perm, quantiles=cfg.pretrained.quantiles, orthogonal_to=refs
    )
    return {n: (float(r["R"][0, 0]), float(r["null_hi"][0])) for n, r in res.items()}


# --- figures -----------------------------------------------------------------------------


def plot_alignment(ax, steps, curves: dict, rows, names, null="res_skip2", ls="-"):
    """W^E's R_cos with each target in ``names`` over training, and one target's null."""
    curve_bands(ax, steps, curves, rows, names, COLOR, LABEL, null, ls)


def mark_onsets(ax, st: dict, rows, names) -> None:
    """A dotted line at the median onset of each stair that has one in some seed."""
    median_lines(ax, st, rows, names, COLOR)


def plot_ngram(ax, hist, rows, near: dict) -> None:
    """KL from each k-gram predictor to the model over training (median over ``rows``), with
    a marker at each seed's nearest pass."""
    colors = {1: COLORS["next"], 2: COLORS["skip2"], 3: COLORS["skip3"], 4: COLORS["skip4"]}
    s = np.asarray(hist.steps)
    for k, c in colors.items():
        kl = np.median(hist[f"kl{k}"][:, rows], 1)
        ax.plot(s[1:], kl[1:], color=c, label=f"{k}-gram")
        at = np.searchsorted(s, near[k])
        ax.plot(near[k], np.median(hist[f"kl{k}"][:, rows], 1)[at], "v", color=c, ms=5)
    ax.set_xscale("log")
    ax.set_ylabel("KL(k-gram ‖ model), nats")


KJV_GLUE = {
    "h12": "H(x|1) - H(x|2), bits",
    "h23": "H(x|2) - H(x|3), bits",
    "ceil": "skip-2 ceiling",
    "digits": "digits",
    "distinct": "distinct lines",
}


def corpus_stats(text: str) -> dict:
    """A corpus's characters: their number, the vocabulary, the share of digits, how much
    the token two (three) back tells beyond one (two) before (bits,
    :func:`conditional_entropies`), and the distinct lines per line (repetition)."""
    tok = tokenizers.CharTokenizer(text)
    H = conditional_entropies(tok.encode(text), tok.vocab_size)
    return {
        "characters": len(text),
        "V": tok.vocab_size,
        "digits": sum(map(str.isdigit, text)) / len(text),
        KJV_GLUE["h12"]: H[2] - H[3],
        KJV_GLUE["h23"]: H[3] - H[4],
        "distinct lines": len(set(text.split("\n"))) / max(1, text.count("\n")),
    }


def kjv_verdict(stats: dict, tol: float = 0.05) -> str:
    """The KJV comparison in words: whether it offers more, less or about as much skip-2
    information per character as Shakespeare (within a relative ``tol``), and what follows."""
    kjv, ref = (stats[c][KJV_GLUE["h12"]] for c in ("KJV", "Shakespeare"))
    if abs(kjv - ref) < tol * ref:
        offers = "about as much skip-2 information per character as"
    else:
        offers = f"{'more' if kjv > ref else 'less'} skip-2 information per character than"
    if kjv < ref and abs(kjv - ref) >= tol * ref:
        return f"By these counts KJV offers {offers} Shakespeare, which may be why its stair is missing."
    return (
        f"By these counts KJV offers {offers} Shakespeare: how much the text holds does not "
        "explain its missing stair, and what does stays open at this scale."
    )

"""Chapter 5's readings of its runs, section by section: what each computes from the main
run (:class:`~.runs.Results`), the numbers the page glues and the rows of its tables."""

from __future__ import annotations

import numpy as np

from ...book import page
from ...book.page import interval, listing, share
from ...data import corpora
from ...measure import lm, statistics
from .. import real_lm_stairs as rd
from . import runs
from .runs import instances, log_at
from .targets import TITLE, chain_orders, other_residual, skip2_ceiling, stair_k

of_n = rd.of_n


# --- corpora, targets and the model ------------------------------------------------------


def target_table(D: dict) -> list[dict]:
    """Per target: its split-half ceiling and the geometry it shares with earlier ones."""
    return [
        {
            "target": rd.LABEL[n],
            "ceiling": D["ceiling"][n],
            "shared with earlier": D["shared"].get(n),
        }
        for n in [*D["names"], "previous"]
    ]


def corpus_numbers(cfg, D: dict) -> dict:
    """The corpus, its targets' ceilings and shared geometry, and the tests' levels."""
    return {
        "k_max": max(stair_k(n) for n in D["names"]),
        "ceil_res2": D["ceiling"]["res_skip2"],
        "ceil_res3": D["ceiling"]["res_skip3"],
        "ceil_next": D["ceiling"]["next"],
        "shared_res2": D["shared"]["res_skip2"],
        "shared_res3": D["shared"]["res_skip3"],
        "end_logs": cfg.readings.end_logs,
        "paired_q_pct": 100 * cfg.tests.paired_q,
        "control_q_pct": 100 * cfg.tests.control_q,
        "tokens": len(D["streams"]["text"]),
        "vocab": D["V"],
        "tracked": len(D["tracked"]),
    }


def model_numbers(cfg, D: dict, first: dict) -> dict:
    """The decoder, the batched run, and the first step's cosines with the order-0 term."""
    sources = [f"markov{o}" for o in chain_orders(cfg)]
    cos0, small, std = first["cos0"], first["small"], first["std"]
    return {
        "n_layers": cfg.model.n_layers,
        "d_model": cfg.model.d_model,
        "context_len": cfg.model.context_len,
        "d_mlp": cfg.model.d_mlp,
        "gamma_small": cfg.gamma,
        "gamma_standard": cfg.gamma_large,
        "gammas": listing([f"{x:g}" for x in cfg.gammas], ""),
        "n_seeds": len(cfg.seeds),
        "batch_size": cfg.train.batch_size,
        "lr": cfg.train.lr,
        "steps": cfg.train.steps,
        "n_logs": len(log_at(cfg)),
        "n_instances": len(instances(cfg, sources)),
        "epochs_main": cfg.train.steps
        * cfg.train.batch_size
        * cfg.model.context_len
        / len(D["streams"]["text"]),
        "escape_steps": cfg.model.d_model**-cfg.gamma / cfg.train.lr,
        "cos0_small_min": cos0[small].min(),
        "cos0_small_max": cos0[small].max(),
        "cos0_std_min": cos0[std].min(),
        "cos0_std_max": cos0[std].max(),
    }


# --- the staircase over k and its chain controls -----------------------------------------


def control_table(cfg, res) -> list[dict]:
    """Per stair k: the real text's climbs and onsets, and its two chain controls."""
    rows = []
    for n, k in zip(res.names, res.ks, strict=True):
        rows.append(
            {
                "stair k": k,
                "real text (γ = 1) climbs": of_n(
                    rd.climbs(res.st, res.small, n).sum(), len(cfg.seeds)
                ),
                "onsets": page.onset_text(res.st[n][res.small], cfg.seeds),
                "positive: order-k chain climbs its own": of_n(
                    res.positive[k].sum(), len(cfg.seeds)
                ),
                "learned: Δ loss (nats)": page.MISSING
                if res.learned[k] is None
                else page.value_range(res.learned[k], "{:+.3f}"),
                "negative: order-(k-1) chain's max z": page.per_seed_text(
                    res.negative[k]["top"], "{:.1f}"
                ),
                "family-wise floor": res.negative[k]["floor"],
            }
        )
    return rows


def learned_text(cfg, res) -> str:
    """Why each unresolved stair is unresolved: whether its positive control's model learned
    the stair's statistics (its loss on its own chain's windows below the order-(k-1) chain's
    model's, :func:`lib.experiments.ch05_real_language_models.runs.learned`), and so
    whether the embedding reading or the run limits that stair."""
    n = len(cfg.seeds)
    parts, unseen, deeper = [], [], True
    for k in (k for k in res.ks if k > res.k_res):
        d = res.learned[k]
        if d is None:
            continue
        below = f"the order-{k - 1} chain's model's"
        shown = of_n(res.positive[k].sum(), n)
        learned = f"the order-{k} chain's model learned order-{k} statistics of its chain in "
        if (d < 0).all():
            half = runs.learned(res.hist, res.inst, k, step=res.steps[-1] // 2)
            deeper &= bool(np.mean(d) < np.mean(half))
            unseen.append(k)
            parts.append(
                f"{learned}{of_n(n, n)} (its loss on that chain's windows "
                f"{page.value_range(-d, '{:.3f}')} nats below {below} at the end, "
                f"{page.value_range(-half, '{:.3f}')} at half the run), yet its embedding "
                f"shows stair {k} in {shown}: the reading, not the learning, limits stair {k}"
            )
        else:
            parts.append(
                f"{learned}{of_n((d < 0).sum(), n)} (its loss on that chain's windows minus "
                f"{below}: {page.value_range(d, '{:+.3f}')} nats), and its embedding shows "
                f"stair {k} in {shown}: the run is too short or the model too small for it"
            )
    if not parts:
        return "every stair it reads is resolved"
    if unseen:
        parts.append(
            f"a model learns these statistics{', more as it trains,' if deeper else ''} "
            "without its token embedding showing them in every seed"
        )
    return "; ".join(parts)


def stair_numbers(cfg, res) -> dict:
    """The resolved stairs, the controls in words, and the main run's onsets and levels."""
    st, small, positive, negative, ks = res.st, res.small, res.positive, res.negative, res.ks
    ceiling, k_res = res.D["ceiling"], res.k_res
    unres = [k for k in ks if k > k_res]
    return {
        "lm_stairs_resolved": k_res,
        "unresolved_text": f"{listing(unres, 'stair')} {'is' if len(unres) == 1 else 'are'} "
        "beyond its resolution: nothing is claimed there, whatever the real text does"
        if unres
        else "every stair it reads is resolved",
        "skip3_box": f"Skip-3 climbs in {share(rd.climbs(st, small, 'res_skip3').sum(), len(small))} "
        "seeds at γ = 1 (measured)"
        if k_res >= 3
        else "Stair k = 3 is beyond this scale's "
        f"resolution: its positive control climbs in {share(positive[3].sum(), len(cfg.seeds))} seeds.",
        "pos_text": "; ".join(f"k = {k}: {of_n(positive[k].sum(), len(cfg.seeds))}" for k in ks),
        "learned_text": learned_text(cfg, res),
        "neg_quiet": "; ".join(
            f"k = {k}: {of_n(negative[k]['quiet'].sum(), len(cfg.seeds))}" for k in ks
        ),
        "main_next": page.onset_text(st["next"][small], cfg.seeds),
        "main_res2": page.onset_text(st["res_skip2"][small], cfg.seeds),
        "main_res3": page.onset_text(st["res_skip3"][small], cfg.seeds),
        "main_res2_range": page.onset_range(st["res_skip2"][small]),
        "small_res2_end": page.value_range(st["res_skip2_end"][small]),
        "frac_res2": page.value_range(st["res_skip2_end"][small] / ceiling["res_skip2"]),
        "frac_res3": page.value_range(st["res_skip3_end"][small] / ceiling["res_skip3"]),
    }


def onset_order(cfg, res) -> dict:
    """Per init scale, the seed-level test of the onset order over the resolved stairs
    (:func:`lib.experiments.real_lm_stairs.order_test`)."""
    res_k = [k for k in res.ks if k <= res.k_res]
    order = {}
    for gm in cfg.gammas:
        at = res.inst.index(source="text", gamma=gm)
        order[gm] = rd.order_test(
            np.stack([res.st[n][at] for n in res.names[: len(res_k)]], 1), cfg.tests.n_order_perm
        )
    return order


def order_numbers(cfg, res) -> dict:
    """The order test's taus, p values and the smallest p it can give."""
    order = res.order
    return {
        "lm_order_p": order[cfg.gamma]["p"],
        "order_tau": page.per_seed_text(order[cfg.gamma]["tau"], "{:.2f}"),
        "order_p_std": order[cfg.gamma_large]["p"],
        "order_alpha": cfg.tests.order_alpha,
        "order_p_min": order[cfg.gamma]["p_min"],
        "res_k_text": listing([k for k in res.ks if k <= res.k_res], ""),
    }


# --- the paired tests --------------------------------------------------------------------


def paired_tests(cfg, res) -> dict:
    """The paired tests named in the Config: the small-init real text against the model of
    the chain one order below, on the real text's target."""
    pairs = {}
    for name, src in cfg.tests.paired_tests:  # named in the Config before the run
        if name in res.names and src in res.ctrl:
            pairs[name] = rd.paired(res.emb, name, res.small, res.ctrl[src], cfg) | dict(chain=src)
    return pairs


def paired_numbers(cfg, res) -> dict:
    """The skip-2 test's levels, null and margins, and the other tests' margins."""
    pairs = res.pairs
    pair2 = pairs["res_skip2"]
    return {
        "paired_margin_min": float(np.min(pair2["margin"])),
        "pair2_text": page.value_range(pair2["a"]),
        "pair2_ctrl": page.value_range(pair2["b"]),
        "pair2_null": page.value_range(pair2["null"]),
        "pair2_pass": of_n((pair2["margin"] > 0).sum(), len(cfg.seeds)),
        "pair_others": "; ".join(
            f"{rd.LABEL[n]} against the {TITLE[p['chain']]}'s model: "
            f"{page.per_seed_text(p['margin'], '{:+.3f}')}"
            for n, p in pairs.items()
            if n != "res_skip2"
        ),
    }


def paired_table(cfg, res) -> list[dict]:
    """Per paired test and seed: both levels, their difference, the null and the margin."""
    return [
        {
            "target": rd.LABEL[n],
            "chain": TITLE[p["chain"]],
            "seed": s,
            "real text": p["a"][i],
            "chain's model": p["b"][i],
            "difference": p["diff"][i],
            "null": p["null"][i],
            "margin": p["margin"][i],
        }
        for n, p in res.pairs.items()
        for i, s in enumerate(cfg.seeds)
    ]


# --- what small initialization changes ---------------------------------------------------


def by_gamma(cfg, res) -> dict:
    """Per init scale: each stair's summary over seeds (``sweep``), the skip-3 ones by
    gamma (``skip3``), the decades between the first two stairs (``sep``) and the seeds
    with both stairs under both main inits (``both``)."""
    st, inst = res.st, res.inst
    sweep = {n: rd.by_gamma(st, inst, n, cfg) for n in ("next", "res_skip2", "res_skip3")}
    skip3 = {r["gamma"]: r for r in sweep["res_skip3"]}
    sep = {gm: rd.separation(st, inst.index(source="text", gamma=gm)) for gm in cfg.gammas}
    both = np.isfinite(sep[cfg.gamma]) & np.isfinite(sep[cfg.gamma_large])
    return dict(sweep=sweep, skip3=skip3, sep=sep, both=both)


def gamma_numbers(cfg, res) -> dict:
    """The skip-3 shares, the standard init's climbs and onsets, and the separations."""
    st, small, standard = res.st, res.small, res.standard
    skip3, sep, both = res.by_gamma["skip3"], res.by_gamma["sep"], res.by_gamma["both"]
    return {
        "lm_skip3_small": skip3[cfg.gamma]["climbed"] / skip3[cfg.gamma]["n"],
        "lm_skip3_standard": skip3[cfg.gamma_large]["climbed"] / skip3[cfg.gamma_large]["n"],
        "skip3_small_text": page.share(skip3[cfg.gamma]["climbed"], skip3[cfg.gamma]["n"]),
        "skip3_standard_text": page.share(
            skip3[cfg.gamma_large]["climbed"], skip3[cfg.gamma_large]["n"]
        ),
        "std_climbed": of_n(rd.climbs(st, standard, "res_skip2").sum(), len(cfg.seeds)),
        "std_next_range": page.onset_range(st["next"][standard]),
        "main_next_range": page.onset_range(st["next"][small]),
        "sep_small": page.per_seed_text(sep[cfg.gamma]),
        "sep_std": page.per_seed_text(sep[cfg.gamma_large]),
        "sep_counted": of_n(both.sum(), len(cfg.seeds)),
        "sep_missing": of_n((~both).sum(), len(cfg.seeds)),
    }


def gamma_table(cfg, res) -> list[dict]:
    """Per init scale and stair: climbs, onsets, median onset and end level with intervals."""
    return [
        {
            "γ": r["gamma"],
            "stair": rd.LABEL[n],
            "climbs": of_n(r["climbed"], r["n"]),
            "onsets": page.onset_text(r["onsets"], cfg.seeds),
            "median onset [95 %]": interval(*r["onset"]),
            "level at end [95 %]": interval(*r["level"]),
            "levels per seed": page.per_seed_text(r["end"], "{:.3f}"),
        }
        for n, rs in res.by_gamma["sweep"].items()
        for r in rs
    ]


# --- the n-gram picture ------------------------------------------------------------------


def ngram_picture(res) -> dict:
    """The small-init runs' nearest passes to each k-gram predictor (``near``), the lag
    from the bigram's to the trigram's, the skip-2 onsets (``on2``), whether each falls
    between the two passes, and the end loss on windows of each chain."""
    hist, small = res.hist, res.small
    near = rd.nearest(hist, small)
    lag = near[3] - near[2]
    on2 = res.st["res_skip2"][small]
    between = (near[2] <= on2) & (on2 <= near[3])  # the skip-2 stair between the two passes
    chain_loss = {
        o: hist[f"chain_loss{o}"][-1, small] for o in (1, 2, 3) if f"chain_loss{o}" in hist.metrics
    }
    return dict(near=near, lag=lag, on2=on2, between=between, chain_loss=chain_loss)


def ngram_numbers(cfg, res) -> dict:
    """The nearest passes, the lag, the onsets and the chains' losses, in words."""
    st, small, ng = res.st, res.small, res.ngram
    near = ng["near"]
    return {
        "lm_ngram_lag": float(np.median(ng["lag"])),
        "near_text": "; ".join(f"{k}-gram: {page.per_seed_text(near[k], '{:.0f}')}" for k in near),
        "onset2_text": page.per_seed_text(st["res_skip2"][small], "{:.0f}"),
        "between_text": of_n(ng["between"].sum(), len(cfg.seeds)),
        "onset3_text": page.per_seed_text(st["res_skip3"][small], "{:.0f}"),
        "chain_loss_text": "; ".join(
            f"order {o}: {page.value_range(v)}" for o, v in ng["chain_loss"].items()
        ),
    }


# --- what the second stair is specific to ------------------------------------------------


def specificity(cfg, res) -> dict:
    """(i) the skip-2 residual read beyond the previous-token signature as well (``spec``,
    its stairs ``st_prev``); (ii) Shakespeare's own skip-2 residual against KJV's on the
    tracked characters KJV shares (``keep``): the end levels ``own`` and ``kjv``."""
    D, hist, small, steps = res.D, res.hist, res.small, res.steps
    prev = {n: D["phi"]["text"][n] for n in ("next", "previous", "res_skip2")}
    spec = lm.alignment_curves(
        hist["S_E"][:, small],
        prev,
        n_perm=cfg.readings.n_perm,
        orthogonal_to={"res_skip2": ("next", "previous"), "previous": ("next",)},
    )
    st_prev = rd.stairs(steps, spec, ["next", "res_skip2"], cfg)
    keep, kjv_res2 = other_residual(D, "kjv")  # the tracked characters KJV shares
    S_keep = hist["S_E"][:, small][:, :, keep][:, :, :, keep]
    own_keep = {n: D["phi"]["text"][n][keep] for n in ("next", "res_skip2")}
    mine = lm.alignment_curves(S_keep, own_keep, n_perm=cfg.readings.n_perm, orthogonal_to="next")
    other = lm.alignment_curves(
        S_keep,
        {"next": own_keep["next"], "res_skip2": kjv_res2},
        n_perm=cfg.readings.n_perm,
        orthogonal_to="next",
    )
    last = len(steps) - 1
    spec_own = statistics.curve_level(mine["res_skip2"]["R"], last, cfg.readings.end_logs)
    spec_kjv = statistics.curve_level(other["res_skip2"]["R"], last, cfg.readings.end_logs)
    return dict(spec=spec, st_prev=st_prev, keep=keep, own=spec_own, kjv=spec_kjv)


def specific_numbers(cfg, res) -> dict:
    """The previous-token part, the skip-2 stair beyond both targets, and the two corpora's
    skip-2 residuals on the shared characters."""
    sp, last = res.specific, len(res.steps) - 1
    st_prev = sp["st_prev"]
    return {
        "prev_part": page.value_range(
            statistics.curve_level(sp["spec"]["previous"]["R"], last, cfg.readings.end_logs)
        ),
        "res2_beyond_prev": page.value_range(st_prev["res_skip2_end"]),
        "res2_beyond_prev_climbs": of_n(
            rd.climbs(st_prev, slice(None), "res_skip2").sum(), len(cfg.seeds)
        ),
        "spec_own": page.value_range(sp["own"]),
        "spec_kjv": page.value_range(sp["kjv"]),
        "n_shared": len(sp["keep"]),
    }


# --- plateaus in linear time -------------------------------------------------------------


def plateau(cfg, res) -> dict:
    """After the next-token onset, how long the skip-2 part R sits inside its null band (both
    sides) against how long it then takes to rise to its onset (``ratio``, and ``ok`` where it
    is a plateau), and the same for the smooth controls (``smooth``)."""
    st, small, steps, emb = res.st, res.small, res.steps, res.emb
    after, onset2 = st["next"][small], st["res_skip2"][small]
    ratio = rd.plateau_two_sided(steps, emb["res_skip2"], small, after, onset2)
    smooth = rd.smooth_controls(steps, emb["res_skip2"], st, small, "res_skip2", after)
    ok = ratio >= cfg.readings.min_wait_over_rise
    return dict(ratio=ratio, smooth=smooth, ok=ok)


def plateau_numbers(cfg, res) -> dict:
    """The wait/rise ratios, how many pass, and the smooth controls' largest ratios."""
    pl = res.plateau
    return {
        "plateau2_ratio": page.per_seed_text(pl["ratio"], "{:.2f}"),
        "plateau2_pass": of_n(pl["ok"].sum(), len(cfg.seeds)),
        "control_loglin_max": np.nanmax(pl["smooth"]["log-linear"]),
        "control_exp_max": np.nanmax(pl["smooth"]["exponential"]),
        "min_wait_over_rise": cfg.readings.min_wait_over_rise,
    }


def plateau_table(cfg, res) -> list[dict]:
    """Per seed: wait / rise of the measured curve and of each smooth control."""
    pl = res.plateau
    return [
        {
            "seed": s,
            "wait / rise": pl["ratio"][i],
            **{f"{c} control": v[i] for c, v in pl["smooth"].items()},
        }
        for i, s in enumerate(cfg.seeds)
    ]


def scale_numbers(cfg, paper) -> dict:
    """The scale of this run and the size of the ``paper`` configuration."""
    return {
        "scale": cfg.scale,
        "paper_d": paper.model.d_model,
        "paper_context": paper.model.context_len,
        "paper_steps": paper.train.steps,
    }


# --- why the King James Bible differs ----------------------------------------------------


def corpus_stats(cfg, D: dict) -> dict:
    """Per corpus (characters): :func:`lib.experiments.real_lm_stairs.corpus_stats` of its
    training split and its skip-2 ceiling."""
    stats = {
        "Shakespeare": rd.corpus_stats(corpora.split_by_document(corpora.load_shakespeare())[0]),
        "KJV": rd.corpus_stats(corpora.split_by_document(corpora.load_kjv())[0]),
    }
    stats["KJV"]["skip-2 ceiling"] = skip2_ceiling(cfg, "kjv")
    stats["Shakespeare"]["skip-2 ceiling"] = D["ceiling"]["res_skip2"]
    return stats


def kjv_numbers(stats: dict) -> dict:
    """Each corpus's numbers by their glue keys, and the comparison in words."""
    out = {f"{c}_{key}": stats[c][k] for c in stats for key, k in rd.KJV_GLUE.items()}
    return out | {"kjv_verdict": rd.kjv_verdict(stats)}

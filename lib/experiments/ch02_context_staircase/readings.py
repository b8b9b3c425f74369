"""Numbers read from the chapter's runs: the anchors' target geometry, the onsets table, the
small- and large-init readings of every run, the plateaus in linear time, the sweep and the
stability reruns (dicts for glue, rows for tables)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pandas as pd

from ...book.page import count, listing, share
from ...measure import metrics as M
from ...measure import plateaus, rates
from .names import ATTN, CONTROL, MLP2, MLP3, SHORT, TASK_OF


def signature_geometry(tg3, lay3) -> dict:
    """How far the three orders' anchor similarities follow their features: the share of
    pairs whose order-1 (order-2) similarity has the sign of "same parity" ("same
    ceil(a/2) parity"), and the correlation of the order-0 and order-1 similarities."""
    S = {o: M.cosine_similarity_matrix(phi).numpy() for o, phi in tg3.phis.items()}
    odd = np.array([a % 2 for a in lay3.anchors]) * 2 - 1
    half = np.array([((a + 1) // 2) % 2 for a in lay3.anchors]) * 2 - 1
    feature = {1: np.outer(odd, odd), 2: np.outer(half, half)}
    iu = np.triu_indices(len(lay3.anchors), 1)
    sign_match = {o: float(np.mean(np.sign(S[o][iu]) == feature[o][iu])) for o in (1, 2)}
    corr01 = float(np.corrcoef(S[0][iu], S[1][iu])[0, 1])
    return dict(sign_match1=sign_match[1], sign_match2=sign_match[2], corr01=corr01)


def onset_table(runs: dict, seeds) -> pd.DataFrame:
    """One row per (run, gamma, seed): onsets, escapes and the next order's R on each plateau
    (copy 0, the seed itself, of a run with copies)."""
    rows = []
    for name, run in runs.items():
        for gamma in run.gammas:
            s = run.stairs(gamma)
            for i, seed in enumerate(seeds):
                k = i * run.copies
                row = {"run": name, "gamma": gamma, "seed": seed}
                row.update({f"onset {o}": s.onsets[o][k] for o in s.onsets})
                row.update({f"escape {o}": s.escapes[o][k] for o in s.escapes})
                row.update({f"R{o} on plateau {o}": s.plateau_R[o][k] for o in s.plateau_R})
                rows.append(row)
    return pd.DataFrame(rows)


def shown_onsets(runs: dict, seeds, gamma, gamma_large, gamma_large_attn) -> pd.DataFrame:
    """The onsets table at the chapter's three rates (not the two-stair Emb-MLP at the
    attention model's large init), beside each run's floors, with its gamma as γ."""
    onsets = onset_table(runs, seeds)
    shown = onsets[
        onsets.gamma.isin([gamma, gamma_large, gamma_large_attn])
        & ~((onsets.run == MLP2) & (onsets.gamma == gamma_large_attn))
    ]
    floors = {f"floor {o}": shown.run.map(lambda n, o=o: runs[n].floor.get(o)) for o in (0, 1, 2)}
    return shown.assign(**floors).rename(columns={"gamma": "γ"})


def escape_summary(stairs) -> dict:
    """``{"escape b": "lowest-highest step over the seeds"}`` for each bit."""
    return {
        f"escape {b}": f"{np.min(v):.0f}-{np.max(v):.0f}"
        if np.isfinite(v).all()
        else "never (some seeds)"
        for b, v in stairs.escapes.items()
    }


def small_init(runs: dict, seeds, gamma: float, cfg):
    """The small-init reading of every run: ``small`` (name -> Stairs), the attention
    model's climb rates per seed and pooled, its weakest copy's peak R1 per seed, the
    control's peak R1 and whether it has no order-1 onset, the Emb-MLP climbs per seed and
    the three-stair seeds that miss a stair (``off3``); ``glue``: the page's numbers."""
    small = {name: runs[name].stairs(gamma) for name in (MLP2, CONTROL, ATTN, MLP3)}
    climb = {name: s.climbs() for name, s in small.items()}
    attn_run = runs[ATTN]
    attn_climbs = attn_run.per_seed(np.array(small[ATTN].climbs_per_seed()))  # (seeds, copies)
    attn_rates = rates.climb_rates(attn_climbs)  # P(climb) per seed, Wilson interval
    attn_pooled = rates.pooled_rate(attn_climbs)
    _, m_attn = attn_run.arm(gamma)
    R1_peak = attn_run.per_seed(np.nanmax(m_attn["R1"][1:], 0)).min(1)  # weakest copy per seed
    R1_ctrl = np.nanmax(runs[CONTROL].arm(gamma)[1]["R1"][1:], 0)
    control_no_stair = ~np.isfinite(small[CONTROL].onsets[1])  # no order-1 onset, per seed
    mlp_climbs = {name: np.array(small[name].climbs_per_seed()) for name in (MLP2, MLP3)}
    off3 = ~mlp_climbs[MLP3]  # three-stair seeds that miss a stair
    words = lambda r: f"{r.p:.2f} [{r.lo:.2f}, {r.hi:.2f}]"
    glue = dict(
        climb_mlp2_words=share(int(mlp_climbs[MLP2].sum()), len(seeds)),
        climb_mlp3_words=share(int(mlp_climbs[MLP3].sum()), len(seeds)),
        off3_seeds=listing(np.array(seeds)[off3]),
        off3_escape=listing(small[MLP3].escapes[1][off3], "step"),
        attn_pooled_words=words(attn_pooled),
        attn_R1_peak_min=float(R1_peak.min()),
        floor1_attn=attn_run.floor[1],
        climb_min=cfg.attn.climb_min,
        attn_rate_lo=min(r.p for r in attn_rates),
        attn_rate_hi=max(r.p for r in attn_rates),
        control_below=share(int(control_no_stair.sum()), len(seeds)),
    )
    return SimpleNamespace(
        small=small,
        climb=climb,
        attn_rates=attn_rates,
        R1_peak=R1_peak,
        R1_ctrl=R1_ctrl,
        control_no_stair=control_no_stair,
        glue=glue,
    )


def attn_rate_table(sm, seeds) -> tuple[list, list]:
    """``(rows, columns)`` per seed: the share of copies that climb, with its Wilson
    interval, and the weakest copy's peak R1."""
    rows = [[seed, sm.attn_rates[k].interval(), sm.R1_peak[k]] for k, seed in enumerate(seeds)]
    return rows, ["seed", "P(climb), attention", "weakest copy's peak R1"]


def large_init(runs: dict, small: dict, large_of: dict, gamma_small: float):
    """Large init against small, per run with a large arm: the per-seed staircase checks at
    large init (``large_seeds``), the speed-up of each bit's median escape (``speed``), and
    ``glue``: the speed-ups, the median log-time gaps, the control's final accuracy."""
    large = {name: runs[held].stairs(gamma) for name, (held, gamma) in large_of.items()}
    climb_large = {name: np.array(s.climbs_per_seed()) for name, s in large.items()}
    log_gap = lambda s: np.log(s.onsets[1]) - np.log(s.onsets[0])  # e-folds; inf if never
    gap_small = np.concatenate([log_gap(small[name]) for name in large_of])
    gap_large = np.concatenate([log_gap(large[name]) for name in large_of])
    large_seeds = np.concatenate(list(climb_large.values()))
    speed = {  # median escape step at small init over that at large init (every copy at small)
        (name, b): float(np.median(small[name].escapes[b]) / np.median(large[name].escapes[b]))
        for name in large_of
        for b in small[name].escapes
    }
    glue = {f"speedup_{SHORT[name]}_{b}": v for (name, b), v in speed.items()}
    control_acc = runs[CONTROL].arm(gamma_small)[1]["acc"][-1].min()
    glue |= dict(
        control_acc=float(control_acc),
        gap_small_med=float(np.median(gap_small)),
        gap_large_med=float(np.median(gap_large)),
        large_climbed=share(large_seeds.sum(), large_seeds.size),
    )
    return SimpleNamespace(large_seeds=large_seeds, speed=speed, glue=glue)


def plateau_numbers(runs: dict, small: dict, gamma: float) -> dict:
    """The largest R of the next order on any plateau, and each run's escape range per bit."""
    plateau_max = 0.0
    for name in (MLP2, ATTN, MLP3):
        _, m = runs[name].arm(gamma)
        for o, mask in small[name].plateaus.items():
            plateau_max = max(plateau_max, float(np.max(np.where(mask, m[f"R{o}"], -np.inf))))
    out = dict(plateau_max=plateau_max)
    for name in (MLP2, ATTN, MLP3):
        s = escape_summary(small[name])
        out |= {f"esc_{SHORT[name]}_{b[-1]}": v for b, v in s.items()}
    return out


def plateau_lengths(runs: dict, small: dict, seeds, gamma: float, cfg):
    """The plateau in linear time: per (run, bit), each instance's plateau length over its
    fall (``wait_over_fall``), and the same for a smooth decay from ln 2 that starts at the
    previous stair's onset and escapes at the same step (``control_over_fall``); ``glue``:
    the extremes and where the check fails."""
    wait_over_fall, control_over_fall = {}, {}
    for name in (MLP2, ATTN, MLP3):
        steps_r, m = runs[name].arm(gamma)
        s = small[name]
        for o in s.escapes:
            wait, fall = plateaus.plateau_and_fall(steps_r, m[f"bit{o}"], s.onsets[o - 1])
            wait_over_fall[(name, o)] = wait / fall
            # from ln 2 at the previous stair's onset t0: exp(-(t - t0) / tau) = 1/2 at the escape
            t0, t = s.onsets[o - 1][None], np.asarray(steps_r, dtype=float)[:, None]
            tau = (s.escapes[o] - t0) / np.log(2)
            smooth = np.log(2) * np.exp(-np.clip(t - t0, 0, None) / tau)
            w_c, f_c = plateaus.plateau_and_fall(steps_r, smooth, s.onsets[o - 1])
            control_over_fall[(name, o)] = w_c / f_c
    lowest = lambda d: float(np.nanmin(np.concatenate(list(d.values()))))
    control_max = float(np.nanmax(np.concatenate(list(control_over_fall.values()))))
    copies_of = lambda name: runs[name].copies
    short = [  # instance k of a run is (seed, copy) = divmod(k, copies)
        f"{name}, bit {o}, seed {seeds[k // copies_of(name)]}"
        + (f" copy {k % copies_of(name)}" if copies_of(name) > 1 else "")
        + (f" (ratio {r:.2f})" if np.isfinite(r) else " (its previous stair never came)")
        for (name, o), ratio in wait_over_fall.items()
        for k, r in enumerate(ratio)
        if not r >= cfg.readings.min_wait_over_fall
    ]
    everywhere = "in every run, bit and seed"
    where = f"{everywhere} except {'; '.join(short)}" if short else everywhere
    glue = dict(
        wait_fall_min=lowest(wait_over_fall),
        min_wait_over_fall=cfg.readings.min_wait_over_fall,
        wait_fall_control_max=control_max,
        plateau_where=where,
    )
    return SimpleNamespace(
        wait_over_fall=wait_over_fall, control_over_fall=control_over_fall, glue=glue
    )


def sweep_escapes(run, sweep_gammas) -> tuple[dict, np.ndarray]:
    """``(onsets, escapes)`` over the sweep: ``onsets[o]`` of shape (gammas, seeds) for
    orders 0 and 1, and bit 1's escape steps, of the same shape."""
    sweep = [run.stairs(x) for x in sweep_gammas]
    sw_on = {o: np.array([s.onsets[o] for s in sweep]) for o in (0, 1)}
    sw_esc = np.array([s.escapes[1] for s in sweep])
    return sw_on, sw_esc


def sweep_numbers(esc_med, sweep_gammas) -> dict:
    """The median escape step at the largest and the smallest init, and their gammas."""
    return dict(
        esc_g_lo=float(esc_med[0]),
        esc_g_hi=float(esc_med[-1]),
        g_lo=sweep_gammas[0],
        g_hi=sweep_gammas[-1],
    )


def stability_numbers(stab: dict, seeds, cfg) -> dict:
    """The reruns in words: how far the events move, which seeds change their verdict, and
    the median loss drift."""
    shift_mlp = int(max(stab[n]["shift"].max() for n in stab))
    moves = lambda n: "move by at most " + count(n, "logged step") if n else "do not move"
    changed = [
        f"{TASK_OF[n]} seed {seeds[k]}"
        for n in stab
        for k in np.flatnonzero(~stab[n]["same_verdict"])
    ]
    drift = float(np.median(np.concatenate([v["drift"] for v in stab.values()])))
    return dict(
        stab_tol=cfg.readings.stability_tol,
        stab_mlp_moves=moves(shift_mlp),
        stab_changed=", ".join(changed) or "no seed",
        drift_mlp=drift,
    )

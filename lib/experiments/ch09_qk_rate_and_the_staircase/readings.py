"""Chapter 9's readings: the numbers the page glues, the tables it shows, and the tests and
fits its claims read (each a dict of glue names, a table, or a small record)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ...book.page import count, listing, plural, share
from ...measure import matched_loss, nulls, statistics
from .runs import ARM_NAME, ARMS, Controls, Runs
from .summary import POSITIONS, failed_instances, per_instance_table, where_counted

CONTROL_COLUMNS = {
    "onset0": "order-0 onset",
    "onset1": "order-1 onset",
    "escape1": "bit-1 escape",
    "R1_peak": "peak R1",
    "loss": "final loss",
}
STUCK_COLUMNS = {
    "qk": "QK",
    "final_loss": "final loss",
    "peak_loss": "peak loss",
    "attn_max": "largest attention",
    "qk_norm": "‖W_QK‖",
    "qk_norm_converged": "‖W_QK‖ converged",
}
INSTANCE_COLUMNS = {
    "arm": "model, QK",
    "converged": "converged",
    "counted": "counts",
    "onset1": "order-1 onset",
    "escape1": "bit-1 escape",
    "leave": "leaves uniform",
    "R1": "final R1",
    "loss": "final loss",
    "anchor_end": "final attention on anchor",
}


# ---------------------------------------------------------------------------
# Words
# ---------------------------------------------------------------------------


def rates(values) -> str:
    """Rates in words: "0.1 and 10"."""
    return listing(values, noun="")


def of(k, n, noun="instance") -> str:
    """A count out of n in words: "no instance", "2 of 3 instances"."""
    return f"no {noun}" if k == 0 else f"{share(k, n)} {plural(n, noun)}"


def rho_words(t, interval=True) -> str:
    """A rank test (statistics.TrendTest) in words: "ρ = +0.12 [-0.50, +0.61], p = 0.3"."""
    if not np.isfinite(t.rho):
        return f"ρ undefined over {count(t.n, 'counted instance')}"
    spread = f" [{t.lo:+.2f}, {t.hi:+.2f}]" if interval else ""
    return f"ρ = {t.rho:+.2f}{spread}, p = {t.p:.2g}"


def exponent_words(fit, n, cfg) -> str:
    """An exponent with its interval and the rates it was fitted over, or why there is none."""
    if not np.isfinite(fit.value):
        verb = "qualify" if n > 1 else "qualifies"
        return f"not fitted ({count(n, 'rate')} {verb}, fewer than {cfg.readings.min_fit_rates})"
    return f"{fit.value:+.2f} [{fit.lo:+.2f}, {fit.hi:+.2f}] over {count(n, 'rate')}"


# ---------------------------------------------------------------------------
# The sweep and the controls
# ---------------------------------------------------------------------------


def sweep_numbers(cfg, cfg2) -> dict:
    """The sweep's settings, for the text."""
    return dict(
        lr=cfg.lr,
        gamma=cfg.gamma,
        steps=cfg.steps,
        stair_steps=cfg.stair.steps,
        r_words=rates(cfg.r_grid),
        stair_r_words=rates(cfg.stair.r_grid),
        chapter2_r=cfg2.r,
        seed_list=listing(cfg.seeds),
        stair_seed_list=listing(cfg.stair.seeds),
        ov_anchors=cfg.ov.n_anchors,
        stair_anchors=cfg2.attn.anchors,
    )


def control_setup_numbers(cfg) -> dict:
    """The controls' settings, for the text (glue names ``ctl_*``)."""
    numbers = dict(
        r_words=rates(cfg.control.r_grid),
        stair_r_words=rates(cfg.control.stair_r_grid),
        seed_list=listing(cfg.control.seeds),
        steps=cfg.control.steps,
    )
    return {f"ctl_{n}": v for n, v in numbers.items()}


def control_table(ctl: Controls) -> pd.DataFrame:
    """The controls' per-instance onsets, escape, peak R1 and final loss, one row each."""
    return (
        pd.concat(
            {ARM_NAME[a]: c[list(CONTROL_COLUMNS)].to_dataframe() for a, c in ctl.summary.items()},
            names=["model"],
        )
        .reset_index()
        .rename(columns=CONTROL_COLUMNS)
    )


@dataclass
class ControlReading:
    """Each control's largest R1 over every seed, r and logged step (``peak``), its
    family-wise floor (``fw``), and the numbers the page glues."""

    peak: dict
    fw: dict
    numbers: dict


def read_controls(ctl: Controls, cfg) -> ControlReading:
    """The controls against their family-wise floors, their own floors, and the shuffled
    labels' own signature."""
    ctl_no_stair = {a: ~np.isfinite(c["onset1"].values).ravel() for a, c in ctl.summary.items()}
    ctl_order0 = {a: np.isfinite(c["onset0"].values).ravel() for a, c in ctl.summary.items()}
    ctl_peak = {a: float(c["R1_peak"].max()) for a, c in ctl.summary.items()}  # every seed, r, step
    # One max-statistic null over everything the control scans (lib.measure.nulls).
    ctl_fw = {
        a: nulls.familywise_floor(ctl.hist[a]["null1"], cfg.control.familywise_q) for a in ARMS
    }
    own_peak = np.nanmax(ctl.hist["ov"]["own_R1"][1:], 0)
    per_model = {  # the control of each model: its floor, how many rose above it, its peak
        "ctl_floor": {a: ctl.floor[a][1] for a in ARMS},
        "ctl_fw": ctl_fw,
        "ctl_above": {a: int((~ctl_no_stair[a]).sum()) for a in ARMS},
        "ctl_n": {a: ctl_no_stair[a].size for a in ARMS},
        "ctl_peak": ctl_peak,
        "ctl_order0": {a: int(ctl_order0[a].sum()) for a in ARMS},
    }
    numbers = (
        {f"{k}_{a}": v[a] for k, v in per_model.items() for a in ARMS}
        | {
            f"{k}_{a}_words": of(per_model[k][a], per_model["ctl_n"][a])
            for k in ("ctl_above", "ctl_order0")
            for a in ARMS
        }
        | dict(
            own_R1_peak=float(own_peak.max()),
            own_floor1=ctl.own_floor["ov"],
            own_crossed_words=of(int((own_peak > ctl.own_floor["ov"]).sum()), own_peak.size),
            ctl_fw_q=cfg.control.familywise_q,
            ctl_fw_alpha=f"{1 - cfg.control.familywise_q:.0%}",
        )
    )
    return ControlReading(ctl_peak, ctl_fw, numbers)


# ---------------------------------------------------------------------------
# Which runs count
# ---------------------------------------------------------------------------


def converged_counts(runs: Runs, cfg) -> pd.DataFrame:
    """The converged seeds of each rate, one column per (model, QK); NaN: a rate not run."""
    counts = pd.DataFrame(index=pd.Index(sorted({*cfg.r_grid, *cfg.stair.r_grid}), name="r"))
    for (arm, qk), ds in runs.summary.items():
        counts[f"{ARM_NAME[arm]}, {qk}"] = ds["converged"].sum("seed").to_series()
    return counts


def convergence_numbers(cfg) -> dict:
    """The convergence rule, for the text."""
    return dict(
        conv_frac=cfg.readings.conv_frac, conv_loss=float(cfg.readings.conv_frac * np.log(2))
    )


@dataclass
class Failures:
    """Every instance that did not converge (``stuck``, one row each), those at the fastest
    rate with a failure (``fast``), which of them end saturated (``sat``), and the numbers the
    page glues."""

    stuck: pd.DataFrame
    fast: pd.DataFrame
    sat: pd.Series
    numbers: dict


def read_failures(runs: Runs, cfg) -> Failures:
    """The instances that did not converge, and how the fastest rate's failures end."""
    stuck = failed_instances({(ARM_NAME[a], q): ds for (a, q), ds in runs.summary.items()})
    n_inst = sum(ds["converged"].size for ds in runs.summary.values())
    fast = stuck[stuck["r"] == stuck["r"].max()] if len(stuck) else stuck
    sat = fast["attn_max"] > cfg.readings.saturated if len(fast) else pd.Series([], dtype=bool)
    ratio = (fast["qk_norm"] / fast["qk_norm_converged"]).dropna() if len(fast) else []
    numbers = dict(stuck_words=of(len(stuck), n_inst), n_inst=n_inst) | dict(
        saturated=cfg.readings.saturated,
        fast_r=float(stuck["r"].max()) if len(stuck) else np.nan,
        fast_saturated=int(sat.sum()),
        fast_n=len(fast),
        fast_qk_words=f"{np.median(ratio):.3g}" if len(ratio) else "undefined: none converged",
    )
    return Failures(stuck, fast, sat, numbers)


def failed_table(fail: Failures) -> pd.DataFrame:
    """The failed instances, with the page's column names."""
    return fail.stuck.rename(columns=STUCK_COLUMNS)


# ---------------------------------------------------------------------------
# The staircase at every rate
# ---------------------------------------------------------------------------


def climbed(runs: Runs) -> dict:
    """Per (model, QK): whether each instance's order-1 stair came, NaN where it does not count."""
    return {key: where_counted(ds, "climbed") for key, ds in runs.summary.items()}


def staircase_numbers(runs: Runs) -> dict:
    """How many instances climb per (model, QK), and how many have order 0 at the first step."""
    first = {key: runs.hist[key].steps[1] for key in runs.summary}  # the first logged step after 0
    order0_first = sum(
        int((ds["onset0"].values <= first[key]).sum()) for key, ds in runs.summary.items()
    )
    return {
        f"climbed_{a}_{q}": of(int(np.nansum(c)), int(np.isfinite(c).sum()))
        for (a, q), c in climbed(runs).items()
    } | dict(order0_first=order0_first)


def instance_table(runs: Runs) -> pd.DataFrame:
    """Every instance of every run, one row each, with the page's column names."""
    per_instance = per_instance_table(
        {f"{ARM_NAME[a]}, {q}": ds for (a, q), ds in runs.summary.items()},
        list(INSTANCE_COLUMNS)[1:],
    )
    return per_instance.reset_index().rename(columns=INSTANCE_COLUMNS)


# ---------------------------------------------------------------------------
# Does faster QK learning take the order-1 stair out?
# ---------------------------------------------------------------------------


def trend(runs: Runs, arm, qk, name, cfg, alternative="less"):
    """The trend test of the final ``name`` against r over the instances that count."""
    ds = runs.summary[arm, qk]
    y = where_counted(ds, name).ravel()
    sw = runs.sweep[arm]
    rd = cfg.readings
    return statistics.trend_test(
        sw["r"], y, sw["seed"], alternative, rd.n_perm, rd.n_boot, rd.stat_seed
    )


def trend_tests(runs: Runs, cfg) -> dict:
    """``{(model, qk, name): TrendTest}`` of the final R1 and of climbing against r."""
    return {
        (arm, qk, n): trend(runs, arm, qk, n, cfg)
        for arm in ARMS
        for qk in cfg.qk_kinds
        for n in ("R1", "climbed")
    }


def control_trend(ctl: Controls, cfg):
    """The same trend test on the learned-OV control's final R1 (no rule: no trend)."""
    sw = ctl.sweep["ov"]
    R1 = ctl.summary["ov"]["R1"].values.ravel()
    rd = cfg.readings
    return statistics.trend_test(
        sw["r"], R1, sw["seed"], "less", rd.n_perm, rd.n_boot, rd.stat_seed
    )


def trend_table(tests: dict) -> list[dict]:
    """One row per trend test, with its interval."""
    return [
        {
            "model": ARM_NAME[arm],
            "QK": qk,
            "against r": "final R1" if n == "R1" else "climbed",
            "ρ [95% interval]": (t.rho, t.lo, t.hi),
            "p": t.p,
            "counted instances": t.n,
        }
        for (arm, qk, n), t in tests.items()
    ]


def stair_climbs(runs: Runs, cfg) -> np.ndarray:
    """Whether the staircase model's order-1 stair came, over its counted instances."""
    c = climbed(runs)
    return np.concatenate([c["stair", qk][np.isfinite(c["stair", qk])] for qk in cfg.qk_kinds])


def resolved(tests: dict, cfg) -> dict:
    """Per QK parameterization: is the learned-OV model's R1 trend resolved?"""
    return {qk: tests["ov", qk, "R1"].p < cfg.readings.alpha for qk in cfg.qk_kinds}


def suppression_numbers(runs: Runs, tests: dict, ctl_trend, cfg) -> dict:
    """The staircase model's climbs and margins, and the trend tests in words."""
    summary, floor = runs.summary, runs.floor
    stair_all = stair_climbs(runs, cfg)
    stair_R1 = [np.nanmin(where_counted(summary["stair", q], "R1")) for q in cfg.qk_kinds]
    # the margin: the smallest final R1 of a counted instance over its run's order-1 floor
    stair_over = [
        np.nanmin(where_counted(summary["stair", q], "R1")) / floor["stair", q][1]
        for q in cfg.qk_kinds
    ]
    res = resolved(tests, cfg)
    r_fast = max(cfg.stair.r_grid)  # the staircase model at its fastest rate: medians over seeds
    at_fast = lambda q, name: np.nanmedian(where_counted(summary["stair", q], name)[-1])
    return (
        dict(alpha=cfg.readings.alpha)
        | {f"trend_words_{qk}": rho_words(tests["ov", qk, "R1"]) for qk in cfg.qk_kinds}
        | {f"climb_words_{qk}": rho_words(tests["ov", qk, "climbed"], False) for qk in cfg.qk_kinds}
        | {f"trend_word_{qk}": "resolved" if res[qk] else "unresolved" for qk in cfg.qk_kinds}
        | {f"stair_leave_{q}": at_fast(q, "leave") for q in cfg.qk_kinds}
        | {f"stair_escape_{q}": at_fast(q, "escape1") for q in cfg.qk_kinds}
        | dict(
            n_seeds_ov=len(cfg.seeds),
            stair_climbed=int(stair_all.sum()),
            stair_counted=len(stair_all),
            stair_R1_min=float(np.nanmin(stair_R1)),
            stair_over_min=float(np.nanmin(stair_over)),
            ctl_trend_words=rho_words(ctl_trend, False),
            ctl_trend_word="no trend"
            if ctl_trend.p >= cfg.readings.alpha
            else "a trend, where none should be",
            ctl_trend_n=ctl_trend.n,
            stair_r_fast=r_fast,
        )
    )


# ---------------------------------------------------------------------------
# Attention at a matched loss
# ---------------------------------------------------------------------------


@dataclass
class Matched:
    """The learned-OV model at a matched loss, over its counted instances of both QK
    parameterizations: the loss ``matched``, the values ``read`` there (R1, attention on the
    gate, distance from uniform), each instance's rate ``r_all`` and QK ``qk_all``, the rank
    correlations ``corr`` with R1, the final attention ``ends[position]`` at the slowest and
    fastest counted rate, and the numbers the page glues."""

    matched: float
    read: dict
    r_all: np.ndarray
    qk_all: np.ndarray
    corr: dict
    ends: dict
    numbers: dict


def read_matched(runs: Runs, cfg) -> Matched:
    """Attention and R1 at one loss every counted learned-OV instance reaches."""
    hist, summary, sweep = runs.hist, runs.summary, runs.sweep
    keys = [("ov", qk) for qk in cfg.qk_kinds]
    cnt = np.concatenate([summary[k]["counted"].values.ravel() for k in keys])
    loss = np.concatenate([hist[k]["loss_all"] for k in keys], 1)[:, cnt]
    GATE = POSITIONS.index("gate")
    at = {
        "R1": np.concatenate([hist[k]["R1"] for k in keys], 1)[:, cnt],
        "attn_dist": np.concatenate([hist[k]["attn_dist"] for k in keys], 1)[:, cnt],
        "gate": np.concatenate([hist[k]["attn"][..., GATE] for k in keys], 1)[:, cnt],
    }
    matched = float(loss.min(0).max()) if cnt.any() else np.nan  # none counted: nothing to read
    read = {n: matched_loss.at_matched_loss(loss, v, matched) for n, v in at.items()}
    seed_all = np.concatenate([sweep["ov"]["seed"]] * len(keys))[cnt]
    r_all = np.concatenate([sweep["ov"]["r"]] * len(keys))[cnt]
    qk_all = np.repeat(cfg.qk_kinds, sweep["ov"].K)[cnt]
    rd = cfg.readings
    corr = {
        n: statistics.trend_test(
            read[n], read["R1"], seed_all, "two-sided", rd.n_perm, rd.n_boot, rd.stat_seed
        )
        for n in ("gate", "attn_dist")
    }
    end = {
        p: {qk: where_counted(summary["ov", qk], f"{p}_end") for qk in cfg.qk_kinds}
        for p in ("gate", "anchor")
    }
    rate_in = [
        i
        for i in range(len(cfg.r_grid))
        if all(np.isfinite(end["gate"][qk][i]).any() for qk in cfg.qk_kinds)
    ]
    lo_r, hi_r = (rate_in[0], rate_in[-1]) if rate_in else (None, None)  # None: no counted rate
    ends = {
        p: [
            float(np.nanmean([v[qk][i] for qk in cfg.qk_kinds])) if rate_in else np.nan
            for i in (lo_r, hi_r)
        ]
        for p, v in end.items()
    }
    numbers = (
        dict(matched=matched)
        | {f"corr_{n}_words": rho_words(c) for n, c in corr.items()}
        | {f"end_{p}_{w}": v[i] for p, v in ends.items() for i, w in enumerate(("slow", "fast"))}
        | dict(
            gate_min=float(np.min(read["gate"])) if cnt.any() else np.nan,
            gate_max=float(np.max(read["gate"])) if cnt.any() else np.nan,
            end_r_slow=cfg.r_grid[lo_r] if rate_in else np.nan,
            end_r_fast=cfg.r_grid[hi_r] if rate_in else np.nan,
        )
    )
    return Matched(matched, read, r_all, qk_all, corr, ends, numbers)


def trend_signs(matched: Matched) -> dict:
    """Per attention summary: does the interval of its correlation with R1 exclude 0?"""
    return {n: bool(c.lo > 0 or c.hi < 0) for n, c in matched.corr.items()}

"""The section on where the parity lives: Chapter 2's gated-parity-bit task with Chapter 2's
settings, four attention models (learned or no value path, 12 or 24 anchors), their
ablations and the race of the learned value path, each read per seed."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pandas as pd

from ...book.page import count, share, table
from ...data import tasks
from ...measure import rates
from ...measure import staircase as st
from ...training import models
from .. import ch02_context_staircase as ex2
from .. import config, staircase_runs

# The attention models of the section "Where the parity lives", by name: value path and
# task size. The staircase model of Chapter 2 is IDENTITY_24; the others are contrasts.
LEARNED_12, LEARNED_24 = "learned OV, 12 anchors", "learned OV, 24 anchors"
IDENTITY_12, IDENTITY_24 = "no OV, 12 anchors", "no OV, 24 anchors"
WHERE_MODELS = {
    LEARNED_12: ("learned", 0),
    LEARNED_24: ("learned", 1),
    IDENTITY_12: ("identity", 0),
    IDENTITY_24: ("identity", 1),
}
# The ablations, on the main contrast and on the staircase model.
FREEZE_E, FREEZE_ATTN = "embedding frozen", "attention frozen"
ABLATED = (LEARNED_12, IDENTITY_24)


def where_row(stairs, m, seed_index: int, floor1: float) -> dict:
    """One seed of one run of the section: escape, order-1 stair and the probes at the end.

    ``stairs`` is the arm's :class:`lib.measure.staircase.Stairs`, ``m`` its metrics
    (:meth:`lib.measure.staircase.BitRun.arm`).
    """
    k = seed_index
    row = {
        "escape 1": stairs.escapes[1][k],
        "onset 1": stairs.onsets[1][k],
        "stair": bool(stairs.climbs_per_seed()[k]),
        "bit-1 loss, end": m["bit1"][-1, k],
        "R1, end": m["R1"][-1, k],
        "R1 of E W_V W_O, end": m["R1_ov"][-1, k] if "R1_ov" in m else float("nan"),
    }
    for probe in ("probe_E", "probe_attn", "probe_mlp"):
        row[probe + ", end"] = m[probe][-1, k]
    row["R1 floor"] = floor1
    return row


def chapter2_config():
    """Chapter 2's configuration at this scale: its task and training settings."""
    return config(ex2)


def where_tasks(cfg, cfg2) -> dict:
    """Per task size (anchors): ``(data, layout, targets, label-permutation null)``."""
    out = {}  # anchors -> (data, layout, targets, label-permutation null)
    for n_a in cfg.where.anchors:
        data, lay = tasks.gated_parity_bits(n_keys=cfg2.n_keys, n_anchors=n_a)
        tg = st.parity_targets(data, lay)
        out[n_a] = (data, lay, tg, st.label_null(data, lay, cfg.where.null_perm))
    return out


def where_run(cfg, cfg2, tasks_, device, name, attention_frozen=False, **kw):
    """One of the section's runs (every seed of Chapter 2, small init), with probes, read
    against its own permutation floor: a :class:`lib.measure.staircase.BitRun`."""
    ov, i = WHERE_MODELS[name]
    data, lay, tg, null = tasks_[cfg.where.anchors[i]]
    shape = dict(context_len=data.X.shape[1], n_out=data.n_labels, d_mlp=cfg2.d_hidden)
    model = models.Transformer(data.vocab_size, cfg2.d_model, ov=ov, **shape)
    attn_w = [n for n, s in model.specs().items() if s.group in ("qk", "ov")]
    frozen = tuple(attn_w) if attention_frozen else ()
    qk_lr = {} if attention_frozen else {"qk": cfg2.lr * cfg2.r}
    adam = dict(optimizer="adam", lr=cfg2.lr, log_at=cfg2.n_logs, device=device)
    args = (model, data, lay, tg, cfg2.seeds, [cfg2.gamma], cfg.where.steps)
    kw = dict(zero_frozen=("P",), frozen=frozen, group_lr=qk_lr, probes=True, desc=name) | kw
    return staircase_runs.run_bits(*args, null=null, **kw, **adam)  # read against its own floor


def run_where(cfg, cfg2, tasks_, device):
    """Every run of the section: ``(race, where)``, the race's ensemble of the learned-OV
    24-anchor model, and each (model, condition) -> its run ("trained" or an ablation)."""
    run = lambda name, **kw: where_run(cfg, cfg2, tasks_, device, name, **kw)
    # The race runs the learned-OV 24-anchor model as an ensemble, each seed as copies
    # whose initial weights differ by a relative copy_rel; its copy 0 (the seeds themselves,
    # probed) is that model's trained run here.
    race = run(LEARNED_24, copies=cfg.where.copies, copy_rel=cfg.where.copy_rel)
    where = {
        (name, "trained"): race.copy(0) if name == LEARNED_24 else run(name)
        for name in WHERE_MODELS
    }
    for name in ABLATED:
        where[(name, FREEZE_E)] = run(name, freeze_at={"E": cfg.where.freeze_step})
        where[(name, FREEZE_ATTN)] = run(name, attention_frozen=True)
    return race, where


def where_reading(cfg, cfg2, where) -> SimpleNamespace:
    """Per run: its stairs and metrics (``where_stairs``), bit 1's escape per seed (``esc``),
    whether each seed climbs (``climbs``), the metrics at the end (``end``); per ablated
    model, whether the freeze point is after order 0 and on plateau 1 (``at_freeze``); per
    trained model, its peak R1 over its floor (``margin``)."""
    where_stairs = {
        key: (run.stairs(cfg2.gamma), run.arm(cfg2.gamma)[1]) for key, run in where.items()
    }
    # The freeze point: the order-0 stair has come and bit 1 is still on its plateau, per seed.
    at_freeze = {}
    for name in ABLATED:
        run = where[(name, "trained")]
        steps_w, m = run.arm(cfg2.gamma)
        i = (
            np.searchsorted(steps_w, cfg.where.freeze_step, side="right") - 1
        )  # last log <= freeze step
        at_freeze[name] = (m["R0"][i] > run.floor[0]) & (m["bit1"][i] >= 0.9 * np.log(2))
    esc = {key: s.escapes[1] for key, (s, m) in where_stairs.items()}
    climbs = {key: np.array(s.climbs_per_seed()) for key, (s, m) in where_stairs.items()}
    end = {key: {k: m[k][-1] for k in m} for key, (s, m) in where_stairs.items()}
    # How far above its permutation floor each trained model's order-1 stair tops out.
    margin = {
        key: np.nanmax(m["R1"][1:], 0) / where[key].floor[1]
        for key, (s, m) in where_stairs.items()
        if key[1] == "trained"
    }
    return SimpleNamespace(
        where_stairs=where_stairs,
        at_freeze=at_freeze,
        esc=esc,
        climbs=climbs,
        end=end,
        margin=margin,
    )


def where_table(cfg2, where, reading):
    """Every seed of every run at the end of training: escape, onset, R1 and the probes."""
    rows = []
    for (name, cond), (s, m) in reading.where_stairs.items():
        for k, seed in enumerate(cfg2.seeds):
            row = where_row(s, m, k, where[(name, cond)].floor[1])
            rows.append({"model": name, "run": cond, "seed": seed} | row)
    where_df = pd.DataFrame(rows)
    return table(where_df, [c.replace(", end", "") for c in where_df.columns])


def where_settings(cfg) -> dict:
    """The section's task size, freeze step and budget."""
    return dict(
        where_n_big=cfg.where.anchors[1],
        freeze_step=cfg.where.freeze_step,
        where_steps=cfg.where.steps,
    )


# The runs the text reads, by a short name: trained, embedding frozen, attention frozen.
TRAINED_RUNS = {
    "L12": (LEARNED_12, "trained"),
    "L24": (LEARNED_24, "trained"),
    "I12": (IDENTITY_12, "trained"),
    "I24": (IDENTITY_24, "trained"),
}
FROZEN_RUNS = {
    "L12_fE": (LEARNED_12, FREEZE_E),
    "I24_fE": (IDENTITY_24, FREEZE_E),
    "I24_fA": (IDENTITY_24, FREEZE_ATTN),
}
PROBED_RUNS = {
    "L12": (LEARNED_12, "trained"),
    "I24": (IDENTITY_24, "trained"),
    "I24_fE": (IDENTITY_24, FREEZE_E),
}
PROBES = ("probe_E", "probe_attn", "probe_mlp")


def where_numbers(reading) -> dict:
    """Per run the text reads: seeds that climb and that learn bit 1 ("k of n"), the final
    sign-bit loss per seed, and the probes' range over seeds (glue with prefix where_)."""
    climbs, esc, end = reading.climbs, reading.esc, reading.end
    # "k of n" seeds, in words when none
    seeds_of = lambda v: f"{int(np.sum(v))} of {len(v)}" if np.sum(v) else f"none of the {len(v)}"
    span = lambda v: f"{v.min():.2f}-{v.max():.2f}"  # over seeds
    runs = TRAINED_RUNS | FROZEN_RUNS
    out = {f"climb_{short}": seeds_of(climbs[key]) for short, key in runs.items()}
    out |= {f"learned_{short}": seeds_of(np.isfinite(esc[key])) for short, key in runs.items()}
    bit1 = {f"bit1_{short}": end[key]["bit1"] for short, key in FROZEN_RUNS.items()}
    out |= {k: ", ".join(f"{v:.2f}" for v in b) for k, b in bit1.items()}
    out |= {
        f"{pr}_{short}": span(end[key][pr]) for short, key in PROBED_RUNS.items() for pr in PROBES
    }
    return out


def race_reading(cfg2, race) -> SimpleNamespace:
    """The race on the learned-OV 24-anchor ensemble: per seed and copy whether bit 1
    escapes (``race_esc``), per seed the rates of escaping and climbing (``race_rates``),
    and the seeds whose copies disagree (``mixed``)."""
    race_stairs = race.stairs(cfg2.gamma)
    race_esc = race.per_seed(np.isfinite(race_stairs.escapes[1]))  # (seeds, copies)
    race_climb = race.per_seed(np.array(race_stairs.climbs_per_seed()))
    race_rates = {"escape": rates.climb_rates(race_esc), "climb": rates.climb_rates(race_climb)}
    mixed = [0 < r.k < r.n for r in race_rates["escape"]]  # seeds whose copies disagree
    return SimpleNamespace(race_esc=race_esc, race_rates=race_rates, mixed=mixed)


def race_numbers(cfg, race) -> dict:
    """The race's size and outcome (glue with prefix where_)."""
    return dict(
        race_rel=cfg.where.copy_rel,
        race_copies=cfg.where.copies,
        race_mixed=count(int(np.sum(race.mixed)), "seed"),
        race_escape_all=share(int(race.race_esc.sum()), race.race_esc.size),
    )


def race_table(cfg2, race):
    """Per seed of the learned-OV 24-anchor model: the share of copies that escape and that
    climb, with their Wilson intervals."""
    rr = race.race_rates
    return table(
        [
            [seed, rr["escape"][k].interval(), rr["climb"][k].interval()]
            for k, seed in enumerate(cfg2.seeds)
        ],
        ["seed", "P(bit 1 escapes)", "P(order-1 stair)"],
    )


def margin_numbers(reading) -> dict:
    """The weakest seed's peak R1 over its floor, per trained model the text reads (glue
    with prefix where_margin_)."""
    return {short: float(reading.margin[TRAINED_RUNS[short]].min()) for short in ("L12", "I24")}

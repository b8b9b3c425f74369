"""The numbers a page reads from the chapter's results: glue dicts and table rows of the
escape, the order of events, the probe, the trap and its sweep, each from the results
that :mod:`lib.experiments.selective_escape` and :mod:`lib.experiments.selective_trap`
return."""

from __future__ import annotations

import numpy as np

from ...book.page import interval, listing, share
from ...measure import rates
from .. import ChapterConfig

# The arms on the task, in the order of the figure and the table, by their label.
ARMS = {
    "learned": "learned QK",
    "learned 0.5": "learned, γ_QK 0.5",
    "frozen 0.5": "frozen, γ_QK 0.5",
    "frozen 0.75": "frozen, γ_QK 0.75",
    "frozen": "frozen, small init",
    "uniform": "uniform",
}
# The pairs of events of the order table: (first, second) by the key of their sign test.
EVENTS = {
    "event-onset1": ("rule-specific attention event", "order-1 onset"),
    "event-escape": ("rule-specific attention event", "escape"),
    "onset1-escape": ("order-1 onset", "escape"),
    "leave-blind": ("contrast reaches δ, task", "contrast reaches δ, order-blind"),
}


def words(e) -> str:
    """An estimate with its interval, as words: ``0.38 [0.33, 0.44]``."""
    return interval(*e.interval())


def rate(hits) -> tuple[float, float, float]:
    """The share of ``hits`` that are true, with its Wilson interval."""
    return rates.wilson(int(np.sum(hits)), len(hits)).interval()


def setup_numbers(cfg: ChapterConfig) -> dict:
    """The seeds and horizons of the arms."""
    return dict(
        n_seeds=len(cfg.seeds), slow_steps=cfg.arms.slow_steps, fast_steps=cfg.arms.fast_steps
    )


def task_numbers(cfg: ChapterConfig, data, X) -> dict:
    """The task's size: anchors, offsets, sequences and distinct sequences ``X``."""
    return dict(n_anchors=cfg.task.n_anchors, width=cfg.task.width, n_seq=len(data), n_fit=len(X))


def arm_settings(cfg: ChapterConfig) -> dict:
    """The arms' optimizer, init and reading levels."""
    return dict(
        lr=cfg.lr,
        gamma=cfg.gamma,
        frozen_gammas=listing(cfg.arms.frozen_gammas, noun=""),
        escape_frac=cfg.readings.escape_frac,
        trap_frac=cfg.readings.trap_frac,
    )


def escape_rows(esc: dict) -> list[dict]:
    """Per arm: horizon, seeds escaped and trapped, median escape, speed-up of learned."""
    return [
        {
            "arm": ARMS[n],
            "horizon": esc["horizons"][n],
            "escaped": rate(esc["escaped"][n]),
            "trapped": rate(esc["trapped"][n]),
            "median escape": esc["median"][n].interval(),
            "speed-up of learned": esc["speedup"][n].interval() if n in esc["speedup"] else None,
        }
        for n in ARMS
    ]


def escape_numbers(cfg: ChapterConfig, esc: dict, grid: float) -> dict:
    """The speed-ups, shares and medians of the escape; ``grid`` is the logging grid's
    relative spacing near the learned arm's median escape."""
    sp = esc["speedup"]
    return dict(
        speedup_frozen_words=words(sp["frozen"]),
        speedup_05_words=words(sp["frozen 0.5"]),
        speedup_075_words=words(sp["frozen 0.75"]),
        frozen_escaped_words=share(esc["escaped"]["frozen"].sum(), len(cfg.seeds)),
        trapped_learned_words=interval(*rate(esc["trapped"]["learned"])),
        trapped_learned=share(esc["trapped"]["learned"].sum(), len(cfg.seeds)),
        median_learned=words(esc["median"]["learned"]),
        median_frozen=words(esc["median"]["frozen"]),
        median_matched=words(esc["median"][f"learned {cfg.arms.matched_gamma:g}"]),
        matched_words=words(esc["matched"]),
        strict_words=words(esc["strict"]),
        matched_gamma=cfg.arms.matched_gamma,
        grid_pct=f"{grid:.0%}",
        frozen_trapped=int(
            sum(esc["trapped"][n].sum() for n in esc["trapped"] if n.startswith("frozen"))
        ),
    )


def order_numbers(cfg: ChapterConfig, order: dict) -> dict:
    """The rule-specific attention event's floor and share, and the onset-escape sign test."""
    tests, fired = order["tests"], np.isfinite(order["event"])
    return dict(
        n_sham=cfg.arms.n_sham,
        null_pct=f"{cfg.readings.pair_q:.0%}",
        delta=cfg.readings.delta,
        pair_floor=order["floor"],
        event_words=share(fired.sum(), fired.size),
        event_seeds=listing(np.asarray(cfg.seeds)[fired]),
        sham_fires=order["sham_fires"],
        onset_before=tests["onset1-escape"][0],
        onset_after=tests["onset1-escape"][1],
        onset_tied=tests["onset1-escape"][2],
        onset_p=tests["onset1-escape"][3],
    )


def order_rows(order: dict) -> list[dict]:
    """Per pair of events: seeds with the first before, after and tied, and the sign test."""
    tests = order["tests"]
    return [
        {"first": a, "second": b, "before": t[0], "after": t[1], "tied": t[2], "sign test p": t[3]}
        for k, (a, b) in EVENTS.items()
        for t in [tests[k]]
    ]


def probe_groups(init_E, fast, fast_params, slow_params, order) -> dict:
    """The groups of embeddings the parity probe reads, ``{name: E}``: at init (``init_E``),
    the learned arm with and without an order-1 onset, the order-blind arm and the arm
    frozen at the small init."""
    learned_E, stair = fast.params_of("learned", fast_params)["E"], np.isfinite(order["onset1"])
    return {
        "at init": init_E,
        "learned, order-1 onset": learned_E[stair],
        "learned, no order-1 onset": learned_E[~stair],
        "order-blind": fast.params_of("blind", fast_params)["E"],
        "frozen, small init": slow_params["E"],
    }


def probe_numbers(cfg: ChapterConfig, probe: dict, order: dict) -> dict:
    """The probe's floor and its median accuracy on the controls and the seeds with no
    order-1 onset."""
    pfloor, pmed, stair = probe["floor"], probe["median"], np.isfinite(order["onset1"])
    return dict(
        probe_floor=pfloor,
        n_folds=cfg.probe.n_folds,
        n_probe_perm=cfg.probe.n_perm,
        probe_fit=f"{cfg.probe.n_folds - 1} in {cfg.probe.n_folds}",
        no_stair=share((~stair).sum(), stair.size),
        probe_no_stair=pmed.get("learned, no order-1 onset", np.nan),
        probe_blind=pmed["order-blind"],
        probe_init=pmed["at init"],
    )


def probe_rows(probe: dict) -> list[dict]:
    """Per group: its seeds, the median accuracy and whether it clears the floor."""
    pfloor, pmed = probe["floor"], probe["median"]
    return [
        {
            "embeddings": n,
            "seeds": len(a),
            "median accuracy": pmed[n],
            "above the floor": pmed[n] > pfloor,
        }
        for n, a in probe["accuracy"].items()
    ]


def lock_numbers(lock: dict, trap) -> dict:
    """In the trapped seeds ``trap``: the largest gap between bit loss and locked share, and
    the largest force on the scores; the median force in the others."""
    return dict(
        lock_gap=float(np.abs(lock["bit"] - lock["locked"])[trap].max()) if trap.any() else np.nan,
        stuck_force=float(lock["force"][trap].max()) if trap.any() else np.nan,
        free_force=float(np.median(lock["force"][~trap])),
    )


def lock_rows(cfg: ChapterConfig, lock: dict, trap) -> list[dict]:
    """Per trapped seed: bit loss, anchors locked on the key, largest force on the scores."""
    return [
        {
            "seed": s,
            "trapped": bool(t),
            "bit loss / ln 2": b,
            "anchors locked on the key": k,
            "largest force on the scores": f,
        }
        for s, t, b, k, f in zip(
            cfg.seeds, trap, lock["bit"], lock["locked"], lock["force"], strict=True
        )
        if t
    ]

"""E4's readings: the auxiliary signatures' target-structure R (a count), the arms' final
R and accuracies, how soon each arm generalizes, and the injection check."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...book import page
from ...data import signatures as sig
from ...measure import metrics as M
from ...measure import onsets
from .design import A4


def signature_R(e4, X, y) -> float:
    """R_cos of the members' centred order-0 signatures on ``(X, y)`` with the target groups."""
    sg, V4 = e4.sg, e4.model.vocab_size
    phi = sig.label_signature(X, y, V4, V4)[sg.members]
    phi = sig.centre(phi, "marginal", sig.label_marginal(X, y, V4, V4))
    return float(M.r_cos(phi, e4.target, subtract_mean_row=False))


def e4_rows(h4, sweep, inits, fit_acc: float) -> list[dict]:
    """Final target-structure R and accuracies, and steps to the fit accuracy, per init and arm."""
    rows = []
    for init in inits:
        for arm in A4:
            ks = sweep.index(arm=arm, init=init)
            fit = onsets.onset_step(h4.steps, h4["train_acc"][:, ks], fit_acc)
            rows.append(
                {
                    "init": init,
                    "arm": arm,
                    "R (end)": h4["R"][-1, ks].mean(),
                    "train acc": h4["train_acc"][-1, ks].mean(),
                    "unseen pairs": h4["unseen_acc"][-1, ks].mean(),
                    "held-out member": h4["held_acc"][-1, ks].mean(),
                    "steps to 95% train": np.nanmean(np.asarray(fit, dtype=float)),
                }
            )
    return rows


def reach_steps(steps, curves, levels) -> np.ndarray:
    """Per seed j, the first logged step at which ``curves[:, j]`` reaches ``levels[j]``."""
    return np.array(
        [onsets.onset_step(steps, curves[:, j], levels[j]) for j in range(len(levels))], dtype=float
    )


def stays_above_from(steps, above) -> int:
    """The first logged step from which ``above`` (one bool per logged step) stays true."""
    last_below = np.nonzero(~above)[0]
    if len(last_below) and last_below[-1] + 1 < len(above):
        return int(steps[last_below[-1] + 1])
    return int(steps[0])


@dataclass
class E4Reading:
    """E4's table rows (by (init, arm) too), every curve labelled (dims step, arm, init,
    seed) and its last step, the steps at which the aux and no-aux arms reach the no-aux
    arm's final accuracy beyond training, the seeds where aux is sooner, the final accuracy
    beyond training, the step from which aux stays above no-aux on held-out members, and
    the steps to 95% training accuracy of the aux and no-aux arms."""

    rows: list
    by_arm: dict
    ds: object
    end: object
    reach: dict
    reach_none: dict
    sooner: dict
    beyond_end: dict
    cross: dict
    fit_steps: dict


def read_e4(cfg, e4, inits: dict) -> E4Reading:
    """E4's readings from its run."""
    h4, sw4, seeds = e4.h, e4.sweep, list(cfg.seeds)
    rows4 = e4_rows(h4, sw4, inits, cfg.fit_acc)
    e4v = {(r["init"], r["arm"]): r for r in rows4}
    ds4 = sw4.dataset(h4)  # every curve, labelled: dims (step, arm, init, seed)
    end4 = ds4.isel(step=-1)
    # Speed: the step at which the aux arm first reaches, on every pair not trained on, the
    # accuracy the no-aux arm (same seed) has at the end, against the step at which the
    # no-aux arm itself first gets there.
    reach, reach_none = {}, {}
    for init in inits:
        beyond_curve = {arm: ds4["beyond_acc"].sel(arm=arm, init=init).values for arm in A4}
        a_none = end4["beyond_acc"].sel(arm="none", init=init).values
        reach[init] = reach_steps(h4.steps, beyond_curve["aux"], a_none)
        reach_none[init] = reach_steps(h4.steps, beyond_curve["none"], a_none)
    sooner = {init: np.array(seeds)[reach[init] < reach_none[init]] for init in inits}
    beyond_end = {
        (init, arm): end4["beyond_acc"].sel(arm=arm, init=init).values
        for init in inits
        for arm in A4
    }
    # The first logged step from which the aux arm's held-out accuracy (seed mean) stays
    # above the no-aux arm's.
    held = {
        init: {arm: ds4["held_acc"].sel(arm=arm, init=init).values.mean(1) for arm in A4}
        for init in inits
    }
    cross = {
        init: stays_above_from(h4.steps, held[init]["aux"] > held[init]["none"]) for init in inits
    }
    fit_steps = {
        init: [e4v[(init, arm)]["steps to 95% train"] for arm in ("aux", "none")] for init in inits
    }
    return E4Reading(rows4, e4v, ds4, end4, reach, reach_none, sooner, beyond_end, cross, fit_steps)


def e4_numbers(cfg, e4, r4: E4Reading, inits: dict) -> dict:
    """E4's numbers for glue."""
    cols = {
        "R (end)": "R",
        "held-out member": "held",
        "unseen pairs": "unseen",
        "steps to 95% train": "fit",
    }
    out = {
        f"{tag}_{init}_{arm}": float(r[key])
        for (init, arm), r in r4.by_arm.items()
        for key, tag in cols.items()
    }
    out |= (
        {f"reach_{init}": float(np.mean(r4.reach[init])) for init in inits}
        | {f"reach_none_{init}": float(np.mean(r4.reach_none[init])) for init in inits}
        | {
            f"beyond_{init}_{arm}": float(r4.beyond_end[(init, arm)].mean())
            for init in inits
            for arm in ("aux", "none")
        }
        | {f"sooner_{init}": page.listing(r4.sooner[init]) for init in inits}
        | {f"cross_{init}": r4.cross[init] for init in inits}
        | dict(n_train=len(e4.sg.train[0]))
    )
    out = {f"e4_{k}": v for k, v in out.items()}
    keys = ("steps", "keep", "main_batch", "aux_batch")
    return out | {f"e4_{key}": getattr(cfg.e4, key) for key in keys}


def every_seed(a, b) -> bool:
    """Whether ``a`` is above ``b`` in every seed."""
    return bool(np.all(np.asarray(a) > np.asarray(b)))


def injection_helps(end4, arm: str, init: str) -> bool:
    """In every seed, the arm ends above the no-aux arm on the target-structure R, on the
    held-out members and on all pairs outside training."""
    end, end0 = end4.sel(arm=arm, init=init), end4.sel(arm="none", init=init)
    return all(every_seed(end[m], end0[m]) for m in ("R", "held_acc", "beyond_acc"))

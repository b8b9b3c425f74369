"""Chapter 9's theory line: the learned-OV model's exponents in r of the attention's early
distance from uniform, of the step at which it leaves uniform and of the escape step, against
the values the Adam picture predicts."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .readings import exponent_words, rho_words, trend
from .runs import Runs
from .summary import exponent

# The theory line's exponents in r (factorized: products of two factors).
PREDICTED = {
    ("factorized", "D_early"): 2,
    ("collapsed", "D_early"): 1,
    ("factorized", "leave"): -1 / 2,
    ("collapsed", "leave"): -1 / 3,
    ("factorized", "escape1"): 0,
    ("collapsed", "escape1"): 0,
}


# ---------------------------------------------------------------------------
# The escape step: a theory line
# ---------------------------------------------------------------------------


@dataclass
class Theory:
    """The learned-OV model's exponents in r, ``fits[qk, name]`` over ``n_rates[qk, name]``
    rates; ``n_quasi[qk]``, the rates at which attention is still in its ball at the escape;
    and ``escape[qk]``, the two-sided trend test of the escape step against r."""

    fits: dict
    n_rates: dict
    n_quasi: dict
    escape: dict


def read_theory(runs: Runs, cfg) -> Theory:
    """The exponents of the early distance, the leave step and the escape step in r."""
    r_ov = np.array(cfg.r_grid)
    fits, n_rates, n_quasi, escape = {}, {}, {}, {}
    for qk in cfg.qk_kinds:
        ds = runs.summary["ov", qk]
        leave, esc = ds["leave"].values, ds["escape1"].values
        premise = {
            "D_early": np.ones_like(leave, dtype=bool),
            "leave": np.isfinite(leave),
            "escape1": np.ones_like(leave, dtype=bool),  # over every counted rate
        }
        for name, ok in premise.items():
            fits[qk, name], n_rates[qk, name] = exponent(ds, r_ov, name, ok, cfg)
        cnt = ds["counted"].values  # the theory's premise: attention in its ball at the escape
        quasi = cnt.any(1) & np.all((leave > esc) | ~cnt, axis=1)
        n_quasi[qk] = int(quasi.sum())
        escape[qk] = trend(runs, "ov", qk, "escape1", cfg, "two-sided")
    return Theory(fits, n_rates, n_quasi, escape)


def exponent_table(theory: Theory, cfg) -> list[dict]:
    """One row per exponent: its interval, its rates and its predicted value."""
    fitted = {
        "D_early": f"distance from uniform at step {cfg.readings.t_early}",
        "leave": "leave step",
        "escape1": "escape step",
    }
    return [
        {
            "QK": qk,
            "exponent of": fitted[n],
            "exponent [95% interval]": tuple(theory.fits[qk, n]),
            "rates": theory.n_rates[qk, n],
            "predicted": PREDICTED[qk, n],
        }
        for qk, n in theory.fits
    ]


def escape_flat(theory: Theory, cfg) -> dict:
    """Per QK parameterization: does the escape exponent's interval lie inside the tolerance?"""
    tol = cfg.readings.escape_flat_tol
    fits = theory.fits
    return {
        qk: bool(abs(fits[qk, "escape1"].lo) <= tol and abs(fits[qk, "escape1"].hi) <= tol)
        for qk in cfg.qk_kinds
    }


def slopes_ordered(theory: Theory) -> bool:
    """Does the factorized early slope's interval lie wholly above the collapsed one's?"""
    return bool(theory.fits["factorized", "D_early"].lo > theory.fits["collapsed", "D_early"].hi)


def theory_numbers(theory: Theory, cfg) -> dict:
    """The fit rules, the exponents in words, and the escape step's verdicts."""
    flat = escape_flat(theory, cfg)
    return (
        {f"n_quasi_{qk}": n for qk, n in theory.n_quasi.items()}
        | dict(
            min_fit_rates=cfg.readings.min_fit_rates,
            escape_flat_tol=cfg.readings.escape_flat_tol,
            t_early=cfg.readings.t_early,
        )
        | {
            f"fit_{n}_{qk}_words": exponent_words(theory.fits[qk, n], theory.n_rates[qk, n], cfg)
            for (qk, n) in theory.fits
        }
        | {f"flat_{qk}": "yes" if flat[qk] else "no" for qk in cfg.qk_kinds}
        | {f"escape_words_{qk}": rho_words(theory.escape[qk], False) for qk in cfg.qk_kinds}
        | dict(ordered_word="resolved" if slopes_ordered(theory) else "unresolved")
    )

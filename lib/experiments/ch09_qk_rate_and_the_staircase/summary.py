"""Chapter 9's per-instance numbers of a run: convergence, which instances count, the stairs'
onsets, the escape, where the readout attends, and the exponents in r."""

from __future__ import annotations

import numpy as np

from ...measure import onsets, plateaus, statistics
from ...training.sweep import Sweep

# Positions of the gated-parity-bit sequence [z, a, g]: the readout is at the gate.
POSITIONS = ("key", "anchor", "gate")


def stair_summary(h, sw: Sweep, floor: dict, cfg):
    """The per-instance numbers of one run as an ``xarray.Dataset`` over the sweep axes.

    ``converged`` (the final loss on the whole task is below ``cfg.readings.conv_frac * ln 2``),
    ``counted`` (converged, at a rate where more than half of the seeds converged),
    ``onset0``, ``onset1`` (:func:`lib.measure.onsets.stair_onsets` against the run's floor
    ``floor``, ``inf``: never above it), ``climbed`` (``onset1`` finite), ``escape1`` (:func:`lib.measure.onsets.escape_steps`),
    ``leave`` (first logged step at which the readout row's distance from uniform reaches
    ``cfg.readings.delta``; ``inf``: never), attention on each position at init, on the bit-1
    plateau (median over :func:`lib.measure.plateaus.plateau_mask`) and at the end, final ``R0``,
    ``R1``, ``loss``, the peak of ``R1``, the largest loss after the first logged step
    (``loss_peak``), and at the end the readout's largest attention weight
    (``attn_max_end``) and the norm of W_QK (``qk_norm_end``, with ``qk_norm_early`` at
    ``cfg.readings.t_early``).
    """
    import xarray as xr

    steps = h.steps
    on0 = onsets.stair_onsets(steps, h["R0"], floor[0])
    on1 = onsets.stair_onsets(steps, h["R1"], floor[1])
    esc = onsets.escape_steps(steps, h["bit1"])
    leave = onsets.onset_step(steps, h["attn_dist"], cfg.readings.delta).numpy()
    plateau = plateaus.plateau_mask(steps, h["bit1"], on0)
    converged = h["loss_all"][-1] < cfg.readings.conv_frac * np.log(2)
    conv_rs = converged.reshape(sw.shape)  # (r, seed)
    rate_counts = conv_rs.mean(1) > 0.5
    A = h["attn"]  # (n_logs, K, L)
    on_plateau = plateau.any(0)  # instances with a bit-1 plateau; NaN for the others
    A_plateau = np.full(A.shape[1:], np.nan)
    A_plateau[on_plateau] = np.nanmedian(np.where(plateau[..., None], A, np.nan)[:, on_plateau], 0)
    out = {
        "converged": converged,
        "counted": (conv_rs & rate_counts[:, None]).ravel(),
        "onset0": on0,
        "onset1": on1,
        "climbed": np.isfinite(on1),
        "escape1": esc,
        "leave": np.where(np.isnan(leave), np.inf, leave),
        "R0": h["R0"][-1],
        "R1": h["R1"][-1],
        "R1_peak": np.nanmax(h["R1"], 0),
        "loss": h["loss_all"][-1],
        "loss_peak": h["loss_all"][1:].max(0),
        "bit1_loss": h["bit1"][-1],
        "attn_max_end": h["attn_max"][-1],
        "qk_norm_end": h["qk_norm"][-1],
        "qk_norm_early": h.at("qk_norm", cfg.readings.t_early),
        "D_early": h.at("attn_dist", cfg.readings.t_early),
    }
    for j, pos in enumerate(POSITIONS):
        out[f"{pos}_init"] = A[0, :, j]
        out[f"{pos}_plateau"] = A_plateau[:, j]
        out[f"{pos}_end"] = A[-1, :, j]
    return xr.Dataset({n: sw.dataarray(v, n) for n, v in out.items()})


def where_counted(ds, name: str) -> np.ndarray:
    """``ds[name]`` as an (r, seed) float array with NaN where the instance does not count."""
    return np.where(ds["counted"].values, ds[name].values.astype(float), np.nan)


def per_instance_table(summaries: dict, names):
    """One row per (arm, r, seed) of the runs' summaries (``{arm: Dataset}``)."""
    import pandas as pd

    rows = [summaries[a][list(names)].to_dataframe().assign(arm=a) for a in summaries]
    return pd.concat(rows).reset_index().set_index(["arm", "r", "seed"])


def failed_instances(summaries: dict):
    """Every instance that did not converge, one row each (``{(model, qk): Dataset}``): its
    final and peak loss, the readout's largest attention weight and the norm of W_QK at the
    end, and the median norm of W_QK over the seeds that converged at the same rate (NaN
    where none did)."""
    import pandas as pd

    rows = []
    for (name, qk), ds in summaries.items():
        for r in ds["r"].values:
            at = ds.sel(r=r)
            ok = at["converged"].values
            ref = float(np.median(at["qk_norm_end"].values[ok])) if ok.any() else np.nan
            for s in at["seed"].values[~ok]:
                one = at.sel(seed=s)
                rows.append(
                    {
                        "model": name,
                        "qk": qk,
                        "r": float(r),
                        "seed": int(s),
                        "final_loss": float(one["loss"]),
                        "peak_loss": float(one["loss_peak"]),
                        "attn_max": float(one["attn_max_end"]),
                        "qk_norm": float(one["qk_norm_end"]),
                        "qk_norm_converged": ref,
                    }
                )
    cols = ["model", "qk", "r", "seed", "final_loss", "peak_loss", "attn_max", "qk_norm"]
    return pd.DataFrame(rows, columns=[*cols, "qk_norm_converged"])


def exponent(ds, r_grid, name: str, premise: np.ndarray, cfg):
    """The exponent in r of the median of ``name`` over seeds, with its bootstrap interval
    (:func:`lib.measure.statistics.loglog_exponent`), over the counted rates at which ``premise``
    ((r, seed) booleans) holds in every counted seed. Returns ``(Interval, n_rates)``; the
    exponent is NaN where fewer than ``cfg.readings.min_fit_rates`` rates qualify."""
    Y = where_counted(ds, name)
    cnt = ds["counted"].values
    ok = cnt.any(1) & np.all(premise | ~cnt, axis=1)
    Y[~ok] = np.nan
    fit = statistics.loglog_exponent(
        r_grid, Y, cfg.readings.min_fit_rates, cfg.readings.n_boot, cfg.readings.stat_seed
    )
    return fit, int(ok.sum())

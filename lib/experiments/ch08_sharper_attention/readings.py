"""What is read from the Scan-and-Snap runs: the baselines, attention at the matched loss,
the Fig 2 panels, the fixed-attention readings (Fig 3) and the projection onto the
reduced model; each reading comes with its numbers for glue and its table."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from ...book.page import listing, table
from ...data import tasks
from ...theory import reduced
from .. import qkov_official as official
from .. import qkov_readings as readings
from .settings import CODE_PANEL, CODE_RATIO, code_panel_rows, nearest_ratio

METRIC_KEYS = ("distinct", "entropy", "separability", "p_true", "query_copy")


def baselines(cfg) -> dict:
    """Uniform attention's distinct mass and entropy, and the sequence length."""
    uniform_mass = tasks.scan_snap_uniform_distinct_mass(cfg.runs.seq_len)
    uniform_entropy = float(np.log(cfg.runs.seq_len - 1))
    return dict(
        uniform_mass=uniform_mass, uniform_entropy=uniform_entropy, seq_len=cfg.runs.seq_len
    )


def similar_loss(syn, cfg) -> SimpleNamespace:
    """The matched held-out loss ``loss_star`` (the largest final loss of the sweep's runs),
    the groups read there (``groups``: label -> run and instance mask), the means at it
    (``mean_at``), each group's ``lift`` above uniform, the uniform copy mass, and the Fig 2
    panels (``fig2_panels``, ``panel_titles``, with the code's ratio or the sweep's
    nearest, ``r_code``)."""
    stats, R_inst = syn.stats, syn.R_inst
    uniform_mass = tasks.scan_snap_uniform_distinct_mass(cfg.runs.seq_len)
    final_losses = np.concatenate(
        [stats[n]["loss"][-1] for n in ("FAFO", "FACO", "CAFO")]
        + [stats["CACO"]["loss"][-1, syn.in_grid]]
    )
    loss_star = float(final_losses.max())  # the control (r < 1) is read on its own
    r1 = R_inst == 1.0
    groups = {  # label -> (run name, instance mask)
        "FAFO": ("FAFO", slice(None)),
        "FACO": ("FACO", slice(None)),
        "CAFO": ("CAFO", slice(None)),
        "CACO": ("CACO", r1),
    }
    mean_at = readings.means_at_matched_loss(stats, groups, loss_star, METRIC_KEYS)
    lift = {grp: mean_at[grp]["distinct"] - uniform_mass for grp in groups}  # above uniform
    evalb = syn.evalb
    uniform_copy = float((evalb.X == evalb.X[:, -1:]).float().mean())
    r_code = nearest_ratio(syn.r_grid, CODE_RATIO)  # the code's r = 5, or the sweep's nearest
    fig2_panels = {  # the heatmap panels: run and instance mask
        "FAFO": ("FAFO", slice(None)),
        "CAFO": ("CAFO", slice(None)),
        "FACO": ("FACO", slice(None)),
        "CACO, r=1": ("CACO", r1),
        CODE_PANEL: ("CACO", R_inst == r_code),
    }
    panel_titles = {
        "FAFO": "FAFO: both factorized",
        "CAFO": "CAFO: OV factorized",
        "FACO": "FACO: QK factorized",
        "CACO, r=1": "CACO: collapsed, r = 1",
        CODE_PANEL: f"CACO: collapsed, r = {r_code:g}",
    }
    return SimpleNamespace(
        uniform_mass=uniform_mass,
        uniform_entropy=float(np.log(cfg.runs.seq_len - 1)),
        loss_star=loss_star,
        groups=groups,
        mean_at=mean_at,
        lift=lift,
        uniform_copy=uniform_copy,
        r_code=r_code,
        fig2_panels=fig2_panels,
        panel_titles=panel_titles,
    )


def similar_loss_numbers(sim, syn, cfg) -> dict:
    """The numbers of the matched-loss reading, for glue."""
    mean_at, lift = sim.mean_at, sim.lift
    return (
        {
            f"{grp}_{k}": mean_at[grp][k]
            for grp in sim.groups
            for k in ("distinct", "entropy", "separability")
        }
        | {f"{grp}_lift": v for grp, v in lift.items()}
        | dict(
            fo_lift_max=max(abs(lift["FAFO"]), abs(lift["CAFO"])),
            loss_star=sim.loss_star,
            init_loss=float(syn.stats["CACO"]["loss"][0].mean()),
            steps=cfg.runs.steps,
            faco_steps=cfg.runs.faco_steps,
            code_lr=official.FIG2_LR,
            lr_vs_code=cfg.runs.lr / official.FIG2_LR,
            uniform_copy=sim.uniform_copy,
        )
    )


def similar_loss_table(sim):
    """The table of every group's means at the matched loss, with uniform attention."""
    return table(
        [
            (grp, d["distinct"], d["entropy"], d["separability"], d["p_true"], d["query_copy"])
            for grp, d in sim.mean_at.items()
        ]
        + [
            (
                "uniform attention",
                sim.uniform_mass,
                sim.uniform_entropy,
                None,
                None,
                sim.uniform_copy,
            )
        ],
        ["model", "distinct mass", "entropy", "separability", "p(right token)", "query copies"],
    )


def fig2_reading(syn, sim, cfg) -> SimpleNamespace:
    """One row per Fig 2 panel and reading (``rows``: the steps read, our distinct-mass
    bins, the status), the panels never read at the code's loss (``not_reached``), the
    code panel's name (``code_panel``) and the statuses for glue (``read``)."""
    rows, not_reached = readings.fig2_rows(
        syn.stats, syn.runs, sim.fig2_panels, sim.loss_star, cfg.runs.lr
    )
    rows = code_panel_rows(rows, sim.r_code)  # named by its own ratio where not the code's
    code_panel = f"CACO, r={sim.r_code:g}"
    panel_tags = {"FAFO": "FAFO", "FACO": "FACO", code_panel: "CACO5"}  # the code saved these
    fig2_read = {}  # fig2_<panel>_<matched|code>: the status; ..._mode: our modal bin
    for r in (r for r in rows if r["panel"] in panel_tags):
        at = "matched" if r["reading"] == "matched loss" else "code"
        key = f"fig2_{panel_tags[r['panel']]}_{at}"
        fig2_read |= {key: r["status"], f"{key}_mode": r["our mode"]}
    return SimpleNamespace(
        rows=rows, not_reached=not_reached, code_panel=code_panel, read=fig2_read
    )


def fig2_bins(fig2):
    """Every Fig 2 row with its bins, the steps read and the training loss there, as
    Markdown (for the fold below the table)."""
    return table(fig2.rows)


def fig2_table(fig2):
    """The Fig 2 table: per panel and reading, our modal bin, the code's, the status."""
    return table(fig2.rows, ["panel", "reading", "our mode", "official mode", "status"])


def fig2_numbers(fig2, cfg) -> dict:
    """The Fig 2 statuses and the settings the text quotes beside them, for glue."""
    caco_flow = official.FIG2_CACO_FLOW_TIME  # the code's r = 5 CACO: a fixed length
    return fig2.read | dict(
        fig2_not_reached=listing(fig2.not_reached, noun="", none="none"),
        batch=cfg.runs.batch_size,
        n_seeds=len(cfg.runs.seeds),
        eval_n=cfg.eval_n,
        log_gap=cfg.runs.steps // cfg.runs.n_logs,
        caco_flow=caco_flow,
        caco_flow_step=int(caco_flow / cfg.runs.lr),
    )


def fixed_reading(fixed, cfg) -> SimpleNamespace:
    """The fixed-attention readings: the incentive over training (``incentive``), how much
    of its peak it keeps (``persist``), the final losses (``fixed_final``), the code's
    (``official3``), the table of both (``fig3_table``), the gaps to the code's and the
    status (``fig3_status``), and the step of each peak."""
    hist = fixed.histories
    incentive = {ov: h["lg"][:, :, 1] for ov, h in hist.items()}  # (n_logs, n_alpha)
    persist = {ov: incentive[ov][-1] / incentive[ov].max(0) for ov in hist}
    fixed_final = {ov: h["lg"][-1, :, 0] for ov, h in hist.items()}
    official3 = readings.code_fig3(cfg.fixed.alphas)  # NaN at an alpha the code did not run
    fig3_table = readings.fig3_table(cfg.fixed.alphas, fixed_final)  # ours beside the code's
    ratio_gap = float(
        np.nanmax(np.abs(np.log(fig3_table["ratio, ours"] / fig3_table["ratio, code"])))
    )
    fig3_falls = {ov: bool(np.all(np.diff(v) < 0)) for ov, v in fixed_final.items()}
    fig3_abs_gap = max(float(np.nanmax(np.abs(fixed_final[ov] / official3[ov] - 1))) for ov in hist)
    # The status rule: both losses fall with alpha and every ratio is within the tolerance.
    fig3_status = (
        "reproduced"
        if all(fig3_falls.values()) and np.exp(ratio_gap) < cfg.fig3_ratio_tol
        else "not reproduced"
    )
    peak_step = {ov: h.steps[incentive[ov][:, 0].argmax()] for ov, h in hist.items()}
    return SimpleNamespace(
        incentive=incentive,
        persist=persist,
        fixed_final=fixed_final,
        official3=official3,
        fig3_table=fig3_table,
        ratio_gap=ratio_gap,
        fig3_falls=fig3_falls,
        fig3_abs_gap=fig3_abs_gap,
        fig3_status=fig3_status,
        peak_step=peak_step,
    )


def fixed_numbers(fx, fixed, cfg) -> dict:
    """The fixed-attention numbers the text quotes (at the smallest and the largest alpha),
    for glue."""
    ends = (0, len(fixed.alphas) - 1)  # the prose quotes the smallest and the largest alpha
    hist, incentive = fixed.histories, fx.incentive
    return (
        dict(
            gamma_torch=cfg.gamma_fixed,
            fixed_seq_len=cfg.fixed.seq_len,
            fixed_batch=cfg.fixed.batch_size,
            fixed_steps=cfg.fixed.steps,
            fixed_eval_n=cfg.fixed.eval_n,
            lr=cfg.runs.lr,
            fixed_flow_code=official.FIG3_FLOW_TIME,
            fixed_flow_ours=cfg.runs.lr * cfg.fixed.steps,
            fig3_status=fx.fig3_status,
            fig3_ratio_tol=cfg.fig3_ratio_tol,
            fig3_ratio_gap=float(np.exp(fx.ratio_gap)),
            fig3_abs_gap=100 * fx.fig3_abs_gap,
        )
        | {f"fixed_{ov}_{i}": float(fx.fixed_final[ov][i]) for ov in hist for i in ends}
        | {f"official_{ov}_{i}": float(fx.official3[ov][i]) for ov in hist for i in ends}
        | {
            f"ratio_{w}_{i}": float(fx.fig3_table[f"ratio, {w}"][i])
            for w in ("ours", "code")
            for i in ends
        }
        | {f"persist_{ov}": float(fx.persist[ov][0]) for ov in hist}
        | {f"peak_{ov}": float(incentive[ov][:, 0].max()) for ov in hist}
        | {f"peak_flow_{ov}": float(cfg.runs.lr * fx.peak_step[ov]) for ov in hist}
    )


def fixed_table(fx):
    """Our final loss at every alpha beside the official code's, and both ratios."""
    return table(fx.fig3_table, ["α", *fx.fig3_table.columns[1:]])


def bridge(syn, sim, cfg, device) -> SimpleNamespace:
    """The CACO weights projected onto the reduced model's ansatz (``mu_qk``, ``mu_ov``),
    the line's two sides (``dG``, ``dO``), the fitted slope per instance (``k_fit``, its
    ``r2``, ``c_fit`` = k / r), the instances off the shortcut (``ok``, their ratios
    ``r_ok``), the fitted constant ``b_fit``, the ansatz's attention against the measured
    one, and the shape of each trajectory (``dip``, ``curv``)."""
    R_inst, stats = syn.R_inst, syn.stats
    m_c, h_c = syn.runs["CACO"]
    mu_qk, mu_ov = readings.project_run(m_c, h_c, device)  # (n_logs, K) each
    p_d = tasks.ScanSnap.DISTINCT_MASS / tasks.ScanSnap.TOTAL_MASS
    m_pos, n_pos = (cfg.runs.seq_len - 2) * p_d, (cfg.runs.seq_len - 2) * (1 - p_d) + 1
    net = reduced.ReducedModel(m=m_pos, n=n_pos, M=tasks.ScanSnap.N_CLASSES, b=1.0)
    dG = net.G(mu_qk) - net.G(mu_qk[0])
    dO = mu_ov**2 - mu_ov[0] ** 2
    k_fit, r2 = readings.fit_lines(dG, dO)  # per instance: dG = k dO through the origin
    c_fit = k_fit / R_inst  # k / r, constant if k is proportional to r
    # Instances that end with their attention on copies of the query token (the shortcut) have
    # left the ansatz, which has no direction for that; they are kept out of the fit.
    shortcut = stats["CACO"]["query_copy"][-1] > cfg.shortcut_factor * sim.uniform_copy
    ok = ~shortcut
    r_ok = np.unique(R_inst[ok])
    b_fit = float(np.mean((net.M - 1) / (2 * net.M * c_fit[ok])))
    alpha_net = stats["CACO"]["distinct"]
    alpha_ansatz = net.alpha(mu_qk)
    ansatz_gap = (alpha_net[-1] - alpha_ansatz[-1])[ok]  # > 0: the ansatz underestimates
    ansatz_err = float(np.median(ansatz_gap))
    c_spread = float(c_fit[ok].max() / c_fit[ok].min())
    c_by_r = np.array([c_fit[ok & (R_inst == r)].mean() for r in r_ok])  # k / r per ratio
    # Shape of each trajectory off the line: a dip below its start, and the sign of the
    # quadratic term of a fit of dG against dO (positive: convex).
    dip = np.array([dG[:, k].min() < 0 for k in range(dG.shape[1])])[ok]
    curv = np.array([np.polyfit(dO[:, k], dG[:, k], 2)[0] for k in range(dG.shape[1])])[ok]
    return SimpleNamespace(
        mu_qk=mu_qk,
        mu_ov=mu_ov,
        m_pos=m_pos,
        n_pos=n_pos,
        dG=dG,
        dO=dO,
        k_fit=k_fit,
        r2=r2,
        c_fit=c_fit,
        shortcut=shortcut,
        ok=ok,
        r_ok=r_ok,
        b_fit=b_fit,
        alpha_net=alpha_net,
        alpha_ansatz=alpha_ansatz,
        ansatz_err=ansatz_err,
        c_spread=c_spread,
        c_by_r=c_by_r,
        dip=dip,
        curv=curv,
    )


def bridge_numbers(br, syn) -> dict:
    """The projection's numbers the text quotes, for glue."""
    R_inst, ok, c_fit, r_ok = syn.R_inst, br.ok, br.c_fit, br.r_ok
    on_shortcut = zip(R_inst, syn.caco["seed"], br.shortcut, strict=True)
    shortcut_who = [f"r = {r:g}, seed {s}" for r, s, on in on_shortcut if on]
    return dict(
        n_ok=int(ok.sum()),
        n_dip=int(br.dip.sum()),
        n_convex=int((br.curv > 0).sum()),
        n_inst=len(br.shortcut),
        shortcut_who=listing(shortcut_who, noun="", none="none"),
        c_rmin=float(c_fit[R_inst == r_ok.min()].mean()),
        c_rmax=float(c_fit[ok & (R_inst == r_ok.max())].mean()),
        r_lo=float(r_ok.min()),
        r_hi=float(r_ok.max()),
        b_fit=br.b_fit,
        r2_min=float(br.r2[ok].min()),
        c_spread=br.c_spread,
        ansatz_err=br.ansatz_err,
        m_pos=br.m_pos,
        n_pos=br.n_pos,
    )


def bridge_table(br, syn):
    """The fitted slope, k / r and the smallest R² per ratio (seed means)."""
    R_inst, k_fit, c_fit, r2 = syn.R_inst, br.k_fit, br.c_fit, br.r2
    return table(
        [
            (r, k_fit[R_inst == r].mean(), c_fit[R_inst == r].mean(), r2[R_inst == r].min())
            for r in np.unique(R_inst)
        ],
        ["r", "fitted slope k (seed mean)", "k / r (seed mean)", "smallest R²"],
    )

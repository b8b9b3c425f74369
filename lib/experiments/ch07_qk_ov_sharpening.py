"""Chapter 7, faster query-key learning sharpens attention: config, the official code's
saved outputs, and the plumbing of the chapter's runs.

The model (single-query attention with collapsed or factorized circuits) is
:mod:`lib.qkov`, the reduced two-scalar theory :mod:`lib.reduced`, the Scan-and-Snap data
and the agreement grammar :mod:`lib.tasks`, and the matched-loss reading
:mod:`lib.metrics`. Here: the chapter's :class:`Config`; the official code's saved outputs
(``OFFICIAL_*``) and the rule that compares a Fig 2 panel with them; the Scan-and-Snap
training runs with weight snapshots and the metrics read from them; the callbacks of the
balancedness, fixed-attention and Shakespeare runs; and the bookkeeping that turns runs
into the chapter's tables.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from .. import engine, metrics, qkov, tasks
from ..init import init_params
from . import ChapterConfig

CHAPTER = "07_qk_ov_sharpening"


@dataclass(frozen=True)
class Config(ChapterConfig):
    """Chapter 7 at book scale.

    The init and the rates (scientific choices, named once):

    gamma: the init rate of every randomly drawn weight, ``N(0, fan_in^(-2 gamma))``. At
        ``gamma = 1/2`` a weight of the 50-token model has standard deviation ``50^(-1/2)``,
        the scale of PyTorch's default init (whose uniform draw has a standard deviation
        ``sqrt(3)`` smaller); the same rate draws the agreement and Shakespeare
        transformers. The fixed-attention runs use :attr:`gamma_fixed` instead.
    lr: the SGD rate of the Scan-and-Snap runs (Sections 1-2): eta_OV of every run and
        eta_QK of the equal-rate ones (the official code: 0.01, the paper scale; larger
        at the smaller scales to fit the time budget, see the chapter).
    r_grid: the ratios r = eta_QK/eta_OV of the batched CACO sweep (Sections 1, 4, 6).
    r_control: ratios below 1 in the same run, the negative control of Section 6.
    ode_r_grid: the official README's ratios r of the reduced ODE (Section 3).
    ode_table_losses: the losses at which the ODE's table reads alpha.

    Scan-and-Snap runs (Sections 1, 2, 4, 6):

    seeds: the init seeds of every sweep (one instance per seed and setting).
    seq_len, batch_size: sequence length and batch of the training runs.
    steps: SGD steps of FAFO, CAFO and CACO; faco_steps: of FACO, which needs longer to
        reach the official code's stopping loss.
    n_logs: logging steps of a run: ``n_logs`` log-spaced and ``n_logs + 1`` evenly spaced.
    eval_n: held-out sequences at which attention is measured.
    balance_lr_factors, balance_steps: the SGD rates of the balancedness run (Section 2),
        as factors of ``lr``, and its length; balance_n_logs: its logging steps.
    check_n: sequences of the forward check; flow_check_n: of the autograd check of the
        implicit-rescaling formula, whose SGD step is flow_check_step.
    shortcut_factor: an instance is on the query-copy shortcut when it ends with more
        than this multiple of uniform attention's mass on copies of the query token.
    near_zero_fraction: the matched loss must be below this fraction of the initial loss.

    Fixed attention (Section 5):

    fixed_alphas: the frozen distinct-token masses (the official Fig 3 values).
    fixed_seq_len, fixed_batch_size: the official Fig 3 code's length and batch.
    fixed_steps: SGD steps at rate ``lr``; fixed_n_logs: logging steps.
    fixed_eval_n: fixed held-out sequences of the loss and of -dL/dalpha.
    fig3_ratio_tol: the status rule: every collapsed/factorized loss ratio within this
        factor of the official code's; fig3_abs_tol: every final loss within this
        relative distance of the code's.

    Agreement stand-in (Section 7):

    sva_train_n, sva_test_n: training and held-out sentences; sva_steps, sva_lr,
        sva_batch_size, sva_n_logs: the Adam run; sva_d_model: the transformer's width.
    sva_r: the faster arm's QK multiplier, eta_QK/eta_rest (the base arm has 1).
    sva_acc_tol: the two arms' accuracies must agree within this.

    Character-level Shakespeare (Section 7):

    shk_layers, shk_d_model, shk_context, shk_mlp: the transformer.
    shk_batch_size, shk_steps, shk_lr, shk_n_logs: the Adam run.
    shk_r_grid: the QK multipliers eta_QK/eta_rest of the batched run.
    shk_val_n: validation windows of the fixed evaluation batch.

    Generator seeds of fixed data (the same at every scale): check_seed (forward check),
    data_seed (the Scan-and-Snap streams: ``data_seed + i`` for the i-th of FAFO, FACO,
    CAFO, CACO), eval_seed (held-out set), flow_check_seed, balance_seed,
    fixed_eval_seed, fixed_data_seed, sva_train_seed, sva_test_seed, shk_val_seed.
    """

    gamma: float = 0.5
    lr: float = 1.0
    r_grid: tuple[float, ...] = (1.0, 2.0, 3.0, 5.0, 10.0)
    r_control: tuple[float, ...] = (0.3,)
    ode_r_grid: tuple[float, ...] = (0.01, 0.1, 1.0, 10.0, 100.0)
    ode_table_losses: tuple[float, ...] = (1e-1, 1e-2, 1e-3, 1e-4)

    seeds: tuple[int, ...] = (0, 1, 2)
    seq_len: int = 128
    batch_size: int = 32
    steps: int = 5000
    faco_steps: int = 8000
    n_logs: int = 40
    eval_n: int = 4096
    balance_lr_factors: tuple[float, ...] = (0.01, 0.1, 1.0)
    balance_steps: int = 1500
    balance_n_logs: int = 20
    check_n: int = 64
    flow_check_n: int = 256
    flow_check_step: float = 1e-6
    shortcut_factor: float = 2.0
    near_zero_fraction: float = 0.05

    fixed_alphas: tuple[float, ...] = (0.2, 0.4, 0.6, 0.8, 1.0)
    fixed_seq_len: int = 64
    fixed_batch_size: int = 128
    fixed_steps: int = 1250
    fixed_n_logs: int = 40
    fixed_eval_n: int = 32768
    fig3_ratio_tol: float = 1.5
    fig3_abs_tol: float = 0.25

    sva_train_n: int = 20000
    sva_test_n: int = 4000
    sva_steps: int = 1500
    sva_lr: float = 1e-3
    sva_batch_size: int = 64
    sva_n_logs: int = 10
    sva_d_model: int = 32
    sva_r: float = 10.0
    sva_acc_tol: float = 0.02

    shk_layers: int = 1
    shk_d_model: int = 32
    shk_context: int = 64
    shk_mlp: int = 128
    shk_batch_size: int = 16
    shk_steps: int = 1500
    shk_lr: float = 3e-3
    shk_n_logs: int = 30
    shk_r_grid: tuple[float, ...] = (1.0, 10.0, 30.0)
    shk_val_n: int = 64

    check_seed: int = 5
    data_seed: int = 100
    eval_seed: int = 999
    flow_check_seed: int = 7
    balance_seed: int = 200
    fixed_eval_seed: int = 998
    fixed_data_seed: int = 300
    sva_train_seed: int = 10
    sva_test_seed: int = 11
    shk_val_seed: int = 10_000

    @property
    def gamma_fixed(self) -> float:
        """The init rate of the fixed-attention runs: the one at which our Gaussian init has
        the standard deviation of PyTorch's default ``nn.Linear(50, 50)`` init, the init of
        the official Fig 3 code (:func:`lib.qkov.torch_default_gamma`)."""
        return qkov.torch_default_gamma(tasks.ScanSnap.VOCAB)


OVERRIDES = {
    "ci": dict(
        lr=2.0,
        r_grid=(1.0, 3.0, 5.0, 10.0),
        seeds=(0, 1),
        steps=2500,
        faco_steps=4000,
        eval_n=1024,
        balance_steps=300,
        fixed_steps=625,
        fixed_eval_n=8192,
        sva_train_n=4000,
        sva_test_n=1000,
        sva_steps=300,
        shk_steps=500,
        shk_n_logs=24,
    ),
    "paper": dict(
        lr=0.01,
        r_grid=(1.0, 2.0, 3.0, 4.0, 5.0, 10.0),
        seeds=(1234, 1235, 1236, 1237, 1238),
        steps=625000,
        faco_steps=625000,
        eval_n=16000,
        balance_lr_factors=(0.001, 0.01, 0.1),
        balance_steps=20000,
        fixed_steps=125000,
        fixed_eval_n=128000,
        sva_train_n=160000,
        sva_test_n=40000,
        sva_steps=20000,
        shk_layers=2,
        shk_d_model=128,
        shk_context=128,
        shk_mlp=512,
        shk_batch_size=64,
        shk_steps=20000,
        shk_lr=1e-3,
        shk_n_logs=60,
        shk_val_n=256,
    ),
}


# ---------------------------------------------------------------------------
# The official code's saved outputs (vashishtrahul/Faster-Query-Key-Learning-Sharpens-
# Attention-in-Self-Attention-Models), for the comparisons of the chapter
# ---------------------------------------------------------------------------

# Fig 3 (fixed attention): the final held-out loss (mean over 1000 fresh batches of 128)
# printed by cell 4 of FIg-3-Code/Fig-3_Fixed-Self-Attention-Experiments_Collapsed.ipynb
# (commit 838c783be39f2e56ff8be995b26b81141264500c; nn.Linear(50, 50) with bias) and of
# FIg-3-Code/Fig-3_Fixed-Self-Attention-Experiments_Factorised.ipynb (commit
# 5c91cca08cf4a10de9cc3ef973e76b956b66c259; two bias-free nn.Linear(50, 50)), after 500
# epochs x 250 batches of SGD at lr 1e-2 (no momentum), torch.manual_seed(1234), batches of
# 32 sequences per class x 4 classes, seq_len 64, PyTorch's default init, one value per
# alpha in OFFICIAL_FIG3_ALPHAS.
OFFICIAL_FIG3_ALPHAS = (0.2, 0.4, 0.6, 0.8, 1.0)
OFFICIAL_FIG3_FINAL_LOSS = {
    "collapsed": (
        0.5980280479192733,
        0.15817544285953045,
        0.06447206139937044,
        0.03459405774623155,
        0.02155211404338479,
    ),
    "factorized": (
        0.003792358746053651,
        0.0014788819566601888,
        0.0008922941937926225,
        0.0006328461089869961,
        0.00048612764789140783,
    ),
}
OFFICIAL_FIG3_SETUP = dict(epochs=500, batches=250, lr=1e-2, seq_len=64, batch_size=128)
# Their training length as gradient-flow time, lr x steps.
OFFICIAL_FIG3_FLOW_TIME = (
    OFFICIAL_FIG3_SETUP["epochs"] * OFFICIAL_FIG3_SETUP["batches"] * OFFICIAL_FIG3_SETUP["lr"]
)

# Fig 2 (heatmaps): the official per-cell percentages exist only inside saved PNG images
# (seaborn heatmaps of Fig2-Heatmaps/Fig-2-Heatmaps.ipynb, commit
# 86a9e649169afb51a84701fb942129ea32c45bf2, and Fig2-Heatmaps/Fig-2_CACO_FAFO
# Experiments.ipynb, commit b8d7a411788c274e5462908ff0eacf46967d5b12), not as text. What
# is recorded here is the modal bin of the distinct-token attention mass (5 bins of width
# 0.2, index 0..4) read from those images; None where the official run saved no output
# (CAFO, Net_p3; the equal-rate CACO, Net_p4, which also used seq_len 64).
DISTINCT_BIN_EDGES = np.linspace(0.0, 1.0, 6)
# The Fig 2 notebooks train with SGD at this rate (no momentum; CACO's faster arm: 5x it for
# QK) and stop FAFO early at about this training loss.
OFFICIAL_FIG2_LR = 0.01
OFFICIAL_FIG2_STOP_LOSS = 1e-3
# The r = 5 CACO runs train for a fixed 2000 epochs x 100 batches instead: OV flow time
# eta_OV x steps.
OFFICIAL_FIG2_CACO_FLOW_TIME = 2000 * 100 * OFFICIAL_FIG2_LR
OFFICIAL_FIG2_MODAL_BIN: dict[str, int | None] = {
    "FAFO": 1,  # essentially uniform attention, distinct mass about 0.35
    "FACO": 4,  # almost every sample in the top bin
    "CACO, r=5": 3,  # mostly 0.6-0.8 (seq_len 128, eta_QK 0.05, eta_OV 0.01)
    "CAFO": None,
    "CACO, r=1": None,
}
BIN_NAMES = [
    f"{a:.1f}-{b:.1f}" for a, b in zip(DISTINCT_BIN_EDGES[:-1], DISTINCT_BIN_EDGES[1:], strict=True)
]


def distinct_mass_percent(samples) -> np.ndarray:
    """Percentage of samples in each of the official heatmaps' five distinct-mass bins
    ``[0, .2), ..., [.8, 1]`` (Section 1)."""
    h, _ = np.histogram(np.asarray(samples).ravel(), bins=DISTINCT_BIN_EDGES)
    return 100.0 * h / max(h.sum(), 1)


def modal_bin_status(percent, official_modal: int | None) -> str:
    """The reproduction status of one Fig 2 panel: "reproduced" when our modal
    distinct-mass bin is the official one, "not reproduced" when it is not, and
    "not comparable" when the official run saved no output."""
    if official_modal is None:
        return "not comparable"
    return "reproduced" if int(np.argmax(percent)) == official_modal else "not reproduced"


# ---------------------------------------------------------------------------
# Scan-and-Snap runs with weight snapshots (Sections 1, 2, 4, 6)
# ---------------------------------------------------------------------------


def scan_snap_stream(K: int, batch_size: int, seq_len: int, seed: int, device="cpu"):
    """``data(step) -> (X, y)`` with an independent Scan-and-Snap batch per instance,
    X (K, batch_size, seq_len - 1), on ``device``. The batches are drawn by a fixed CPU
    generator, so the stream is reproducible and the same on every device."""
    gen = torch.Generator().manual_seed(seed)

    def data(step):
        b = tasks.scan_snap_batch(K * batch_size, seq_len=seq_len, generator=gen, device=device)
        return b.X.view(K, batch_size, -1), b.y.view(K, batch_size)

    return data


def snapshot_callbacks(model) -> dict:
    """Engine callbacks that log a copy of every weight (K, ...) at every logging step."""
    return {n: (lambda step, p, n=n: p[n].detach().clone()) for n in model.specs()}


def snapshots(history, model, i: int, device=None) -> dict[str, torch.Tensor]:
    """The weights logged at logging index ``i`` of ``history`` (kept on the CPU by the
    engine), on ``device`` (the CPU when None)."""
    return {n: torch.as_tensor(history[n][i], device=device) for n in model.specs()}


def train_scan_snap(cfg: Config, name: str, eta_qk, eta_ov, run_seeds, data_seed, n_steps, device):
    """One batched SGD run of parameterization ``name`` from the official code's init
    (:func:`lib.qkov.code_init_`), one instance per seed; returns ``(model, history)``
    with a weight snapshot at every step of :func:`lib.engine.log_grid`."""
    m = qkov.SingleQueryAttention.named(name)
    params = init_params(m.specs(), list(run_seeds), gamma=cfg.gamma, device=device)
    qkov.code_init_(m, params)
    h = engine.train(
        m,
        params,
        scan_snap_stream(len(run_seeds), cfg.batch_size, cfg.seq_len, data_seed, device=device),
        n_steps,
        optimizer="sgd",
        group_lr={"qk": eta_qk, "ov": eta_ov},
        log_at=engine.log_grid(n_steps, cfg.n_logs),
        callbacks=snapshot_callbacks(m),
        desc=name,
    )
    return m, h


@torch.no_grad()
def stats_over_training(history, model, batch) -> dict[str, np.ndarray]:
    """attention_stats on a held-out ``batch`` at every logged step; sample means of each
    metric (n_logs, K) plus the per-sample arrays under ``"samples"`` (n_logs, K, B).
    The weights are evaluated on the batch's device."""
    X, y, _, dm = batch
    out: dict[str, list] = {}
    for i in range(len(history.steps)):
        st = qkov.attention_stats(model, snapshots(history, model, i, X.device), X, y, dm)
        for key, v in st.items():
            v = v.cpu()
            out.setdefault(key, []).append(v.numpy() if v.dim() == 1 else v.mean(-1).numpy())
            if key in ("distinct", "p_true"):
                out.setdefault(key + "_samples", []).append(v.numpy())
    return {k: np.stack(v) for k, v in out.items()}


def means_at_matched_loss(stats, groups, loss_star, keys) -> dict[str, dict[str, float]]:
    """Per group ``label -> (run name, instance selection)``: the seed mean of each metric
    in ``keys``, each instance read where its held-out loss first falls to ``loss_star``."""
    out = {}
    for label, (name, sel) in groups.items():
        s = stats[name]
        out[label] = {
            key: float(
                np.mean(metrics.at_matched_loss(s["loss"][:, sel], s[key][:, sel], loss_star))
            )
            for key in keys
        }
    return out


def group_by(values, labels, keys) -> np.ndarray:
    """``values`` of instances (K,) stacked by label: (len(keys), instances per key)."""
    values, labels = np.asarray(values), np.asarray(labels)
    return np.stack([values[labels == k] for k in keys])


# ---------------------------------------------------------------------------
# Fig 2: reading the panels at the matched loss and at the code's reading (Section 1)
# ---------------------------------------------------------------------------


def reading_index(stats_run, history, sel, reading, loss_star, lr, fixed_flow=None):
    """Per instance, the logging index a panel is read at: where the held-out loss first
    reaches ``loss_star`` (``reading == "matched loss"``); or the code's reading: the first
    log at OV flow time ``lr * step >= fixed_flow`` if given (a fixed-length run of the
    code), else where the logged training loss first reaches the code's stopping loss (the
    lowest logged training loss if never)."""
    if reading == "matched loss":
        return metrics.first_log_below(stats_run["loss"][:, sel], loss_star)
    if fixed_flow is not None:
        i = int(np.nonzero(lr * history.steps >= fixed_flow)[0][0])
        return np.full(history["loss"][:, sel].shape[1], i)
    train = history["loss"][:, sel]
    idx = metrics.first_log_below(train, OFFICIAL_FIG2_STOP_LOSS)
    return np.where(idx >= 0, idx, train.argmin(0))


def read_samples(stats_run, sel, idx):
    """Pooled per-sample distinct mass and p(right token) of the instances at log idx."""
    ks = np.arange(stats_run["loss"].shape[1])[sel]

    def pick(key):
        return np.concatenate([stats_run[key][i, k] for i, k in zip(idx, ks, strict=True)])

    return pick("distinct_samples"), pick("p_true_samples")


def fig2_rows(stats, runs, panels, loss_star, lr):
    """The Fig 2 comparison: one row per panel and reading (the matched loss, the code's
    reading) with the steps read, the largest training loss there, our percentage per
    distinct-mass bin, our and the official modal bin and the status; and the panels that
    never reached the code's stopping loss."""
    rows, not_reached = [], []
    for panel, (name, sel) in panels.items():
        h = runs[name][1]
        train = h["loss"][:, sel]
        fixed_flow = OFFICIAL_FIG2_CACO_FLOW_TIME if panel == "CACO, r=5" else None
        reached = bool((metrics.first_log_below(train, OFFICIAL_FIG2_STOP_LOSS) >= 0).all())
        if not reached and fixed_flow is None:
            not_reached.append(panel)
        for reading in ("matched loss", "code's reading"):
            idx = reading_index(stats[name], h, sel, reading, loss_star, lr, fixed_flow)
            pct = distinct_mass_percent(read_samples(stats[name], sel, idx)[0])
            official = OFFICIAL_FIG2_MODAL_BIN[panel]
            label = reading if reading == "matched loss" else "code: train loss <= 1e-3"
            if reading != "matched loss" and fixed_flow is not None:
                label = f"code: flow time {fixed_flow:g}"
            elif reading != "matched loss" and not reached:
                label = "code: lowest train loss"
            rows.append(
                {
                    "panel": panel,
                    "reading": label,
                    "steps": ", ".join(str(int(h.steps[i])) for i in idx),
                    "train loss": float(train[idx, np.arange(len(idx))].max()),
                    **dict(zip(BIN_NAMES, pct.round(1), strict=True)),
                    "our mode": BIN_NAMES[int(np.argmax(pct))],
                    "official mode": "no output" if official is None else BIN_NAMES[official],
                    "status": modal_bin_status(pct, official),
                }
            )
    return rows, not_reached


def fig2_summary(rows, not_reached) -> str:
    """The sentence that states each comparable panel's status at both readings."""
    parts = []
    for reading in ("matched loss", "code's reading"):
        items = []
        for r in rows:
            same = (r["reading"] == "matched loss") == (reading == "matched loss")
            if same and r["status"] != "not comparable":
                items.append(
                    f"{r['panel']} {r['status']} (ours {r['our mode']}, "
                    f"the code's {r['official mode']})"
                )
        parts.append(f"at the {reading}: " + "; ".join(items))
    md = "By this rule, " + ", and ".join(parts) + "."
    stop_loss = OFFICIAL_FIG2_STOP_LOSS
    if not_reached:
        md += (
            f" Within this scale's budget {', '.join(not_reached)} never logged a training loss "
            f"at or below {stop_loss:g}; {'it is' if len(not_reached) == 1 else 'they are'} read "
            "at the lowest logged training loss instead."
        )
    else:
        md += f" Every panel reached the code's stopping loss {stop_loss:g}."
    return md


# ---------------------------------------------------------------------------
# Section 2: effective rates and the balancedness drift
# ---------------------------------------------------------------------------


def effective_rate_gains(model, history, device) -> dict[str, np.ndarray]:
    """Effective-rate multipliers of QK and OV at every logged step, (n_logs, K) each:
    sigma_max(W_Q)^2 + sigma_max(W_K)^2 for a factorized QK (and the OV analogue), 1 for a
    collapsed circuit."""

    def sv(W):
        return torch.linalg.matrix_norm(W.double(), ord=2) ** 2

    gains = {"qk": [], "ov": []}
    for i in range(len(history.steps)):
        p = snapshots(history, model, i, device)
        one = torch.ones(p[next(iter(p))].shape[0], dtype=torch.float64, device=device)
        gains["qk"].append(sv(p["W_Q"]) + sv(p["W_K"]) if model.qk == "factorized" else one)
        gains["ov"].append(sv(p["W_O"]) + sv(p["W_V"]) if model.ov == "factorized" else one)
    return {k: torch.stack(v).cpu().numpy() for k, v in gains.items()}


def gram_matrices(p) -> dict[str, torch.Tensor]:
    """The Gram matrices whose differences gradient flow conserves (K, d, d):
    W_Q W_Q^T, W_K W_K^T, W_O^T W_O, W_V W_V^T."""
    W_Q, W_K, W_O, W_V = p["W_Q"], p["W_K"], p["W_O"], p["W_V"]
    return {"Q": W_Q @ W_Q.mT, "K": W_K @ W_K.mT, "O": W_O.mT @ W_O, "V": W_V @ W_V.mT}


def unbalanced_fraction_callback(p0):
    """An engine callback ``(step, p) -> (K, 2)``: for QK and OV, the fraction of the change
    of the Gram matrices since ``p0`` that is not balanced,
    ``||D(t) - D(0)||_F / (||dG_Q||_F + ||dG_K||_F)`` with ``D = G_Q - G_K`` (OV alike)."""
    G0 = {k: v.detach().clone() for k, v in gram_matrices(p0).items()}

    def nrm(A):
        return A.flatten(1).norm(dim=1)

    def drift(step, p):
        G = gram_matrices(p)

        def d(a, b):
            return nrm((G[a] - G[b]) - (G0[a] - G0[b])) / (
                nrm(G[a] - G0[a]) + nrm(G[b] - G0[b]) + 1e-30
            )

        return torch.stack([d("Q", "K"), d("O", "V")], -1)

    return drift


# ---------------------------------------------------------------------------
# Section 4: the network projected onto the reduced model
# ---------------------------------------------------------------------------


def project_run(model, history, device) -> tuple[np.ndarray, np.ndarray]:
    """(mu_qk, mu_ov), each (n_logs, K): every logged CACO weight projected onto the
    symmetric ansatz (:func:`lib.qkov.symmetric_projection`)."""
    mu_qk, mu_ov = [], []
    for i in range(len(history.steps)):
        p = snapshots(history, model, i, device)
        a, o = qkov.symmetric_projection(p["W_QK"], p["W_OV"], model.scale)
        mu_qk.append(a)
        mu_ov.append(o)
    return np.array(mu_qk), np.array(mu_ov)


def fit_lines(dG: np.ndarray, dO: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per instance (column), the least-squares slope k of ``dG = k dO`` through the origin
    and its R^2 (against the mean of dG)."""
    K = dG.shape[1]
    k_fit = np.array([(dG[:, k] @ dO[:, k]) / (dO[:, k] @ dO[:, k]) for k in range(K)])
    r2 = np.array(
        [
            1
            - np.sum((dG[:, k] - k_fit[k] * dO[:, k]) ** 2)
            / np.sum((dG[:, k] - dG[:, k].mean()) ** 2)
            for k in range(K)
        ]
    )
    return k_fit, r2


# ---------------------------------------------------------------------------
# Section 5: the Fig 3 table
# ---------------------------------------------------------------------------


def fig3_table(alphas, final_loss: dict[str, np.ndarray]):
    """Our final held-out loss per alpha beside the official code's, and the ratio
    collapsed/factorized of both (a pandas DataFrame)."""
    import pandas as pd

    official = {ov: np.array(v) for ov, v in OFFICIAL_FIG3_FINAL_LOSS.items()}
    return pd.DataFrame(
        {
            "alpha": list(alphas),
            "collapsed, ours": final_loss["collapsed"],
            "collapsed, code": official["collapsed"],
            "factorized, ours": final_loss["factorized"],
            "factorized, code": official["factorized"],
            "ratio, ours": final_loss["collapsed"] / final_loss["factorized"],
            "ratio, code": official["collapsed"] / official["factorized"],
        }
    )


# ---------------------------------------------------------------------------
# Section 7: the agreement stand-in and the Shakespeare model
# ---------------------------------------------------------------------------


def to_device(batch, device):
    """A NamedTuple of tensors (e.g. :class:`lib.tasks.AgreementBatch`) on ``device``."""
    return type(batch)(*(t.to(device) for t in batch))


@torch.no_grad()
def faithfulness(model, params, X, y, subject_pos) -> dict[str, np.ndarray]:
    """Accuracy, rationale attention mass, comprehensiveness and sufficiency (top-1 attended
    token, replaced by padding), per instance, of a one-layer transformer read out at the
    last position on agreement sentences."""
    pad = tasks.Agreement.PAD
    z, att = model.forward(params, X, return_attention=True)
    a = att[0][:, :, -1, :].masked_fill(X == pad, -1.0)  # readout row; padding never chosen
    prob = torch.softmax(z, -1)
    pred = prob.argmax(-1)

    def p_pred(Z):
        return torch.gather(torch.softmax(Z, -1), -1, pred[..., None])[..., 0]

    top = a.argmax(-1, keepdim=True)  # (K, B, 1)
    Xk = X.expand(a.shape[0], *X.shape)
    X_wo = Xk.scatter(-1, top, pad)
    X_only = torch.full_like(Xk, pad).scatter(-1, top, torch.gather(Xk, -1, top))
    base = p_pred(z)
    mass = torch.gather(a, -1, subject_pos.view(1, -1, 1).expand(a.shape[0], -1, 1))[..., 0]
    out = {
        "accuracy": (pred == y).float().mean(-1),
        "rationale mass": mass.mean(-1),
        "comprehensiveness": (base - p_pred(model.forward(params, X_wo))).mean(-1),
        "sufficiency": (base - p_pred(model.forward(params, X_only))).mean(-1),
    }
    return {k: v.cpu().numpy() for k, v in out.items()}


def shakespeare_data(cfg: Config, device):
    """The Shakespeare corpus split by whole plays: ``(tokenizer, train stream, validation
    stream, validation text, (X_val, y_val))``. Validation characters absent from the
    training plays are dropped; (X_val, y_val) is the fixed batch of ``cfg.shk_val_n``
    validation windows."""
    from .. import corpora, lm

    train_text, val_text = corpora.split_by_document(corpora.load_shakespeare())
    tok = corpora.CharTokenizer(train_text)
    val_text = "".join(c for c in val_text if c in tok.chars)
    stream, val_stream = tok.encode(train_text), tok.encode(val_text)
    sampler = lm.window_sampler(
        val_stream, cfg.shk_context, cfg.shk_val_n, [cfg.shk_val_seed], device=device
    )
    Xv, yv = (t[0] for t in sampler(0))
    return tok, stream, val_stream, val_text, (Xv, yv)


def log_positions(context_len: int, device) -> torch.Tensor:
    """log(i + 1) for positions i = 0..context_len-1: the entropy of a causal attention row
    uniform over its visible prefix."""
    return torch.log(torch.arange(1, context_len + 1, dtype=torch.float32, device=device))


def shk_val_metrics(model, Xv, yv):
    """An engine callback ``(step, params) -> (K, 4)``: per instance, the validation loss,
    the attention entropy (nats), the normalized entropy H_i / log(i+1) (i >= 1) and the
    attention mass on the previous character, averaged over layers, windows and positions."""
    log_i = log_positions(Xv.shape[-1], Xv.device)

    @torch.no_grad()
    def callback(step, params):
        z, att = model.forward(params, Xv, return_attention=True)
        A = torch.stack(att)  # (layers, K, B, L, L); a head's causal rows
        H = -torch.special.xlogy(A, A).sum(-1)  # (layers, K, B, L)
        H_norm = H[..., 1:] / log_i[1:]
        prev = torch.diagonal(A, -1, -2, -1)  # a_{i,i-1}
        return torch.stack(
            [
                engine.cross_entropy(z, yv),
                H.mean((0, 2, 3)),
                H_norm.mean((0, 2, 3)),
                prev.mean((0, 2, 3)),
            ],
            1,
        )

    return callback


def unigram_loss(stream: torch.Tensor, val_stream: torch.Tensor, vocab_size: int) -> float:
    """A context-free baseline: the training text's character frequencies (add-one
    smoothed), scored on the validation text in nats per character."""
    freq = torch.bincount(stream, minlength=vocab_size).double() + 1
    return float(-torch.log(freq / freq.sum())[val_stream].mean())


def shk_table_rows(at: dict[str, np.ndarray], r_inst, r_grid) -> list[str]:
    """The Shakespeare table (Markdown rows): per QK multiplier, the seed mean and range of
    each quantity read at the matched loss."""
    rows = [
        "| QK multiplier | entropy (nats) | normalized entropy | previous-char mass "
        "| step at matched loss | final val. loss |",
        "|---|---|---|---|---|---|",
    ]

    def fmt(v, f):
        return f"{v.mean():{f}} [{v.min():{f}}, {v.max():{f}}]"

    for r in r_grid:
        sel = np.asarray(r_inst) == r
        rows.append(
            f"| {r:g} | {fmt(at['H'][sel], '.3f')} | {fmt(at['Hn'][sel], '.3f')} | "
            f"{fmt(at['prev'][sel], '.3f')} | {fmt(at['step'][sel], '.0f')} | "
            f"{fmt(at['final loss'][sel], '.3f')} |"
        )
    return rows


def shk_order_summary(H_by: np.ndarray, r_grid) -> str:
    """Whether the entropy ordering over multipliers holds seed by seed; H_by is
    (n_multipliers, n_seeds)."""
    n_seeds = H_by.shape[1]
    paired_all = int(np.all(np.diff(H_by, axis=0) < 0, axis=0).sum())
    paired_ends = int((H_by[-1] < H_by[0]).sum())
    if paired_all == n_seeds:
        return f"The ordering holds seed by seed, for each of the {n_seeds} seeds."
    return (
        f"Seed by seed the full ordering holds in {paired_all} of {n_seeds} paired seeds, "
        f"and multiplier {r_grid[-1]:g} has the lower entropy than multiplier "
        f"{r_grid[0]:g} in {paired_ends}."
    )


def shk_loss_summary(final_loss_mean: np.ndarray, r_grid) -> str:
    """The sentence comparing the seed-mean final validation loss of the highest
    multiplier with the lowest (and the middle one's difference)."""
    d_loss = final_loss_mean[-1] - final_loss_mean[0]
    return (
        "The sharpest attention did not buy a lower loss: "
        if d_loss > 0
        else "Here the sharper attention came with a lower loss: "
    ) + (
        f"at the end of training, multiplier {r_grid[-1]:g} has a "
        f"{'higher' if d_loss > 0 else 'lower'} validation loss than multiplier "
        f"{r_grid[0]:g}, by {abs(d_loss):.3f} nats on the seed mean (multiplier "
        f"{r_grid[1]:g}: {final_loss_mean[1] - final_loss_mean[0]:+.3f})."
    )

"""The training engine: K model instances trained at once.

Seeds and hyperparameters are an instance dimension of one batched model (as in
*Toy Models of Superposition*), so a sweep is one run. Every instance has its own
learning rate per parameter group (``lr`` and ``group_lr``), which is what the
QK/OV chapter needs (eta_QK != eta_OV, varying across instances).

The loss is the sum over instances of each instance's mean loss, so the gradient
of instance k's weights is exactly that instance's own gradient: instances never
interact. The optimizers are written out (:mod:`lib.training.optimizers`) because
torch.optim takes one scalar learning rate per parameter group, not one per instance.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.nn.functional as F
from tqdm import tqdm

from ..env import ConfigError, perturbation, quiet
from . import smoke
from .init import per_instance, perturb
from .optimizers import OPTIMIZERS, STEP, Hyper, clip_per_instance, per_instance_view

BAR_DELAY_S = 3.0  # seconds a training run lasts before its progress bar appears


class TrainingDivergedError(FloatingPointError):
    """NaN or inf appeared in training; the message names the step, instance and parameter."""


def log_steps(total: int, n: int = 60) -> np.ndarray:
    """About ``n`` log-spaced logging steps in [0, total], always including 0 and total."""
    if total < 0:
        raise ConfigError(f"total steps must be >= 0, got {total}")
    s = np.unique(np.round(np.geomspace(1, max(total, 1), num=max(n - 1, 1))).astype(int))
    return np.unique(np.concatenate([[0], s[s <= total], [total]]))


@dataclass
class History:
    """What a run logged: ``steps`` (n_logs,) and ``metrics[name]`` of shape (n_logs, K, ...)."""

    steps: np.ndarray
    metrics: dict[str, np.ndarray] = field(default_factory=dict)

    def __getitem__(self, name: str) -> np.ndarray:
        return self.metrics[name]

    def at(self, name: str, step: int) -> np.ndarray:
        """The value logged at the logged step closest to ``step``."""
        return self.metrics[name][int(np.argmin(np.abs(self.steps - step)))]


def log_grid(total: int, n: int, extra=()) -> np.ndarray:
    """Logging steps for a run whose events come both early and late: ``n`` log-spaced steps
    (:func:`log_steps`), ``n + 1`` evenly spaced ones, and the ``extra`` steps a reading
    needs exactly (e.g. the step at which a scaling is read), sorted and unique."""
    lin = np.linspace(0, total, n + 1).astype(int)
    return np.union1d(np.union1d(log_steps(total, n), lin), np.asarray(extra, dtype=int))


def cross_entropy(logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy per instance: logits (K, ..., C), labels (...) or (K, ...) -> (K,)."""
    K, C = logits.shape[0], logits.shape[-1]
    y = y.expand(K, *y.shape) if y.dim() == logits.dim() - 2 else y
    ce = F.cross_entropy(logits.reshape(-1, C), y.reshape(-1), reduction="none")
    return ce.view(K, -1).mean(1)


def soft_cross_entropy(logits: torch.Tensor, P: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy per instance against target weights: logits (K, B, C), ``P`` (B, C)
    or (K, B, C), e.g. the label distributions of :func:`lib.data.tasks.label_distributions`:
    ``-(P * log_softmax(logits)).sum(-1).mean(-1)`` -> (K,)."""
    logp = torch.log_softmax(logits, -1)
    return -(P.to(logp.dtype) * logp).sum(-1).mean(-1)


def instance_batches(datasets, assignment, batch_size: int, seed: int = 0):
    """A batch stream in which instance k trains on ``datasets[assignment[k]]``.

    ``datasets`` is a list of ``(X, y)`` with X of shape (N_i, L) (one L for all);
    returns ``data(step) -> (X (K, B, L), y (K, B))`` for :func:`train`, so arms that
    differ in their *data* (tasks, auxiliary data) still run as one batched model.
    Instances on the same dataset see the same batch (seeded, reproducible).
    """
    lengths = {X.shape[1] for X, _ in datasets}
    if len(lengths) != 1:
        raise ConfigError(f"all datasets must have one sequence length, got {sorted(lengths)}")
    if not all(0 <= a < len(datasets) for a in assignment):
        raise ConfigError(
            f"assignment {list(assignment)} names a dataset outside 0..{len(datasets) - 1}"
        )
    gen = torch.Generator().manual_seed(seed)
    assignment = list(assignment)

    def data(step):
        picks = [torch.randint(0, X.shape[0], (batch_size,), generator=gen) for X, _ in datasets]
        Xb = torch.stack([datasets[a][0][picks[a]] for a in assignment])
        yb = torch.stack([datasets[a][1][picks[a]] for a in assignment])
        return Xb, yb

    return data


def accuracy_callback(model, X: torch.Tensor, y: torch.Tensor):
    """A callback logging each instance's accuracy on (X, y): shared (N, L) or per-instance (K, N, L)."""

    def acc(step, params):
        return (model.forward(params, X).argmax(-1) == y).double().mean(-1)

    return acc


def cached_callbacks(
    measure: Callable[[int, Mapping[str, torch.Tensor]], Mapping[str, object]],
    names: Sequence[str],
) -> dict[str, Callable]:
    """Callbacks ``{name: fn(step, params)}`` for :func:`train` that share one measurement.

    ``measure(step, params)`` returns a mapping holding every name of ``names`` (one
    forward pass, say, read several ways). It runs once per logged step, at the first of
    these callbacks that :func:`train` calls there; the others return their field of the
    same result. The cache holds the last step only (and the ``params`` it was read from).
    """
    names = list(names)
    cache: dict = {"key": None, "value": None}

    def field(name: str) -> Callable:
        def fn(step, params):
            if cache["key"] != (step, id(params)):
                value = measure(step, params)
                missing = [n for n in names if n not in value]
                if missing:
                    raise KeyError(f"measure returned no {missing}; it returned {sorted(value)}")
                cache.update(key=(step, id(params)), value=value)
            return cache["value"][name]

        return fn

    return {n: field(n) for n in names}


def _check_finite(step: int, params: Mapping[str, torch.Tensor], loss: torch.Tensor | None) -> None:
    """Raise TrainingDivergedError naming the first non-finite instance and parameter."""
    ok = [p.detach().flatten(1).isfinite().all(1) for p in params.values()]
    bad_param = ~torch.stack(ok)  # (n_params, K)
    bad_loss = ~loss.isfinite() if loss is not None else torch.zeros_like(bad_param[0])
    if not (bad_param.any() or bad_loss.any()):
        return
    names = list(params)
    k = int(torch.nonzero(bad_param.any(0) | bad_loss)[0])
    hit = [names[i] for i in torch.nonzero(bad_param[:, k]).flatten().tolist()]
    if hit:
        where = f"parameter {hit[0]!r}" + (f" (also {hit[1:]})" if len(hit) > 1 else "")
    else:
        norms = {n: float(p.detach()[k].norm()) for n, p in params.items()}
        big = max(norms, key=norms.get)
        where = f"the loss (weights still finite; largest is {big!r} with norm {norms[big]:.3g})"
    raise TrainingDivergedError(
        f"non-finite value at step {step}, instance {k}: {where}. "
        "Lower the learning rate of that instance or clip gradients."
    )


def _batch_stream(data, optimizer: str, batch_size: int | None, seed: int) -> Callable:
    """``step -> (X, y)``: a streaming callable as given, the full set, or seeded minibatches
    drawn (with replacement) from shared ``(N, L)`` or per-instance ``(K, N, L)`` tensors."""
    if callable(data):
        return data
    X_all, y_all = data
    if optimizer == "gd" and batch_size is not None:
        raise ConfigError("optimizer='gd' is full-batch: leave batch_size=None")
    if batch_size is None:
        return lambda step: (X_all, y_all)
    gen = torch.Generator(device="cpu").manual_seed(seed)
    N = X_all.shape[-2] if X_all.dim() == 3 else X_all.shape[0]

    def next_batch(step):
        idx = torch.randint(0, N, (batch_size,), generator=gen).to(X_all.device)
        Xb = X_all[:, idx] if X_all.dim() == 3 else X_all[idx]
        yb = y_all[:, idx] if y_all.dim() == 2 else y_all[idx]
        return Xb, yb

    return next_batch


class _Log:
    """The batch loss and every callback, at the logging steps."""

    def __init__(self, steps: int, log_at, callbacks: Mapping[str, Callable] | None):
        at = log_steps(steps, log_at) if isinstance(log_at, int) else log_at
        self.at = {int(s) for s in at if 0 <= int(s) <= steps}
        self.callbacks = dict(callbacks or {})
        self.records: dict[str, list] = {"loss": [], **{n: [] for n in self.callbacks}}
        self.steps: list[int] = []

    def __call__(self, step: int, params, loss: torch.Tensor) -> None:
        self.steps.append(step)
        self.records["loss"].append(loss.detach().cpu().numpy().copy())
        with torch.no_grad():
            for name, fn in self.callbacks.items():
                v = fn(step, params)
                v = v.detach().cpu().numpy() if torch.is_tensor(v) else np.asarray(v)
                self.records[name].append(np.array(v, copy=True))

    def history(self) -> History:
        return History(np.array(self.steps), {n: np.stack(v) for n, v in self.records.items() if v})


def train(
    model,
    params: dict[str, torch.Tensor],
    data,
    steps: int,
    *,
    optimizer: str = "adam",
    lr=1e-3,
    group_lr: Mapping[str, object] | None = None,
    momentum: float = 0.0,
    betas: tuple[float, float] = (0.9, 0.999),
    eps: float = 1e-8,
    weight_decay: float = 0.0,
    batch_size: int | None = None,
    clip: float | None = None,
    schedule: Callable[[int], float] | None = None,
    loss_fn: Callable = cross_entropy,
    log_at: int | Sequence[int] = 60,
    callbacks: Mapping[str, Callable] | None = None,
    seed: int = 0,
    desc: str = "train",
    frozen: Sequence[str] = (),
    freeze_at: Mapping[str, int] | None = None,
    opt_state: dict | None = None,
) -> History:
    """Train all K instances of ``params`` (updated in place) for ``steps`` steps.

    Args:
        model: has ``specs()`` (name -> ParamSpec with a ``group``) and ``forward(params, X)``.
        params: name -> (K, ...) tensors with requires_grad.
        data: ``(X, y)`` tensors of the whole training set (full batch if ``batch_size``
            is None, else minibatches drawn with a generator seeded by ``seed``), or a
            callable ``data(step) -> (X, y)`` that streams batches.
        optimizer: ``gd`` (full batch, plain steps), ``sgd`` (optional momentum),
            ``adam`` (L2 weight decay in the gradient) or ``adamw`` (decoupled decay).
        lr: learning rate, a scalar or one per instance.
        group_lr: parameter group -> learning rate (scalar or per instance); overrides
            ``lr`` for that group, e.g. ``{"qk": eta_qk, "ov": eta_ov}``.
        clip: clip each instance's global gradient norm to this value.
        schedule: step -> multiplier of every learning rate.
        log_at: number of log-spaced logging steps, or the explicit steps.
        callbacks: name -> ``fn(step, params) -> (K, ...)`` metrics, called under
            no_grad at every logging step; ``loss`` (the batch loss) is always logged.
        frozen: names of weights that are not trained.
        freeze_at: weight name -> the step from which it is no longer updated (an
            ablation that freezes a weight mid-run, e.g. the embedding once the order-0
            stair is done); the other weights and every optimizer state carry on.
        opt_state: a dict the optimizer keeps its state in, ``name -> {"m": ..., "v": ...}``
            for Adam (the raw moments, before bias correction), so that a callback that
            holds the dict can read it; a fresh one by default.

    Returns:
        A :class:`History`. Raises :class:`TrainingDivergedError` on NaN/inf.

    The loop is :func:`_run`; before it, :func:`_check_args` refuses a bad call,
    :func:`_learning_rates` gives each trained weight its per-instance rate and
    :func:`lib.training.smoke.plan` cuts the run where the smoke mode asks (``BOOK_SMOKE=1``:
    two updating steps, a few logs, their times recorded).
    """
    _check_args(optimizer, steps)
    _perturb_from_env(params)
    trained, lr_of, freeze_at = _learning_rates(model, params, lr, group_lr, frozen, freeze_at)
    state = {} if opt_state is None else opt_state
    for n in trained:
        state.setdefault(n, {})
    hyper = Hyper(momentum, betas, eps, weight_decay, decoupled=optimizer == "adamw")
    update = _Update(trained, state, lr_of, freeze_at, STEP[optimizer], hyper, clip, steps)
    next_batch = _batch_stream(data, optimizer, batch_size, seed)
    log = _Log(steps, log_at, callbacks)
    n_logs = len(log.at)
    run = smoke.plan(steps, log.at)
    log.at = run.log_at
    _run(model, params, steps, run, next_batch, loss_fn, log, update, schedule, desc)
    _check_finite(steps, params, None)
    run.clock.record(
        desc=desc,
        model=type(model).__name__,
        K=next(iter(params.values())).shape[0],
        steps=steps,
        run_steps=run.cut,
        n_logs=n_logs,
        n_logs_run=len(log.at),
    )
    return log.history()


def _perturb_from_env(params: dict[str, torch.Tensor]) -> None:
    """Under ``BOOK_PERTURB=REL:SEED`` (:func:`lib.env.perturbation`), multiply every
    parameter in place by ``1 + REL * z`` (:func:`lib.training.init.perturb`, instance k's
    noise from ``(SEED, k)``) before the run starts; otherwise do nothing."""
    found = perturbation()
    if found is None:
        return
    rel, seed = found
    new = perturb(params, rel, seed)
    with torch.no_grad():
        for name, p in params.items():
            p.copy_(new[name])


def _check_args(optimizer: str, steps: int) -> None:
    if optimizer not in OPTIMIZERS:
        raise ConfigError(f"unknown optimizer {optimizer!r}; choose from {OPTIMIZERS}")
    if steps < 0:
        raise ConfigError(f"steps must be >= 0, got {steps}")


def _learning_rates(model, params, lr, group_lr, frozen, freeze_at):
    """The trained weights, each one's per-instance learning rate shaped to broadcast over
    it (``group_lr`` of its group, else ``lr``), and the checked ``freeze_at``."""
    specs = model.specs()
    unknown = set(params) - set(specs)
    if unknown:
        raise ConfigError(f"params {sorted(unknown)} are not weights of {type(model).__name__}")
    K = next(iter(params.values())).shape[0]
    device = next(iter(params.values())).device
    groups = {s.group for s in specs.values()}
    group_lr = dict(group_lr or {})
    for group in group_lr:
        if group not in groups:
            raise ConfigError(
                f"group_lr names group {group!r}, which {type(model).__name__} lacks ({sorted(groups)})"
            )
    base_lr = per_instance(lr, K, "lr", torch.float32, device, nonnegative=True)
    lrs = {
        group: per_instance(v, K, f"group_lr[{group!r}]", torch.float32, device, nonnegative=True)
        for group, v in group_lr.items()
    }
    trained = {n: p for n, p in params.items() if n not in frozen}
    freeze_at = dict(freeze_at or {})
    for name, at in freeze_at.items():
        if name not in trained:
            raise ConfigError(
                f"freeze_at names {name!r}, which is not a trained weight ({sorted(trained)})"
            )
        if not (isinstance(at, int) and at >= 0):
            raise ConfigError(f"freeze_at[{name!r}] must be a step >= 0, got {at!r}")
    lr_of = {n: per_instance_view(lrs.get(specs[n].group, base_lr), p) for n, p in trained.items()}
    return trained, lr_of, freeze_at


@dataclass
class _Update:
    """One optimizer step of every trained weight, from the loss of every instance."""

    trained: dict
    state: dict
    lr_of: dict
    freeze_at: dict
    step_fn: Callable
    hyper: Hyper
    clip: float | None
    steps: int

    def __call__(self, loss: torch.Tensor, step: int, mult: float) -> None:
        grads = list(torch.autograd.grad(loss.sum(), list(self.trained.values())))
        with torch.no_grad():
            if self.clip is not None:
                grads = clip_per_instance(grads, self.clip)
            for (name, p), grad in zip(self.trained.items(), grads, strict=True):
                if step >= self.freeze_at.get(name, self.steps + 1):
                    continue
                self.step_fn(
                    p, grad, self.state[name], self.lr_of[name] * mult, step + 1, self.hyper
                )


def _run(model, params, steps, run, next_batch, loss_fn, log, update, schedule, desc):
    """The loop: at every step the loss, a finiteness check and the logs where they fall,
    then (before ``run.cut``, the steps the smoke mode leaves) an update."""
    cut, clock = run.cut, run.clock
    # A bar only where a person watches one long run: never under BOOK_QUIET (the build, the
    # tests, the benchmark's many short runs), and only once a run has lasted BAR_DELAY_S.
    bar = tqdm(
        total=steps, desc=desc, disable=quiet(), mininterval=1.0, leave=False, delay=BAR_DELAY_S
    )
    try:
        for step in range(steps + 1):
            if cut < step < steps and step not in log.at:
                continue  # past the cut: the weights no longer change; only the logs are run
            clock.step_started()
            X, y = next_batch(step)
            with torch.set_grad_enabled(step < cut):
                loss = loss_fn(model.forward(params, X), y)
            # Checked before the update, so the message names the weight that went bad
            # first, not every weight its gradient has since contaminated.
            if step in log.at or not torch.isfinite(loss.detach()).all():
                _check_finite(step, params, loss.detach())
            if step in log.at:
                clock.log_started()
                log(step, params, loss)
                clock.log_ended()
            if step == steps:
                break
            if step >= cut:
                continue
            update(loss, step, 1.0 if schedule is None else float(schedule(step)))
            clock.step_ended()
            bar.update(1)
    finally:
        bar.close()

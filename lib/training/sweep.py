"""A labelled grid of instances: one batched run, read back by name.

A sweep over seeds and hyperparameters is one batched run whose instance dimension K
is the flattened grid. :class:`Sweep` keeps the labels::

    sw = Sweep(seed=[0, 1, 2], gamma=[1.0, 0.3])          # K = 6, the last axis fastest
    params = build(model, sw["seed"], gamma=sw["gamma"], device=device)
    h = engine.train(model, params, data, steps, lr=sw.tensor("lr"), ...)
    ds = sw.dataset(h)                                     # an xarray.Dataset
    ds["R0"].sel(gamma=1.0).mean("seed")                   # dims: step

The labelled arrays are `xarray <https://xarray.dev>`_: every metric of a
:class:`lib.training.engine.History` of shape ``(n_logs, K, ...)`` becomes an array with the dims
``("step", *sweep axes, ...)``, so selecting an arm and averaging over seeds are named
operations instead of index arithmetic. A run whose instances are not a full grid (a
real-text model beside its controls and perturbed copies) labels them with
:class:`Instances`, one row of labels per instance.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np
import torch

from ..env import ConfigError


class Sweep:
    """The Cartesian product of named axes, flattened in C order (last axis fastest)."""

    def __init__(self, **axes: Sequence):
        if not axes:
            raise ConfigError("a Sweep needs at least one axis, e.g. Sweep(seed=[0, 1, 2])")
        self.axes: dict[str, list] = {}
        for name, values in axes.items():
            values = list(values)
            if not values:
                raise ConfigError(f"sweep axis {name!r} has no values")
            if len(set(map(repr, values))) != len(values):
                raise ConfigError(f"sweep axis {name!r} repeats a value: {values}")
            self.axes[name] = values
        self._rows = list(itertools.product(*self.axes.values()))

    @property
    def K(self) -> int:
        """The number of instances."""
        return len(self._rows)

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(len(v) for v in self.axes.values())

    def __len__(self) -> int:
        return self.K

    def __getitem__(self, name: str) -> list:
        """The value of axis ``name`` for every instance, in instance order."""
        if name not in self.axes:
            raise KeyError(f"{name!r} is not an axis of this sweep; axes: {list(self.axes)}")
        i = list(self.axes).index(name)
        return [row[i] for row in self._rows]

    def tensor(self, name: str, dtype=torch.float32, device=None) -> torch.Tensor:
        """Axis ``name`` as a per-instance tensor (for ``lr``, ``gamma``, ``group_lr``)."""
        return torch.tensor(self[name], dtype=dtype, device=device)

    def index(self, **where) -> list[int]:
        """The instances whose labels match every ``axis=value`` given."""
        for name in where:
            self[name]  # raises on an unknown axis
        names = list(self.axes)
        return [
            k
            for k, row in enumerate(self._rows)
            if all(row[names.index(n)] == v for n, v in where.items())
        ]

    def label(self, k: int) -> dict:
        """The labels of instance ``k``."""
        return dict(zip(self.axes, self._rows[k], strict=True))

    def dataarray(self, values, name: str | None = None, lead: Sequence[str] = ()):
        """An array whose instance axis (after ``lead`` leading dims) becomes the sweep axes."""
        import xarray as xr

        a = np.asarray(values)
        n = len(lead)
        if a.ndim <= n or a.shape[n] != self.K:
            raise ConfigError(
                f"{name or 'array'} has shape {a.shape}; expected its axis {n} to be the "
                f"K={self.K} instances of this sweep"
            )
        shaped = a.reshape(*a.shape[:n], *self.shape, *a.shape[n + 1 :])
        extra = [f"{name or 'dim'}_{i}" for i in range(a.ndim - n - 1)]
        coords = {ax: vals for ax, vals in self.axes.items()}
        return xr.DataArray(shaped, dims=[*lead, *self.axes, *extra], coords=coords, name=name)

    def dataset(self, history):
        """Every metric of a :class:`lib.training.engine.History` as a labelled ``xarray.Dataset``."""
        import xarray as xr

        ds = xr.Dataset(
            {n: self.dataarray(v, n, lead=("step",)) for n, v in history.metrics.items()}
        )
        return ds.assign_coords(step=np.asarray(history.steps))

    def __repr__(self) -> str:
        axes = ", ".join(f"{n}={v}" for n, v in self.axes.items())
        return f"Sweep({axes}; K={self.K})"


class Instances:
    """The instances of one batched run, each labelled by ``source`` (the stream it trains
    on), ``init`` ("small" or "standard"), ``seed`` and ``copy`` (0: the instance itself;
    1, 2, ...: a copy with its initial weights perturbed)."""

    def __init__(self, rows):
        self.rows = [dict(r) for r in rows]

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, name: str) -> list:
        return [r[name] for r in self.rows]

    def index(self, **where) -> list[int]:
        """The instances whose labels match every ``label=value`` given, in seed order."""
        return [k for k, r in enumerate(self.rows) if all(r[n] == v for n, v in where.items())]

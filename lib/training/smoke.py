"""How a training run is cut in the smoke mode (``BOOK_SMOKE=1``, :mod:`lib.env`).

:func:`plan` turns a run of ``steps`` steps logged at ``log_at`` into the run the
environment asks for: in the smoke mode only the first :data:`~lib.env.SMOKE_STEPS` steps
update the weights, and the run is logged at its first :data:`~lib.env.SMOKE_LOGS` logging
steps and its last one (at every one with ``BOOK_SMOKE_LOGS=all``, so that the history has
its full shape, and at every one in a run logged at every step: a probe whose analysis reads
its history by step). Its :class:`Clock` times the steps and the logs and records them
(:func:`lib.env.smoke_record`); outside the smoke mode the plan is the run itself and its
clock does nothing.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from ..env import SMOKE_LOGS, SMOKE_STEPS, smoke, smoke_all_logs, smoke_record

__all__ = ["Plan", "Clock", "plan"]


class Clock:
    """Times nothing: the clock of a full run."""

    def step_started(self) -> None:
        pass

    def step_ended(self) -> None:
        pass

    def log_started(self) -> None:
        pass

    def log_ended(self) -> None:
        pass

    def record(self, **run) -> None:
        pass


@dataclass
class SmokeClock(Clock):
    """Seconds per updating step and in the logs, recorded at the end of the run."""

    step_s: list[float] = field(default_factory=list)
    log_s: float = 0.0
    started: float = field(default_factory=time.perf_counter)
    _step: float = 0.0
    _log: float = 0.0

    def step_started(self) -> None:
        self._step = time.perf_counter()

    def step_ended(self) -> None:
        self.step_s.append(time.perf_counter() - self._step)

    def log_started(self) -> None:
        self._log = time.perf_counter()

    def log_ended(self) -> None:
        spent = time.perf_counter() - self._log
        self.log_s += spent
        self._step += spent  # a log inside a step is not the step's time

    def record(self, **run) -> None:
        smoke_record(
            dict(
                run, step_s=self.step_s, log_s=self.log_s, wall_s=time.perf_counter() - self.started
            )
        )


@dataclass(frozen=True)
class Plan:
    """``cut``: the steps that update the weights; ``log_at``: the steps logged."""

    cut: int
    log_at: set[int]
    clock: Clock


def plan(steps: int, log_at: set[int]) -> Plan:
    """The run of ``steps`` steps logged at ``log_at``, as the environment asks for it."""
    if not smoke():
        return Plan(steps, log_at, Clock())
    if not smoke_all_logs() and len(log_at) < steps + 1:
        at = sorted(log_at)
        log_at = set(at[:SMOKE_LOGS] + at[-1:])
    return Plan(min(steps, SMOKE_STEPS), log_at, SmokeClock())

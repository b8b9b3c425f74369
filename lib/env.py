"""The runtime environment: scale, device and quietness. Nothing experiment-specific.

``BOOK_SCALE`` is ``ci`` (every chapter under nbmake in minutes), ``book`` (the
default, the rendered book on a laptop) or ``paper`` (the papers' scale, for a GPU).
When ``BOOK_SCALE`` is unset, ``paper`` is chosen automatically on a machine with
CUDA and ``book`` otherwise; on a CPU, ``paper`` is refused unless ``BOOK_PAPER_ON_CPU=1``
(:func:`check_scale`). ``BOOK_DEVICE`` overrides the device (default: ``cuda`` when
available, else ``cpu``). ``BOOK_QUIET`` turns progress bars off.

``BOOK_SMOKE=1`` is the smoke mode (``make paper-smoke``): at any scale, every training run
of :func:`lib.training.engine.train` makes :data:`SMOKE_STEPS` optimizer steps instead of its
``steps`` (the weights then stay as they are) and is logged at its first
:data:`SMOKE_LOGS` logging steps and its last one, or at every one of them with
``BOOK_SMOKE_LOGS=all`` (then every history has its full shape, and the memory that the
logs keep is measured too); a chapter's claims are recorded, not asserted
(:mod:`lib.book.claims`). Each run's seconds per step and per log are appended, one JSON line
per run, to the file named by ``BOOK_SMOKE_LOG`` (if set), from which ``make paper-smoke``
estimates the full run's time.
"""

from __future__ import annotations

import contextlib
import json
import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

SCALES = ("ci", "book", "paper")
SMOKE_STEPS = 2  # optimizer steps per training run in the smoke mode
SMOKE_LOGS = 3  # logging steps run from the start of each run in the smoke mode (and the last)


class ConfigError(ValueError):
    """A bad scale, device or experiment config."""


def get_scale() -> str:
    """The scale named by ``BOOK_SCALE``; ``paper`` on a CUDA machine, else ``book``."""
    raw = os.environ.get("BOOK_SCALE")
    if raw is None or raw.strip() == "":
        import torch

        return "paper" if torch.cuda.is_available() else "book"
    scale = raw.strip().lower()
    if scale not in SCALES:
        raise ConfigError(
            f"BOOK_SCALE={raw!r} is not a known scale; valid values are: {', '.join(SCALES)}"
        )
    return scale


def get_device() -> torch.device:
    """``BOOK_DEVICE`` if set, else ``cuda`` when available, else ``cpu``.

    Only devices that work here are accepted: ``cpu``, or ``cuda``/``cuda:N`` with a GPU
    present and N below the number of GPUs. Anything else is refused before any work
    starts, with a message that names the problem and the fix.
    """
    import torch

    raw = os.environ.get("BOOK_DEVICE", "").strip()
    if not raw:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    fix = "set BOOK_DEVICE=cpu, or unset it to choose automatically"
    try:
        dev = torch.device(raw)
    except RuntimeError:
        raise ConfigError(f"BOOK_DEVICE={raw!r} is not a device name; {fix}") from None
    if dev.type == "cpu":
        return dev
    if dev.type != "cuda":
        raise ConfigError(f"BOOK_DEVICE={raw!r}: the book runs on cpu or cuda only; {fix}")
    n = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if n == 0:
        raise ConfigError(f"BOOK_DEVICE={raw!r} but this machine has no CUDA GPU; {fix}")
    if dev.index is not None and dev.index >= n:
        raise ConfigError(
            f"BOOK_DEVICE={raw!r} but this machine has {n} GPU(s), cuda:0 to cuda:{n - 1}; {fix}"
        )
    return dev


# What `make paper-smoke` estimated for the full paper runs on one CPU thread (README):
# from under an hour (Chapter 9) to about 4,100 hours (Chapter 5), 4,200 hours in all.
PAPER_CPU_ESTIMATE = "under an hour to about 4,100 hours a chapter, some 4,200 hours for the book"
PAPER_ON_CPU = "BOOK_PAPER_ON_CPU"  # =1: run paper scale on a CPU all the same


def check_scale(scale: str, device: torch.device, estimate: str | None = None) -> None:
    """Refuse ``paper`` scale on a CPU before any work starts: it is sized for a GPU.

    Allowed all the same in the smoke mode (``make paper-smoke`` cuts every run to 2 steps)
    and with ``BOOK_PAPER_ON_CPU=1``. ``estimate``: the expected time of what was asked
    for, when known (default :data:`PAPER_CPU_ESTIMATE`).
    """
    if scale != "paper" or device.type != "cpu" or smoke():
        return
    opt_in = os.environ.get(PAPER_ON_CPU, "").strip()
    if opt_in == "1":
        return
    if opt_in not in ("", "0"):
        raise ConfigError(f"{PAPER_ON_CPU}={opt_in!r}: set {PAPER_ON_CPU}=1, or unset it")
    raise ConfigError(
        f"BOOK_SCALE=paper on a CPU is refused: its runs would take "
        f"{estimate or PAPER_CPU_ESTIMATE} on one CPU thread (make paper-smoke's estimate). "
        f"Run it on a GPU, use BOOK_SCALE=book, or set {PAPER_ON_CPU}=1 to start it anyway"
    )


def smoke() -> bool:
    """Whether ``BOOK_SMOKE`` asks for the smoke mode (``1``); unset, empty or ``0``: no."""
    raw = os.environ.get("BOOK_SMOKE", "").strip()
    if raw not in ("", "0", "1"):
        raise ConfigError(f"BOOK_SMOKE={raw!r}: set BOOK_SMOKE=1 for the smoke mode, or unset it")
    return raw == "1"


def smoke_all_logs() -> bool:
    """Whether ``BOOK_SMOKE_LOGS=all`` asks the smoke mode to run every logging step."""
    raw = os.environ.get("BOOK_SMOKE_LOGS", "").strip()
    if raw not in ("", "all"):
        raise ConfigError(f"BOOK_SMOKE_LOGS={raw!r}: set BOOK_SMOKE_LOGS=all, or unset it")
    return raw == "all"


def smoke_record(record: dict) -> None:
    """Append ``record`` as one JSON line to the file named by ``BOOK_SMOKE_LOG``, if set."""
    path = os.environ.get("BOOK_SMOKE_LOG", "").strip()
    if path:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(record) + "\n")


def quiet() -> bool:
    """True inside the book build and the test suite: no progress bars in outputs."""
    return os.environ.get("BOOK_QUIET", "0") not in ("", "0", "false", "False")


@contextlib.contextmanager
def quietly():
    """No progress bars in the block (a benchmark's many short runs), restored afterwards."""
    before = os.environ.get("BOOK_QUIET")
    os.environ["BOOK_QUIET"] = "1"
    try:
        yield
    finally:
        if before is None:
            del os.environ["BOOK_QUIET"]
        else:
            os.environ["BOOK_QUIET"] = before


@contextlib.contextmanager
def cpu_threads(n: int | None):
    """Run the block on ``n`` CPU threads (``None``: unchanged), restored afterwards.

    The stability reruns use it: a verdict that changes with the thread count hinged on
    the order of floating-point sums.
    """
    import torch

    before = torch.get_num_threads()
    if n is not None:
        if int(n) < 1:
            raise ConfigError(f"cpu threads must be >= 1, got {n}")
        torch.set_num_threads(int(n))
    try:
        yield
    finally:
        torch.set_num_threads(before)


PERTURB_ENV = "BOOK_PERTURB"
FAILED_ENV = "BOOK_FAILED_CHAPTERS"  # the report's kernel: {chapter: why} of those that failed


def perturbation() -> tuple[float, int] | None:
    """``BOOK_PERTURB=REL:SEED`` (e.g. ``1e-6:1``): every training run's initial parameters
    are multiplied by ``1 + REL * z``, ``z ~ N(0, 1)`` drawn from SEED
    (:func:`lib.training.engine.train`), so a verdict that hangs on the last bits of the
    floating point shows itself. Unset or empty: no perturbation (the default)."""
    raw = os.environ.get(PERTURB_ENV, "").strip()
    if not raw:
        return None
    fix = f"set {PERTURB_ENV}=REL:SEED, e.g. 1e-6:1 (REL in (0, 0.1], SEED an integer), or unset it"
    rel, sep, seed = raw.partition(":")
    try:
        out = (float(rel), int(seed))
    except ValueError:
        raise ConfigError(f"{PERTURB_ENV}={raw!r} is not REL:SEED; {fix}") from None
    if not sep or not 0 < out[0] <= 0.1:
        raise ConfigError(f"{PERTURB_ENV}={raw!r}: {fix}")
    return out


# A try run (``make try``, bookbuild.trying): a reader's settings for one chapter.
SET_ENV = "BOOK_TRY_SET"
CHAPTER_ENV = "BOOK_TRY_CHAPTER"


def trying() -> bool:
    """Whether this process runs a try (its claims are recorded, not asserted)."""
    return bool(os.environ.get(SET_ENV))

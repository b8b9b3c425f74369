"""Process-wide settings that every run of the book needs, applied when ``lib`` is imported.

:func:`set_process_defaults` is the one place where importing the library changes the
process: ``lib/__init__.py`` calls it, before anything imports torch.
"""

from __future__ import annotations

import os


def set_process_defaults() -> None:
    """Make idle threads sleep and flush denormal floats to zero, for this process.

    ``OMP_WAIT_POLICY=PASSIVE`` (unless already set: an explicit setting wins): threads
    that wait for work sleep instead of spinning. The Makefile exports the same for
    ``make book`` and ``make test``; this covers a chapter run any other way (nbmake by
    hand, a script). A chapter's stability rerun on 2 threads beside another job otherwise
    spins for the core that job holds, many times slower. OpenMP reads the variable once,
    when torch loads, so it is set before torch is imported here.

    ``torch.set_flush_denormal(True)``: floats below 1e-38 become zero. Adam drives the
    logits of labels a model has ruled out down at a constant rate, so their probabilities
    and gradients pass through the denormal range, where CPUs compute many times slower
    (``make bench`` measures it). The flag is per thread and worker threads copy it when
    they are created, so it is set here, before torch starts its thread pool.

    Neither setting changes a result; both only change how fast it comes.
    """
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    import torch

    torch.set_flush_denormal(True)

"""Process-wide settings that every run of the book needs, applied when ``lib`` is imported.

:func:`set_process_defaults` is the one place where importing the library changes the
process: ``lib/__init__.py`` calls it, before anything imports torch.
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import os
import sys


def set_process_defaults() -> None:
    """Make idle threads sleep and flush denormal floats to zero, for this process.

    ``OMP_WAIT_POLICY=PASSIVE`` (unless already set: an explicit setting wins): threads
    that wait for work sleep instead of spinning. The Makefile exports the same for
    ``make book`` and ``make test``; this covers a chapter run any other way (nbmake by
    hand, a script). A chapter's stability rerun on 2 threads beside another job otherwise
    spins for the core that job holds, many times slower. OpenMP reads the variable once,
    when torch loads, so it is set before torch is imported.

    ``torch.set_flush_denormal(True)``: floats below 1e-38 become zero. Adam drives the
    logits of labels a model has ruled out down at a constant rate, so their probabilities
    and gradients pass through the denormal range, where CPUs compute many times slower
    (``make bench`` measures it). The flag is per thread and worker threads copy it when
    they are created, so it is set as soon as torch is imported, before any of its work:
    at once if torch is already loaded, else right after its import. Importing ``lib``
    does not import torch itself, so the build's command line (``bookbuild``) starts
    without it.

    Neither setting changes a result; both only change how fast it comes.
    """
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    if "torch" in sys.modules:
        sys.modules["torch"].set_flush_denormal(True)
    elif not any(isinstance(f, _AfterTorchImport) for f in sys.meta_path):
        sys.meta_path.insert(0, _AfterTorchImport())


class _AfterTorchImport(importlib.abc.MetaPathFinder):
    """Finds torch as the other finders do, and has its loader set flush-denormal once the
    module has run (then leaves ``sys.meta_path``)."""

    def find_spec(self, name, path=None, target=None):
        if name != "torch":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            return spec
        run = spec.loader.exec_module

        def exec_module(module):
            run(module)
            module.set_flush_denormal(True)

        spec.loader.exec_module = exec_module
        return spec

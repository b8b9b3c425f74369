"""The Order of Learning: the library behind the executable book.

Core: ``env`` (scale, device, quietness), ``init`` (the one init function), ``models``
(the batched models), ``engine`` (batched training), ``sweep`` (labelled grids of
instances), ``tasks``, ``corpora``, ``signatures``, ``metrics``, ``style`` (the figure
style) and ``interactive`` (offline slider figures). Per topic: ``staircase``, ``flow``,
``lm``, ``pretrained``, ``embedstruct`` and ``qkov``. The book: ``config`` (each chapter's
constants per scale, and ``announce``), ``claims`` (what each chapter checks, for the
reproduction report), ``booktools`` (the build) and ``bench`` (speed, as ratios).
Chapters import what they need: ``from lib import signatures as sig``.
"""

__version__ = "0.1.0"

import torch as _torch

# Flush denormal floats (below 1e-38) to zero, process-wide. Adam drives the logits of
# labels a model has ruled out down at a constant rate, so their probabilities and
# gradients pass through the denormal range, where CPUs compute many times slower
# (`make bench` measures it). The flag is per thread and worker threads copy it when they
# are created, so it is set here, on import, before torch starts its thread pool.
_torch.set_flush_denormal(True)

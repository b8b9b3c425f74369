"""The Order of Learning: the library behind the executable book.

Modules: ``config`` (scale and device), ``init`` (the one init function),
``models``, ``engine`` (batched training), ``tasks``, ``corpora``, ``signatures``,
``metrics`` and ``style`` (the figure style). Chapters import what they need:
``from lib import signatures as sig``.
"""

__version__ = "0.1.0"

import torch as _torch

# Flush denormal floats (below 1e-38) to zero, process-wide. Adam drives the logits of
# labels a model has ruled out down at a constant rate, so their probabilities and
# gradients pass through the denormal range, where CPUs compute many times slower
# (`make bench` measures it). The flag is per thread and worker threads copy it when they
# are created, so it is set here, on import, before torch starts its thread pool.
_torch.set_flush_denormal(True)

"""The Order of Learning: the library behind the executable book.

Its folders are its layers, bottom up; a module imports only from its own layer and the
ones below it (``tests/test_layout.py`` checks it, with the 500-line limit per module and
the absence of import circles):

- ``book``: what a page shows (claims, the one formatter, the figure style, interactive
  figures); it imports no science layer, and the experiments draw with it;
- ``data``: the synthetic tasks, the offline corpora and their tokenizers, the
  probability signatures and what a stream's Markov chains predict;
- ``training``: the one init, the batched models, the engine and its optimizers, sweeps;
- ``measure``: what is read off weights and histories: alignment, onsets and plateaus,
  the staircase's readings, probes, attention, nulls, rates and statistics over seeds;
- ``theory``: the flow expansions, the escape from a saddle, the reduced QK/OV theory,
  what sets the order, Adam's plateau;
- ``experiments``: one module per chapter (its typed ``Config`` and plumbing) and the
  runs chapters share. This is the layer that starts training runs; the layers below
  define models, losses and what a run logs, and never start one.

Beside them: ``env`` (scale, device, quietness, ``ConfigError``) and ``process`` (the
settings importing ``lib`` applies to the process, below: idle threads sleep, denormal
floats flush to zero). The build of the book (stamps, workers, the lock, staging, the
test cache, ``make try``, the benchmark) is not part of the library: it is the package
:mod:`bookbuild` beside it, which imports ``lib`` and is never imported by it. Each
package's docstring names its modules. Chapters import what they need:
``from lib.data import signatures as sig``.
"""

__version__ = "0.1.0"

from .process import set_process_defaults as _set_process_defaults

_set_process_defaults()

"""The Order of Learning: the library behind the executable book.

Its folders are its layers, each importing only from those below it: ``data`` (tasks,
corpora, signatures), ``training`` (the init, the batched models, the engine), ``measure``
(alignment, onsets, probes, nulls, rates), ``theory`` (the flow expansions, the reduced
theory), ``experiments`` (one module per chapter: its typed ``Config`` and plumbing) and
``book`` (claims, the page's formatter, the figure style, and the build). Beside them:
``env`` (scale, device, quietness, ``ConfigError``), ``process`` (the settings importing
``lib`` applies to the process: idle threads sleep, denormal floats flush to zero),
``booktools`` (the build's command line, ``python -m lib.booktools``) and ``bench``
(speed, as ratios). Chapters import what they need:
``from lib.data import signatures as sig``.
"""

__version__ = "0.1.0"

from .process import set_process_defaults as _set_process_defaults

_set_process_defaults()

"""The Order of Learning: the library behind the executable book.

Modules: ``config`` (scale and device), ``init`` (the one init function),
``models``, ``engine`` (batched training), ``tasks``, ``corpora``, ``signatures``,
``metrics`` and ``style`` (the figure style). Chapters import what they need:
``from lib import signatures as sig``.
"""

__version__ = "0.1.0"

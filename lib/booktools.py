"""The book's build from the command line: ``python -m lib.booktools CMD ...``.

This module is only the entry point that the Makefile, ``conftest.py`` and the tests run as
a program; it holds no code of its own. The commands (``execute``, ``stage``, ``convert``,
``times``, ``test-cache``, ``try``) are parsed by :func:`lib.book.cli.main`, and the build
lives in :mod:`lib.book`, one module per concern: import from there, not from here.
"""

from __future__ import annotations

import sys

from .book.cli import main

__all__ = ["main"]

if __name__ == "__main__":
    sys.exit(main())

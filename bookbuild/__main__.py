"""The book's build from the command line: ``python -m bookbuild CMD ...``.

This module is only the entry point that the Makefile, ``conftest.py`` and the tests run as
a program; it holds no code of its own. The commands (``execute``, ``stage``, ``convert``,
``times``, ``test-cache``, ``try``) are parsed by :func:`bookbuild.cli.main`, and the build
lives in the modules of :mod:`bookbuild`, one per concern: import from there, not from here.
"""

from __future__ import annotations

import sys

from .cli import main

__all__ = ["main"]

if __name__ == "__main__":
    sys.exit(main())

"""The book's build in one namespace, and its command line: ``python -m lib.booktools CMD``.

The Makefile, ``conftest.py``, the tests and :mod:`lib.bench` use this module; the code
lives in :mod:`lib.book`, one module per concern (its docstring says what the build
guarantees: stamps, parallel execution, Ctrl-C, staging).
"""

from __future__ import annotations

import sys

from .book import testcache
from .book.cli import main
from .book.execute import REPORT_PREFIX, execute
from .book.fold import FOLD_TAGS, fold_plumbing
from .book.mathjax import mathjax_dir
from .book.notebook import (
    CELL_TIMEOUT,
    ROOT,
    STAMP_KEY,
    BuildError,
    chapters,
    check_chapter,
    convert,
    execute_one,
    select_chapters,
    write_error,
)
from .book.pool import Job, Pool, PoolResult, run_pool, worker_env
from .book.stage import BOOK_FILES, stage
from .book.stamps import (
    PACKAGE,
    chapter_stamp,
    environment_fingerprint,
    lib_closure,
    notebook_stamp,
)
from .book.timing import DURATIONS_RECORD, timing_table

__all__ = [
    "BOOK_FILES",
    "CELL_TIMEOUT",
    "DURATIONS_RECORD",
    "FOLD_TAGS",
    "PACKAGE",
    "REPORT_PREFIX",
    "ROOT",
    "STAMP_KEY",
    "BuildError",
    "Job",
    "Pool",
    "PoolResult",
    "chapter_stamp",
    "chapters",
    "check_chapter",
    "convert",
    "environment_fingerprint",
    "execute",
    "execute_one",
    "fold_plumbing",
    "lib_closure",
    "main",
    "mathjax_dir",
    "notebook_stamp",
    "run_pool",
    "select_chapters",
    "stage",
    "testcache",
    "timing_table",
    "worker_env",
    "write_error",
]

if __name__ == "__main__":
    sys.exit(main())

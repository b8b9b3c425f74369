"""The build of the book, called by the Makefile (``python -m bookbuild CMD``).

It imports the library (``lib``) and is never imported by it: the science and what a page
shows live in ``lib``, the machinery that executes and stages the pages lives here.
The book never shows outputs from other code, another scale or another version, and a
rebuild executes only what changed:

* ``execute``: every chapter has a **stamp**, a hash of what its outputs depend on: its
  own source; the ``lib`` modules it imports, transitively (found by parsing the
  imports); every other file in ``lib/``; ``pyproject.toml`` and the requirements files;
  the name and version of every installed distribution; the Python version; the scale
  and the device. A chapter whose executed notebook is missing or carries another stamp
  is executed again, the stale ones in parallel (one worker per core, torch on one
  thread each, the longest chapter first). A chapter's notebook and claims are published
  only when its execution finished, together (its old failure log goes with them), so an
  interrupted run or a full disk leaves nothing half-done and a rerun recovers; a write
  that fails is named in one line. Ctrl-C stops every worker and kernel, and is reported
  as an interrupt, not a failure. Chapters are named exactly, by stem or number.
* ``stage``: a copy of the book whose chapters are the executed notebooks, with
  execution off. Sphinx re-reads a page when its file changes, and a notebook changes
  exactly when it was executed again, so a page is re-read if and only if its outputs
  may differ. A notebook without outputs is refused, and named.
* ``convert``: chapters are jupytext MyST-Markdown; nbmake and ruff read ``.ipynb``.
  A chapter whose header is not MyST (which would silently turn its code cells into
  Markdown) or that has no code cell is refused.
* ``execute --keep-going`` and ``failures``: a chapter that fails does not stop the book.
  Its page shows the cells that ran under a banner naming the error, the report marks it,
  and ``failures``, the build's last step, lists every failed chapter and exits non-zero.
* ``reference`` and ``compare``: the reference run's claim statuses at ``ci`` and
  ``book`` (``docs/reference_claims.json``, with its commit), and a run's differences from
  them or from another run (``make robust``): a check or finding that differs fails,
  a measured claim that differs is printed.
* ``times``: the table of seconds per phase and per notebook that ``make test`` prints.
* ``test-cache``: ``make test`` keeps each chapter that passed under nbmake, with its stamp
  at ``ci`` scale and the test's settings, and restores it instead of running it again
  while the stamp holds (``FRESH=1`` runs every chapter; a failure is never kept).

Every command holds a lock on its output folder, so two runs in one checkout serialize
instead of clobbering each other; the Makefile's targets hold one more, ``.book.lock``
(``lock``: it says whom a run waits for, and returns only after the command has ended).

Modules, one concern each: ``notebook`` (chapters as notebooks: read, convert, execute one;
imports nothing from ``lib``, so a worker process loads it alone), ``stamps`` (hashes of what
a chapter's outputs depend on), ``pool`` (worker processes, Ctrl-C and SIGTERM), ``execute``
(the stale chapters, through the pool), ``outputs`` (a chapter's outputs, staged and
published together), ``lock`` (the Makefile's lock, run as a file), ``mathjax`` and ``fold`` (what staging copies and
folds), ``stage`` (the book Sphinx reads), ``timing`` (the table of ``make test``),
``testcache`` (the chapters ``make test`` need not run again), ``reference`` (the
reference run's statuses, and a run's differences from them), ``robust`` (``make robust``:
the ci book perturbed against the plain one), ``trying`` (a chapter run
with a reader's own settings, ``make try``) and ``cli`` (the command line). ``__main__`` is the command run as a program (``python -m bookbuild``), and ``bench``
measures speed as ratios (batched against sequential training, a parallel against a
serial build). ``warm`` compiles, once at install, the bytecode of what the chapters and
the build import.
"""

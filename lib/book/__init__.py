"""The book: what a page shows of the library's results.

What a page shows: ``claims`` (what each chapter checks, for the reproduction report),
``report`` (the report's tables of every claim), ``reference`` (the reference run's
statuses, and where a run differs from them),
``page`` (the one formatter of glued numbers and tables), ``style`` (the figure style and
palettes) and ``interactive`` (offline slider figures). The chapters and
:mod:`lib.experiments` use them; they import nothing from the science layers.

The build of the pages (executing, staging, the test cache, ``make try``) is the package
:mod:`bookbuild`, outside the library.
"""

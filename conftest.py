"""Ctrl-C stops the whole test run, and parallel chapters start with the longest.

**Ctrl-C.** nbmake runs each chapter through nbclient, whose event loop takes over SIGINT
while a notebook runs: it shuts the kernel down, the chapter fails, and pytest would go
on to the next chapter. Here every SIGINT is also remembered (through the loop's handler
and outside it), and once the interrupted test has ended the session stops. Under
pytest-xdist (``make chapters`` runs one worker per core) this file is loaded by the
controller and by every worker: a worker whose chapter was interrupted stops taking new
ones, and the controller's KeyboardInterrupt shuts the workers down.

**Longest first.** With ``-n N``, the notebooks are ordered by their last recorded
duration (``.cache/chapter-durations.json``, written by ``python -m bookbuild times``
at the end of ``make test``; before any run, :data:`KNOWN_SECONDS`), the longest first,
and handed out one at a time to whichever worker asks (:class:`LongestFirst`), so that the
long chapters run side by side and the short ones fill the gaps at the end. xdist's
default scheduler would send each worker two consecutive notebooks at once: the two
longest to the same worker.
"""

import asyncio.unix_events
import importlib.util
import json
import signal
from itertools import cycle
from pathlib import Path

import pytest

_interrupted: list[bool] = []
_loop_cls = asyncio.unix_events._UnixSelectorEventLoop
_add_signal_handler = _loop_cls.add_signal_handler

DURATIONS = Path(".cache") / "chapter-durations.json"  # relative to the rootdir


# Seconds under nbmake at BOOK_SCALE=ci on the reference machine, for a checkout that has
# recorded none (docs/chapter_seconds.json; none where this file is copied outside the
# project). Only the order matters; a notebook missing here is taken as the longest.
def _known_seconds() -> dict[str, float]:
    try:
        path = Path(__file__).resolve().parent / "docs" / "chapter_seconds.json"
        return dict(json.loads(path.read_text())["ci"])
    except (OSError, ValueError, KeyError):
        return {}


KNOWN_SECONDS = _known_seconds()


def _kernel_defaults():
    """nbmake's kernels on Unix sockets of their own, not TCP ports that two workers can
    both be handed, and stopped within a second (``bookbuild.notebook.kernel_defaults``).
    That module is loaded from its file, without importing the ``bookbuild`` package, so
    that this also works where the tests copy this file, outside the project."""
    spec = importlib.util.find_spec("bookbuild")
    if spec is None or not spec.submodule_search_locations:
        return
    path = Path(list(spec.submodule_search_locations)[0]) / "notebook.py"
    book = importlib.util.spec_from_file_location("_book_notebook", path)
    module = importlib.util.module_from_spec(book)
    book.loader.exec_module(module)
    module.kernel_defaults()


def _remembering(self, sig, callback, *args):
    if sig == signal.SIGINT:
        inner = callback

        def callback(*a):
            _interrupted.append(True)
            inner(*a)

    return _add_signal_handler(self, sig, callback, *args)


def pytest_configure(config):
    _loop_cls.add_signal_handler = _remembering
    _kernel_defaults()

    def on_sigint(signum, frame):
        _interrupted.append(True)
        raise KeyboardInterrupt

    signal.signal(signal.SIGINT, on_sigint)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    yield
    if _interrupted:
        item.session.shouldstop = "interrupted by Ctrl-C: run the same command again"


def recorded_seconds(root: Path) -> dict[str, float]:
    """Each notebook's last recorded seconds (stem -> s), over :data:`KNOWN_SECONDS`."""
    known = dict(KNOWN_SECONDS)
    try:
        known.update(json.loads((root / DURATIONS).read_text()))
    except (OSError, ValueError):
        pass
    return known


def pytest_collection_modifyitems(config, items):
    """Notebooks first, the longest first (ties and the rest keep their order). Every
    xdist worker sorts the same way, so their collections agree."""
    notebooks = [it for it in items if it.path.suffix == ".ipynb"]
    if len(notebooks) < 2:
        return
    seconds = recorded_seconds(config.rootpath)
    notebooks.sort(key=lambda it: -seconds.get(it.path.stem, float("inf")))
    items[:] = notebooks + [it for it in items if it.path.suffix != ".ipynb"]


if importlib.util.find_spec("xdist") is not None:
    from xdist.scheduler import LoadScheduling

    class LongestFirst(LoadScheduling):
        """xdist's load scheduling, handing out the collection in order, one test at a
        time: two to each worker at the start (an xdist worker holds the test after the
        one it runs), then one more to each worker that finishes one."""

        def schedule(self):
            assert self.collection_is_completed
            if self.collection is not None:
                for node in self.nodes:
                    self.check_schedule(node)
                return
            if not self._check_nodes_have_same_collection():
                self.log("**Different tests collected, aborting run**")
                return
            self.collection = next(iter(self.node2collection.values()))
            self.pending[:] = range(len(self.collection))
            self.maxschedchunk = 1
            nodes = cycle(self.nodes)
            for _ in range(min(len(self.pending), 2 * len(self.nodes))):
                self._send_tests(next(nodes), 1)
            if not self.pending:
                for node in self.nodes:
                    node.shutdown()

    def pytest_xdist_make_scheduler(config, log):
        if config.getoption("dist") == "load":
            return LongestFirst(config, log)
        return None

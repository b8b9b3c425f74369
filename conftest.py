"""Ctrl-C stops the whole test run.

nbmake runs each chapter through nbclient, whose event loop takes over SIGINT while a
notebook runs: it shuts the kernel down, the chapter fails, and pytest would go on to the
next chapter. Here every SIGINT is also remembered (through the loop's handler and
outside it), and once the interrupted test has ended the session stops.
"""

import asyncio.unix_events
import signal

import pytest

_interrupted: list[bool] = []
_loop_cls = asyncio.unix_events._UnixSelectorEventLoop
_add_signal_handler = _loop_cls.add_signal_handler


def _remembering(self, sig, callback, *args):
    if sig == signal.SIGINT:
        inner = callback

        def callback(*a):
            _interrupted.append(True)
            inner(*a)

    return _add_signal_handler(self, sig, callback, *args)


def pytest_configure(config):
    _loop_cls.add_signal_handler = _remembering

    def on_sigint(signum, frame):
        _interrupted.append(True)
        raise KeyboardInterrupt

    signal.signal(signal.SIGINT, on_sigint)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    yield
    if _interrupted:
        item.session.shouldstop = "interrupted by Ctrl-C: run the same command again"

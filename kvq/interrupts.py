"""SIGINT and SIGTERM stop a command cleanly: no JVM or server left running, no partial file.

SIGTERM (what Kubernetes and `timeout` send) would otherwise end the process at once, skipping
every `finally`: a half-written OpenMetrics file, the part folders, and a JVM that lives on with
parent 1. Both signals raise `Interrupted` in the main thread instead, so the run unwinds the way
Ctrl-C does, and the job stops its JVM before removing the folders Spark's tasks write into.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Interrupted(KeyboardInterrupt):
    """SIGINT or SIGTERM arrived; a KeyboardInterrupt, so whatever handles Ctrl-C handles it."""

    def __init__(self, signum: int) -> None:
        self.name = signal.Signals(signum).name
        super().__init__(self.name)
        self.exit_code = 128 + signum
        """The shell's convention for a process ended by a signal: 130 for SIGINT, 143 SIGTERM."""


def _raise(signum: int, frame: FrameType | None) -> None:
    raise Interrupted(signum)


@contextmanager
def raised() -> Iterator[None]:
    """While the block runs, SIGINT and SIGTERM raise `Interrupted` in the main thread."""
    with _handled(_raise):
        yield


@contextmanager
def deferred() -> Iterator[None]:
    """While the block runs, SIGINT and SIGTERM are held, then raised as `Interrupted` when it ends.

    For the start of a local JVM: until PySpark's launcher returns, this process does not know
    the JVM's pid, so an interrupt there would leave it running. Also undoes the SIGINT handler
    a new SparkContext installs (the signals keep the handlers they had before the block)."""
    received: list[int] = []
    try:
        with _handled(lambda signum, frame: received.append(signum)):
            yield
    except BaseException:
        if received:  # e.g. the JVM's launcher, killed by the same signal, failed the start
            raise Interrupted(received[0]) from None
        raise
    if received:
        raise Interrupted(received[0])


@contextmanager
def _handled(handler) -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        yield  # only the main thread receives signals (and may set their handlers)
        return
    previous = {signum: signal.signal(signum, handler) for signum in SIGNALS}
    try:
        yield
    finally:
        for signum, old in previous.items():
            signal.signal(signum, old)

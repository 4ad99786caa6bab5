"""SIGINT and SIGTERM stop a command cleanly: no JVM or server left running, no partial file.

SIGTERM (what Kubernetes and `timeout` send) would otherwise end the process at once, skipping
every `finally`: a half-written OpenMetrics file, the part folders, and a JVM that lives on with
parent 1. Both signals raise `Interrupted` in the main thread instead, so the run unwinds the way
Ctrl-C does, and the job stops its JVM before removing the folders Spark's tasks write into.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

SIGNALS = (signal.SIGINT, signal.SIGTERM)
REDELIVERY_SECONDS = 0.01
"""How long after a finalizer dropped an interrupt it is sent again."""


class Interrupted(KeyboardInterrupt):
    """SIGINT or SIGTERM arrived; a KeyboardInterrupt, so whatever handles Ctrl-C handles it."""

    def __init__(self, signum: int) -> None:
        self.name = signal.Signals(signum).name
        super().__init__(self.name)
        self.exit_code = 128 + signum
        """The shell's convention for a process ended by a signal: 130 for SIGINT, 143 SIGTERM."""


def _raise(signum: int, frame: FrameType | None) -> None:
    if _redelivery.in_hook:  # raised here, Python would print it and drop it for good
        _redelivery.arrived = signum
        return
    if _unwinding.active:
        _unwinding.repeated(signum)
        return
    _unwinding.active = True
    raise Interrupted(signum)


@contextmanager
def raised() -> Iterator[None]:
    """While the block runs, SIGINT and SIGTERM raise `Interrupted` in the main thread; once
    one has, the block unwinds and later ones are not raised (`_Unwinding`)."""
    _unwinding.reset()
    try:
        with _handled(_raise):
            yield
    finally:
        _unwinding.reset()


class _Unwinding:
    """The interrupt the block is unwinding from. A second one raised there would end the
    cleanup it interrupts: a `pkill` matching both a command and the `timeout` around it, or a
    second Ctrl-C, left tmpfs file systems mounted and work folders behind. So it is said once on
    stderr and not raised; SIGKILL still ends the process at once, before its cleanup."""

    def __init__(self) -> None:
        self.active = False
        """Whether an interrupt has been raised and the block is unwinding from it."""
        self.said = False

    def reset(self) -> None:
        self.active, self.said = False, False

    def repeated(self, signum: int) -> None:
        if self.said:
            return
        self.said = True
        name = signal.Signals(signum).name
        print(
            f"{name}: already stopping (servers being stopped, files removed); "
            "SIGKILL ends the process at once, before its cleanup",
            file=sys.stderr,
            flush=True,
        )


_unwinding = _Unwinding()


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
            _unwinding.active = True
            raise Interrupted(received[0]) from None
        raise
    if received:
        _unwinding.active = True
        raise Interrupted(received[0])


@contextmanager
def _handled(handler) -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        yield  # only the main thread receives signals (and may set their handlers)
        return
    previous = {signum: signal.signal(signum, handler) for signum in SIGNALS}
    unraisable = sys.unraisablehook
    sys.unraisablehook = _redelivering(unraisable)
    try:
        yield
    finally:
        sys.unraisablehook = unraisable
        for signum, old in previous.items():
            signal.signal(signum, old)


class _Redelivery:
    """Sends an interrupt Python dropped to this process again, from another thread a moment
    later: sent from the hook that saw it dropped, it would be handled, and dropped, in the
    hook."""

    def __init__(self) -> None:
        self.in_hook = False
        """Whether the main thread is in the unraisable hook. An interrupt handled there is noted
        in `arrived`, and the hook sends it again before it returns: raised there, Python would
        drop it for good. It happens: the hook waits for its thread to start, on a loaded machine
        long enough for the signal that thread sends to arrive."""
        self.arrived: int | None = None

    def send_again(self, signum: int) -> None:
        again = threading.Timer(REDELIVERY_SECONDS, os.kill, (os.getpid(), signum))
        again.daemon = True
        again.start()


_redelivery = _Redelivery()


def _redelivering(unraisable):
    """An unraisable hook that sends an `Interrupted` raised where Python cannot raise (a
    finalizer or weakref callback, such as py4j's freeing of a Java object) to this process
    again: Python prints and drops an exception there, and a SIGTERM that arrived in py4j's
    clean-up was lost, the run going on to exit 0. It is handled once the callback has
    returned (or dropped and sent again, from the next one)."""

    def hook(args) -> None:
        if not isinstance(args.exc_value, Interrupted):
            unraisable(args)
            return
        signum: int | None = args.exc_value.exit_code - 128
        _unwinding.active = False  # dropped: nothing unwinds from it, the one sent again must raise
        _redelivery.in_hook = True
        try:
            while signum is not None:
                _redelivery.arrived = None
                _redelivery.send_again(signum)
                signum = _redelivery.arrived
        finally:
            _redelivery.in_hook = False

    return hook

"""What py4j logs when an interrupted run stops Spark: expected, so not printed as a traceback.

Its own module, without pyspark, so that `kvq-backfill` sets up its logging (and says how to
install pyspark when it is missing) before anything imports pyspark."""

from __future__ import annotations

import logging
import threading
from pathlib import Path

STOPPING = threading.Event()
"""Set once `spark.session.stop_local_jvm` begins: from then on a call to the JVM failing is
expected."""


def without_expected_py4j_traces(record: logging.LogRecord) -> bool:
    """A filter for the log handlers, which py4j's failed calls to the JVM reach with their
    tracebacks (on the root logger from `GatewayClient.send_command`, on its own from the
    connection's clean-up): False for the failures an interrupted run causes itself, so that the
    command says it in one line instead. That is the interrupt arriving while the driver waits for
    the JVM (Ctrl-C or SIGTERM during any Spark call) and whatever fails while that unwinds, and
    any call once `stop_local_jvm` has begun: py4j's finalizer thread still tells the JVM about the
    Python objects collected later, at whatever moment the garbage collector finds them."""
    if record.exc_info is None or Path(record.pathname).parent.name != "py4j":
        return True
    return not (caused_by_an_interrupt(record.exc_info[1]) or STOPPING.is_set())


def caused_by_an_interrupt(error: BaseException | None) -> bool:
    """True if `error`, or one it was raised while handling, is an interrupt."""
    while error is not None:
        if isinstance(error, KeyboardInterrupt):
            return True
        error = error.__cause__ or error.__context__
    return False

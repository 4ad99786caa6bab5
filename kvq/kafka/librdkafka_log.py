"""librdkafka's own log lines in Python logging, each distinct line at most once a minute."""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable


class RepeatFilter(logging.Filter):
    """Pass a line once per `window` seconds: librdkafka logs a refused connection again on every
    reconnect (39 lines in 2 s against an unreachable bootstrap). Lines that differ only in
    numbers (`after 0ms`, `after 1ms`) count as the same line."""

    def __init__(self, window: float = 60.0, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self.window = window
        self._clock = clock
        self._last: dict[str, float] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        key = f"{record.levelno} " + _DIGITS.sub("#", record.getMessage())
        now = self._clock()
        last = self._last.get(key)
        if last is not None and now - last < self.window:
            return False
        if len(self._last) > 1000:
            self._last.clear()
        self._last[key] = now
        return True


_DIGITS = re.compile(r"\d+")
LIBRDKAFKA_LOG = logging.getLogger("kvq.librdkafka")
"""librdkafka's own log lines, as a client's `logger`: they reach Python logging (and its format)
when the client is polled, instead of raw `%3|...|FAIL|` lines on stderr; repeats are dropped."""
LIBRDKAFKA_LOG.addFilter(RepeatFilter())

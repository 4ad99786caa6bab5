"""librdkafka's repeated lines: each distinct line once per window."""

import logging

from kvq.kafka.librdkafka_log import RepeatFilter


def record(message: str) -> logging.LogRecord:
    return logging.LogRecord("kvq.librdkafka", logging.ERROR, "", 0, message, (), None)


def test_a_line_repeated_within_the_window_passes_once():
    now = [0.0]
    repeats = RepeatFilter(window=60, clock=lambda: now[0])
    refused = "FAIL [kvq#producer-1] Connect to 127.0.0.1:{} failed (after {}ms in state CONNECT)"
    assert repeats.filter(record(refused.format(9092, 0)))
    assert not repeats.filter(record(refused.format(9092, 1)))
    assert repeats.filter(record("FAIL [kvq#producer-1] something else"))
    now[0] = 61.0
    assert repeats.filter(record(refused.format(9092, 3)))

"""Progress on stderr: what the job is doing (stages, rows, files), with the elapsed time."""

from __future__ import annotations

import sys
import time
from typing import TextIO


class Progress:
    def __init__(self, stream: TextIO | None = None, prefix: str = "kvq-backfill") -> None:
        self.stream = stream
        self.prefix = prefix
        self.started = time.monotonic()

    def __call__(self, message: str) -> None:
        elapsed = time.monotonic() - self.started
        stream = self.stream or sys.stderr
        print(f"{self.prefix} [{elapsed:6.1f}s] {message}", file=stream, flush=True)

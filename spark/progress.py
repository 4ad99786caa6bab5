"""Progress on stderr: what the job is doing, with the elapsed time.

Plain lines always (lines read, observations, bad lines, grid times, samples, files). On a
terminal, while Spark runs, one more line is redrawn in place: the running stage, its tasks done
out of all, and an estimate of the time it has left (from the rate its tasks finish at). Spark's
own status tracker supplies the numbers: no extra Spark job, no count().
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TextIO

REFRESH_SECONDS = 0.5


class Progress:
    def __init__(self, stream: TextIO | None = None, prefix: str = "kvq-backfill") -> None:
        self.stream = stream
        self.prefix = prefix
        self.started = time.monotonic()
        self._lock = threading.Lock()
        self._live = ""

    @property
    def out(self) -> TextIO:
        return self.stream or sys.stderr

    @property
    def interactive(self) -> bool:
        return bool(getattr(self.out, "isatty", lambda: False)())

    def __call__(self, message: str) -> None:
        elapsed = time.monotonic() - self.started
        with self._lock:
            self._clear()
            print(f"{self.prefix} [{elapsed:6.1f}s] {message}", file=self.out, flush=True)
            self._draw()

    def _clear(self) -> None:
        if self._live:
            self.out.write("\r" + " " * len(self._live) + "\r")

    def _draw(self) -> None:
        if self._live:
            self.out.write(self._live)
            self.out.flush()

    def show(self, line: str) -> None:
        """Replace the in-place line (terminals only)."""
        with self._lock:
            self._clear()
            self._live = line
            self._draw()

    @contextmanager
    def stages(self, spark_context) -> Iterator[None]:
        """While the block runs, redraw the running Spark stage's progress (terminals only)."""
        if not self.interactive:
            yield
            return
        stop = threading.Event()
        watcher = threading.Thread(
            target=self._watch, args=(spark_context.statusTracker(), stop), daemon=True
        )
        watcher.start()
        try:
            yield
        finally:
            stop.set()
            watcher.join()
            self.show("")

    def _watch(self, tracker, stop: threading.Event) -> None:
        first_seen: dict[int, tuple[float, int]] = {}
        while not stop.wait(REFRESH_SECONDS):
            infos = [tracker.getStageInfo(i) for i in tracker.getActiveStageIds()]
            infos = [i for i in infos if i is not None]
            if not infos:
                continue
            stage = max(infos, key=lambda i: i.numTasks - i.numCompletedTasks)
            now = time.monotonic()
            since, done_then = first_seen.setdefault(stage.stageId, (now, stage.numCompletedTasks))
            self.show(
                stage_line(
                    stage.stageId,
                    stage.numCompletedTasks,
                    stage.numTasks,
                    stage.numCompletedTasks - done_then,
                    now - since,
                    len(infos),
                )
            )


def stage_line(
    stage: int, done: int, total: int, done_here: int, seconds: float, running: int
) -> str:
    """`stage 7: 12/48 tasks, ~9 s left` (the estimate from the rate seen so far)."""
    line = f"  Spark stage {stage}: {done}/{total} tasks"
    if running > 1:
        line += f" (+{running - 1} more stage{'s' if running > 2 else ''} running)"
    if done_here > 0 and seconds > 0:
        left = (total - done) * seconds / done_here
        line += f", ~{left:.0f} s left"
    else:
        line += ", estimating time left"
    return line

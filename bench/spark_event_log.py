"""Spark's event log read back, and the wall time the same work would take on N executor cores.

The model is the one Sparklens uses: a run is driver-only time (no stage running: the JVM's
start, planning, the driver's own passes, the concatenation after the last job) plus the stages.
Stages that overlap in time form one busy period; within it each stage waits for its parent
stages and for every stage that had completed when the driver submitted it (the driver's order)
plus the delay the driver took to submit it after them, and its measured task durations
(launch to finish: deserialization, GC, shuffle fetch included) are put longest first onto the
earliest free of N cores. Driver-only time does not shrink with cores. The critical path is the
same schedule with a core for every task: each stage costs its longest task.

Spark writes the log with `spark.eventLog.enabled=true` (`EVENT_LOG_SETTINGS`): one JSON object
per line, in one file or (rolling, Spark 4's default) a folder `eventlog_v2_<app>` of
`events_<n>_<app>` files.
"""

from __future__ import annotations

import heapq
import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path

EVENT_LOG_SETTINGS = {
    "spark.eventLog.enabled": "true",
    "spark.eventLog.compress": "false",
}
"""Spark settings that write an uncompressed event log (plus spark.eventLog.dir)."""
ROLLING_FILE = re.compile(r"^events_(\d+)_")


class EventLogError(ValueError):
    """The event log is missing, compressed, or lacks the application's start or end."""


@dataclass(frozen=True)
class TaskCosts:
    """Where the tasks' seconds went, summed (Spark's task metrics)."""

    deserialize: float = 0.0
    run: float = 0.0
    """Executor run time, which holds the next two."""
    gc: float = 0.0
    fetch_wait: float = 0.0
    """Waiting for shuffle blocks."""
    scheduler: float = 0.0
    """Launch to finish minus deserialization, run and result serialization: the scheduler's and
    the result's delays."""
    cpu: float = 0.0
    """CPU time of the task's thread (running and deserializing): on a machine whose cores are
    busy with other work, task time minus this is mostly waiting for a core."""

    def __add__(self, other: TaskCosts) -> TaskCosts:
        return TaskCosts(
            self.deserialize + other.deserialize,
            self.run + other.run,
            self.gc + other.gc,
            self.fetch_wait + other.fetch_wait,
            self.scheduler + other.scheduler,
            self.cpu + other.cpu,
        )


def task_costs(event: dict) -> TaskCosts:
    """The costs of one SparkListenerTaskEnd (zero for a task that sent no metrics)."""
    info, metrics = event["Task Info"], event.get("Task Metrics") or {}
    seconds = (info["Finish Time"] - info["Launch Time"]) / 1000
    deserialize = metrics.get("Executor Deserialize Time", 0) / 1000
    run = metrics.get("Executor Run Time", 0) / 1000
    serialize = metrics.get("Result Serialization Time", 0) / 1000
    fetch_wait = (metrics.get("Shuffle Read Metrics") or {}).get("Fetch Wait Time", 0) / 1000
    return TaskCosts(
        deserialize,
        run,
        metrics.get("JVM GC Time", 0) / 1000,
        fetch_wait,
        max(0.0, seconds - deserialize - run - serialize),
        (metrics.get("Executor CPU Time", 0) + metrics.get("Executor Deserialize CPU Time", 0))
        / 1e9,
    )


@dataclass(frozen=True)
class Stage:
    stage_id: int
    name: str
    parents: tuple[int, ...]
    submitted: float
    """Seconds since the epoch, as Spark's clock (milliseconds) says."""
    completed: float
    tasks: tuple[float, ...]
    """Every task attempt's seconds from launch to finish."""
    costs: TaskCosts = TaskCosts()
    task_cpu: tuple[float, ...] = ()
    """Every task attempt's CPU seconds (`TaskCosts.cpu`), in the order of `tasks`."""

    @property
    def task_seconds(self) -> float:
        return sum(self.tasks)

    @property
    def longest_task(self) -> float:
        return max(self.tasks, default=0.0)


@dataclass(frozen=True)
class EventLog:
    started: float
    """ApplicationStart, seconds since the epoch."""
    ended: float
    """ApplicationEnd."""
    stages: tuple[Stage, ...]
    """Every stage that ran (skipped ones are left out), by submission time."""

    @property
    def seconds(self) -> float:
        return self.ended - self.started

    @property
    def task_seconds(self) -> float:
        return sum(stage.task_seconds for stage in self.stages)

    @property
    def tasks(self) -> int:
        return sum(len(stage.tasks) for stage in self.stages)

    @property
    def costs(self) -> TaskCosts:
        return sum((stage.costs for stage in self.stages), TaskCosts())


def event_log_settings(folder: Path) -> dict[str, str]:
    """The Spark settings that write an uncompressed event log into `folder`."""
    return {**EVENT_LOG_SETTINGS, "spark.eventLog.dir": folder.resolve().as_uri()}


def event_files(path: Path) -> list[Path]:
    """The files of one application's log: `path` itself, or a rolling log folder's parts in
    order; a folder holding one application's log (file or rolling folder) is looked into."""
    if path.is_file():
        return [path]
    rolling = sorted(
        (p for p in path.iterdir() if ROLLING_FILE.match(p.name)),
        key=lambda p: int(ROLLING_FILE.match(p.name).group(1)),  # type: ignore[union-attr]
    )
    if rolling:
        return rolling
    logs = [p for p in path.iterdir() if not p.name.startswith(".")]
    if len(logs) != 1:
        names = ", ".join(sorted(p.name for p in logs)) or "nothing"
        raise EventLogError(f"{path} should hold one application's event log, holds {names}")
    return event_files(logs[0])


def events(path: Path) -> Iterator[dict]:
    for part in event_files(path):
        if part.suffix in {".lz4", ".lzf", ".snappy", ".zstd"}:
            raise EventLogError(
                f"{part} is compressed; write it with spark.eventLog.compress=false"
            )
        with open(part, encoding="utf-8") as lines:
            for line in lines:
                if line.strip():
                    yield json.loads(line)


@dataclass
class _StageBuilder:
    name: str = ""
    parents: tuple[int, ...] = ()
    submitted: float | None = None
    completed: float | None = None
    tasks: list[float] = field(default_factory=list)
    costs: TaskCosts = TaskCosts()
    task_cpu: list[float] = field(default_factory=list)


def read_event_log(path: Path) -> EventLog:
    """The application's span and its stages, from the event log at `path`."""
    started = ended = None
    stages: dict[int, _StageBuilder] = {}
    for event in events(path):
        kind = event["Event"]
        if kind == "SparkListenerApplicationStart":
            started = event["Timestamp"] / 1000
        elif kind == "SparkListenerApplicationEnd":
            ended = event["Timestamp"] / 1000
        elif kind in ("SparkListenerStageSubmitted", "SparkListenerStageCompleted"):
            info = event["Stage Info"]
            stage = stages.setdefault(info["Stage ID"], _StageBuilder())
            stage.name = info["Stage Name"]
            stage.parents = tuple(info.get("Parent IDs", ()))
            if "Submission Time" in info:
                stage.submitted = info["Submission Time"] / 1000
            if "Completion Time" in info:
                stage.completed = info["Completion Time"] / 1000
        elif kind == "SparkListenerTaskEnd":
            task = event["Task Info"]
            stage = stages.setdefault(event["Stage ID"], _StageBuilder())
            stage.tasks.append((task["Finish Time"] - task["Launch Time"]) / 1000)
            costs = task_costs(event)
            stage.costs += costs
            stage.task_cpu.append(costs.cpu)
    if started is None or ended is None:
        raise EventLogError(
            f"{path}: no application {'start' if started is None else 'end'} in the event log "
            "(did the application stop?)"
        )
    ran = [
        Stage(
            stage_id,
            b.name,
            b.parents,
            b.submitted,
            b.completed,
            tuple(b.tasks),
            b.costs,
            tuple(b.task_cpu),
        )  # fmt: skip
        for stage_id, b in stages.items()
        if b.submitted is not None and b.completed is not None
    ]
    return EventLog(started, ended, tuple(sorted(ran, key=lambda s: (s.submitted, s.stage_id))))


def within(log: EventLog, start: float, end: float) -> EventLog:
    """The part of `log` from `start` to `end` (seconds since the epoch) as an application of its
    own: the stages submitted in it (one run of several in the same application)."""
    stages = tuple(s for s in log.stages if start <= s.submitted and s.completed <= end)
    return EventLog(start, end, stages)


def on_dedicated_cores(log: EventLog) -> EventLog:
    """`log` with every task taking its CPU time: what its tasks would take on cores of their
    own, where the run shared its cores with other work (they are CPU-bound: parsing, sorting,
    building text). Stage and driver-only times are left as measured."""
    return replace(
        log,
        stages=tuple(replace(stage, tasks=stage.task_cpu) for stage in log.stages),
    )


def busy_periods(stages: Iterable[Stage]) -> list[list[Stage]]:
    """The stages grouped into maximal periods in which at least one of them runs."""
    periods: list[list[Stage]] = []
    end = float("-inf")
    for stage in sorted(stages, key=lambda s: (s.submitted, s.stage_id)):
        if not periods or stage.submitted > end:
            periods.append([])
        periods[-1].append(stage)
        end = max(end, stage.completed)
    return periods


def driver_only_seconds(log: EventLog) -> float:
    """Application time during which no stage runs."""
    busy = sum(
        max(s.completed for s in period) - period[0].submitted
        for period in busy_periods(log.stages)
    )
    return log.seconds - busy


def period_seconds(period: list[Stage], cores: int) -> float:
    """The busy period's stages scheduled on `cores` (the module's model)."""
    done: dict[int, float] = {}
    free = [0.0] * cores  # when each core is next free
    for stage in period:  # in submission order: Spark's FIFO scheduler serves earlier stages first
        # It waits for what it waited for in the run, plus the driver's delay in submitting it.
        ready = max(
            (
                done[other.stage_id] + max(0.0, stage.submitted - other.completed)
                for other in period
                if other.stage_id in done
                and (other.stage_id in stage.parents or other.completed <= stage.submitted)
            ),
            default=0.0,
        )
        finish = ready
        for seconds in sorted(stage.tasks, reverse=True):
            start = max(heapq.heappop(free), ready)
            heapq.heappush(free, start + seconds)
            finish = max(finish, start + seconds)
        done[stage.stage_id] = finish
    return max(done.values(), default=0.0)


def predicted_seconds(log: EventLog, cores: int, outside: float = 0.0) -> float:
    """The run's wall time on `cores` executor cores: `outside` (the process's time before and
    after the application), the driver-only time, and every busy period scheduled on `cores`."""
    stages = sum(period_seconds(p, cores) for p in busy_periods(log.stages))
    return outside + driver_only_seconds(log) + stages


def critical_path_seconds(log: EventLog, outside: float = 0.0) -> float:
    """The run's wall time with a core for every task: no core count does better."""
    every_task = max(1, sum(len(s.tasks) for s in log.stages))
    return predicted_seconds(log, every_task, outside)


@dataclass(frozen=True)
class DriverGaps:
    """Driver-only seconds of a run: before its first stage, between stages, after the last one.
    `before` and `after` hold the process's time outside the application when it is given
    (`outside_before`: Python's start, imports, the JVM's launch up to Spark's ApplicationStart;
    `outside_after`: from ApplicationEnd to the process's exit)."""

    before: float
    between: float
    after: float
    outside_before: float = 0.0
    outside_after: float = 0.0

    @property
    def total(self) -> float:
        return self.before + self.between + self.after

    @property
    def application(self) -> float:
        """Driver-only seconds within the application (Sparklens' span: start to end)."""
        return self.total - self.outside_before - self.outside_after


def driver_gaps(log: EventLog, outside: float = 0.0, outside_after: float = 0.0) -> DriverGaps:
    """The gaps, `outside` (the process's seconds outside the application) counted in: the part
    `outside_after` after the application's end, the rest before its start."""
    before_app = max(0.0, outside - outside_after)
    periods = busy_periods(log.stages)
    if not periods:
        return DriverGaps(outside + log.seconds, 0.0, 0.0, before_app, outside_after)
    before = periods[0][0].submitted - log.started
    after = log.ended - max(s.completed for s in periods[-1])
    return DriverGaps(
        before_app + before,
        driver_only_seconds(log) - before - after,
        after + outside_after,
        before_app,
        outside_after,
    )


MAX_TASKS_PER_STAGE = 4000
"""The most tasks a stage grows to with its input (`spark.job`'s cap on shuffle partitions)."""


def grown_stages_seconds(log: EventLog, scale: float, cores: int) -> float:
    """The run's stages over `scale` times its input, scheduled on `cores` as `period_seconds`
    does: each stage keeps its task time per row, spread over more tasks (`grown_stage`)."""
    return sum(
        period_seconds([grown_stage(stage, scale) for stage in period], cores)
        for period in busy_periods(log.stages)
    )


def grown_stage(stage: Stage, scale: float) -> Stage:
    """`stage` over `scale` times the rows: its task time times `scale`, spread over as many
    more tasks (at most `MAX_TASKS_PER_STAGE`), of equal size."""
    count = max(1, min(MAX_TASKS_PER_STAGE, round(len(stage.tasks) * scale)))
    count = max(count, len(stage.tasks))
    each = stage.task_seconds * scale / count
    return Stage(
        stage.stage_id, stage.name, stage.parents, stage.submitted, stage.completed,
        (each,) * count,
    )  # fmt: skip


CORE_COUNTS = (1, 2, 4, 8, 16, 32, 64)


def stage_label(stage: Stage) -> str:
    """`collect at /x/spark/job.py:323` -> `collect at job.py:323`."""
    return re.sub(r" at \S*/", " at ", stage.name)


def report(log: EventLog, rows: int, outside: float = 0.0, outside_after: float = 0.0) -> list[str]:
    """Where a run's time went: driver-only time, task time per stage, the critical path.

    Driver-only time is the whole process's (what a user waits for: `outside` counted in, of
    which `outside_after` after the application's end), and also the application's alone."""
    wall = log.seconds + outside
    gaps = driver_gaps(log, outside, outside_after)
    costs = log.costs
    lines = [
        f"{len(log.stages)} stages, {log.tasks} tasks; the run {wall:.1f} s "
        f"(the Spark application {log.seconds:.1f} s)",
        f"driver-only {gaps.total:.1f} s ({gaps.total / wall:.0%} of the run): before the first "
        f"stage {gaps.before:.1f} s (of it {gaps.outside_before:.1f} s before Spark's "
        f"application started: Python, imports, the JVM's launch), between stages "
        f"{gaps.between:.1f} s, after the last {gaps.after:.1f} s (of it "
        f"{gaps.outside_after:.1f} s after the application ended: the JVM's stop, the exit)",
        f"driver-only within the Spark application (its start to its end, Sparklens' span): "
        f"{gaps.application:.1f} s ({gaps.application / log.seconds:.0%} of "
        f"{log.seconds:.1f} s)",
        f"task time {log.task_seconds:.1f} s, {log.task_seconds / rows * 1e6:.2f} us per log-dir "
        f"row (run {costs.run:.1f} s of which GC {costs.gc:.1f} s and shuffle fetch wait "
        f"{costs.fetch_wait:.1f} s; deserialization {costs.deserialize:.1f} s; scheduler and "
        f"result {costs.scheduler:.1f} s); the tasks' threads had {costs.cpu:.1f} s of CPU",
        "stage  tasks  task time  longest task  stage wall  name",
    ]
    lines += [
        f"{s.stage_id:5d}  {len(s.tasks):5d}  {s.task_seconds:7.1f} s  {s.longest_task:10.2f} s  "
        f"{s.completed - s.submitted:8.1f} s  {stage_label(s)}"
        for s in log.stages
    ]
    lines.append(
        f"critical path (a core for every task): {critical_path_seconds(log, outside):.1f} s"
    )
    return lines


def predicted_by_cores(log: EventLog, outside: float = 0.0) -> list[tuple[int, float]]:
    """(cores, predicted seconds) for each count of `CORE_COUNTS`, 1 first."""
    return [(cores, predicted_seconds(log, cores, outside)) for cores in CORE_COUNTS]


def scaling_lines(log: EventLog, outside: float = 0.0) -> list[str]:
    """`16 cores: <seconds> s, <speedup>x`, one line per count of `CORE_COUNTS`."""
    predicted = predicted_by_cores(log, outside)
    one = predicted[0][1]
    return [
        f"{cores:2d} {'core' if cores == 1 else 'cores'}: {seconds:7.1f} s, {one / seconds:5.2f}x"
        for cores, seconds in predicted
    ]


def application_scaling_line(log: EventLog) -> str:
    """The speedups of `scaling_lines` over the Spark application alone (start to end, as
    Sparklens counts a run: without the process's start before it and its exit after), in one
    line."""
    predicted = predicted_by_cores(log)
    one = predicted[0][1]
    shown = ", ".join(f"{cores} {one / seconds:.2f}x" for cores, seconds in predicted)
    return f"the Spark application alone ({one:.1f} s on 1 core), by cores: {shown}"


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m bench.spark_event_log",
        description="Where a Spark application's time went and its wall time on 1-64 cores, "
        "from its event log (what `python -m bench.backfill --scaling` prints for its runs).",
    )
    parser.add_argument("event_log", type=Path, help="an event log file or folder")
    parser.add_argument("--rows", type=int, default=1, help="input rows, for the time per row")
    parser.add_argument(
        "--outside",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="the process's time before and after the application (its wall time minus the "
        "application's), counted as driver-only",
    )
    args = parser.parse_args(argv)
    try:
        log = read_event_log(args.event_log)
    except (OSError, EventLogError) as exc:
        parser.exit(2, f"{parser.prog}: {exc}\n")
    for line in report(log, args.rows, args.outside) + scaling_lines(log, args.outside):
        print(line)
    print(application_scaling_line(log))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

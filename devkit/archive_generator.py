"""Realistic generated archives: N brokers x M log dirs polled every interval, with the events a
backfill must get right (a volume filling up, a broker stopping, failed polls long enough for the
fallback, an unusable log dir, a pre-KIP-827 broker) and a few bad lines.

Written exactly as the exporter writes them: `<dir>/<cluster>/YYYY-MM-DD/HH.jsonl`, one
`kvq.contract.archive_record.to_line` per poll, older hours gzipped. Deterministic for a given seed.

    python -m devkit.archive_generator --out /tmp/archive --brokers 12 --dirs 4 --hours 168
"""

from __future__ import annotations

import argparse
import gzip
import math
import random
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from kvq.contract.archive_record import to_line
from kvq.model.observation import STAGE_DESCRIBE_CLUSTER, STAGE_DESCRIBE_LOG_DIRS, Observation
from kvq.model.volume import LogDirDescription

KAFKA_STORAGE_ERROR = 56
DEFAULT_START = 1_763_596_800.0  # 2025-11-20T00:00:00Z


@dataclass(frozen=True, slots=True)
class Window:
    """An event active from `begin` to `end` (fractions of the archive's duration)."""

    begin: float
    end: float

    def holds(self, fraction: float) -> bool:
        return self.begin <= fraction < self.end


@dataclass(frozen=True, slots=True)
class Events:
    """Where things happen, as fractions of the duration (and which broker / log dir)."""

    fill: tuple[int, int, Window] = (1, 0, Window(0.20, 0.45))
    failures: tuple[tuple[str, Window], ...] = (
        (STAGE_DESCRIBE_CLUSTER, Window(0.50, 0.56)),  # longer than validity: fallback
        (STAGE_DESCRIBE_LOG_DIRS, Window(0.60, 0.605)),  # shorter: no fallback
    )
    stops: tuple[tuple[int, Window], ...] = (
        (2, Window(0.70, 0.85)),  # longer than validity: cached, then evicted
        (0, Window(0.64, 0.655)),  # shorter: cached only
    )
    log_dir_error: tuple[int, int, Window] = (0, 1, Window(0.30, 0.35))
    unknown_size: tuple[int, int, Window] = (0, 0, Window(0.90, 0.93))
    bad_lines: tuple[float, ...] = (0.10, 0.40, 0.75)


@dataclass(frozen=True, slots=True)
class ArchivePlan:
    cluster: str = "kafka"
    brokers: int = 3
    dirs_per_broker: int = 2
    start: float = DEFAULT_START
    hours: float = 4.0
    interval: float = 30.0
    total_bytes: int = 1_000_000_000_000
    seed: int = 7
    events: Events = field(default_factory=Events)
    gzip_old_hours: bool = True

    @property
    def polls(self) -> int:
        return int(self.hours * 3600 / self.interval)


def log_dir_path(index: int) -> str:
    return f"/var/lib/kafka/data-{index}"


def _available_ratio(plan: ArchivePlan, broker: int, index: int, fraction: float, rng) -> float:
    base = 0.35 + 0.3 * ((broker * 7 + index * 3) % 10) / 10
    wave = 0.05 * math.sin(2 * math.pi * (fraction * 3 + broker / 5 + index / 7))
    ratio = base + wave + rng.uniform(-0.005, 0.005)
    b, i, window = plan.events.fill
    if (broker, index) == (b, i) and window.holds(fraction):
        progress = (fraction - window.begin) / (window.end - window.begin)
        ratio = max(0.02, ratio * (1 - min(1.0, 2 * progress)))
    return ratio


def observation_at(plan: ArchivePlan, poll: int, rng: random.Random) -> Observation:
    """The poll number `poll`: what the exporter would have archived."""
    fraction = poll / max(1, plan.polls)
    time = round(plan.start + poll * plan.interval + rng.uniform(0.01, 0.6), 3)
    events = plan.events
    brokers = tuple(
        b
        for b in range(plan.brokers)
        if not any(sb == b and w.holds(fraction) for sb, w in events.stops)
    )
    for stage, window in events.failures:
        if window.holds(fraction):
            if stage == STAGE_DESCRIBE_CLUSTER:
                return Observation.failed(time, stage, "timed out waiting for DescribeCluster")
            return Observation.failed(
                time, stage, f"broker {brokers[-1]} did not answer", active_brokers=brokers
            )
    dirs = []
    for broker in brokers:
        for index in range(plan.dirs_per_broker):
            total = plan.total_bytes + broker * 10_000_000 + index * 1_000_000
            usable = int(total * _available_ratio(plan, broker, index, fraction, rng))
            error = 0
            eb, ei, ew = events.log_dir_error
            kb, ki, kw = events.unknown_size
            if (broker, index) == (eb, ei) and ew.holds(fraction):
                total, usable, error = -1, -1, KAFKA_STORAGE_ERROR
            elif (broker, index) == (kb, ki) and kw.holds(fraction):
                total, usable = -1, -1
            dirs.append(LogDirDescription(broker, log_dir_path(index), total, usable, error))
    return Observation(time, brokers, tuple(dirs))


def _bad_line(kind: int, good_line: str) -> str:
    if kind % 3 == 0:
        return good_line[: len(good_line) // 2] + "\n"  # a write cut short
    if kind % 3 == 1:
        return good_line.replace('"schema":1', '"schema":2')
    return "this is not an archive record\n"


def generate(plan: ArchivePlan, out: str | Path) -> dict[str, int]:
    """Write the archive under `out`; returns counts (observations, files, bad_lines)."""
    rng = random.Random(plan.seed)
    bad_at = {int(f * plan.polls) for f in plan.events.bad_lines}
    hours: dict[Path, list[str]] = {}
    root = Path(out) / plan.cluster
    bad = 0
    for poll in range(plan.polls):
        observation = observation_at(plan, poll, rng)
        line = to_line(observation, plan.cluster)
        moment = datetime.fromtimestamp(observation.time, UTC)
        path = root / moment.strftime("%Y-%m-%d") / moment.strftime("%H.jsonl")
        lines = hours.setdefault(path, [])
        if poll in bad_at:
            lines.append(_bad_line(bad, line))
            bad += 1
        lines.append(line)
    paths = sorted(hours)
    for number, path in enumerate(paths):
        path.parent.mkdir(parents=True, exist_ok=True)
        text = "".join(hours[path]).encode()
        if plan.gzip_old_hours and number < len(paths) - 1:
            path.with_name(path.name + ".gz").write_bytes(gzip.compress(text, mtime=0))
        else:
            path.write_bytes(text)
    return {"observations": plan.polls, "files": len(paths), "bad_lines": bad}


def write_config(
    path: str | Path,
    cluster: str = "kafka",
    ratio: float | None = 0.05,
    min_bytes: int | None = None,
    validity: str = "PT5M",
    interval: str = "PT30S",
    fallback: float = 0.5,
    extra: dict[str, str] | None = None,
) -> Path:
    """A properties file matching a generated archive."""
    prefix = "client.quota.callback.static."
    lines = {
        prefix + "kafka.admin.bootstrap.servers": "localhost:9092",
        prefix + "throttle.factor.validity.duration": validity,
        prefix + "storage.check.interval": interval,
        prefix + "throttle.factor.fallback": repr(fallback),
        "kvq.cluster.name": cluster,
    }
    if min_bytes is not None:
        lines[prefix + "storage.per.volume.limit.min.available.bytes"] = str(min_bytes)
    else:
        lines[prefix + "storage.per.volume.limit.min.available.ratio"] = repr(ratio)
    lines.update(extra or {})
    path = Path(path)
    path.write_text("".join(f"{k}={v}\n" for k, v in lines.items()))
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m devkit.archive_generator",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--out", required=True, help="archive directory to write")
    parser.add_argument("--cluster", default="kafka")
    parser.add_argument("--brokers", type=int, default=3)
    parser.add_argument("--dirs", type=int, default=2, help="log dirs per broker")
    parser.add_argument("--hours", type=float, default=4.0)
    parser.add_argument("--interval", type=float, default=30.0, help="seconds between polls")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--config", help="also write a matching properties file here")
    args = parser.parse_args(argv)
    plan = ArchivePlan(
        args.cluster,
        args.brokers,
        args.dirs,
        hours=args.hours,
        interval=args.interval,
        seed=args.seed,
    )
    counts = generate(plan, args.out)
    if args.config:
        write_config(args.config, cluster=args.cluster, interval=f"PT{args.interval:g}S")
    print(", ".join(f"{k}={v}" for k, v in counts.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

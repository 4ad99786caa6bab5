"""The reference: replay the archive through the exporter's own policy core, one poll at a time.

Observations go to a `ThrottleFactorSource` in archive order (time, file, line); at each grid time
`kvq.contract.metric_samples.families` says what the live exporter would have published. The
Spark job must produce exactly these samples; the bench uses this as its baseline.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from kvq.contract.archive_record import ArchiveRecordError, from_line
from kvq.contract.metric_families import COUNTER
from kvq.contract.metric_samples import families
from kvq.model.observation import Observation
from kvq.model.throttle_factor_source import ThrottleFactorSource
from kvq.settings.config import Config
from spark.archive_files import BadLine, archive_files, numbered_lines
from spark.evaluation_grid import EvaluationGrid
from spark.openmetrics_text import Sample


@dataclass(slots=True)
class ArchiveContents:
    """The observations of one cluster in archive order, and what could not be used."""

    observations: list[Observation] = field(default_factory=list)
    bad_lines: list[BadLine] = field(default_factory=list)
    other_clusters: Counter = field(default_factory=Counter)
    files: int = 0


def read_archive(archive_dir: str | Path, cluster: str) -> ArchiveContents:
    """Parse every archive file with `kvq.contract.archive_record.from_line`."""
    contents = ArchiveContents()
    keyed: list[tuple[float, str, int, Observation]] = []
    for path in archive_files(archive_dir):
        contents.files += 1
        for number, line in numbered_lines(path):
            try:
                record_cluster, observation = from_line(line)
            except ArchiveRecordError as exc:
                contents.bad_lines.append(BadLine(str(path), number, str(exc)))
                continue
            if record_cluster != cluster:
                contents.other_clusters[record_cluster] += 1
                continue
            keyed.append((observation.time, str(path), number, observation))
    keyed.sort(key=lambda item: item[:3])
    contents.observations = [item[3] for item in keyed]
    return contents


def replay(
    observations: list[Observation],
    config: Config,
    grid: EvaluationGrid,
    scenario: str | None = None,
) -> Iterator[Sample]:
    """Every sample the exporter would have published at each emitted grid time."""
    if not observations:
        return
    source = ThrottleFactorSource(
        config.policy,
        config.validity.total_seconds(),
        config.fallback_factor,
        start_time=observations[0].time,
        checking=config.check_interval.total_seconds() > 0,
        hold_seconds=config.violation_hold.total_seconds(),
    )
    extra = (("scenario", scenario),) if scenario else ()
    check_interval = config.check_interval.total_seconds()
    position = 0
    for index in range(grid.first, grid.last + 1):
        now = grid.time(index)
        while position < len(observations) and observations[position].time <= now:
            source.observe(observations[position])
            position += 1
        if not grid.emitted(index):
            continue
        for family in families(source, float(now), config.cluster, config.limit, check_interval):
            name = family.name + "_total" if family.type == COUNTER else family.name
            for labels, value in family.samples:
                yield Sample(name, tuple(sorted({**labels, **dict(extra)}.items())), now, value)

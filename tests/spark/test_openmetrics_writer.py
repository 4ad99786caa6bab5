"""The driver's concatenation into `<cluster>.om`: whatever stops it, the file is absent, a
previous run's whole file, or this run's whole file; never a partial one or a temp left over."""

from __future__ import annotations

import pytest

from kvq.contract.metric_families import backfilled
from kvq.model.limits import MinAvailableRatio
from spark.openmetrics_writer import concatenate, pending_path

CATALOG = list(backfilled(MinAvailableRatio(0.05)))


def failing_lines(family):
    """The driver's lines of the first family, then a failure (a full disk, an interrupt)."""
    if family is not CATALOG[0]:
        raise KeyboardInterrupt  # what SIGINT and SIGTERM raise (spark.interrupts)
    return [f"{family.name} 1 1700000000\n"]


def test_a_stopped_concatenation_keeps_the_previous_file_and_leaves_no_temp(tmp_path):
    previous = "# previous run's whole file\n# EOF\n"
    path = tmp_path / "kafka.om"
    path.write_text(previous)
    with pytest.raises(KeyboardInterrupt):
        concatenate(tmp_path / "parts", 0, CATALOG, path, failing_lines)
    assert path.read_text() == previous
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kafka.om"]


def test_a_complete_file_replaces_the_previous_one(tmp_path):
    path = tmp_path / "kafka.om"
    path.write_text("# previous\n")
    count = concatenate(tmp_path / "parts", 0, CATALOG, path, lambda family: [])
    assert count == 0 and path.read_text().endswith("# EOF\n")
    assert not pending_path(path).exists()

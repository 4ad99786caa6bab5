"""Archive lines: one JSON object per poll, read back exactly by the backfill."""

import json

import pytest

from kvq.contract.archive_record import SCHEMA_VERSION, ArchiveRecordError, from_line, to_line
from kvq.model.observation import STAGE_DESCRIBE_LOG_DIRS, Observation
from kvq.model.retention_forecast import AHEAD_SECONDS
from kvq.model.volume import LogDirDescription


def test_success_round_trips_as_one_line():
    observation = Observation(
        1763820000.25,
        (0, 1),
        (LogDirDescription(0, "/d/0", 1000, 400), LogDirDescription(1, "/d/1", -1, -1, 56)),
    )
    line = to_line(observation, "prod")
    assert line.endswith("\n") and line.count("\n") == 1
    record = json.loads(line)
    assert record["schema"] == SCHEMA_VERSION and record["outcome"] == "success"
    assert from_line(line) == ("prod", observation)


def test_failure_keeps_stage_error_and_what_was_seen():
    observation = Observation.failed(
        5.0, STAGE_DESCRIBE_LOG_DIRS, "broker 2: timeout", active_brokers=(1, 2)
    )
    cluster, back = from_line(to_line(observation, "c"))
    assert back == observation and not back.succeeded


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("{not json", "not JSON"),
        ("[]", "JSON object"),
        ('{"schema": 2}', "schema must be 1"),
        ('{"schema": 1, "outcome": "maybe", "time": 1}', "outcome must be"),
        ('{"schema": 1, "outcome": "success"}', "missing field"),
        ('{"schema": 1, "outcome": "failure", "time": 1}', "failure_stage"),
        ('{"schema": 1, "outcome": "success", "time": 1, "log_dirs": [{"path": "/a"}]}', "field"),
    ],
)
def test_bad_lines_say_what_is_wrong(line, message):
    with pytest.raises(ArchiveRecordError, match=message):
        from_line(line)


def test_the_retention_forecast_round_trips_by_seconds_ahead_and_a_partial_one_is_unknown():
    freed = tuple(1000 * k for k in range(len(AHEAD_SECONDS)))
    dirs = (LogDirDescription(0, "/d", 1000, 400, grown_bytes=1, retention_freed=freed),)
    foreseen = Observation(7.0, (0,), dirs)
    written = json.loads(to_line(foreseen, "c"))["log_dirs"][0]["retention_freed_bytes"]
    assert written["5"] == 0 and written["120"] == 23_000 and len(written) == 24
    assert from_line(to_line(foreseen, "c")) == ("c", foreseen)
    del written["60"]  # times ahead it does not know (another version's): not a forecast
    record = {**json.loads(to_line(foreseen, "c"))}
    record["log_dirs"][0]["retention_freed_bytes"] = written
    assert from_line(json.dumps(record))[1].log_dirs[0].retention_freed is None
    assert "retention_freed" not in to_line(Observation(7.0, (0,), dirs[:0]), "c")


def test_grown_bytes_round_trip_and_lines_without_them_read_as_unknown():
    grown = Observation(7.0, (0,), (LogDirDescription(0, "/d", 1000, 400, grown_bytes=4096),))
    assert json.loads(to_line(grown, "c"))["log_dirs"][0]["grown_bytes"] == 4096
    assert from_line(to_line(grown, "c")) == ("c", grown)
    unknown = Observation(7.0, (0,), (LogDirDescription(0, "/d", 1000, 400),))
    assert "grown_bytes" not in to_line(unknown, "c")
    assert from_line(to_line(unknown, "c"))[1].log_dirs[0].grown_bytes is None

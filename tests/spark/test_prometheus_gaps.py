"""--prometheus-url: only grid times Prometheus holds no data for are backfilled (HTTP API
mocked with `responses`)."""

from __future__ import annotations

import pytest
import responses

from spark.evaluation_grid import EvaluationGrid
from spark.prometheus_gaps import PrometheusError, coverage_query, missing_ranges

URL = "http://prometheus.test:9090"
RANGE = URL + "/api/v1/query_range"


def answer(times):
    return {
        "status": "success",
        "data": {
            "resultType": "matrix",
            "result": [{"metric": {"cluster": "kafka"}, "values": [[t, "1"] for t in times]}],
        },
    }


@responses.activate
def test_gaps_are_the_grid_times_without_samples():
    grid = EvaluationGrid(60, 100, 119)  # times 6000 .. 7140
    held = [60 * k for k in range(100, 105)] + [60 * k for k in range(110, 115)]
    responses.get(RANGE, json=answer(held))
    ranges = missing_ranges(URL, grid, {"cluster": "kafka", "scenario": ""})
    assert ranges == [(105, 109), (115, 119)]
    query = responses.calls[0].request.params
    assert query["query"] == coverage_query({"cluster": "kafka", "scenario": ""}, 60)
    assert 'scenario=""' in query["query"] and "[60s]" in query["query"]
    assert (query["start"], query["end"], query["step"]) == ("6000", "7140", "60")


@responses.activate
def test_long_ranges_are_asked_in_chunks_under_the_point_limit():
    grid = EvaluationGrid(10, 0, 25_000)
    responses.get(RANGE, json=answer([]))
    assert missing_ranges(URL, grid, {"cluster": "kafka"}) == [(0, 25_000)]
    assert len(responses.calls) == 3


@responses.activate
def test_a_full_history_leaves_nothing_to_do():
    grid = EvaluationGrid(60, 1, 3)
    responses.get(RANGE, json=answer([60, 120, 180]))
    assert missing_ranges(URL, grid, {"cluster": "kafka"}) == []


@responses.activate
def test_errors_name_prometheus_and_the_reason():
    grid = EvaluationGrid(60, 1, 3)
    responses.get(
        RANGE, status=400, json={"status": "error", "errorType": "bad_data", "error": "parse"}
    )
    with pytest.raises(PrometheusError, match="bad_data parse"):
        missing_ranges(URL, grid, {"cluster": "kafka"})


def test_unreachable_prometheus_is_a_clear_error():
    with responses.RequestsMock() as mock:  # nothing registered: the connection is refused
        with pytest.raises(PrometheusError, match="cannot reach Prometheus"):
            missing_ranges(URL, EvaluationGrid(60, 1, 3), {"cluster": "kafka"})
        assert len(mock.calls) == 1

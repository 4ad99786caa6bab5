"""Ask Prometheus which grid times already hold data, so the backfill fills only the gaps.

A grid time t counts as covered when Prometheus stores at least one sample of
`kafka_volume_quota_throttle_factor{cluster=..., scenario=...}` (`cluster`: the kvq.cluster.label
name) in (t - step, t] (`count_over_time(...[step])` evaluated by a range query exactly at the
grid times). Requests are chunked to stay under Prometheus's 11,000 points per series.
"""

from __future__ import annotations

import requests

from kvq.contract.metric_families import NAMESPACE
from kvq.settings.redaction import mask_url_credentials, redacted
from spark.evaluation_grid import EvaluationGrid

MAX_POINTS = 10_000
TIMEOUT = 30


class PrometheusError(RuntimeError):
    """Prometheus could not be asked or answered with an error; the message says which."""


def coverage_query(labels: dict[str, str], step: int) -> str:
    matchers = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    return f"count_over_time({NAMESPACE}_throttle_factor{{{matchers}}}[{step}s])"


def covered_times(url: str, query: str, start: int, end: int, step: int) -> set[int]:
    """Grid times in [start, end] at which `query` has a value."""
    shown = mask_url_credentials(url)
    try:
        response = requests.get(
            url.rstrip("/") + "/api/v1/query_range",
            params={"query": query, "start": str(start), "end": str(end), "step": str(step)},
            timeout=TIMEOUT,
        )
    except requests.RequestException as exc:
        raise PrometheusError(f"cannot reach Prometheus at {shown}: {redacted(str(exc))}") from None
    try:
        body = response.json()
    except ValueError:
        raise PrometheusError(
            f"{shown} answered HTTP {response.status_code} without JSON; is it Prometheus?"
        ) from None
    if response.status_code != 200 or body.get("status") != "success":
        raise PrometheusError(
            f"Prometheus at {shown} refused {query!r}: HTTP {response.status_code} "
            f"{body.get('errorType', '')} {body.get('error', '')}".rstrip()
        )
    return {int(float(t)) for series in body["data"]["result"] for t, _ in series.get("values", [])}


def missing_ranges(url: str, grid: EvaluationGrid, labels: dict[str, str]) -> list[tuple[int, int]]:
    """Inclusive grid index ranges at which Prometheus holds no data (all of them if none)."""
    query = coverage_query(labels, grid.step)
    covered: set[int] = set()
    for chunk_start in range(grid.first, grid.last + 1, MAX_POINTS):
        chunk_end = min(grid.last, chunk_start + MAX_POINTS - 1)
        times = covered_times(url, query, grid.time(chunk_start), grid.time(chunk_end), grid.step)
        covered |= {t // grid.step for t in times if t % grid.step == 0}
    ranges: list[tuple[int, int]] = []
    for index in range(grid.first, grid.last + 1):
        if index in covered or (grid.ranges is not None and not grid.emitted(index)):
            continue
        if ranges and ranges[-1][1] == index - 1:
            ranges[-1] = (ranges[-1][0], index)
        else:
            ranges.append((index, index))
    return ranges

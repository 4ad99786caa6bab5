"""The cluster-wide series (one value per grid time), written by the driver itself.

Which state field feeds which family is declared in `spark.series_sources.GLOBAL`. The lines
use the same formatting as the Python writer (`spark.openmetrics_text`), family by family, each
series whole and in time order, for `spark.openmetrics_writer.concatenate`.
"""

from __future__ import annotations

from collections.abc import Iterator

from kvq.contract.metric_families import MetricFamily
from kvq.model.limits import Limit
from spark.openmetrics_text import check_timestamp, format_value, label_text
from spark.poll_history import GridState
from spark.series_sources import GLOBAL


def global_lines(
    family: MetricFamily,
    states: list[GridState],
    limit: Limit,
    check_interval: float,
    base_labels: dict[str, str],
    stamps: list[str],
) -> Iterator[str]:
    """A cluster-wide family's sample lines, each series whole and in time order. `stamps`:
    `timestamp_suffixes(states)`, shared by every family written from the same states (every
    series has a line per state: each timestamp is formatted once, not once a series)."""
    constants = {"limit": float(limit.threshold), "check_interval": float(check_interval)}
    for extra, field in GLOBAL[family.short]:
        prefix = family.sample_name + label_text({**base_labels, **extra}) + " "
        texts: dict[float, str] = {}  # a series takes few values: each is formatted once
        for state, suffix in zip(states, stamps, strict=True):
            value = constants[field] if field in constants else getattr(state, field)
            if value is None:
                continue
            text = texts.get(value)
            if text is None:
                text = texts[value] = prefix + format_value(value)
            yield text + suffix


def timestamp_suffixes(states: list[GridState]) -> list[str]:
    """Each state's line ending: a space, its timestamp, the newline."""
    return [f" {check_timestamp(state.t)}\n" for state in states]

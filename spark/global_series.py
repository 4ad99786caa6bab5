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
) -> Iterator[str]:
    """A cluster-wide family's sample lines, each series whole and in time order."""
    constants = {"limit": float(limit.threshold), "check_interval": float(check_interval)}
    for extra, field in GLOBAL[family.short]:
        prefix = family.sample_name + label_text({**base_labels, **extra}) + " "
        for state in states:
            value = constants[field] if field in constants else getattr(state, field)
            if value is not None:
                yield f"{prefix}{format_value(value)} {check_timestamp(state.t)}\n"

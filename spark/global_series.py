"""The cluster-wide series (one value per grid time), written by the driver itself.

Which state field feeds which family is declared in `spark.series_sources.GLOBAL`. The lines
use the same formatting as the Python writer (`spark.openmetrics_text`), family by family, each
series whole and in time order, for `spark.openmetrics_writer.concatenate`.
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import groupby, islice
from operator import attrgetter, itemgetter

from kvq.contract.metric_families import MetricFamily
from kvq.model.limits import Limit
from spark.openmetrics_text import check_timestamp, format_value, label_text
from spark.poll_history import GridState
from spark.series_sources import GLOBAL

LINES_PER_TEXT = 4096
"""The most lines `global_lines` puts in one text (a year of one value: a million lines)."""


def global_lines(
    family: MetricFamily,
    states: list[GridState],
    limit: Limit,
    check_interval: float,
    base_labels: dict[str, str],
    stamps: list[str],
    line_prefix: str = "",
) -> Iterator[str]:
    """A cluster-wide family's sample lines, each series whole and in time order, as texts of
    whole lines, each line starting with `line_prefix`. `stamps`: `timestamp_suffixes(states)`,
    shared by every family written from the same states (every series has a line per state:
    each timestamp is formatted once, not once a series)."""
    constants = {"limit": float(limit.threshold), "check_interval": float(check_interval)}
    for extra, field in GLOBAL[family.short]:
        prefix = line_prefix + family.sample_name + label_text({**base_labels, **extra}) + " "
        if field in constants:
            values = [constants[field]] * len(states)
        else:
            values = list(map(attrgetter(field), states))
        # A series keeps each value for many grid times: a run of them is one text (up to
        # LINES_PER_TEXT lines), its lines joined at C speed (`head.join`), not built and handed
        # on one at a time.
        for value, run in groupby(zip(values, stamps, strict=True), key=itemgetter(0)):
            if value is None:
                continue
            head = prefix + format_value(value)
            times = map(itemgetter(1), run)
            while piece := list(islice(times, LINES_PER_TEXT)):
                yield head + head.join(piece)


def timestamp_suffixes(states: list[GridState]) -> list[str]:
    """Each state's line ending: a space, its timestamp, the newline."""
    return [f" {check_timestamp(state.t)}\n" for state in states]

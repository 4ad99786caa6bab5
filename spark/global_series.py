"""The cluster-wide series (one value per grid time) written by the driver as part files.

Which state field feeds which family is declared in `spark.series_sources.GLOBAL`. The lines
use the same formatting as the Python writer (`spark.openmetrics_text`), family by family, each
series whole and in time order, into the part folders `spark.openmetrics_writer.concatenate`
reads.
"""

from __future__ import annotations

from pathlib import Path

from kvq.contract.metric_families import MetricFamily
from kvq.model.limits import Limit
from spark.openmetrics_text import check_timestamp, format_value, label_text
from spark.poll_history import GridState
from spark.series_sources import GLOBAL

PART_NAME = "part-global"


def write_global_parts(
    folder_of,
    families: list[tuple[int, MetricFamily]],
    states: list[GridState],
    limit: Limit,
    check_interval: float,
    base_labels: dict[str, str],
) -> None:
    """Each global family's samples into `folder_of(index) / PART_NAME`.

    `families`: (catalog index, family) of the global families to write."""
    constants = {"limit": float(limit.threshold), "check_interval": float(check_interval)}
    times = [check_timestamp(s.t) for s in states]
    for index, family in families:
        folder: Path = folder_of(index)
        folder.mkdir(parents=True, exist_ok=True)
        with open(folder / PART_NAME, "w", encoding="utf-8") as out:
            for extra, field in GLOBAL[family.short]:
                prefix = family.sample_name + label_text({**base_labels, **extra}) + " "
                if field in constants:
                    text = format_value(constants[field])
                    out.writelines(f"{prefix}{text} {t}\n" for t in times)
                    continue
                for state, t in zip(states, times, strict=True):
                    value = getattr(state, field)
                    if value is not None:
                        out.write(f"{prefix}{format_value(value)} {t}\n")

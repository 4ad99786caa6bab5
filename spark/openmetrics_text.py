"""OpenMetrics text as promtool reads it: the formatting rules shared by both writers.

Families in catalog order, `# TYPE` and `# HELP` once each, the series of a family one after the
other (sorted by their label text), each series' samples in time order, timestamps in whole seconds,
a final `# EOF`. promtool silently drops out-of-order samples and reads millisecond timestamps as
seconds, so `check_timestamp` refuses anything but plausible epoch seconds.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from kvq.contract.metric_families import MetricFamily

EOF_LINE = "# EOF\n"
MAX_EPOCH_SECONDS = 10**11
"""Year ~5138: anything larger is a millisecond (or finer) timestamp written by mistake."""
MAX_EXACT_INTEGER = 2**53


class TimestampError(ValueError):
    """A timestamp promtool would misread."""


def check_timestamp(seconds: int) -> int:
    if not isinstance(seconds, int) or not 0 <= seconds < MAX_EPOCH_SECONDS:
        raise TimestampError(
            f"timestamp {seconds!r} is not whole seconds since the epoch; promtool would read a "
            "millisecond timestamp as seconds"
        )
    return seconds


def escape_label_value(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def escape_help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def label_text(labels: Mapping[str, str]) -> str:
    """`{a="1",b="2"}` with label names sorted; empty labels give an empty string."""
    if not labels:
        return ""
    inner = ",".join(f'{k}="{escape_label_value(labels[k])}"' for k in sorted(labels))
    return "{" + inner + "}"


def joined_texts(texts: Iterable[str], size: int = 1 << 20) -> Iterator[str]:
    """`texts` joined into texts of about `size` characters (one write each), in order."""
    batch: list[str] = []
    length = 0
    for text in texts:
        batch.append(text)
        length += len(text)
        if length >= size:
            yield "".join(batch)
            batch, length = [], 0
    if batch:
        yield "".join(batch)


def format_value(value: float) -> str:
    """Whole numbers without a fraction, others as Python's shortest round-tripping repr."""
    if value == int(value) and abs(value) < MAX_EXACT_INTEGER:
        return str(int(value))
    return repr(float(value))


def header_lines(family: MetricFamily) -> str:
    return f"# TYPE {family.name} {family.type}\n# HELP {family.name} {escape_help(family.help)}\n"


@dataclass(frozen=True, slots=True)
class Sample:
    """One sample: its name (`_total` for counters), labels, time (s) and value."""

    name: str
    labels: tuple[tuple[str, str], ...]
    time: int
    value: float

    @property
    def series(self) -> tuple[str, tuple[tuple[str, str], ...]]:
        return self.name, self.labels


def write_openmetrics(path: Path, catalog: list[MetricFamily], samples: Iterable[Sample]) -> int:
    """Write `samples` in promtool's order; returns the number of sample lines."""
    by_family: dict[str, dict[str, list[Sample]]] = {f.sample_name: {} for f in catalog}
    for sample in samples:
        if sample.name not in by_family:
            raise ValueError(f"sample {sample.name} belongs to no family of the catalog")
        key = label_text(dict(sample.labels))
        by_family[sample.name].setdefault(key, []).append(sample)
    count = 0
    with open(path, "w", encoding="utf-8") as out:
        for family in catalog:
            series = by_family[family.sample_name]
            if not series:
                continue
            out.write(header_lines(family))
            for key in sorted(series):
                for sample in sorted(series[key], key=lambda s: s.time):
                    ts = check_timestamp(sample.time)
                    out.write(f"{sample.name}{key} {format_value(sample.value)} {ts}\n")
                    count += 1
        out.write(EOF_LINE)
    return count


def read_openmetrics(path: Path) -> dict[tuple[str, str], dict[int, float]]:
    """Parse our own output back: {(sample name, label text): {time: value}} (for tests/bench)."""
    result: dict[tuple[str, str], dict[int, float]] = {}
    with open(path, encoding="utf-8") as stream:
        for line in stream:
            if line.startswith("#"):
                continue
            head, value, ts = line.rstrip("\n").rsplit(" ", 2)
            name, brace, rest = head.partition("{")
            series = result.setdefault((name, brace + rest), {})
            series[int(ts)] = float(value)
    return result

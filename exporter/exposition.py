"""The exporter's `/metrics` text (Prometheus text format 0.0.4), written directly.

Byte for byte what prometheus_client's `generate_latest` writes for the same families (a test
holds it to that), but the per-volume families, four lines per volume (96,000 lines at 24,000
volumes), are written in one pass: each volume's label text is built once and shared by its four
lines, values are formatted as prometheus_client formats them (`floatToGoString`).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence

from prometheus_client.utils import floatToGoString

from kvq.contract import metric_families as mf
from kvq.contract.cluster_identity import ClusterIdentity
from kvq.contract.metric_samples import VOLUME_COLUMNS, Family, VolumeColumn
from kvq.model.volume import Volume


def escape_label_value(value: str) -> str:
    return value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")


def header(family: mf.MetricFamily) -> str:
    """`# HELP` and `# TYPE` as the 0.0.4 format writes them (counters named with `_total`)."""
    name = family.sample_name
    text = family.help.replace("\\", r"\\").replace("\n", r"\n")
    return f"# HELP {name} {text}\n# TYPE {name} {family.type}\n"


def render_family(family: Family) -> str:
    """One family of a few samples; label names sorted, as prometheus_client writes them."""
    name = family.family.sample_name
    lines = [header(family.family)]
    for labels, value in family.samples:
        inner = ",".join(f'{k}="{escape_label_value(labels[k])}"' for k in sorted(labels))
        label_text = "{" + inner + "}" if inner else ""
        lines.append(f"{name}{label_text} {floatToGoString(value)}\n")
    return "".join(lines)


def format_value(value: float) -> str:
    """`floatToGoString(value)` (Go's formatting, as prometheus_client writes values), with fast
    paths for whole numbers of bytes and for ratios; anything else goes to prometheus_client."""
    if type(value) is int:
        if 0 <= value < 1_000_000:
            return f"{value}.0"
        if 1_000_000 <= value < _EXACT_INT:
            digits = str(value)
            mantissa = f"{digits[0]}.{digits[1:]}0".rstrip("0.")
            return f"{mantissa}e+{len(digits) - 1:02d}"
    elif type(value) is float and 0.0 <= value < 1_000_000.0:
        return repr(value)
    return floatToGoString(value)


_EXACT_INT = 2**53
"""Whole numbers below this are exact in a double, so repr(float(n)) is str(n) + '.0'."""


def _formatted(column: VolumeColumn, judged: list[tuple[Volume, bool]]) -> list[str]:
    """The column's value texts, each distinct value formatted once (most volumes of a cluster
    share a few disk sizes, and `log_dir_violating` has two values)."""
    texts: dict[float, str] = {}
    values = [column.value(volume, violating) for volume, violating in judged]
    for value in values:
        if value not in texts:
            texts[value] = format_value(value)
    return [texts[value] for value in values]


def volume_label_parts(cluster: ClusterIdentity) -> tuple[str, str, str]:
    """A volume's label text, `{broker_id="B",cluster="..",log_dir="D"} `, as the three parts
    around its broker id B and escaped log dir D: the table's per-volume labels in their order,
    the cluster's (the same on every line) within the parts."""
    pairs = {
        "broker_id": 'broker_id="\0"',
        "log_dir": 'log_dir="\0"',
        cluster.label: f'{cluster.label}="{escape_label_value(cluster.name)}"',
    }
    names = mf.PER_VOLUME_FAMILIES[0].label_names(cluster.label)
    before, between, after = ("{" + ",".join(pairs[name] for name in names) + "} ").split("\0")
    return before, between, after


def render_volumes(
    volumes: Iterable[Volume],
    violating: Collection[tuple[int, str]],
    cluster: ClusterIdentity,
    policy: Sequence[tuple[mf.MetricFamily, list[float]]] = (),
) -> str:
    """The per-volume families (`VOLUME_COLUMNS`) for `volumes` (sorted by key), in table order,
    then the policy's (`kvq.contract.metric_samples.policy_columns`: a value per volume each),
    each line labelled with the cluster's name."""
    volumes = list(volumes)
    before, between, after = volume_label_parts(cluster)
    labels = [
        f"{before}{v.broker_id}{between}{escape_label_value(v.log_dir)}{after}" for v in volumes
    ]
    judged = [(v, (v.broker_id, v.log_dir) in violating) for v in volumes]
    columns = [(column.family, _formatted(column, judged)) for column in VOLUME_COLUMNS]
    columns += [(family, [format_value(v) for v in values]) for family, values in policy]
    parts = []
    for family, values in columns:
        parts.append(header(family))
        if values:
            name = family.sample_name
            parts += [name, ("\n" + name).join(map(str.__add__, labels, values)), "\n"]
    return "".join(parts)

"""The exporter's /metrics text matches the metric table in kvq/contract/metric_families.py:
the same families in the same order, the same HELP and TYPE lines, the same label names."""

from __future__ import annotations

import re

import pytest

from devkit.exposition_reference import prometheus_client_text
from exporter.exporter_app import Exporter
from exporter.settings import ExporterSettings
from kvq.contract.metric_families import FAMILIES, HISTOGRAM, published
from kvq.model.observation import Observation
from kvq.model.volume import LogDirDescription

P = "client.quota.callback.static."
LIMITS = {
    "ratio": (P + "storage.per.volume.limit.min.available.ratio", "0.1"),
    "bytes": (P + "storage.per.volume.limit.min.available.bytes", "100"),
}


def exposition(limit: str, **more: str) -> tuple[Exporter, str]:
    key, value = LIMITS[limit]
    settings = ExporterSettings.build(
        {P + "kafka.admin.bootstrap.servers": "unused:9092", key: value, **more}, environ={}
    )
    exporter = Exporter(settings, client=object(), clock=lambda: 1001.0)  # type: ignore[arg-type]
    exporter.throttle.observe(
        Observation(
            1000.0,
            (0, 1),
            (
                LogDirDescription(0, "/data/a", 1000, 50),
                LogDirDescription(1, "/data/a", 1000, 900),
                LogDirDescription(1, "/data/b", -1, -1),
                LogDirDescription(1, "/data/c", -1, -1, error_code=56),
            ),
        )
    )
    return exporter, exporter.render_metrics().decode()


@pytest.mark.parametrize("limit", sorted(LIMITS))
def test_help_and_type_lines_are_the_table_in_its_order(limit):
    exporter, text = exposition(limit)
    headers = [
        line
        for line in text.splitlines()
        if line.startswith("# ") and not line.split()[2].endswith("_created")
    ]
    expected = []
    for family in published(exporter.config.limit):
        name = family.sample_name  # the 0.0.4 text format names counters with `_total`
        expected += [f"# HELP {name} {family.help}", f"# TYPE {name} {family.type}"]
    assert headers == expected


@pytest.mark.parametrize("limit", sorted(LIMITS))
@pytest.mark.parametrize("cluster_label", ["cluster", "kafka_cluster", "_k", "zone"])
def test_every_sample_carries_exactly_the_table_labels(limit, cluster_label):
    """With kvq.cluster.label the cluster's label takes that name on every family (sorted among
    the others: `_k` comes first, `zone` last)."""
    exporter, text = exposition(limit, **{"kvq.cluster.label": cluster_label})
    by_sample_name = {f.sample_name: f for f in FAMILIES}
    histograms = [f for f in FAMILIES if f.type == HISTOGRAM]
    seen = set()
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        match = re.fullmatch(r"([a-z_]+)(\{[^}]*\})? \S+", line)
        assert match, line
        name, labels = match.group(1), match.group(2) or ""
        label_names = tuple(n for n in re.findall(r'([a-z_]+)="', labels) if n != "le")
        family = by_sample_name.get(name) or next(
            f for f in histograms if name.startswith(f.name + "_")
        )
        assert label_names == family.label_names(cluster_label), line
        assert f'{cluster_label}="kafka"' in labels, line
        seen.add(family.name)
    assert seen == {f.name for f in published(exporter.config.limit)}


def test_the_fake_exporter_of_the_rule_tests_publishes_the_same_headers():
    from devkit.fake_exporter import FakeExporter

    def headers(text: str) -> list[str]:
        return [
            line
            for line in text.splitlines()
            if line.startswith("# ") and not line.split()[2].endswith("_created")
        ]

    _, real = exposition("ratio")
    assert headers(FakeExporter(cluster="prod").render()) == headers(real)


ODD_LOG_DIRS = ("/data/a", 'with "quotes"', "back\\slash", "new\nline", "ünïcödé", "")


def test_the_direct_rendering_is_byte_identical_to_prometheus_client():
    key, value = LIMITS["ratio"]
    settings = ExporterSettings.build(
        {P + "kafka.admin.bootstrap.servers": "unused:9092", key: value, "kvq.cluster.name": "c"},
        environ={},
    )
    exporter = Exporter(settings, client=object(), clock=lambda: 2001.0)  # type: ignore[arg-type]
    dirs = [
        LogDirDescription(b, d, total, free)
        for b, (total, free) in enumerate([(10**12, 123456789), (1000, 7), (0, 0), (3, 1)])
        for d in ODD_LOG_DIRS
    ]
    dirs.append(LogDirDescription(9, "/gone", -1, -1))
    exporter.throttle.observe(Observation(1000.0, (0, 1, 2, 3, 9), tuple(dirs)))
    exporter.throttle.observe(
        Observation(2000.0, (0, 1), tuple(d for d in dirs if d.broker_id < 2))
    )
    text = exporter.render_metrics()
    assert "cached_log_dirs" in text.decode() and 'log_dir="new\\nline"' in text.decode()
    assert text == prometheus_client_text(exporter)


def test_another_cluster_label_renames_only_the_label():
    """The default exposition is unchanged by naming the default; `kafka_cluster` (sorted where
    `cluster` is) changes nothing but the label's name."""

    def without_created(text: str) -> str:  # the histogram's creation time differs
        return "".join(line for line in text.splitlines(True) if "_created" not in line)

    default, named_default, renamed = (
        without_created(exposition("ratio", **more)[1])
        for more in ({}, {"kvq.cluster.label": "cluster"}, {"kvq.cluster.label": "kafka_cluster"})
    )
    assert named_default == default
    assert default.count('cluster="kafka"') > 20
    assert renamed == default.replace('cluster="kafka"', 'kafka_cluster="kafka"')


@pytest.mark.parametrize("cluster_label", ["kafka_cluster", "_k", "zone"])
def test_direct_rendering_with_another_cluster_label_is_prometheus_client_s(cluster_label):
    key, value = LIMITS["bytes"]
    settings = ExporterSettings.build(
        {
            P + "kafka.admin.bootstrap.servers": "unused:9092",
            key: value,
            "kvq.cluster.label": cluster_label,
            "kvq.cluster.name": "prod-eu.1",
        },
        environ={},
    )
    exporter = Exporter(settings, client=object(), clock=lambda: 1001.0)  # type: ignore[arg-type]
    dirs = tuple(LogDirDescription(b, d, 1000, 10 * b) for b in range(3) for d in ODD_LOG_DIRS)
    exporter.throttle.observe(Observation(1000.0, (0, 1, 2), dirs))
    assert exporter.render_metrics() == prometheus_client_text(exporter)


def test_promtool_check_metrics_is_clean_at_scale():
    import subprocess

    key, value = LIMITS["bytes"]
    settings = ExporterSettings.build(
        {P + "kafka.admin.bootstrap.servers": "unused:9092", key: value}, environ={}
    )
    exporter = Exporter(settings, client=object(), clock=lambda: 1001.0)  # type: ignore[arg-type]
    dirs = tuple(
        LogDirDescription(b, f"/var/lib/kafka/data-{i}", 10**12, (b * 7919 + i) % 10**12)
        for b in range(200)
        for i in range(12)
    )
    exporter.throttle.observe(Observation(1000.0, tuple(range(200)), dirs))
    result = subprocess.run(
        ["promtool", "check", "metrics"],
        input=exporter.render_metrics(),
        capture_output=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_values_are_formatted_exactly_as_prometheus_client_formats_them():
    import random

    from prometheus_client.utils import floatToGoString

    from exporter.exposition import format_value

    rng = random.Random(7)
    values = [0, 1, 999_999, 1_000_000, 10**12, 2**53 - 1, 2**53, 2**63 - 1, -1, -(10**7)]
    values += [rng.randrange(10**k) for k in range(1, 19) for _ in range(200)]
    values += [0.0, 1.0, 0.1, 1e-05, 1 / 3, 999_999.5, 1e6, 2.5e7, float("inf"), float("nan")]
    values += [rng.random() * 10**k for k in range(-8, 9) for _ in range(200)]
    for value in values:
        assert format_value(value) == floatToGoString(value), value


def test_graceful_slowdown_publishes_fill_rate_time_to_limit_and_factor_per_volume():
    """Only under the graceful-slowdown policy (the proposal's exposition stays as it was): its
    families after the others, rendered as prometheus_client renders them, promtool-clean."""
    import subprocess

    key, value = LIMITS["bytes"]
    settings = ExporterSettings.build(
        {
            P + "kafka.admin.bootstrap.servers": "unused:9092",
            key: value,
            "kvq.throttle.policy": "graceful-slowdown",
            "kvq.throttle.slowdown.horizon": "PT1M",
        },
        environ={},
    )
    exporter = Exporter(settings, client=object(), clock=lambda: 1011.0)  # type: ignore[arg-type]
    for time, available in ((1000.0, 900), (1005.0, 700), (1010.0, 500)):
        dirs = (LogDirDescription(0, "/data/a", 1000, available),)
        exporter.throttle.observe(Observation(time, (0,), dirs))
    text = exporter.render_metrics()
    assert text == prometheus_client_text(exporter)
    lines = text.decode().splitlines()
    gauges = exporter.config.policy.gauges
    headers = [
        line
        for line in lines
        if line.startswith("# HELP kafka_volume_quota") and not line.split()[2].endswith("_created")
    ]
    expected = [
        f"# HELP {f.sample_name} {f.help}" for f in published(exporter.config.limit, gauges)
    ]
    assert headers == expected
    volume = '{broker_id="0",cluster="kafka",log_dir="/data/a"}'
    assert f"kafka_volume_quota_log_dir_fill_rate_bytes_per_second{volume} 40.0" in lines
    assert f"kafka_volume_quota_log_dir_seconds_to_limit{volume} 10.0" in lines  # 400 B at 40 B/s
    factor = next(line for line in lines if line.startswith("kafka_volume_quota_throttle_factor{"))
    assert f"kafka_volume_quota_log_dir_throttle_factor{volume} {factor.split()[1]}" in lines
    assert 0.0 < float(factor.split()[1]) < 1.0
    check = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True)
    assert check.returncode == 0, check.stdout + check.stderr

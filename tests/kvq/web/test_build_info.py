"""build_info and the landing page name the source revision the image was built from (its
KVQ_REVISION), and "unknown" where nothing says it."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import requests
from prometheus_client import CollectorRegistry, generate_latest

import kvq
from kvq.web.server import Response, Route, WebServer
from kvq.web.standard_metrics import BUILD_INFO, BuildInfoCollector, register_standard_metrics

ROOT = Path(__file__).resolve().parents[3]


@contextmanager
def serving() -> Iterator[str]:
    """A kvq server on a free loopback port with the standard metrics, as both apps run it."""
    registry = CollectorRegistry()
    server = WebServer(
        "kvq-test",
        "a server",
        ("127.0.0.1", 0),
        [Route("/metrics", lambda _r: Response(200, generate_latest(registry)), "metrics")],
    )
    register_standard_metrics(registry, "kvq-test", server)
    server.start()
    try:
        yield server.url
    finally:
        server.stop()


@pytest.mark.parametrize("revision", ["3f2c1a9e0b7d4c5a8e6f1b2d3c4a5e6f7a8b9c0d", None])
def test_build_info_and_landing_page_carry_the_revision(monkeypatch, revision) -> None:
    if revision is None:
        monkeypatch.delenv(kvq.REVISION_ENV, raising=False)
    else:
        monkeypatch.setenv(kvq.REVISION_ENV, revision)
    expected = revision or "unknown"
    with serving() as url:
        metrics = requests.get(url + "/metrics", timeout=5).text
        landing = requests.get(url + "/", timeout=5).text
    (build_info,) = [line for line in metrics.splitlines() if line.startswith(BUILD_INFO + "{")]
    assert f'revision="{expected}"' in build_info
    assert f'version="{kvq.__version__}"' in build_info and build_info.endswith(" 1.0")
    assert f"kafka-volume-quotas {kvq.__version__}, revision {expected}" in landing


def test_the_docs_and_the_dashboard_show_every_build_info_label() -> None:
    """docs/metrics.md's list and the dashboard's "Versions running" table have every label
    build_info carries, the revision included."""
    labels = list(BuildInfoCollector("kvq-test").labels)
    assert "revision" in labels
    page = (ROOT / "docs" / "metrics.md").read_text()
    assert f"`{BUILD_INFO}{{{', '.join(labels)}}} 1`" in page
    dashboard = json.loads(
        (ROOT / "grafana" / "dashboards" / "kafka-volume-quotas.json").read_text()
    )
    (panel,) = [p for p in dashboard["panels"] if p.get("title") == "Versions running"]
    (target,) = panel["targets"]
    grouped = re.fullmatch(r"max by \(([^)]*)\) \(" + BUILD_INFO + " .*", target["expr"])
    assert grouped and set(grouped.group(1).split(", ")) == {"job", "instance", *labels}
    (organize,) = panel["transformations"]
    assert set(organize["options"]["indexByName"]) == {"job", "instance", *labels}

"""The exporter's HTTP endpoints: /metrics, /status, /ready, /healthz (and the page at /)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST

from kvq.web.server import ConnectionLimits, Response, Route, WebServer
from kvq.web.web_config import WebConfig

DESCRIPTION = (
    "Publishes the throttle factor of one Kafka cluster, computed from the free space of every "
    "log dir of every broker, for Prometheus."
)


def exporter_routes(
    render_metrics: Callable[[], bytes],
    render_live: Callable[[], bytes],
    is_ready: Callable[[], bool],
    status: Callable[[], dict[str, Any]],
    metrics_path: str = "/metrics",
    on_scrape: Callable[[str], None] = lambda peer: None,
) -> list[Route]:
    """`on_scrape` is told the address of each client asking for the metrics, as it asks."""

    def ready(_request) -> Response:
        if is_ready():
            return Response(200, b"ready\n")
        return Response(503, b"no successful observation yet\n")

    def metrics(request) -> Response:
        on_scrape(request.peer)
        return Response(
            200, render_metrics(), CONTENT_TYPE_LATEST, compressible=True, tail=render_live()
        )

    return [
        Route(metrics_path, metrics, "Prometheus metrics (gzip when asked)"),
        Route("/status", lambda _r: Response.json(200, status()), "the factor and why, as JSON"),
        Route("/ready", ready, "200 once the first observation succeeded"),
        Route("/healthz", lambda _r: Response(200, b"ok\n"), "liveness"),
    ]


def exporter_server(
    address: tuple[str, int],
    routes: list[Route],
    web_config: WebConfig | None = None,
    limits: ConnectionLimits | None = None,
) -> WebServer:
    return WebServer("kvq-exporter", DESCRIPTION, address, routes, web_config, limits)

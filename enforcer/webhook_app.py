"""The HTTP face of the enforcer: a Flask app served by kvq.web's server (see cli.py).

POST /webhook   Alertmanager webhook v4 (authenticated); 200 applied/ignored, 400 bad payload,
                401 credentials, 413 too large, 503 Kafka failed (Alertmanager retries 5xx)
GET  /status    per-cluster target/applied factor, changed entities, drift (authenticated)
GET  /metrics   Prometheus metrics
GET  /ready     200 when the server takes webhooks
GET  /healthz   200 ok; 503 degraded (work cannot progress) or failing (originals unknown)

The server checks credentials and the Content-Length from the request head (a 401 or 413 is
answered before any of the body is read), bounds and times out connections, and hands the request
to the Flask app through WSGI (kvq/web/wsgi.py); /metrics is served by the server directly so its
gzip is cached with the text.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from flask import Flask, request
from flask import Response as FlaskResponse
from werkzeug.exceptions import HTTPException

from enforcer.applier import ApplyError
from enforcer.auth import Credentials
from enforcer.enforcer import Enforcer
from enforcer.journal import JournalError
from enforcer.webhook_payload import PayloadError, parse_webhook
from kvq.web.server import Limits, Response, Route, WebServer
from kvq.web.standard_metrics import register_standard_metrics
from kvq.web.web_config import WebConfig
from kvq.web.wsgi import wsgi_handler

DEFAULT_MAX_BODY = 1024 * 1024
OTHER_PATHS = ("/webhook", "/status", "/ready", "/healthz")
"""What the server serves besides the metrics (whose path `--web.telemetry-path` sets)."""
DESCRIPTION = (
    "Alertmanager webhook that sets Kafka client quotas to base x throttle factor while the "
    "KafkaVolumeQuotaThrottle alert fires and restores them exactly when it resolves."
)
REJECTED_OUTCOME = {
    400: "bad_request",  # a malformed request head
    401: "unauthorized",
    408: "bad_request",  # head or body not sent in time
    411: "bad_request",  # no Content-Length
    413: "too_large",
    417: "bad_request",  # an Expect other than 100-continue
}
log = logging.getLogger("kvq.enforcer")


def _json(status: int, document: Any) -> FlaskResponse:
    body = json.dumps(document, indent=2, ensure_ascii=True) + "\n"
    return FlaskResponse(body, status, mimetype="application/json")


def create_app(enforcer: Enforcer) -> Flask:
    """The enforcer's Flask application: webhook, status and health documents.

    Credentials, methods and body size are enforced by the server before the app runs (see
    enforcer_routes); the app only ever sees requests it should answer.
    """
    app = Flask("kvq-enforcer")
    metrics = enforcer.metrics

    def error(status: int, outcome: str, message: str) -> FlaskResponse:
        metrics.webhooks.labels(outcome).inc()
        return _json(status, {"error": message})

    @app.post("/webhook")
    def webhook() -> FlaskResponse:
        try:
            payload = parse_webhook(request.get_data(cache=False))
            outcome = enforcer.handle(payload)
        except PayloadError as exc:
            log.warning("rejected webhook: %s", exc)
            return error(400, "bad_request", str(exc))
        except ApplyError as exc:
            return error(503, "kafka_unavailable", str(exc))
        except JournalError as exc:
            log.error("%s", exc)
            return error(500, "error", str(exc))
        except Exception:
            log.exception("webhook failed")
            return error(500, "error", "internal error; see the enforcer's log")
        metrics.webhooks.labels(outcome.outcome).inc()
        return _json(200, outcome.to_json())

    @app.get("/status")
    def status() -> FlaskResponse:
        return _json(200, enforcer.status())

    @app.get("/healthz")
    def health() -> FlaskResponse:
        document = enforcer.health()
        return _json(200 if document["status"] == "ok" else 503, document)

    @app.get("/ready")
    def ready() -> FlaskResponse:
        return _json(200, {"status": "ready", "clusters": sorted(enforcer.appliers)})

    @app.errorhandler(Exception)
    def unexpected(exc: Exception) -> FlaskResponse:
        if isinstance(exc, HTTPException):
            return _json(exc.code or 500, {"error": exc.description})
        log.exception("request failed")
        return _json(500, {"error": "internal error; see the enforcer's log"})

    return app


def enforcer_routes(
    enforcer: Enforcer,
    credentials: Credentials | None,
    max_body: int = DEFAULT_MAX_BODY,
    address: tuple[str, int] = ("127.0.0.1", 0),
    scheme: str = "http",
    metrics_path: str = "/metrics",
) -> list[Route]:
    """The routes: the Flask app behind the server's checks, and /metrics served directly.

    `credentials` None means no authentication (--insecure-no-auth)."""
    metrics = enforcer.metrics
    app = wsgi_handler(create_app(enforcer), address, scheme)

    def rejected(status: int) -> None:
        if status in REJECTED_OUTCOME:
            metrics.webhooks.labels(REJECTED_OUTCOME[status]).inc()

    return [
        Route(
            "/webhook",
            app,
            "Alertmanager webhook v4 (authenticated)",
            methods=("POST",),
            credentials=credentials,
            max_body=max_body,
            on_rejected=rejected,
        ),
        Route(
            "/status",
            app,
            "per-cluster target and applied factor, changed quotas, drift (authenticated)",
            credentials=credentials,
        ),
        Route(
            metrics_path,
            lambda _r: Response(200, metrics.render(), metrics.content_type, compressible=True),
            "Prometheus metrics (gzip when asked)",
        ),
        Route("/ready", app, "200 when the server takes webhooks"),
        Route("/healthz", app, "200 ok, 503 degraded or failing (JSON says why)"),
    ]


def enforcer_server(
    enforcer: Enforcer,
    credentials: Credentials | None,
    address: tuple[str, int],
    web_config: WebConfig | None = None,
    threads: int = 4,
    max_body: int = DEFAULT_MAX_BODY,
    limits: Limits | None = None,
    metrics_path: str = "/metrics",
) -> WebServer:
    """The enforcer's server (not started); its registry also gets build info and process."""
    server = WebServer(
        "kvq-enforcer",
        DESCRIPTION,
        address,
        enforcer_routes(
            enforcer,
            credentials,
            max_body,
            address,
            web_config.scheme if web_config else "http",
            metrics_path,
        ),
        web_config,
        limits,
        threads,
    )
    register_standard_metrics(enforcer.metrics.registry, "kvq-enforcer", server)
    return server

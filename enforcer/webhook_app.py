"""The HTTP face of the enforcer: a Flask app served by kvq.web's server (built in
enforcer_app.py).

POST /webhook   Alertmanager webhook v4 (authenticated); 200 applied/ignored (with the state in
                Kafka: queued for the acting replica), 400 bad payload, 401 credentials, 413 too
                large, 503 Kafka failed (Alertmanager retries 5xx)
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
from collections.abc import Callable
from typing import Any

from flask import Flask, request
from flask import Response as FlaskResponse
from werkzeug.exceptions import HTTPException

from enforcer.apply.result import ApplyError
from enforcer.auth import Credentials
from enforcer.enforcer import Enforcer
from enforcer.inbox import InboxError
from enforcer.journal import JournalError
from enforcer.replica import Replica
from enforcer.webhook_payload import PayloadError, parse_webhook
from kvq.web.server import ConnectionLimits, Request, Response, Route, WebServer
from kvq.web.standard_metrics import register_standard_metrics
from kvq.web.web_config import WebConfig
from kvq.web.wsgi import wsgi_handler

DEFAULT_MAX_BODY = 1024 * 1024
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


class _Direct:
    """The local store (one replica): a webhook is handled here, before the answer."""

    def __init__(self, enforcer: Enforcer) -> None:
        self.enforcer = enforcer
        self.metrics = enforcer.metrics
        self.clusters = tuple(sorted(enforcer.appliers))
        self.status = enforcer.status
        self.health = enforcer.health

    def take(self, body: bytes) -> tuple[str, dict[str, Any]]:
        outcome = self.enforcer.handle(parse_webhook(body))
        return outcome.outcome, outcome.to_json()


class _Views:
    """What each endpoint answers: Flask views (run inside the app) and the server's handler of
    /metrics. Credentials, methods and body size are enforced by the server before a view runs
    (see enforcer_routes); a view only ever sees requests it should answer."""

    def __init__(self, face: _Direct | Replica) -> None:
        self.face = face
        self.metrics = face.metrics

    def webhook(self) -> FlaskResponse:
        try:
            outcome, document = self.face.take(request.get_data(cache=False))
        except PayloadError as exc:
            log.warning("rejected webhook: %s", exc)
            return self._error(400, "bad_request", str(exc))
        except (ApplyError, InboxError) as exc:
            return self._error(503, "kafka_unavailable", str(exc))
        except JournalError as exc:
            log.error("%s", exc)
            return self._error(500, "error", str(exc))
        except Exception:
            log.exception("webhook failed")
            return self._error(500, "error", "internal error; see the enforcer's log")
        self.metrics.webhooks.labels(outcome).inc()
        return _json(200, document)

    def webhook_rejected(self, status: int) -> None:
        """A webhook the server refused from its head (never reached `webhook`), counted."""
        if status in REJECTED_OUTCOME:
            self.metrics.webhooks.labels(REJECTED_OUTCOME[status]).inc()

    def status(self) -> FlaskResponse:
        return _json(200, self.face.status())

    def health(self) -> FlaskResponse:
        document = self.face.health()
        return _json(200 if document["status"] == "ok" else 503, document)

    def ready(self) -> FlaskResponse:
        return _json(200, {"status": "ready", "clusters": list(self.face.clusters)})

    def serve_metrics(self, _request: Request) -> Response:
        return Response(200, self.metrics.render(), self.metrics.content_type, compressible=True)

    def _error(self, status: int, outcome: str, message: str) -> FlaskResponse:
        self.metrics.webhooks.labels(outcome).inc()
        return _json(status, {"error": message})


def _flask_app() -> Flask:
    """The app the views are registered in; its errors are JSON like its answers."""
    app = Flask("kvq-enforcer")

    @app.errorhandler(Exception)
    def unexpected(exc: Exception) -> FlaskResponse:
        if isinstance(exc, HTTPException):
            return _json(exc.code or 500, {"error": exc.description})
        log.exception("request failed")
        return _json(500, {"error": "internal error; see the enforcer's log"})

    return app


def _endpoint_declarer(app: Flask, address: tuple[str, int], scheme: str) -> Callable[..., Route]:
    """`endpoint(path, view, title, **checks)` declares one endpoint of `app` once: the server's
    Route (`checks`: Route's methods, credentials, max_body, on_rejected) that checks a request
    from its head and hands it to the app through WSGI, and the app's rule for the same path and
    methods that runs `view`."""
    served = wsgi_handler(app, address, scheme)

    def endpoint(path: str, view: Callable[[], FlaskResponse], title: str, **checks: Any) -> Route:
        route = Route(path, served, title, **checks)
        app.add_url_rule(path, view_func=view, methods=route.methods)
        return route

    return endpoint


def enforcer_routes(
    enforcer: Enforcer | Replica,
    credentials: Credentials | None,
    max_body: int = DEFAULT_MAX_BODY,
    address: tuple[str, int] = ("127.0.0.1", 0),
    scheme: str = "http",
    metrics_path: str = "/metrics",
) -> list[Route]:
    """The routes, each declared once: the Flask views behind the server's checks, and /metrics
    served by the server directly.

    `credentials` None means no authentication (--insecure-no-auth)."""
    views = _Views(enforcer if isinstance(enforcer, Replica) else _Direct(enforcer))
    endpoint = _endpoint_declarer(_flask_app(), address, scheme)
    return [
        endpoint(
            "/webhook",
            views.webhook,
            "Alertmanager webhook v4 (authenticated)",
            methods=("POST",),
            credentials=credentials,
            max_body=max_body,
            on_rejected=views.webhook_rejected,
        ),
        endpoint(
            "/status",
            views.status,
            "per-cluster target and applied factor, changed quotas, drift (authenticated)",
            credentials=credentials,
        ),
        Route(metrics_path, views.serve_metrics, "Prometheus metrics (gzip when asked)"),
        endpoint("/ready", views.ready, "200 when the server takes webhooks"),
        endpoint("/healthz", views.health, "200 ok, 503 degraded or failing (JSON says why)"),
    ]


def enforcer_server(
    enforcer: Enforcer | Replica,
    credentials: Credentials | None,
    address: tuple[str, int],
    web_config: WebConfig | None = None,
    threads: int = 4,
    max_body: int = DEFAULT_MAX_BODY,
    limits: ConnectionLimits | None = None,
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

"""The HTTP face of the enforcer, served by kvq.web's server (see cli.py).

POST /webhook   Alertmanager webhook v4 (authenticated); 200 applied/ignored, 400 bad payload,
                401 credentials, 413 too large, 503 Kafka failed (Alertmanager retries 5xx)
GET  /status    per-cluster target/applied factor, changed entities, drift (authenticated)
GET  /metrics   Prometheus metrics
GET  /ready     200 when the server takes webhooks
GET  /healthz   200 ok; 503 degraded (work cannot progress) or failing (originals unknown)

Credentials and the Content-Length are checked from the request head: a 401 or 413 is answered
before any of the body is read.
"""

from __future__ import annotations

import logging

from enforcer.applier import ApplyError
from enforcer.auth import Credentials
from enforcer.journal import JournalError
from enforcer.service import Enforcer
from enforcer.webhook_payload import PayloadError, parse_webhook
from kvq.web.server import Limits, Request, Response, Route, WebServer
from kvq.web.standard_metrics import register_standard_metrics
from kvq.web.web_config import WebConfig

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


def enforcer_routes(
    enforcer: Enforcer, credentials: Credentials | None, max_body: int = DEFAULT_MAX_BODY
) -> list[Route]:
    """The routes; `credentials` None means no authentication (--insecure-no-auth)."""
    metrics = enforcer.metrics

    def count(outcome: str) -> None:
        metrics.webhooks.labels(outcome).inc()

    def error(status: int, outcome: str, message: str) -> Response:
        count(outcome)
        return Response.error(status, message)

    def webhook(request: Request) -> Response:
        try:
            payload = parse_webhook(request.body)
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
        count(outcome.outcome)
        return Response.json(200, outcome.to_json())

    def health(_request: Request) -> Response:
        document = enforcer.health()
        return Response.json(200 if document["status"] == "ok" else 503, document)

    def ready(_request: Request) -> Response:
        return Response.json(200, {"status": "ready", "clusters": sorted(enforcer.appliers)})

    return [
        Route(
            "/webhook",
            webhook,
            "Alertmanager webhook v4 (authenticated)",
            methods=("POST",),
            credentials=credentials,
            max_body=max_body,
            on_rejected=lambda status: (
                count(REJECTED_OUTCOME[status]) if status in REJECTED_OUTCOME else None
            ),
        ),
        Route(
            "/status",
            lambda _r: Response.json(200, enforcer.status()),
            "per-cluster target and applied factor, changed quotas, drift (authenticated)",
            credentials=credentials,
        ),
        Route(
            "/metrics",
            lambda _r: Response(200, metrics.render(), metrics.content_type, compressible=True),
            "Prometheus metrics (gzip when asked)",
        ),
        Route("/ready", ready, "200 when the server takes webhooks"),
        Route("/healthz", health, "200 ok, 503 degraded or failing (JSON says why)"),
    ]


def enforcer_server(
    enforcer: Enforcer,
    credentials: Credentials | None,
    address: tuple[str, int],
    web_config: WebConfig | None = None,
    threads: int = 4,
    max_body: int = DEFAULT_MAX_BODY,
    limits: Limits | None = None,
) -> WebServer:
    """The enforcer's server (not started); its registry also gets build info and process."""
    server = WebServer(
        "kvq-enforcer",
        DESCRIPTION,
        address,
        enforcer_routes(enforcer, credentials, max_body),
        web_config,
        limits,
        threads,
    )
    register_standard_metrics(enforcer.metrics.registry, "kvq-enforcer", server)
    return server

"""The HTTP face of the enforcer (Flask; served by waitress, see cli.py).

POST /webhook   Alertmanager webhook v4 (authenticated); 200 applied/ignored, 400 bad payload,
                401 credentials, 413 too large, 503 Kafka failed (Alertmanager retries 5xx)
GET  /status    per-cluster target/applied factor, changed entities, drift (authenticated)
GET  /metrics   Prometheus metrics
GET  /healthz   200 ok; 503 degraded (work cannot progress) or failing (originals unknown)
"""

from __future__ import annotations

import logging

from flask import Flask, Response, jsonify, request
from werkzeug.exceptions import RequestEntityTooLarge

from enforcer.applier import ApplyError
from enforcer.auth import Credentials
from enforcer.journal import JournalError
from enforcer.service import Enforcer
from enforcer.webhook_payload import PayloadError, parse_webhook

DEFAULT_MAX_BODY = 1024 * 1024
log = logging.getLogger("kvq.enforcer")


def create_app(
    enforcer: Enforcer, credentials: Credentials | None, max_body: int = DEFAULT_MAX_BODY
) -> Flask:
    """The Flask app; `credentials` None means no authentication (--insecure-no-auth)."""
    app = Flask("kvq-enforcer")
    app.config["MAX_CONTENT_LENGTH"] = max_body
    metrics = enforcer.metrics

    def error(status: int, outcome: str | None, message: str) -> Response:
        if outcome:
            metrics.webhooks.labels(outcome).inc()
        response = jsonify({"error": message})
        response.status_code = status
        if status == 401 and credentials is not None:
            response.headers["WWW-Authenticate"] = ", ".join(
                f'{s} realm="kvq-enforcer"' for s in credentials.schemes
            )
        return response

    def authorized() -> bool:
        return credentials is None or credentials.allows(request.headers.get("Authorization"))

    @app.post("/webhook")
    def webhook() -> Response:
        if not authorized():
            return error(401, "unauthorized", "missing or wrong credentials")
        if request.content_length is not None and request.content_length > max_body:
            return error(413, "too_large", f"payload over {max_body} bytes")
        try:
            payload = parse_webhook(request.get_data(cache=False))
            outcome = enforcer.handle(payload)
        except RequestEntityTooLarge:
            return error(413, "too_large", f"payload over {max_body} bytes")
        except PayloadError as exc:
            log.warning("rejected webhook: %s", exc)
            return error(400, "bad_request", str(exc))
        except ApplyError as exc:
            return error(503, "kafka_unavailable", str(exc))
        except JournalError as exc:
            log.error("%s", exc)
            return error(500, "error", str(exc))
        metrics.webhooks.labels(outcome.outcome).inc()
        return jsonify(outcome.to_json())

    @app.get("/status")
    def status() -> Response:
        if not authorized():
            return error(401, None, "missing or wrong credentials")
        return jsonify(enforcer.status())

    @app.get("/metrics")
    def metrics_endpoint() -> Response:
        return Response(metrics.render(), content_type=metrics.content_type)

    @app.get("/healthz")
    def healthz() -> Response:
        health = enforcer.health()
        response = jsonify(health)
        response.status_code = 200 if health["status"] == "ok" else 503
        return response

    @app.errorhandler(404)
    def not_found(_exc) -> Response:
        return error(
            404, None, "not found; endpoints: POST /webhook, GET /status /metrics /healthz"
        )

    @app.errorhandler(405)
    def not_allowed(_exc) -> Response:
        return error(405, None, "method not allowed")

    return app

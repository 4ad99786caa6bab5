"""The control API: JSON over HTTP, for the demo, the tests and users' own scripts.

    GET    /state                           brokers, log dirs, quotas, active faults
    GET    /brokers/{id}                    one broker
    POST   /brokers/{id}/stop | /start      close / reopen the broker's port
    PUT    /brokers/{id}/faults             {"latency_ms": n,
                                             "log_dir_error": {"index": i, "code": c},
                                             "max_describe_log_dirs_version": v,
                                             "fail_describe_log_dirs": true | code,
                                             "leave_before_describe_log_dirs": true,
                                             "drop_describe_log_dirs": n,
                                             "alter_client_quotas": {"delay_ms": n,
                                                 "apply": "late" | "early", "error_code": c,
                                                 "entities": [...], "validate_only": b,
                                                 "count": k},
                                             "quota_metadata_lag_ms": n,
                                             "clear": true}
    PUT    /brokers/{id}/log-dirs/{index}   {"capacity_bytes": n, "usable_bytes": n,
                                             "fill_bytes": n, "clear": true}
    PUT    /brokers/{id}/config             {"client.quota.callback.class": "..." | null}
    GET    /acls                            ACLs on the cluster resource (null: no authorizer)
    PUT    /acls                            {"User:name": ["Describe", ...]}: replace them
    DELETE /acls                            no authorizer: everything allowed
    GET    /sasl-users                      SASL/PLAIN user names (never passwords)
    PUT    /sasl-users/{name}               {"password": "..."}: add or change a user
    DELETE /sasl-users/{name}               remove a user
    GET    /quotas                          the stored client quotas
    GET    /requests                        requests received, by API and broker
    DELETE /requests                        reset those counts

Every error is a 4xx (or 507 when a fill hits a full disk) with ``{"error": "..."}``.
"""

from __future__ import annotations

import json
import logging
import re
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol
from urllib.parse import unquote

from .validation import ControlError

log = logging.getLogger(__name__)

MAX_BODY_BYTES = 64 * 1024
ENDPOINTS = (
    "GET /state, GET /brokers/{id}, POST /brokers/{id}/stop, POST /brokers/{id}/start, "
    "PUT /brokers/{id}/faults, PUT /brokers/{id}/log-dirs/{index}, PUT /brokers/{id}/config, "
    "GET /acls, PUT /acls, DELETE /acls, "
    "GET /sasl-users, PUT /sasl-users/{name}, DELETE /sasl-users/{name}, GET /quotas, "
    "GET /requests, DELETE /requests"
)


class ControlledCluster(Protocol):
    """The operations the control API calls (``DevCluster``'s, which runs this server): each
    takes the request's JSON body, returns the JSON answer, and raises ControlError for a bad
    request."""

    def state(self) -> dict[str, Any]: ...
    def quota_state(self) -> list[dict[str, Any]]: ...
    def acl_state(self) -> dict[str, list[str]] | None: ...
    def set_acls(self, body: Any) -> dict[str, list[str]] | None: ...
    def sasl_user_names(self) -> list[str]: ...
    def set_sasl_user(self, name: str, body: Any = None) -> list[str]: ...
    def remove_sasl_user(self, name: str) -> list[str]: ...
    def request_counts(self) -> dict[str, Any]: ...
    def reset_request_counts(self) -> dict[str, Any]: ...
    def broker_state(self, broker_id: int) -> dict[str, Any]: ...
    def stop_broker(self, broker_id: int) -> dict[str, Any]: ...
    def start_broker(self, broker_id: int) -> dict[str, Any]: ...
    def set_faults(self, broker_id: int, body: Any = None) -> dict[str, Any]: ...
    def set_broker_config(self, broker_id: int, body: Any) -> dict[str, str]: ...
    def set_log_dir(self, broker_id: int, index: int, body: Any = None) -> dict[str, Any]: ...


def _routes(dc: ControlledCluster) -> list[tuple[str, re.Pattern, Callable[..., Any]]]:
    def r(method: str, pattern: str, fn: Callable[..., Any]):
        return method, re.compile(f"^{pattern}$"), fn

    return [
        r("GET", "/state", lambda _b: dc.state()),
        r("GET", "/quotas", lambda _b: dc.quota_state()),
        r("GET", "/acls", lambda _b: dc.acl_state()),
        r("PUT", "/acls", lambda b: dc.set_acls(b)),
        r("DELETE", "/acls", lambda _b: dc.set_acls(None)),
        r("GET", "/sasl-users", lambda _b: dc.sasl_user_names()),
        r("PUT", "/sasl-users/([^/]+)", lambda b, name: dc.set_sasl_user(unquote(name), b)),
        r("DELETE", "/sasl-users/([^/]+)", lambda _b, name: dc.remove_sasl_user(unquote(name))),
        r("GET", "/requests", lambda _b: dc.request_counts()),
        r("DELETE", "/requests", lambda _b: dc.reset_request_counts()),
        r("GET", r"/brokers/(\d+)", lambda _b, i: dc.broker_state(int(i))),
        r("POST", r"/brokers/(\d+)/stop", lambda _b, i: dc.stop_broker(int(i))),
        r("POST", r"/brokers/(\d+)/start", lambda _b, i: dc.start_broker(int(i))),
        r("PUT", r"/brokers/(\d+)/faults", lambda b, i: dc.set_faults(int(i), b)),
        r("PUT", r"/brokers/(\d+)/config", lambda b, i: dc.set_broker_config(int(i), b)),
        r(
            "PUT",
            r"/brokers/(\d+)/log-dirs/(\d+)",
            lambda b, i, j: dc.set_log_dir(int(i), int(j), b),
        ),
    ]


class ControlServer:
    def __init__(self, dc: ControlledCluster, host: str, port: int):
        routes = _routes(dc)

        class Handler(_Handler):
            pass

        Handler.routes = routes
        self._httpd = ThreadingHTTPServer((host, port), Handler)
        self._httpd.daemon_threads = True
        self.url = f"http://{host}:{self._httpd.server_address[1]}"
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, args=(0.05,), name="devcluster-control", daemon=True
        )

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(5)


class _Handler(BaseHTTPRequestHandler):
    routes: list[tuple[str, re.Pattern, Callable[..., Any]]] = []
    protocol_version = "HTTP/1.1"
    server_version = "kvq-devcluster"

    def do_GET(self):  # noqa: N802 (http.server's naming)
        self._dispatch("GET")

    def do_POST(self):  # noqa: N802
        self._dispatch("POST")

    def do_PUT(self):  # noqa: N802
        self._dispatch("PUT")

    def do_DELETE(self):  # noqa: N802
        self._dispatch("DELETE")

    def _dispatch(self, method: str) -> None:
        try:
            body = self._read_body()
            path = self.path.split("?", 1)[0].rstrip("/") or "/"
            allowed = []
            for route_method, pattern, fn in self.routes:
                m = pattern.match(path)
                if m is None:
                    continue
                if route_method != method:
                    allowed.append(route_method)
                    continue
                if method in ("PUT",) and body is None:
                    raise ControlError(400, f"{method} {path} needs a JSON object body")
                self._send(200, fn(body, *m.groups()))
                return
            if allowed:
                raise ControlError(405, f"{method} not allowed on {path}; use {', '.join(allowed)}")
            raise ControlError(404, f"no such resource: {path}; endpoints: {ENDPOINTS}")
        except ControlError as exc:
            self._send(exc.status, {"error": exc.message})
        except Exception as exc:  # a bug of ours: say so, keep serving
            log.exception("control request %s %s failed", method, self.path)
            self._send(500, {"error": f"internal error: {exc!r}"})

    def _read_body(self) -> Any:
        length = self.headers.get("Content-Length")
        if length is None:
            if self.headers.get("Transfer-Encoding"):
                self.close_connection = True
                raise ControlError(411, "send the body with a Content-Length")
            return None
        try:
            n = int(length)
        except ValueError:
            self.close_connection = True
            raise ControlError(400, f"bad Content-Length {length!r}") from None
        if n > MAX_BODY_BYTES:
            self.close_connection = True
            raise ControlError(413, f"body of {n} bytes is over the limit of {MAX_BODY_BYTES}")
        raw = self.rfile.read(n)
        if not raw.strip():
            return None
        try:
            return json.loads(raw)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ControlError(400, f"body is not valid JSON: {exc}") from None

    def _send(self, status: int, payload: Any) -> None:
        data = json.dumps(payload, indent=1).encode() + b"\n"
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        log.debug("control: " + format, *args)

"""One HTTP server: /metrics, /healthz, /ready, /status."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST


class ExporterHTTPServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(
        self,
        address: tuple[str, int],
        render_metrics: Callable[[], bytes],
        is_ready: Callable[[], bool],
        status: Callable[[], dict[str, Any]],
    ) -> None:
        self.render_metrics = render_metrics
        self.is_ready = is_ready
        self.status = status
        super().__init__(address, _Handler)

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host}:{port}"

    def serve_in_thread(self) -> threading.Thread:
        thread = threading.Thread(target=self.serve_forever, name="kvq-http", daemon=True)
        thread.start()
        return thread


class _Handler(BaseHTTPRequestHandler):
    server: ExporterHTTPServer

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        path = self.path.split("?", 1)[0]
        if path == "/metrics":
            self._send(200, self.server.render_metrics(), CONTENT_TYPE_LATEST)
        elif path == "/healthz":
            self._send(200, b"ok\n", "text/plain")
        elif path == "/ready":
            if self.server.is_ready():
                self._send(200, b"ready\n", "text/plain")
            else:
                self._send(503, b"no successful observation yet\n", "text/plain")
        elif path == "/status":
            body = json.dumps(self.server.status(), indent=2).encode() + b"\n"
            self._send(200, body, "application/json")
        else:
            self._send(404, b"not found: try /metrics /status /ready /healthz\n", "text/plain")

    def _send(self, code: int, body: bytes, content_type: str) -> None:
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args) -> None:  # noqa: A002 - quiet access log
        pass

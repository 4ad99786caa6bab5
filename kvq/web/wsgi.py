"""Serve a WSGI application (the enforcer's Flask app) from kvq.web's server.

The server has already done what must happen before a body is read (route, method, credentials,
Content-Length, size limit) and holds the whole body in memory; this turns that request into a
WSGI environ, calls the application and returns its answer as a Response. The application sees a
plain PEP 3333 environment, so any WSGI framework runs unchanged.
"""

from __future__ import annotations

import io
import sys
from collections.abc import Callable, Iterable
from typing import Any

from kvq.web.server import Request, Response

WSGIApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]
_NOT_HTTP_HEADERS = {"content-type": "CONTENT_TYPE", "content-length": "CONTENT_LENGTH"}


def environ_of(request: Request, server: tuple[str, int], scheme: str = "http") -> dict[str, Any]:
    """The PEP 3333 environ of one request."""
    host, port = server
    environ: dict[str, Any] = {
        "REQUEST_METHOD": request.method,
        "SCRIPT_NAME": "",
        "PATH_INFO": request.path,
        "QUERY_STRING": request.query,
        "SERVER_NAME": host,
        "SERVER_PORT": str(port),
        "SERVER_PROTOCOL": "HTTP/1.1",
        "REMOTE_ADDR": request.peer,
        "CONTENT_LENGTH": str(len(request.body)),
        "wsgi.version": (1, 0),
        "wsgi.url_scheme": scheme,
        "wsgi.input": io.BytesIO(request.body),
        "wsgi.errors": sys.stderr,
        "wsgi.multithread": True,
        "wsgi.multiprocess": False,
        "wsgi.run_once": False,
    }
    for name, value in request.headers.items():
        key = _NOT_HTTP_HEADERS.get(name) or "HTTP_" + name.upper().replace("-", "_")
        environ[key] = value
    return environ


def wsgi_handler(
    app: WSGIApp, server: tuple[str, int], scheme: str = "http"
) -> Callable[[Request], Response]:
    """A route handler that answers with `app`."""

    def handle(request: Request) -> Response:
        answer: dict[str, Any] = {}

        def start_response(status: str, headers: list[tuple[str, str]], exc_info=None):
            if exc_info and answer:
                raise exc_info[1].with_traceback(exc_info[2])
            answer["status"] = int(status.split(" ", 1)[0])
            answer["headers"] = headers
            return lambda _data: None  # the legacy write() callable; Flask never uses it

        chunks = app(environ_of(request, server, scheme), start_response)
        try:
            body = b"".join(chunks)
        finally:
            close = getattr(chunks, "close", None)
            if close:
                close()
        headers = {k: v for k, v in answer["headers"] if k.lower() != "content-length"}
        content_type = headers.pop("Content-Type", "application/octet-stream")
        return Response(answer["status"], body, content_type, headers)

    return handle

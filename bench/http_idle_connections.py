"""Request latency of kvq's HTTP server alone vs with 500 idle and 100 slow connections open.

Starts the server on loopback (one JSON route, as the webhook answers), measures p50/p99 of
sequential requests with nothing else open, then again while 500 idle connections and 100 that
send half a request head are held, and the threads the server process used in each case.
    python -m bench.http_idle_connections [--idle 500] [--slow 100] [--requests 200]
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time

import requests

from devkit import results_page
from devkit.processes import wait_until
from devkit.web_clients import held_connections
from kvq.web.server import Response, Route, WebServer


def latencies(url: str, count: int) -> list[float]:
    samples = []
    with requests.Session() as http:
        for _ in range(count):
            started = time.perf_counter()
            http.post(url, data=b"{}", timeout=30).raise_for_status()
            samples.append(time.perf_counter() - started)
    return samples


def p(samples: list[float], q: float) -> float:
    return statistics.quantiles(samples, n=100)[int(q) - 1] * 1000


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--idle", type=int, default=500)
    parser.add_argument("--slow", type=int, default=100)
    parser.add_argument("--requests", type=int, default=200)
    args = parser.parse_args(argv)
    results_page.arguments(parser, args)
    route = Route(
        "/webhook", lambda r: Response.json(200, {"ok": True}), "", ("POST",), max_body=1024
    )
    server = WebServer("bench", "", ("127.0.0.1", 0), [route]).start()
    url = server.url + "/webhook"
    bound = server.bound
    assert bound is not None, "a started server is bound"
    half_head = b"POST /webhook HTTP/1.1\r\nHost: x\r\nContent-"
    try:
        alone = latencies(url, args.requests)
        threads_alone = threading.active_count()
        with (
            held_connections(bound, args.idle),
            held_connections(bound, args.slow, half_head),
        ):
            wait_until(
                lambda: server.open_connections >= args.idle + args.slow, what="connections held"
            )
            loaded = latencies(url, args.requests)
            threads_loaded = threading.active_count()
    finally:
        server.stop()
    held = f"{args.idle} idle + {args.slow} slow"
    print(f"HTTP request latency, {args.requests} sequential requests each")
    print(f"  alone                p50 {p(alone, 50):7.2f} ms  p99 {p(alone, 99):7.2f} ms")
    print(f"  {held:20} p50 {p(loaded, 50):7.2f} ms  p99 {p(loaded, 99):7.2f} ms")
    print(f"  p99 loaded / alone              {p(loaded, 99) / p(alone, 99):7.2f}x")
    print(f"  threads alone / loaded          {threads_alone} / {threads_loaded}")


if __name__ == "__main__":
    from bench.results import command_line

    raise SystemExit(command_line(__name__))

"""/metrics over HTTP at 24,000 volumes: plain vs gzip, first gzip scrape vs cached ones.

Starts the exporter's real server on loopback with one observation of 2,000 brokers x 12 log
dirs, and measures side by side: bytes on the wire plain and gzipped, a plain scrape, the first
gzip scrape after the text changed (compression), and a repeated gzip scrape (cached gzip).
    python -m bench.metrics_gzip [--brokers 2000] [--log-dirs 12]
"""

from __future__ import annotations

import argparse
import time

import requests

from bench.metrics_render import large_exporter
from bench.timing import median_seconds
from devkit import results_page


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--brokers", type=int, default=2000)
    parser.add_argument("--log-dirs", type=int, default=12)
    args = parser.parse_args(argv)
    results_page.arguments(parser, args)
    exporter, _observation, _limit = large_exporter(args.brokers, args.log_dirs)
    server = exporter.server.start()
    url = server.url + "/metrics"
    http = requests.Session()
    try:

        def scrape(gzip: bool) -> int:
            headers = {"Accept-Encoding": "gzip" if gzip else "identity"}
            response = http.get(url, headers=headers, stream=True, timeout=60)
            return len(response.raw.read())

        plain_bytes = scrape(False)  # renders and caches the text
        started = time.perf_counter()
        gzip_bytes = scrape(True)  # compresses it once
        first_gzip = time.perf_counter() - started
        plain = median_seconds(lambda: scrape(False))
        cached_gzip = median_seconds(lambda: scrape(True))
    finally:
        http.close()
        server.stop()
    print(f"/metrics over HTTP: {args.brokers * args.log_dirs} volumes")
    print(f"  plain body                      {plain_bytes / 1e6:8.2f} MB")
    print(f"  gzip body                       {gzip_bytes / 1e6:8.2f} MB")
    print(f"  plain / gzip size               {plain_bytes / gzip_bytes:8.1f}x")
    print(f"  plain scrape (cached text)      {plain * 1000:8.1f} ms")
    print(f"  first gzip scrape (compresses)  {first_gzip * 1000:8.1f} ms")
    print(f"  repeated gzip scrape (cached)   {cached_gzip * 1000:8.1f} ms")
    print(f"  first / repeated gzip scrape    {first_gzip / cached_gzip:8.1f}x")


if __name__ == "__main__":
    from bench.results import command_line

    raise SystemExit(command_line(__name__))

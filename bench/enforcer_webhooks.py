"""Enforcer webhook throughput and latency under concurrent posts, and Kafka calls for duplicates.

Posts the same firing KafkaVolumeQuotaThrottle notification (shaped like Alertmanager 0.25's) many
times from concurrent clients to a real kvq-enforcer in front of devcluster, and compares
p50/p99 under load with one post alone; counts AlterClientQuotas calls through devcluster.
    python -m bench.enforcer_webhooks [--posts 1000] [--concurrency 8]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import requests

from devkit import results_page

P = "client.quota.callback.static."


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--posts", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=8)
    args = parser.parse_args(argv)
    results_page.arguments(parser, args)

    from devcluster.cluster import DevCluster
    from devkit.alertmanager import throttle_webhook
    from devkit.processes import ManagedProcess, http_ok, server_port, wait_until

    with (
        tempfile.TemporaryDirectory() as work,
        DevCluster(brokers=3, log_dirs_per_broker=1, data_dir=Path(work) / "data") as cluster,
    ):
        work_dir = Path(work)
        (work_dir / "token").write_text("bench-token\n")
        config = work_dir / "kvq.properties"
        config.write_text(
            f"{P}kafka.admin.bootstrap.servers={cluster.bootstrap}\n"
            f"{P}storage.per.volume.limit.min.available.ratio=0.05\n"
            f"{P}produce=10000000\n"
            "kvq.cluster.name=bench\n"
            f"kvq.enforcer.auth.bearer.token.file={work_dir / 'token'}\n"
        )
        port = server_port()
        url = f"http://127.0.0.1:{port}"
        argv = [
            sys.executable, "-m", "enforcer.cli", "--config", str(config),
            "--listen", f"127.0.0.1:{port}", "--journal", str(work_dir / "journal.sqlite3"),
            "--threads", str(args.concurrency),
        ]  # fmt: skip
        with ManagedProcess(argv, work_dir / "enforcer.log"):
            wait_until(lambda: http_ok(url + "/healthz"), 30, what="enforcer")
            session = requests.Session()
            session.headers["Authorization"] = "Bearer bench-token"
            body = throttle_webhook(cluster="bench", factor=0.0)

            def post(_: int = 0) -> float:
                started = time.perf_counter()
                response = session.post(url + "/webhook", json=body, timeout=30)
                response.raise_for_status()
                return time.perf_counter() - started

            first = post()  # the one that applies the throttle
            cluster.reset_request_counts()
            alone = statistics.median(post() for _ in range(50))
            started = time.perf_counter()
            with ThreadPoolExecutor(args.concurrency) as pool:
                latencies = sorted(pool.map(post, range(args.posts)))
            elapsed = time.perf_counter() - started
            alters = cluster.request_counts()["total"].get("AlterClientQuotas", 0)

    p50 = latencies[len(latencies) // 2]
    p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))]
    print(f"enforcer webhooks: {args.posts} identical firing posts, {args.concurrency} concurrent")
    print(f"  first post (applies the throttle)    {first * 1000:8.1f} ms")
    print(f"  one post alone, median               {alone * 1000:8.1f} ms")
    print(f"  under load: p50                      {p50 * 1000:8.1f} ms")
    print(f"  under load: p99                      {p99 * 1000:8.1f} ms")
    print(f"  throughput                           {args.posts / elapsed:8.0f} posts/s")
    print(f"  p99 under load / alone               {p99 / alone:8.1f}x")
    print(f"  AlterClientQuotas calls for the {args.posts + 50} repeats: {alters}")


if __name__ == "__main__":
    from bench.results import command_line

    raise SystemExit(command_line(__name__))

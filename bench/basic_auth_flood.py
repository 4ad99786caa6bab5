"""Scrape latency with a remembered basic-auth password, alone and under a flood of wrong ones.

Starts kvq's HTTP server with a bcrypt user (cost 10 and 12) and scrapes `/metrics` with the
right password once (from then on remembered), then measures back-to-back scrapes alone and while
a crowd (50 and 400 clients, in a process of its own, each from its own loopback address) sends
a new wrong password on a new connection as soon as its previous one is answered. After the crowd
gives up (closes every connection), it times a first login of another user: how long the crowd's
leftover bcrypt work keeps a newcomer waiting.
    python -m bench.basic_auth_flood [--cost 10,12] [--clients 50,400] [--seconds 5]
"""

from __future__ import annotations

import argparse
import multiprocessing
import statistics
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import bcrypt
import requests

from devkit import results_page
from devkit.processes import wait_until
from devkit.web_clients import WrongPasswordCrowd
from kvq.web.server import Response, Route, WebServer
from kvq.web.web_config import load_web_config

PASSWORD = "scrape-secret"
TIMEOUT = 60.0
"""A scrape that takes longer is counted as timed out (Prometheus' timeout is at most this)."""


@dataclass(frozen=True)
class Run:
    alone: float
    """Median scrape time without a crowd (s)."""
    flooded: list[float]
    newcomer: float
    """First login of another user once the crowd gave up (s)."""
    answers: dict[int | None, int]
    """The crowd's answers by status."""
    most_pending: int | None
    """The server's most bcrypt checks pending at once (None: a server without the bound)."""

    def row(self, cost: int, clients: int) -> str:
        p50 = statistics.median(self.flooded)
        timeouts = sum(1 for s in self.flooded if s >= TIMEOUT)
        return (
            f"  {cost:4} {clients:7}  {self.alone * 1000:8.1f}  {p50 * 1000:14.1f}"
            f"  {max(self.flooded) * 1000:7.0f}  {p50 / self.alone:12.1f}x"
            f"  {timeouts:3}/{len(self.flooded):<5}  {self.newcomer * 1000:17.0f}"
            f"  {self.most_pending}  {dict(sorted(self.answers.items(), key=str))}"
        )


def crowd_process(address: tuple[str, int], clients: int, stop, answers) -> None:
    """Flood until `stop` is set, then give up on what is pending; put the answer counts."""
    crowd = WrongPasswordCrowd(address, clients, clients, again=True)
    stop.wait()
    crowd.close()
    answers.put(dict(Counter(crowd.answers)))


def timed_get(session: requests.Session, url: str, user: str) -> float:
    started = time.perf_counter()
    try:
        session.get(url, auth=(user, PASSWORD), timeout=TIMEOUT).raise_for_status()
    except requests.Timeout:
        return TIMEOUT
    return time.perf_counter() - started


def scrapes_for(seconds: float, session: requests.Session, url: str) -> list[float]:
    """Back-to-back scrapes for `seconds` (at least one)."""
    samples: list[float] = []
    end = time.monotonic() + seconds
    while not samples or time.monotonic() < end:
        samples.append(timed_get(session, url, "prometheus"))
    return samples


def measure(cost: int, clients: int, seconds: float, workdir: Path) -> Run:
    hashed = bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(rounds=cost)).decode()
    config = workdir / f"web-{cost}.yml"
    config.write_text(f"basic_auth_users:\n  prometheus: '{hashed}'\n  grafana: '{hashed}'\n")
    route = Route("/metrics", lambda _r: Response(200, b"up 1\n"), "metrics")
    server = WebServer("bench", "", ("127.0.0.1", 0), [route], load_web_config(config)).start()
    url = server.url + "/metrics"
    spawn = multiprocessing.get_context("spawn")
    stop, answers = spawn.Event(), spawn.Queue()
    crowd = spawn.Process(target=crowd_process, args=(server.bound, clients, stop, answers))
    try:
        with requests.Session() as session:
            timed_get(session, url, "prometheus")  # the first check; remembered from now on
            alone = scrapes_for(1.0, session, url)
            crowd.start()
            wait_until(lambda: server.open_connections > clients // 2, what="the crowd")
            flooded = scrapes_for(seconds, session, url)
            stop.set()
            counts = answers.get(timeout=60)
            crowd.join()
            newcomer = timed_get(requests.Session(), url, "grafana")
        queue = getattr(server, "auth_checks", None)
        most_pending = queue.most_pending if queue is not None else None
        return Run(statistics.median(alone), flooded, newcomer, counts, most_pending)
    finally:
        stop.set()
        if crowd.pid is not None:
            crowd.join()
        server.stop()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cost", default="10,12", help="bcrypt costs, comma-separated")
    parser.add_argument("--clients", default="50,400", help="crowd sizes, comma-separated")
    parser.add_argument("--seconds", type=float, default=5.0, help="flood duration")
    args = parser.parse_args(argv)
    results_page.arguments(parser, args)
    print(f"scrape latency with the remembered password, {args.seconds:g} s of flood each")
    print(
        "  cost clients  alone ms  flooded p50 ms   max ms  flooded/alone  timed out"
        "  newcomer after ms  most pending  crowd's answers by status"
    )
    with tempfile.TemporaryDirectory() as workdir:
        for cost in (int(c) for c in args.cost.split(",")):
            for clients in (int(c) for c in args.clients.split(",")):
                run = measure(cost, clients, args.seconds, Path(workdir))
                print(run.row(cost, clients), flush=True)


if __name__ == "__main__":
    from bench.results import command_line

    raise SystemExit(command_line(__name__))

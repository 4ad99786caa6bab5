"""/metrics render time at 2,000 brokers x 12 log dirs (24,000 volumes).

Measures, side by side in one run: one policy calculation over the volumes, the first scrape
after a poll (the exporter's direct rendering), the same text written by prometheus_client (how
it was rendered before), a repeated scrape of the same state, and the first scrape at half the
volumes (linear in volumes).
    python -m bench.metrics_render [--brokers 2000] [--log-dirs 12]
"""

from __future__ import annotations

import argparse

from bench.timing import median_seconds
from devkit import results_page
from devkit.exposition_reference import prometheus_client_text
from exporter.exporter_app import Exporter
from exporter.settings import ExporterSettings
from kvq.model.limits import MinAvailableRatio
from kvq.model.observation import Observation
from kvq.model.policy_run import PolicyRun
from kvq.model.stop_on_violation import StopOnViolation
from kvq.model.volume import LogDirDescription

LIMIT = MinAvailableRatio(0.05)


def first_render_seconds(exporter: Exporter) -> float:
    def render() -> None:
        exporter._rendered = None  # as after a poll: nothing cached
        exporter.render_metrics()

    return median_seconds(render)


def large_exporter(brokers: int, log_dirs_per_broker: int, listen: str = "127.0.0.1:0"):
    """An Exporter (not started) holding one observation of brokers x log dirs volumes."""
    limit = LIMIT
    log_dirs = tuple(
        LogDirDescription(b, f"/var/lib/kafka/data-{i}", 10**12, (b * 7919 + i * 104729) % 10**12)
        for b in range(brokers)
        for i in range(log_dirs_per_broker)
    )
    observation = Observation(1000.0, tuple(range(brokers)), log_dirs)
    p = "client.quota.callback.static."
    settings = ExporterSettings.build(
        {
            p + "kafka.admin.bootstrap.servers": "unused:9092",
            limit.property_name: "0.05",
            "kvq.exporter.listen": listen,
        },
        environ={},
    )
    exporter = Exporter(settings, client=object(), clock=lambda: 1001.0)  # type: ignore[arg-type]
    exporter.poller.throttle.observe(observation)
    return exporter, observation, limit


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--brokers", type=int, default=2000)
    parser.add_argument("--log-dirs", type=int, default=12)
    args = parser.parse_args(argv)
    results_page.arguments(parser, args)
    exporter, observation, _limit = large_exporter(args.brokers, args.log_dirs)
    half, _observation, _limit = large_exporter(args.brokers // 2, args.log_dirs)

    text = exporter.render_metrics()
    assert text == prometheus_client_text(exporter), "direct rendering differs"
    run = PolicyRun(StopOnViolation(LIMIT))
    policy = median_seconds(lambda: run.calculate(observation.volumes))
    first = first_render_seconds(exporter)
    first_half = first_render_seconds(half)
    before = median_seconds(lambda: prometheus_client_text(exporter), rounds=3)
    exporter.render_metrics()
    cached = median_seconds(exporter.render_metrics)
    volumes = len(observation.log_dirs)
    print(f"/metrics render: {args.brokers} brokers x {args.log_dirs} log dirs = {volumes} volumes")
    print(f"  exposition size                        {len(text) / 1e6:8.2f} MB")
    print(f"  policy calculation                     {policy * 1000:8.1f} ms")
    print(f"  first scrape after a poll              {first * 1000:8.1f} ms  (goal < 300 ms)")
    print(f"  same text by prometheus_client         {before * 1000:8.1f} ms")
    print(f"  repeated scrape, same state            {cached * 1000:8.3f} ms")
    print(f"  first scrape / policy calculation      {first / policy:8.1f}x")
    print(f"  prometheus_client / direct rendering   {before / first:8.1f}x")
    print(f"  first scrape at half the volumes       {first_half * 1000:8.1f} ms")
    print(f"  full / half (2.0 = linear)             {first / first_half:8.2f}x")
    print(f"  volumes rendered per second            {volumes / first:8.0f}")


if __name__ == "__main__":
    from bench.results import command_line

    raise SystemExit(command_line(__name__))

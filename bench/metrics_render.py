"""/metrics render time at 2,000 brokers x 12 log dirs (24,000 volumes).

Measures, side by side: building the families from the policy state, the full exposition text
(what a scrape costs), and one policy calculation over the same volumes.
    python -m bench.metrics_render [--brokers 2000] [--log-dirs 12]
"""

from __future__ import annotations

import argparse

from prometheus_client import generate_latest

from bench.timing import median_seconds
from exporter.exporter_app import Exporter
from exporter.settings import ExporterSettings
from kvq.contract.metric_samples import families
from kvq.model.limits import MinAvailableRatio
from kvq.model.observation import Observation
from kvq.model.throttle_factor_policy import ThrottleFactorPolicy
from kvq.model.volume import LogDirDescription


def large_exporter(brokers: int, log_dirs_per_broker: int, listen: str = "127.0.0.1:0"):
    """An Exporter (not started) holding one observation of brokers x log dirs volumes."""
    limit = MinAvailableRatio(0.05)
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
    exporter, observation, limit = large_exporter(args.brokers, args.log_dirs)
    log_dirs = observation.log_dirs
    throttle, registry = exporter.throttle, exporter.registry

    build = median_seconds(lambda: list(families(throttle, 1001.0, "bench", limit, 60)))
    text = generate_latest(registry)
    render = median_seconds(lambda: generate_latest(registry))
    exporter.render_metrics()
    cached = median_seconds(exporter.render_metrics)
    policy = median_seconds(lambda: ThrottleFactorPolicy(limit).calculate(observation.volumes))
    volumes = len(log_dirs)
    print(f"/metrics render: {args.brokers} brokers x {args.log_dirs} log dirs = {volumes} volumes")
    print(f"  exposition size                  {len(text) / 1e6:8.2f} MB")
    print(f"  policy calculation               {policy * 1000:8.1f} ms")
    print(f"  build families from state        {build * 1000:8.1f} ms")
    print(f"  full scrape (generate_latest)    {render * 1000:8.1f} ms")
    print(f"  repeated scrape, same state      {cached * 1000:8.3f} ms")
    print(f"  scrape / policy calculation      {render / policy:8.1f}x")
    print(f"  first scrape / repeated scrape   {render / cached:8.0f}x")
    print(f"  scrape / 1 s scrape interval     {render:8.3f}")
    print(f"  volumes rendered per second      {volumes / render:8.0f}")


if __name__ == "__main__":
    main()

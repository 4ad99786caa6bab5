"""The demo scenario: fill a log dir past the limit, see the loop throttle; free it, see it restore.

Each step waits for something a user can see (exporter /status, Prometheus alerts, Kafka's quotas)
and marks the moment on a timeline.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from demo.stack import ALERT, CLUSTER, DemoStack
from devkit.processes import wait_until
from enforcer.quota_client import KafkaQuotaClient
from enforcer.quota_plan import BYTE_RATE_FLOOR, Change
from kvq.kafka.quota_entity import QuotaEntity

KEY = "producer_byte_rate"
INITIAL_QUOTAS = {
    (("user", "alice"),): 5_000_000.0,
    (("client-id", "batch-loader"),): 2_000_000.0,
    (("client-id", "app"), ("user", "bob")): 1_000_000.0,
}


@dataclass
class Timeline:
    """Moments of the run, relative to its start."""

    started: float = field(default_factory=time.monotonic)
    events: list[tuple[float, str]] = field(default_factory=list)

    def mark(self, what: str) -> float:
        moment = time.monotonic()
        self.events.append((moment, what))
        return moment

    def at(self, what: str) -> float:
        return next(moment for moment, label in self.events if label == what)

    def render(self) -> str:
        return "\n".join(
            f"  {moment - self.started:7.1f} s  {label}" for moment, label in self.events
        )


@dataclass
class Outcome:
    timeline: Timeline
    before: dict
    throttled: dict
    restored: dict

    @property
    def detect_to_enforce_seconds(self) -> float:
        return self.timeline.at(APPLIED) - self.timeline.at(CROSSED)


CROSSED = "volume crossed the limit (devcluster broker 1, log dir 0)"
SEEN = "exporter saw it: throttle factor 0"
FIRED = f"{ALERT} firing in Prometheus"
APPLIED = "quotas throttled in Kafka (every producer_byte_rate at the 8 KiB/s floor)"
FREED = "space freed"
RECOVERED = "exporter: throttle factor 1"
RESOLVED = f"{ALERT} resolved"
RESTORED = "quotas restored byte for byte"


def set_initial_quotas(stack: DemoStack) -> dict:
    client = KafkaQuotaClient({"bootstrap.servers": stack.bootstrap})
    try:
        client.alter(
            [Change(QuotaEntity.of(entity), KEY, value) for entity, value in INITIAL_QUOTAS.items()]
        )
    finally:
        client.close()
    return stack.quotas()


def firing(stack: DemoStack) -> bool:
    return bool(stack.prometheus.firing(ALERT, cluster=CLUSTER))


def throttled(quotas: dict, before: dict) -> bool:
    """Every entity that held a producer quota is at the byte-rate floor, and so is the default
    user (factor 0: the lowest rate Kafka still throttles reliably)."""
    held = [entity for entity, values in before.items() if KEY in values]
    default_user = (("user", None),)
    return all(quotas.get(e, {}).get(KEY) == BYTE_RATE_FLOOR for e in [*held, default_user])


def run(
    stack: DemoStack,
    timeline: Timeline,
    log: Callable[[str], None] = print,
    fill_after_poll: bool = False,
) -> Outcome:
    """Drive the loop once; raises TimeoutError naming the step that did not happen.

    `fill_after_poll`: cross the limit just after a poll ended, so the exporter sees it only a
    whole poll interval later (the worst case of that wait)."""
    factor_series = f'kafka_volume_quota_throttle_factor{{cluster="{CLUSTER}"}}'
    wait_until(lambda: stack.prometheus.query(factor_series), 30, what="Prometheus scraping")
    before = set_initial_quotas(stack)
    log(f"client quotas set: {len(before)} entities hold {KEY}")
    capacity = stack.capacity_bytes
    keep = int(capacity * stack.min_available_ratio) // 2  # half the limit stays available
    if fill_after_poll:
        last = stack.exporter_status()["last_successful_poll"]
        wait_until(
            lambda: stack.exporter_status()["last_successful_poll"] != last,
            30,
            interval=0.01,
            what="the next poll",
        )
    stack.control.set_log_dir(1, 0, fill_bytes=capacity - keep - _used(stack, 1, 0))
    timeline.mark(CROSSED)
    log(CROSSED)

    wait_until(lambda: stack.exporter_status()["throttle_factor"] == 0.0, 30, what=SEEN)
    timeline.mark(SEEN)
    wait_until(lambda: firing(stack), 30, what=FIRED)
    timeline.mark(FIRED)
    wait_until(lambda: throttled(stack.quotas(), before), 30, what=APPLIED)
    timeline.mark(APPLIED)
    throttled_quotas = stack.quotas()

    stack.control.set_log_dir(1, 0, clear=True)
    timeline.mark(FREED)
    log(FREED)
    wait_until(lambda: stack.exporter_status()["throttle_factor"] == 1.0, 30, what=RECOVERED)
    timeline.mark(RECOVERED)
    wait_until(lambda: not firing(stack), 30, what=RESOLVED)
    timeline.mark(RESOLVED)
    wait_until(lambda: stack.quotas() == before, 30, what=RESTORED)
    timeline.mark(RESTORED)
    return Outcome(timeline, before, throttled_quotas, stack.quotas())


def _used(stack: DemoStack, broker: int, index: int) -> int:
    """Bytes already used in that log dir (so the fill leaves exactly what we want)."""
    entry = stack.control.broker(broker)["log_dirs"][index]
    return entry["total_bytes"] - entry["usable_bytes"]

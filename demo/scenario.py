"""The demo scenario: fill a log dir past the limit, see the loop throttle; free it, see it restore.

Each step waits for something a user can see (exporter /status, Prometheus alerts, Kafka's quotas)
and marks the moment on a timeline. On devcluster the control API fills and frees the log dir; on
real Kafka (``DemoStack(kafka="apache")``) real bytes do: a topic whose one replica sits on broker
1 is produced to until the volume is past the limit, then deleted.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from demo.apache import VolumeFill, usable_bytes
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
            f"  {moment - self.started:7.1f} s  {label}"
            for moment, label in sorted(self.events, key=lambda event: event[0])
        )


@dataclass
class Outcome:
    timeline: Timeline
    before: dict
    throttled: dict
    restored: dict
    crossed: str = ""
    """The timeline's label of the crossing (it names the volume)."""

    @property
    def detect_to_enforce_seconds(self) -> float:
        return self.timeline.at(APPLIED) - self.timeline.at(self.crossed or CROSSED)


FULL_BROKER = 1
CROSSED = "volume crossed the limit (devcluster broker 1, log dir 0)"
KAFKA_FILL_MARGIN = 512 << 10
"""On Kafka the fill stops this far below the limit: it crosses the limit with its last chunk."""
SEEN = "exporter saw it: throttle factor 0"
FIRED = f"{ALERT} firing in Prometheus"
APPLIED = "quotas throttled in Kafka (every producer_byte_rate at the 8 KiB/s floor)"
FREED = "space freed"
FILES_GONE = "Kafka removed the topic's files: the volume is above the limit again"
RECOVERED = "exporter: throttle factor 1"
RESOLVED = f"{ALERT} resolved"
RESTORED = "quotas restored byte for byte"


def set_initial_quotas(stack: DemoStack) -> dict:
    client = KafkaQuotaClient(stack.admin_properties)
    try:
        client.alter(
            [Change(QuotaEntity.of(entity), KEY, value) for entity, value in INITIAL_QUOTAS.items()]
        )
    finally:
        client.close()
    # Kafka's brokers learn quotas from the metadata log: a DescribeClientQuotas right after the
    # alter may not show them yet.
    return wait_until(lambda: holds(stack.quotas(), INITIAL_QUOTAS), 30, what="quotas set")


def holds(quotas: dict, expected: dict[tuple, float]) -> dict | None:
    """``quotas`` when every expected entity holds its expected producer_byte_rate, else None."""
    ok = all(quotas.get(entity, {}).get(KEY) == value for entity, value in expected.items())
    return quotas if ok else None


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
    limit = int(capacity * stack.min_available_ratio)
    keep = limit // 2  # half the limit stays available
    filler = None
    crossed = CROSSED
    patience = 30.0  # seconds for each step; real Kafka on a loaded machine gets longer
    if stack.kafka is not None:
        filler = VolumeFill(stack.kafka, FULL_BROKER)
        index = filler.create()
        crossed = f"volume crossed the limit (Kafka broker {FULL_BROKER}, log dir {index})"
        keep = limit - KAFKA_FILL_MARGIN
        patience = 90.0
        log(f"filling {filler.path} (a {capacity >> 20} MiB tmpfs) through topic {filler.topic}")
    if fill_after_poll:
        last = stack.exporter_status()["last_successful_poll"]
        wait_until(
            lambda: stack.exporter_status()["last_successful_poll"] != last,
            30,
            interval=0.01,
            what="the next poll",
        )
    if filler is not None:
        filler.fill_until(keep)
    else:
        stack.control.set_log_dir(1, 0, fill_bytes=capacity - keep - _used(stack, 1, 0))
    timeline.mark(crossed)
    log(crossed)

    wait_until(lambda: stack.exporter_status()["throttle_factor"] == 0.0, patience, what=SEEN)
    timeline.mark(SEEN)
    wait_until(lambda: firing(stack), patience, what=FIRED)
    timeline.mark(FIRED)
    wait_until(lambda: throttled(stack.quotas(), before), patience, what=APPLIED)
    timeline.mark(APPLIED)
    throttled_quotas = stack.quotas()

    if filler is not None:
        filler.free()
        timeline.mark(f"{FREED}: topic {filler.topic} deleted")
        wait_until(lambda: usable_bytes(filler.path) > limit, patience, what=FILES_GONE)
        timeline.mark(FILES_GONE)
    else:
        stack.control.set_log_dir(1, 0, clear=True)
        timeline.mark(FREED)
    log(FREED)
    wait_until(lambda: stack.exporter_status()["throttle_factor"] == 1.0, patience, what=RECOVERED)
    timeline.mark(RECOVERED)
    wait_until(lambda: not firing(stack), patience, what=RESOLVED)
    timeline.mark(RESOLVED)
    wait_until(lambda: stack.quotas() == before, patience, what=RESTORED)
    timeline.mark(RESTORED)
    return Outcome(timeline, before, throttled_quotas, stack.quotas(), crossed)


def _used(stack: DemoStack, broker: int, index: int) -> int:
    """Bytes already used in that log dir (so the fill leaves exactly what we want)."""
    entry = stack.control.broker(broker)["log_dirs"][index]
    return entry["total_bytes"] - entry["usable_bytes"]

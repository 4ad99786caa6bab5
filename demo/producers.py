"""`make demo SCENARIO=producers`: real producers fill a small disk, with kvq and without it.

On the embedded stack (devcluster, exporter, Prometheus, Alertmanager, enforcer), four
confluent-kafka producers (three SASL users, four client-ids) write a steady total of
``RATE`` value bytes/s into two topics whose replicas all have a copy on broker 0, so broker 0's
volume (a virtual disk of ``CAPACITY`` bytes) fills first, in about a minute. The run prints the
timeline, each producer's acknowledged rate before / while / after the throttle, the lowest
headroom (usable bytes) reached on any volume and the bound predicted from the configured
intervals: limit - R x (poll + scrape + evaluation + group_wait + apply), R the fullest volume's
fill rate. Then the same load runs with the enforcer stopped, until the disk fills (the storage
error). Meanwhile, while throttled, the full broker is stopped for longer than the validity
duration and started again still full: the throttle must hold throughout (the violation hold).
Exit 0 only if, with kvq, no volume reached 0 usable bytes, no producer got a storage error, the
lowest headroom was at or above the bound and the throttle held through the restart.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import confluent_kafka.admin as ck

from demo.scenario import Timeline, firing, throttled
from demo.stack import CLUSTER, KAFKA_BACKENDS, DemoStack
from devkit import loop_settings
from devkit.processes import wait_until
from devkit.producer_load import LoadProducer
from enforcer.quota_client import KafkaQuotaClient
from enforcer.quota_plan import BYTE_RATE_FLOOR, Change
from kvq.kafka.quota_entity import QuotaEntity

KEY = "producer_byte_rate"
USERS = {"alice": "alice-secret", "bob": "bob-secret", "carol": "carol-secret"}
PRODUCERS = (  # user, client-id, topic
    ("alice", "web", "orders"),
    ("alice", "batch", "clicks"),
    ("bob", "app", "orders"),
    ("carol", "etl", "clicks"),
)
# Every partition has a replica on broker 0: it takes all R bytes/s, brokers 1 and 2 half each.
TOPICS = {"orders": [[0, 1], [1, 0]], "clicks": [[0, 2], [2, 0]]}
ORIGINAL_QUOTAS = {
    (("user", "alice"),): 5_000_000.0,
    (("client-id", "app"), ("user", "bob")): 1_000_000.0,
    (("client-id", "etl"),): 2_000_000.0,
}
RATE = 600_000  # value bytes/s, all producers together
CAPACITY = 32_000_000  # each log dir: a virtual disk
MIN_AVAILABLE_RATIO = 0.25
MESSAGE_BYTES = 1000
LOOP = loop_settings.demo()  # poll, scrape, evaluation, group_wait: 1 s each
APPLY_SECONDS = 1.0  # enforcer AlterClientQuotas + brokers re-read quotas (0.25 s) + next request
# The configured intervals between a byte crossing the limit and the producers being held.
INTERVALS = {
    "exporter poll": LOOP.poll,
    "scrape": LOOP.scrape,
    "rule evaluation": LOOP.evaluation,
    "group_wait": LOOP.group_wait,
    "apply": APPLY_SECONDS,
}
HOLD_SECONDS = 3  # how long the scenario keeps the cluster throttled before growing the disk
VALIDITY_SECONDS = 5  # throttle.factor.validity.duration: how long a departed broker is cached
AWAY_SECONDS = VALIDITY_SECONDS + 5  # the full broker stays stopped longer than that
VIOLATION_HOLD = "PT1H"  # kvq.departed.broker.violation.hold (its default)


@dataclass
class Sample:
    at: float
    usable: dict[tuple[int, int], int]
    storage_errors: int


@dataclass
class DiskWatch:
    """Polls the devcluster control API: every volume's usable bytes, and storage errors."""

    stack: DemoStack
    interval: float = 0.1
    samples: list[Sample] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        self._thread = threading.Thread(target=self._run, name="disk-watch", daemon=True)

    def start(self) -> DiskWatch:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                state = self.stack.control.state()
            except Exception:  # noqa: BLE001 - the stack is going down
                break
            usable = {
                (b["id"], d["index"]): d["usable_bytes"]
                for b in state["brokers"]
                for d in b["log_dirs"]
                if d["usable_bytes"] is not None
            }
            self.samples.append(Sample(time.monotonic(), usable, len(state["storage_errors"])))
            self._stop.wait(self.interval)

    def lowest(self, since: float = 0.0) -> tuple[int, tuple[int, int]]:
        """(lowest usable bytes on any volume, that volume) seen since ``since``."""
        return min(
            (value, volume)
            for s in self.samples
            if s.at >= since
            for volume, value in s.usable.items()
        )

    def first(self, predicate: Callable[[Sample], bool]) -> float | None:
        return next((s.at for s in self.samples if predicate(s)), None)

    def fill_rate(self, volume: tuple[int, int], start: float, end: float) -> float:
        """Bytes/s the volume filled at over [start, end]."""
        window = [s for s in self.samples if start <= s.at <= end and volume in s.usable]
        if len(window) < 2:
            return 0.0
        first, last = window[0], window[-1]
        return (first.usable[volume] - last.usable[volume]) / max(last.at - first.at, 1e-9)


@dataclass
class Run:
    timeline: Timeline
    producers: list[LoadProducer]
    watch: DiskWatch
    load_started: float
    limit: int
    marks: dict[str, float] = field(default_factory=dict)
    released: list[float] = field(default_factory=list)
    """Moments the throttle was found released while the full broker was away or back."""

    def rate_table(self, phases: dict[str, tuple[float, float]]) -> str:
        head = f"  {'producer':24}" + "".join(f"{name:>14}" for name in phases)
        rows = [head]
        for p in self.producers:
            cells = "".join(
                f"{p.log.rate(a, b) / 1000:>10.0f} kB/s" if b > a else f"{'-':>14}"
                for a, b in phases.values()
            )
            rows.append(f"  {p.user + ' / ' + p.client_id:24}{cells}")
        return "\n".join(rows)


def make_stack(work: Path) -> DemoStack:
    return DemoStack(
        work,
        brokers=3,
        log_dirs_per_broker=1,
        capacity_bytes=CAPACITY,
        min_available_ratio=MIN_AVAILABLE_RATIO,
        loop=LOOP,
        sasl_users=USERS,
        validity=f"PT{VALIDITY_SECONDS}S",
        extra_properties=f"kvq.departed.broker.violation.hold={VIOLATION_HOLD}\n",
    )


def prepare(stack: DemoStack) -> dict:
    """Topics and the original quotas; returns Kafka's quotas as they are then."""
    admin = ck.AdminClient({"bootstrap.servers": stack.bootstrap, "log_level": 0})
    futures = admin.create_topics(
        [ck.NewTopic(name, len(a), replica_assignment=a) for name, a in TOPICS.items()]
    )
    for future in futures.values():
        future.result(30)
    client = KafkaQuotaClient({"bootstrap.servers": stack.bootstrap})
    try:
        client.alter([Change(QuotaEntity.of(e), KEY, v) for e, v in ORIGINAL_QUOTAS.items()])
    finally:
        client.close()
    return stack.quotas()


def start_load(stack: DemoStack, active: list) -> list[LoadProducer]:
    """Start every producer; each is added to ``active`` at once (the caller closes them)."""
    producers = []
    for user, client_id, topic in PRODUCERS:
        producer = LoadProducer(
            stack.sasl_bootstrap,
            client_id=client_id,
            user=user,
            password=USERS[user],
            # An application's buffer: while throttled the producer blocks once 64 kB are queued,
            # rather than piling up a backlog that floods the disks after the restore.
            **{"queue.buffering.max.kbytes": 64},
        )
        active.append(producer)
        producer.run_steady([topic], RATE / len(PRODUCERS), MESSAGE_BYTES)
        producers.append(producer)
    return producers


def limit_bytes() -> int:
    return int(CAPACITY * MIN_AVAILABLE_RATIO)


def run_with_kvq(
    stack: DemoStack,
    timeline: Timeline,
    log: Callable[[str], None],
    active: list,
    restart: bool = True,
) -> Run:
    factor = f'kafka_volume_quota_throttle_factor{{cluster="{CLUSTER}"}}'
    wait_until(lambda: stack.prometheus.query(factor), 30, what="Prometheus scraping")
    before = prepare(stack)
    watch = DiskWatch(stack).start()
    active.append(watch)
    limit = limit_bytes()
    producers = start_load(stack, active)
    run = Run(timeline, producers, watch, timeline.mark(f"load started: {RATE} B/s"), limit)
    log(f"{len(producers)} producers at {RATE / 1000:.0f} kB/s in total; limit {limit} bytes")
    full = (0, 0)

    def crossed() -> bool:
        return any(s.usable.get(full, CAPACITY) <= limit for s in watch.samples[-3:])

    wait_until(crossed, 180, interval=0.05, what="broker 0's volume crossing the limit")
    run.marks["crossed"] = watch.first(lambda s: s.usable.get(full, CAPACITY) <= limit)
    timeline.events.append((run.marks["crossed"], "broker 0's volume crossed the limit"))
    wait_until(lambda: stack.exporter_status()["throttle_factor"] == 0.0, 30, what="factor 0")
    run.marks["seen"] = timeline.mark("exporter: throttle factor 0")
    wait_until(lambda: firing(stack), 30, what="alert firing")
    run.marks["fired"] = timeline.mark("alert firing in Prometheus")
    wait_until(lambda: throttled(stack.quotas(), before), 30, what="quotas throttled")
    run.marks["applied"] = timeline.mark(
        f"quotas throttled in Kafka ({BYTE_RATE_FLOOR:.0f} bytes/s, the enforcer's floor)"
    )
    wait_until(
        lambda: all(
            any(t >= run.marks["applied"] - 1 for t, _ in p.log.throttles) for p in producers
        ),
        30,
        what="every producer throttled",
    )
    run.marks["held"] = timeline.mark("every producer throttled by the brokers")
    if restart:
        restart_full_broker(stack, run, log, before)
    time.sleep(HOLD_SECONDS)  # the throttle holding: the disk must not grow meanwhile
    stack.control.set_log_dir(0, 0, capacity_bytes=CAPACITY * 2)
    run.marks["grown"] = timeline.mark("operator doubled broker 0's volume")
    log("broker 0's volume grown; waiting for the restore")
    wait_until(lambda: stack.exporter_status()["throttle_factor"] == 1.0, 30, what="factor 1")
    timeline.mark("exporter: throttle factor 1")
    wait_until(lambda: stack.quotas() == before, 30, what="quotas restored")
    run.marks["restored"] = timeline.mark("quotas restored byte for byte")
    try:
        wait_until(lambda: _recovered(producers, 3.0), 150, interval=0.2, what="producers back")
    except TimeoutError as exc:
        now = time.monotonic()
        detail = "; ".join(
            f"{p.client_id}: {p.log.rate(now - 3, now) / 1000:.0f} kB/s, last throttles "
            f"{[(round(t - now, 1), ms) for t, ms in p.log.throttles[-2:]]}"
            for p in producers
        )
        raise TimeoutError(f"{exc}: {detail}") from None
    run.marks["recovered"] = timeline.mark("producers back at their rate")
    time.sleep(8)  # the 'after' measurement period
    run.marks["end"] = timeline.mark("load stopped")
    return run


def restart_full_broker(
    stack: DemoStack, run: Run, log: Callable[[str], None], before: dict
) -> None:
    """Stop broker 0 (full, throttled) for longer than the validity duration: the throttle must
    hold the whole time, and still hold once it is back, still below the limit."""
    stack.control.stop_broker(0)
    stopped = run.timeline.mark("broker 0 (the full one) stopped while throttled")
    log(f"broker 0 stopped; away {AWAY_SECONDS} s (validity PT{VALIDITY_SECONDS}S)")
    released = []
    while time.monotonic() < stopped + AWAY_SECONDS:
        status = stack.exporter_status()
        if status["throttle_factor"] != 0.0 or not throttled(stack.quotas(), before):
            released.append(time.monotonic())
        if not run.marks.get("held_seen") and status.get("held_log_dirs"):
            run.marks["held_seen"] = run.timeline.mark(
                "exporter holds broker 0's violating volume (broker away)"
            )
        time.sleep(0.2)
    run.timeline.mark(f"validity passed ({VALIDITY_SECONDS} s): still throttled")
    stack.control.start_broker(0)
    run.marks["back"] = run.timeline.mark("broker 0 started again (still below the limit)")
    wait_until(
        lambda: (
            not stack.exporter_status().get("held_log_dirs")
            and stack.exporter_status()["active_brokers"] == 3
        ),
        30,
        what="broker 0 seen again",
    )
    if stack.exporter_status()["throttle_factor"] != 0.0 or not throttled(stack.quotas(), before):
        released.append(time.monotonic())
    run.marks["seen_again"] = run.timeline.mark("exporter sees broker 0 again: still violating")
    run.released = released


def run_without_kvq(
    stack: DemoStack, timeline: Timeline, log: Callable[[str], None], active: list
) -> Run:
    prepare(stack)
    stack.stop_enforcer()
    timeline.mark("enforcer stopped: nothing will apply quotas")
    watch = DiskWatch(stack).start()
    active.append(watch)
    producers = start_load(stack, active)
    run = Run(timeline, producers, watch, timeline.mark(f"load started: {RATE} B/s"), 0)
    log("same load without the enforcer; waiting for the disk to fill")
    wait_until(
        lambda: watch.samples and watch.samples[-1].storage_errors > 0,
        240,
        interval=0.1,
        what="a storage error",
    )
    run.marks["full"] = watch.first(lambda s: s.storage_errors > 0)
    timeline.events.append(
        (run.marks["full"], "broker 0's disk full: KAFKA_STORAGE_ERROR, log dir offline")
    )
    run.marks["end"] = timeline.mark("load stopped")
    return run


def _recovered(producers: list[LoadProducer], seconds: float) -> bool:
    now = time.monotonic()
    offered = RATE / len(producers)
    return all(p.log.rate(now - seconds, now) >= 0.8 * offered for p in producers)


def stop_all(active: list) -> None:
    """Close every producer and disk watch started (also after a failure)."""
    while active:
        item = active.pop()
        if isinstance(item, LoadProducer):
            item.close()
        else:
            item.stop()


@dataclass
class Verdict:
    lowest: int
    volume: tuple[int, int]
    bound: float
    fill_rate: float
    storage_errors: int
    delivery_errors: dict
    fill_seconds_without: float | None
    released_during_restart: int = 0

    @property
    def ok(self) -> bool:
        return (
            self.lowest > 0
            and self.storage_errors == 0
            and not self.delivery_errors
            and self.lowest >= self.bound
            and self.released_during_restart == 0
        )


def judge(run: Run) -> Verdict:
    lowest, volume = run.watch.lowest()
    start = run.load_started + 5
    rate = run.watch.fill_rate((0, 0), start, run.marks["crossed"])
    bound = run.limit - rate * sum(INTERVALS.values())
    errors: dict = {}
    for p in run.producers:
        for code, count in p.log.errors.items():
            errors[code] = errors.get(code, 0) + count
    storage = run.watch.samples[-1].storage_errors if run.watch.samples else 0
    return Verdict(lowest, volume, bound, rate, storage, errors, None, len(run.released))


def report(with_kvq: Run, verdict: Verdict, without: Run | None, out=print) -> None:
    m = with_kvq.marks
    out("\ntimeline with kvq:")
    out(with_kvq.timeline.render())
    out("\nacknowledged rate per producer:")
    out(
        with_kvq.rate_table(
            {
                "before": (with_kvq.load_started + 5, m["crossed"]),
                "while": (m["held"], m["grown"]),
                "after": (m["recovered"] + 3, m["end"]),
            }
        )
    )
    out(f"\nfullest volume (broker 0) filled at {verdict.fill_rate / 1000:.0f} kB/s")
    out(f"limit (min.available.ratio {MIN_AVAILABLE_RATIO})     {with_kvq.limit:>12,} bytes")
    out(f"predicted bound: limit - R x ({' + '.join(INTERVALS)} = {sum(INTERVALS.values()):.0f} s)")
    out(f"                                   {verdict.bound:>12,.0f} bytes")
    out(
        f"lowest headroom reached            {verdict.lowest:>12,} bytes "
        f"(broker {verdict.volume[0]}, log dir {verdict.volume[1]})"
    )
    out(f"storage errors                     {verdict.storage_errors:>12}")
    out(f"producer delivery errors           {verdict.delivery_errors or 'none':>12}")
    if "back" in m:
        held = "held" if not verdict.released_during_restart else "RELEASED"
        out(
            f"throttle while broker 0 was away {AWAY_SECONDS} s (> validity "
            f"{VALIDITY_SECONDS} s) and after it came back: {held}"
        )
    if without is not None:
        out("\ntimeline without kvq (enforcer stopped):")
        out(without.timeline.render())
        filled = without.marks["full"] - without.load_started
        out(f"\nwithout kvq the disk filled {filled:.1f} s after the load started")


def protected_run(work: Path, timeline: Timeline, log: Callable[[str], None]):
    """The run with kvq on a fresh stack in ``work``: (Run, Verdict); everything stopped after."""
    active: list = []
    with make_stack(work) as stack:
        timeline.mark("stack up: devcluster, exporter, enforcer, Prometheus, Alertmanager")
        try:
            run = run_with_kvq(stack, timeline, log, active)
        finally:
            stop_all(active)
    return run, judge(run)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="make demo SCENARIO=producers", description=__doc__)
    parser.add_argument(
        "--skip-without", action="store_true", help="only the run with kvq (faster)"
    )
    parser.add_argument("--kafka", choices=KAFKA_BACKENDS, default="devcluster")
    args = parser.parse_args(argv)
    log = lambda text: print(f"- {text}", flush=True)  # noqa: E731
    with tempfile.TemporaryDirectory(prefix="kvq-demo-producers-") as work:
        work = Path(work)
        timeline = Timeline()
        without = None
        active: list = []
        try:
            run, verdict = protected_run(work / "with-kvq", timeline, log)
            if not args.skip_without:
                with make_stack(work / "without-kvq") as stack:
                    try:
                        without = run_without_kvq(stack, Timeline(), log, active)
                    finally:
                        stop_all(active)
        except TimeoutError as exc:
            print("\ntimeline so far:")
            print(timeline.render())
            print(f"\nscenario failed: {exc}", file=sys.stderr)
            return 1
        report(run, verdict, without)
        verdict.fill_seconds_without = (
            None if without is None else without.marks["full"] - without.load_started
        )
        if verdict.ok:
            print(
                "\nPROTECTED: no volume reached 0 usable bytes, no storage error, headroom >= "
                "bound, throttle held through the full broker's restart"
            )
            return 0
        print("\nNOT PROTECTED: see the numbers above", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())

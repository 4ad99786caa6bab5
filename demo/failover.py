"""`make demo SCENARIO=failover KAFKA=apache`: the acting enforcer replica killed mid-apply, twice.

On a real 3-node Apache Kafka cluster holding 10,000 client quotas (users `u00000`... with a
`producer_byte_rate` each), two kvq-enforcer replicas run with their state in Kafka
(`kvq.enforcer.state.store=kafka`), as the chart runs them. A firing KafkaVolumeQuotaThrottle
(factor 0.5) is posted to the replica that stands by, as a Service may route Alertmanager's
request; once the acting replica has throttled a share of the quotas, it is killed with SIGKILL
and started again (Kubernetes would replace it). Then the resolution is posted, and the acting
replica is killed again in the middle of the restore.

Printed per kill: the seconds from the kill to the other replica having finished (every quota at
its target on every broker, and the replica reporting the factor applied; for the restore, every
quota exactly as before, byte for byte; the enforcer's copy of the originals, removed once no
request of the killed replica can land any more, is timed apart), and
how many AlterClientQuotas requests of the killed replica the brokers completed after the other
replica took over (each replica has its own client.id; every broker logs every request it
completes). Exits 0 only if each kill was taken over within GOAL_SECONDS, the restore was exact
and no write of a killed replica got through after the other began. Written to
docs/results/failover.md.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import requests

from devkit.alertmanager import throttle_webhook
from devkit.enforcer_process import TOKEN, RunningEnforcer, log_times, running_enforcer
from devkit.kafka_cluster import STRIMZI_ADMIN, KafkaCluster, KafkaClusterError
from devkit.kafka_dist import KafkaDistError
from devkit.kafka_requests import RequestLog, writes_after
from devkit.processes import wait_until
from devkit.results_page import Recording
from enforcer.quota_client import KafkaQuotaClient
from enforcer.quota_plan import Change
from kvq.kafka.quota_entity import ORIGINALS_USER, QuotaEntity

CLUSTER = "failover-demo"
P = "producer_byte_rate"
PAIRS = 10_000
FACTOR = 0.5
GOAL_SECONDS = 15.0
KILL_AFTER_WRITES = 1
"""The acting replica is killed as soon as the brokers have completed this many of its
AlterClientQuotas requests of the apply (the first writes its copy of the originals; 10,000
pairs take a few requests: Kafka takes at most 10,000 per request)."""
TOPIC = "kvq-enforcer-state"
SETTINGS = {
    "kvq.enforcer.state.store": "kafka",
    "kvq.enforcer.failsafe.after": "PT0S",
    # a request the killed replica sent but did not journal an answer to is verified again after
    # this long; the enforcer's copy of the originals is removed only then
    "kvq.enforcer.alter.settle": "PT10S",
}


@dataclass
class Kill:
    what: str
    killed_client: str
    killed_at: float
    taken_over_at: float | None = None
    finished_at: float | None = None
    copy_removed_at: float | None = None
    late_writes: int = 0

    @property
    def seconds(self) -> float | None:
        return None if self.finished_at is None else self.finished_at - self.killed_at


def originals() -> dict[QuotaEntity, float]:
    return {QuotaEntity.user(f"u{i:05d}"): float(1_000_000 + i) for i in range(PAIRS)}


class Replicas:
    """The two replicas, each (re)started as a process of its own with a client.id of its own."""

    def __init__(self, kafka: KafkaCluster, work: Path, stack: contextlib.ExitStack) -> None:
        self.kafka = kafka
        self.work = work
        self.stack = stack
        self.starts = 0
        self.running: dict[str, tuple[RunningEnforcer, contextlib.ExitStack]] = {}

    def start(self) -> str:
        """Start one more replica; returns its client.id."""
        self.starts += 1
        name = f"kvq-enforcer-{self.starts}"
        work = self.work / name
        work.mkdir()
        own = contextlib.ExitStack()
        settings = {**SETTINGS, f"{STRIMZI_ADMIN}client.id": name}
        replica = own.enter_context(
            running_enforcer(self.kafka.admin_properties, work, cluster=CLUSTER, settings=settings)
        )
        self.stack.callback(own.close)
        self.running[name] = (replica, own)
        return name

    def acting(self) -> str | None:
        for name, (replica, _) in self.running.items():
            with contextlib.suppress(requests.RequestException):
                if status(replica)["acting"]:
                    return name
        return None

    def applied(self) -> float | None:
        """The factor the acting replica reports applied (None: none acts)."""
        for replica, _ in self.running.values():
            with contextlib.suppress(requests.RequestException):
                found = status(replica)
                if found["acting"]:
                    return found["clusters"][CLUSTER]["applied_factor"]
        return None

    def standby(self, actor: str) -> RunningEnforcer:
        return next(r for n, (r, _) in self.running.items() if n != actor)

    def kill(self, name: str) -> None:
        replica, own = self.running.pop(name)
        os.kill(replica.pid, signal.SIGKILL)
        own.close()

    def log_line(self, name: str, text: str, after: float) -> float | None:
        """The Unix time of the first line of `name`'s log containing `text` after `after` (a
        replica may have acted before: it took over and handed over again)."""
        times = [t for t in log_times(self.work / name / "enforcer.log", text) if t > after]
        return times[0] if times else None


def status(replica: RunningEnforcer) -> dict:
    answer = requests.get(
        replica.url + "/status", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=10
    )
    answer.raise_for_status()
    return answer.json()


def post(replica: RunningEnforcer, factor: float | None) -> None:
    answer = requests.post(
        replica.url + "/webhook",
        json=throttle_webhook(cluster=CLUSTER, factor=factor, group_key="failover"),
        headers={"Authorization": f"Bearer {TOKEN}"},
        timeout=60,
    )
    answer.raise_for_status()


def wait_exact(
    client: KafkaQuotaClient, expected: dict[QuotaEntity, dict[str, float]], with_copy: bool
) -> None:
    """Until every broker describes every quota as `expected`; the enforcer's copy of the
    originals (removed last, once no request of the killed replica can land) too if
    `with_copy`."""
    differing: list[str] = []

    def exact() -> bool:
        now = client.describe_agreed()
        entities = expected.keys() | now.keys()
        if not with_copy:
            entities = {e for e in entities if not is_copy(e)}
        differing[:] = [str(e) for e in entities if now.get(e) != expected.get(e)]
        return not differing

    what = "the copy of the originals removed" if with_copy else "every quota exactly as before"
    try:
        wait_until(exact, 180, interval=0.1, what=what)
    except TimeoutError as exc:
        raise TimeoutError(
            f"{exc}: {len(differing)} entities differ, e.g. {differing[:3]}"
        ) from None


def is_copy(entity: QuotaEntity) -> bool:
    return any(kind == "user" and name == ORIGINALS_USER for kind, name in entity.components)


def agreed_on(
    client: KafkaQuotaClient, values: dict[QuotaEntity, float]
) -> dict[QuotaEntity, dict[str, float]]:
    """The quotas once every broker describes `values` (Kafka answers an alter once the
    controller has it; the brokers catch up a moment later)."""
    seen: dict[QuotaEntity, dict[str, float]] = {}

    def agreed() -> bool:
        seen.clear()
        seen.update(client.describe_agreed())
        return all(seen.get(e, {}).get(P) == v for e, v in values.items())

    wait_until(agreed, 60, what="every broker describing the quotas set")
    return dict(seen)


def changed_share(client: KafkaQuotaClient, wanted: dict[QuotaEntity, float]) -> float:
    now = client.describe()
    done = sum(1 for e, v in wanted.items() if now.get(e, {}).get(P) == v)
    return done / len(wanted)


def kill_mid_way(replicas: Replicas, kafka: KafkaCluster, what: str) -> Kill:
    """Kill the acting replica once the brokers have completed KILL_AFTER_WRITES of its
    AlterClientQuotas requests since now; start a replacement."""
    actor = wait_until(replicas.acting, 60, what="a replica acting")
    writes = RequestLog(kafka, actor)
    wait_until(
        lambda: writes.count() >= KILL_AFTER_WRITES,
        120,
        interval=0.005,
        what=f"{KILL_AFTER_WRITES} AlterClientQuotas of {actor}",
    )
    replicas.kill(actor)
    kill = Kill(what, actor, time.time())
    print(f"- {what}: killed {actor} (SIGKILL) after {writes.seen} of its writes", flush=True)
    replicas.start()
    return kill


def finished(replicas: Replicas, kill: Kill) -> None:
    """When the replica that took over did, from its log: the first to act after the kill."""
    times = [replicas.log_line(name, 'msg="acting on', kill.killed_at) for name in replicas.running]
    kill.taken_over_at = min((t for t in times if t is not None), default=None)


def late_writes(kafka: KafkaCluster, kill: Kill) -> int:
    """AlterClientQuotas requests of the killed replica that brokers completed after the other
    replica took over."""
    if kill.taken_over_at is None:
        return 0
    return writes_after(kafka, kill.killed_client, kill.taken_over_at)


@contextlib.contextmanager
def demo_cluster(work: Path) -> Iterator[KafkaCluster]:
    with KafkaCluster(work / "kafka", nodes=3, request_log=True) as kafka:
        print(f"Kafka up: {kafka.bootstrap}", flush=True)
        yield kafka


def run(work: Path) -> list[Kill]:
    before = originals()
    throttled = {e: float(max(int(v * FACTOR), 8192)) for e, v in before.items()}
    with demo_cluster(work) as kafka, contextlib.ExitStack() as stack:
        client = KafkaQuotaClient(kafka.admin_properties, timeout_ms=60_000)
        stack.callback(client.close)
        client.alter([Change(e, P, v) for e, v in before.items()])
        expected = agreed_on(client, before)
        print(f"{PAIRS:,} quotas set; starting two replicas", flush=True)
        replicas = Replicas(kafka, work, stack)
        replicas.start()
        replicas.start()
        actor = wait_until(replicas.acting, 90, what="a replica acting")

        post(replicas.standby(actor), FACTOR)
        throttle = kill_mid_way(replicas, kafka, "throttle")
        wait_until(
            lambda: changed_share(client, throttled) == 1.0 and replicas.applied() == FACTOR,
            120,
            interval=0.1,
            what="every quota throttled and the factor applied",
        )
        throttle.finished_at = time.time()
        finished(replicas, throttle)

        actor = wait_until(replicas.acting, 60, what="a replica acting")
        post(replicas.standby(actor), None)
        restore = kill_mid_way(replicas, kafka, "restore")
        wait_exact(client, expected, with_copy=False)
        restore.finished_at = time.time()
        wait_exact(client, expected, with_copy=True)
        restore.copy_removed_at = time.time()
        # after the copy's removal, which the replica taking over does: a kill after the
        # killed one's last write leaves the values exact before anyone took over
        finished(replicas, restore)
        kills = [throttle, restore]
        for kill in kills:
            kill.late_writes = late_writes(kafka, kill)
        return kills


PARSER = argparse.ArgumentParser(
    prog="make demo SCENARIO=failover KAFKA=apache",
    description=__doc__,
    formatter_class=argparse.RawDescriptionHelpFormatter,
)


def main(argv: list[str] | None = None) -> int:
    with Recording("failover", __doc__.splitlines()[0]) as recording:
        args = PARSER.parse_args(argv)
        recording.arguments(PARSER, args, kafka=True)
        with tempfile.TemporaryDirectory(prefix="kvq-failover-") as work:
            try:
                kills = run(Path(work))
            except (TimeoutError, KafkaClusterError, KafkaDistError, RuntimeError) as exc:
                print(f"\ndemo failed: {exc}", file=sys.stderr)
                return 1
        print(
            f"\n{PAIRS:,} quotas on a 3-node Kafka cluster, two replicas with the state in Kafka; "
            "the acting one killed (SIGKILL) as soon as the brokers completed its first "
            "AlterClientQuotas of the apply\n"
        )
        print("| kill during | kill to done | taken over after | killed one's writes after |")
        print("|---|---|---|---|")
        for kill in kills:
            took = (
                "-"
                if kill.taken_over_at is None
                else f"{kill.taken_over_at - kill.killed_at:.1f} s"
            )
            print(f"| {kill.what} | {kill.seconds:.1f} s | {took} | {kill.late_writes} |")
        ok = all(k.seconds is not None and k.seconds <= GOAL_SECONDS for k in kills)
        ok = ok and all(k.late_writes == 0 for k in kills)
        copy_removed = kills[-1].copy_removed_at
        if copy_removed is not None:
            print(
                "\nthe enforcer's copy of the originals removed "
                f"{copy_removed - kills[-1].killed_at:.1f} s after the second kill (once no "
                "request of the killed replica could land: "
                f"kvq.enforcer.alter.settle {SETTINGS['kvq.enforcer.alter.settle']})"
            )
        print(
            f"restore exact on every broker: yes ({PAIRS:,} values, the copy removed); "
            f"goals (each kill done within {GOAL_SECONDS:.0f} s, no late write): "
            f"{'met' if ok else 'MISSED'}"
        )
        recording.complete()
        return 0 if ok else 1


if __name__ == "__main__":
    from devkit.processes import run_until_interrupted

    raise SystemExit(run_until_interrupted(main))

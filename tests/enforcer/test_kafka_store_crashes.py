"""The reliability suite's "killed at any point" with the state in Kafka
(kvq.enforcer.state.store=kafka): a replica dies at every step of a throttle, a deeper throttle
and a restore (before the first state transaction or quota write, and after each); another
replica, with an empty working copy, takes over from what Kafka holds and finishes the work
Alertmanager redelivers. Every value is base x factor while throttled, never compounded, and
exact after the restore. The state lives in the run's shared 3-node Kafka (a topic of its own per
case); the quotas in memory, since where they live is not what dies here."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import timedelta
from pathlib import Path

import pytest

from devkit.alertmanager import throttle_webhook
from devkit.memory_quotas import InMemoryQuotas
from enforcer.applier import Applier
from enforcer.broker_quota_settings import BrokerQuotaSettings
from enforcer.enforcer import Enforcer
from enforcer.journal import Journal
from enforcer.journal_rows import Record
from enforcer.kafka_state import KafkaState
from enforcer.metrics import EnforcerMetrics
from enforcer.quota_plan import Change, QuotaPolicy
from enforcer.state_log import StateLog
from enforcer.webhook_payload import webhook_from_dict
from kvq.kafka.quota_entity import QuotaEntity
from kvq.settings.config import CLUSTER_LABEL_DEFAULT
from tests.clock_support import wall_clock

pytestmark = [pytest.mark.integration, pytest.mark.paced]

CLUSTER = "c1"
P = "producer_byte_rate"
C = "consumer_byte_rate"
ORIGINALS = {
    QuotaEntity.user("alice"): {P: 800.0},
    QuotaEntity.of({"user": "alice", "client-id": "app"}): {P: 301.0, C: 9.0},
    QuotaEntity.of({"client-id": "batch"}): {P: 7_000.0},
}


class Killed(BaseException):
    """SIGKILL, as far as the dying replica's code can tell: nothing after it runs (no handler
    catches a BaseException, and every later step of the dead replica raises it again)."""


class Steps:
    """Counts a replica's steps that leave a trace (state transactions, quota writes) and kills
    it once `after` of them took effect (0: before the first). Between two steps the replica only
    reads and computes, so dying after one step is dying anywhere before the next."""

    def __init__(self, after: int | None = None) -> None:
        self.after = after
        self.taken = 0
        self.dead = False

    def take(self, step: Callable[[], None]) -> None:
        if self.dead or self.after == self.taken:
            self._die()
        step()
        self.taken += 1
        if self.after == self.taken:
            self._die()

    def _die(self) -> None:
        self.dead = True
        raise Killed


class DyingState:
    """KafkaState whose transactions are steps (journal_rows.RowSink)."""

    def __init__(self, state: KafkaState, steps: Steps) -> None:
        self.state, self.steps = state, steps

    def publish(self, records_by_cluster: Mapping[str, list[Record]]) -> None:
        self.steps.take(lambda: self.state.publish(records_by_cluster))

    def forget(self, cluster: str, keys: list[str]) -> None:
        self.steps.take(lambda: self.state.forget(cluster, keys))


class DyingQuotas:
    """The cluster's quotas (enforcer.quota_client.QuotaClient) as the dying replica reaches
    them: its real writes are steps, and a dead replica reaches nothing."""

    def __init__(self, quotas: InMemoryQuotas, steps: Steps) -> None:
        self.quotas, self.steps = quotas, steps

    def describe(self) -> dict[QuotaEntity, dict[str, float]]:
        return self._alive().describe()

    def describe_agreed(self) -> dict[QuotaEntity, dict[str, float]]:
        return self._alive().describe_agreed()

    def quota_settings(self) -> BrokerQuotaSettings:
        return self._alive().quota_settings()

    def alter(self, changes: Sequence[Change], validate_only: bool = False) -> None:
        if validate_only:
            self._alive().alter(changes, validate_only=True)
        else:
            self.steps.take(lambda: self.quotas.alter(changes))

    def close(self) -> None:
        pass

    def _alive(self) -> InMemoryQuotas:
        if self.steps.dead:
            raise Killed
        return self.quotas


class World:
    """One cluster's quotas, its state topic in Kafka, and the replicas that act on it in turn."""

    def __init__(self, kafka, tmp_path: Path) -> None:
        self.kafka, self.tmp_path = kafka, tmp_path
        self.topic = f"kvq-state-{uuid.uuid4().hex[:8]}"
        self.quotas = InMemoryQuotas(ORIGINALS)
        self.clock = wall_clock(2026, 11, 22, 15)
        self.started = self.clock()
        self._closing: list[Callable[[], None]] = []

    @contextlib.contextmanager
    def replica(self, name: str, steps: Steps) -> Iterator[Enforcer]:
        """A replica that has taken over the cluster's state into an empty working copy."""
        log = StateLog(self.kafka.admin_properties, self.topic, f"kvq.{self.topic}", 30)
        state = KafkaState({CLUSTER: log})
        path = self.tmp_path / f"{name}.sqlite3"
        journal = Journal(path, clock=self.clock, sink=DyingState(state, steps))
        try:
            state.take_over(journal, CLUSTER)
            metrics = EnforcerMetrics((CLUSTER,), CLUSTER_LABEL_DEFAULT)
            policy = QuotaPolicy((P, C), {P: 1000})
            quotas = DyingQuotas(self.quotas, steps)
            applier = Applier(
                CLUSTER, policy, quotas, journal, metrics, sleep=self._pass, settle_s=0.0
            )
            yield Enforcer({CLUSTER: applier}, journal, metrics, CLUSTER_LABEL_DEFAULT,
                           clock=self.clock)  # fmt: skip
        finally:
            state.close()
            journal.close()

    def _pass(self, seconds: float) -> None:
        self.clock.now += timedelta(seconds=seconds)

    def notifications(self) -> list[dict]:
        """What Alertmanager sends: firing at half, deeper at a quarter, then resolved."""
        at = self.started
        return [
            throttle_webhook(cluster=CLUSTER, factor=0.5, starts_at=at),
            throttle_webhook(cluster=CLUSTER, factor=0.25, starts_at=at),
            throttle_webhook(
                cluster=CLUSTER, factor=None, starts_at=at, ends_at=at + timedelta(minutes=5)
            ),
        ]


def throttles(quotas: InMemoryQuotas) -> dict[QuotaEntity, dict[str, float]]:
    """The quotas Kafka enforces (not its copy of the originals, kept while throttled)."""
    return {e: v for e, v in quotas.describe().items() if not e.is_originals_record}


def deliver(enforcer: Enforcer, body: dict) -> None:
    enforcer.handle(webhook_from_dict(body))


def run_until_killed(world: World, steps: Steps) -> list[dict[QuotaEntity, dict[str, float]]]:
    """The first replica handles every notification until it is killed; returns what Kafka
    held after each one it answered (Alertmanager redelivers the rest, the one it died on
    included)."""
    held = []
    with contextlib.suppress(Killed), world.replica("first", steps) as first:
        for body in world.notifications():
            deliver(first, body)
            held.append(throttles(world.quotas))
    return held


@pytest.fixture(scope="module")
def undisturbed(shared_kafka, tmp_path_factory) -> tuple[int, list]:
    """A run nobody kills: how many steps it takes, and what Kafka holds after each
    notification."""
    steps = Steps()
    held = run_until_killed(World(shared_kafka, tmp_path_factory.mktemp("undisturbed")), steps)
    return steps.taken, held


STEPS = 25
"""As many as a whole run takes at most (checked below): a kill after each step."""


def test_a_whole_run_takes_fewer_steps_than_the_kill_points_cover(undisturbed):
    taken, held = undisturbed
    assert 10 < taken <= STEPS
    assert held[-1] == ORIGINALS and held[0] != ORIGINALS


@pytest.mark.parametrize("after", range(STEPS + 1))
def test_a_replica_killed_at_any_step_is_finished_exactly_by_the_next(
    shared_kafka, tmp_path, undisturbed, after
):
    _taken, expected = undisturbed
    world = World(shared_kafka, tmp_path)
    answered = len(run_until_killed(world, Steps(after)))
    with world.replica("second", Steps()) as second:
        for index in range(answered, len(expected)):
            deliver(second, world.notifications()[index])
            assert throttles(world.quotas) == expected[index], (
                f"killed after {after} steps, then notification {index + 1} redelivered: "
                f"Kafka holds {throttles(world.quotas)}"
            )
        assert second.reconcile() == {}
        assert world.quotas.describe() == ORIGINALS, "every original back, byte for byte"
        recovered = second.metrics.originals_recovered.labels(CLUSTER)._value.get()
        assert recovered == 0, "the state came from the store, not from Kafka's copy"

"""More than 10,000 managed pairs, on devcluster and on real Kafka: every AlterClientQuotas request
stays within the controller's 10,000-record batch, and a crash between two requests still restores
exactly. On Kafka each request's records go through the metadata log: the time until every broker
describes them is measured and printed next to devcluster's (where the store is the broker)."""

from __future__ import annotations

import time

import pytest
from kafka.protocol.admin.client_quotas import AlterClientQuotasRequest

from enforcer.applier import Applier
from enforcer.apply.result import ApplyError
from enforcer.journal import Journal
from enforcer.metrics import EnforcerMetrics
from enforcer.quota_client import MAX_PAIRS_PER_REQUEST, KafkaQuotaClient
from enforcer.quota_plan import Change, QuotaPolicy
from kvq.kafka.quota_entity import QuotaEntity
from kvq.settings.config import CLUSTER_LABEL_DEFAULT
from tests.enforcer.applier_support import apply_step
from tests.quota_backends import DevclusterQuotas, kafka_quotas_left_as_found

pytestmark = pytest.mark.integration

P = "producer_byte_rate"
USERS = 10_200


class Died(BaseException):
    """The enforcer process dying (not an error it could handle)."""


class RecordingClient(KafkaQuotaClient):
    """The real client; records the pairs of every AlterClientQuotas request and can die after
    the n-th real (not validate_only) one was answered."""

    def __init__(self, admin_properties: dict[str, str], die_after_alters: int | None = None):
        super().__init__({**admin_properties, "request.timeout.ms": "30000"})
        self.sizes: list[int] = []
        self.last_real: list[Change] = []
        self.die_after_alters = die_after_alters

    def _send(self, request, node_id=None):
        response = super()._send(request, node_id)
        if isinstance(request, AlterClientQuotasRequest):
            self.sizes.append(sum(len(entry.ops) for entry in request.entries))
            if not request.validate_only:
                self.last_real = _changes_of(request)
                if self.die_after_alters is not None:
                    self.die_after_alters -= 1
                    if self.die_after_alters < 0:
                        raise Died()
        return response


def _changes_of(request: AlterClientQuotasRequest) -> list[Change]:
    changes = []
    for entry in request.entries:
        entity = QuotaEntity.of([(e.entity_type, e.entity_name) for e in entry.entity])
        changes += [Change(entity, op.key, None if op.remove else op.value) for op in entry.ops]
    return changes


@pytest.fixture(params=["devcluster", "kafka"])
def backend(request, devcluster):
    if request.param == "devcluster":
        yield DevclusterQuotas(devcluster(brokers=1, log_dirs_per_broker=1))
        return
    shared_kafka = request.getfixturevalue("shared_kafka")
    with kafka_quotas_left_as_found(shared_kafka, agree_within=120) as backend:
        yield backend


def _applier(client, journal, settle_s: float = 75.0) -> Applier:
    policy = QuotaPolicy((P,), {P: 2000.0})
    metrics = EnforcerMetrics(("c1",), CLUSTER_LABEL_DEFAULT)
    return Applier("c1", policy, client, journal, metrics, verify_attempts=20, settle_s=settle_s)


def _timed_apply(applier: Applier, factor: float, client: RecordingClient, backend, timings):
    """Apply; note how long it took and how long until every broker held its last request."""
    started = time.monotonic()
    result = apply_step(applier, factor)
    took = time.monotonic() - started
    spread = backend.wait_until_every_broker_holds(client.last_real)
    timings.append(f"apply({factor}) {took:.1f} s, every broker {spread:.2f} s later")
    return result


def test_over_10000_pairs_in_requests_kafka_accepts_and_a_crash_between_two_still_restores(
    backend, tmp_path
):
    """Kafka and devcluster fail a whole AlterClientQuotas of more than 10,000 pairs."""
    backend.seed_many({QuotaEntity.user(f"user-{i:05d}"): {P: 1000.0 + i} for i in range(USERS)})
    before = backend.quotas()
    # the copy of the originals, then the plan, in order: 3 requests; dies after the second
    dying = RecordingClient(backend.admin_properties, die_after_alters=1)
    journal = Journal(tmp_path / "j.sqlite3")
    try:
        with pytest.raises((Died, ApplyError)):
            apply_step(_applier(dying, journal), 0.5)
    finally:
        dying.close()
        journal.close()
    spread = backend.wait_until_every_broker_holds(dying.last_real)
    timings = [f"{len(dying.last_real)} pairs on every broker {spread:.2f} s after the answer"]
    half = backend.quotas()
    changed = sum(1 for entity, values in half.items() if before.get(entity) != values)
    assert 0 < changed < USERS, "the crash left the plan half applied"
    client = RecordingClient(backend.admin_properties)
    journal = Journal(tmp_path / "j.sqlite3")  # the restarted enforcer
    try:
        # It died before it could journal the answer of its last request, so that request is in
        # doubt after the restart; it was answered, so nothing of it lands later.
        applier = _applier(client, journal, settle_s=0.0)
        assert applier.settle_due_in() is not None, "the request it died waiting for is known"
        result = _timed_apply(applier, 0.5, client, backend, timings)
        assert result.drift == {}, "half-applied values are recognised as ours, not drift"
        throttled = backend.quotas()
        last = f"user-{USERS - 1:05d}"
        assert throttled[(("user", last),)] == {P: (1000.0 + USERS - 1) // 2}
        assert throttled[(("user", None),)] == {P: 1000.0}
        _timed_apply(applier, 1.0, client, backend, timings)
        assert backend.quotas() == before
        assert backend.originals_copy() == []
        assert max(dying.sizes + client.sizes) <= MAX_PAIRS_PER_REQUEST
    finally:
        client.close()
        journal.close()
    print(f"\n{backend.name}: " + "; ".join(timings))

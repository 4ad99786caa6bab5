"""More than 10,000 managed pairs against devcluster: every AlterClientQuotas request stays within
the controller's 10,000-record batch, and a crash between two requests still restores exactly."""

from __future__ import annotations

import pytest
from kafka.protocol.admin.client_quotas import AlterClientQuotasRequest

from devcluster.quota_store import Alteration, Op
from enforcer.applier import Applier, ApplyError
from enforcer.journal import Journal
from enforcer.metrics import EnforcerMetrics
from enforcer.quota_client import MAX_PAIRS_PER_REQUEST, KafkaQuotaClient
from enforcer.quota_plan import QuotaPolicy
from kvq.kafka.quota_entity import ORIGINALS_USER

pytestmark = pytest.mark.integration

P = "producer_byte_rate"
USERS = 10_200


class Died(BaseException):
    """The enforcer process dying (not an error it could handle)."""


class RecordingClient(KafkaQuotaClient):
    """The real client; records the pairs of every AlterClientQuotas request and can die after
    the n-th real (not validate_only) one was answered."""

    def __init__(self, bootstrap: str, die_after_alters: int | None = None) -> None:
        super().__init__({"bootstrap.servers": bootstrap, "request.timeout.ms": "30000"})
        self.sizes: list[int] = []
        self.die_after_alters = die_after_alters

    def _send(self, request, node_id=None):
        response = super()._send(request, node_id)
        if isinstance(request, AlterClientQuotasRequest):
            self.sizes.append(sum(len(entry.ops) for entry in request.entries))
            if not request.validate_only and self.die_after_alters is not None:
                self.die_after_alters -= 1
                if self.die_after_alters < 0:
                    raise Died()
        return response


def _seed(dc, users: int) -> dict:
    """Users with their own quota, set as an operator would (in requests Kafka accepts)."""
    alterations = [
        Alteration((("user", f"user-{i:05d}"),), (Op(P, 1000.0 + i),)) for i in range(users)
    ]
    for start in range(0, users, MAX_PAIRS_PER_REQUEST):
        results = dc.quotas.alter(alterations[start : start + MAX_PAIRS_PER_REQUEST])
        assert {r.error_code for r in results} == {0}
    return _quotas(dc)


def _quotas(dc) -> dict:
    return {
        tuple(sorted(item["entity"].items(), key=str)): item["values"]
        for item in dc.quota_state()
        if item["entity"].get("user") != ORIGINALS_USER
    }


def _applier(client, journal, settle_s: float = 75.0) -> Applier:
    policy = QuotaPolicy((P,), {P: 2000.0})
    metrics = EnforcerMetrics(("c1",))
    return Applier("c1", policy, client, journal, metrics, verify_attempts=20, settle_s=settle_s)


def test_over_10000_pairs_in_requests_kafka_accepts_and_a_crash_between_two_still_restores(
    devcluster, tmp_path
):
    """devcluster fails a whole AlterClientQuotas of more than 10,000 pairs, as Kafka does."""
    dc = devcluster(brokers=1, log_dirs_per_broker=1)
    before = _seed(dc, USERS)
    # the copy of the originals, then the plan, in order: 3 requests; dies after the second
    dying = RecordingClient(dc.bootstrap, die_after_alters=1)
    journal = Journal(tmp_path / "j.sqlite3")
    try:
        with pytest.raises((Died, ApplyError)):
            _applier(dying, journal).apply(0.5)
    finally:
        dying.close()
        journal.close()
    half = _quotas(dc)
    changed = sum(1 for entity, values in half.items() if before.get(entity) != values)
    assert 0 < changed < USERS, "the crash left the plan half applied"
    client = RecordingClient(dc.bootstrap)
    journal = Journal(tmp_path / "j.sqlite3")  # the restarted enforcer
    try:
        # It died before it could journal the answer of its last request, so that request is in
        # doubt after the restart; devcluster applied it on arrival: nothing lands later.
        applier = _applier(client, journal, settle_s=0.0)
        assert applier.settle_due_in() is not None, "the request it died waiting for is known"
        result = applier.apply(0.5)
        assert result.drift == {}, "half-applied values are recognised as ours, not drift"
        throttled = _quotas(dc)
        last = f"user-{USERS - 1:05d}"
        assert throttled[(("user", last),)] == {P: (1000.0 + USERS - 1) // 2}
        assert throttled[(("user", None),)] == {P: 1000.0}
        applier.apply(1.0)
        assert _quotas(dc) == before
        assert [i for i in dc.quota_state() if i["entity"].get("user") == ORIGINALS_USER] == []
        assert max(dying.sizes + client.sizes) <= MAX_PAIRS_PER_REQUEST
    finally:
        client.close()
        journal.close()

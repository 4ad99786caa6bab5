"""Two kvq-enforcer processes with their state in Kafka (kvq.enforcer.state.store=kafka) on the
run's shared 3-node Kafka cluster, as the chart runs them: one acts, either takes webhooks, and
when the acting one is killed (SIGKILL: no goodbye to the group) the other takes over and the
restore is exact."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import requests
from kafka.admin import KafkaAdminClient

from devkit.alertmanager import throttle_webhook
from devkit.enforcer_process import TOKEN, RunningEnforcer, running_enforcer
from devkit.kafka_cluster import kafka_admin_settings
from devkit.processes import wait_until
from enforcer.journal import Journal
from enforcer.kafka_state import KafkaState
from enforcer.state_log import StateLog, client_keywords
from kvq.kafka.quota_entity import QuotaEntity
from tests.quota_backends import KafkaQuotas, kafka_quotas_left_as_found

pytestmark = [pytest.mark.integration, pytest.mark.paced]

CLUSTER = "replicas"
ALICE = QuotaEntity.user("alice")
P = "producer_byte_rate"


def post(replica: RunningEnforcer, body: dict) -> requests.Response:
    return requests.post(
        replica.url + "/webhook",
        data=json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"},
        timeout=30,
    )


def acting(replica: RunningEnforcer) -> bool:
    status = requests.get(
        replica.url + "/status", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=10
    )
    return bool(status.json()["acting"])


def test_the_standby_takes_webhooks_and_takes_over_from_a_killed_replica(shared_kafka, tmp_path):
    topic = f"kvq-state-{uuid.uuid4().hex[:8]}"
    with contextlib.ExitStack() as stack:
        quotas = stack.enter_context(kafka_quotas_left_as_found(shared_kafka))
        quotas.seed({"user": "alice"}, producer_byte_rate=1_000_000.0)
        before = quotas.snapshot()
        replicas = [start_replica(stack, shared_kafka, tmp_path / n, topic) for n in ("a", "b")]
        throttle_then_fail_over(replicas, quotas, before, CLUSTER)


def throttle_then_fail_over(
    replicas: list[RunningEnforcer], quotas: KafkaQuotas, before: dict, cluster: str
) -> None:
    """One of two replicas acts; a throttle of alice to half posted to the other is applied;
    the acting one killed (SIGKILL: no goodbye to the group), the other takes over and the
    restore posted meanwhile puts every quota back as `before`."""
    actor = wait_until(lambda: [r for r in replicas if acting(r)], 60, what="one replica acting")[0]
    standby = next(r for r in replicas if r is not actor)
    assert not acting(standby)

    answer = post(standby, throttle_webhook(cluster=cluster, factor=0.5, group_key="g"))
    assert answer.status_code == 200 and "queued" in answer.json(), answer.text
    wait_until(
        lambda: quotas.snapshot().get(ALICE, {}).get(P) == 500_000.0,
        60,
        what="alice throttled to half by the acting replica",
    )

    os.kill(actor.pid, signal.SIGKILL)
    answer = post(standby, throttle_webhook(cluster=cluster, factor=None, group_key="g"))
    assert answer.status_code == 200, answer.text  # queued while nobody acts yet
    wait_until(lambda: acting(standby), 60, what="the standby acting")
    wait_until(lambda: quotas.snapshot() == before, 60, what="every quota as before")


def metric(replica: RunningEnforcer, name: str) -> float:
    """The sum of every series of `name` the replica's /metrics shows."""
    text = requests.get(replica.url + "/metrics", timeout=10).text
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(name))


def start_replica(stack: contextlib.ExitStack, kafka, work: Path, topic: str) -> RunningEnforcer:
    """A replica working in `work` (created) with its state in `topic`; stopped with `stack`."""
    work.mkdir()
    settings = {
        "kvq.enforcer.state.store": "kafka",
        "kvq.enforcer.state.topic": topic,
        "kvq.enforcer.state.group": f"kvq-enforcer-{topic}",
        "kvq.enforcer.failsafe.after": "PT0S",
        # a killed replica may have died before journaling an answer: short, so a test sees
        # the restore finished (the copy of the originals removed) soon after
        "kvq.enforcer.alter.settle": "PT5S",
    }
    return stack.enter_context(
        running_enforcer(kafka.admin_properties, work, cluster=CLUSTER, settings=settings)
    )


def delete_topic(admin_properties: dict, topic: str) -> None:
    admin = KafkaAdminClient(**client_keywords(admin_properties, 30_000))
    try:
        admin.delete_topics([topic])
    finally:
        admin.close()


def test_the_state_topic_lost_with_every_working_copy_is_recovered_from_kafkas_quotas(
    shared_kafka, tmp_path
):
    """The reliability suite's lost journal, with the state in Kafka: the topic deleted while
    throttled and the acting replica killed with its working copy. The next replica starts the
    state afresh, takes the originals from Kafka's copy of them, never compounds, and restores
    exactly."""
    topic = f"kvq-state-{uuid.uuid4().hex[:8]}"
    with contextlib.ExitStack() as stack:
        quotas = stack.enter_context(kafka_quotas_left_as_found(shared_kafka))
        quotas.seed({"user": "alice"}, producer_byte_rate=1_000_000.0)
        before = quotas.snapshot()
        first = start_replica(stack, shared_kafka, tmp_path / "a", topic)
        wait_until(lambda: acting(first), 60, what="the first replica acting")
        assert post(first, throttle_webhook(cluster=CLUSTER, factor=0.5, group_key="g")).ok
        wait_until(lambda: quotas.snapshot().get(ALICE, {}).get(P) == 500_000.0, 60,
                   what="alice throttled to half")  # fmt: skip
        os.kill(first.pid, signal.SIGKILL)
        delete_topic(shared_kafka.admin_properties, topic)

        second = start_replica(stack, shared_kafka, tmp_path / "b", topic)  # an empty copy
        wait_until(lambda: acting(second), 60, what="the second replica acting")
        assert post(second, throttle_webhook(cluster=CLUSTER, factor=0.25, group_key="g")).ok
        wait_until(lambda: quotas.snapshot().get(ALICE, {}).get(P) == 250_000.0, 60,
                   what="alice at a quarter of her original, not the throttled value")  # fmt: skip
        assert metric(second, "kafka_volume_quota_enforcer_originals_recovered_total") > 0
        assert post(second, throttle_webhook(cluster=CLUSTER, factor=None, group_key="g")).ok
        wait_until(lambda: quotas.snapshot() == before, 60, what="every quota as before")


def test_a_duplicate_or_stale_notification_reaching_the_other_replica_changes_nothing(
    shared_kafka, tmp_path
):
    """Notifications duplicated and out of order across replicas, as an Alertmanager cluster
    sends them: the same firing from another peer to the other replica changes nothing again; a
    resolution of an earlier episode delivered late is stale (older than the firing alert's
    start) and the throttle stays; the fresh resolution restores."""
    topic = f"kvq-state-{uuid.uuid4().hex[:8]}"
    started = datetime.now(UTC)
    with contextlib.ExitStack() as stack:
        quotas = stack.enter_context(kafka_quotas_left_as_found(shared_kafka))
        quotas.seed({"user": "alice"}, producer_byte_rate=1_000_000.0)
        before = quotas.snapshot()
        replicas = [start_replica(stack, shared_kafka, tmp_path / n, topic) for n in ("a", "b")]
        first, second = replicas
        firing = throttle_webhook(cluster=CLUSTER, factor=0.5, group_key="g", starts_at=started)
        stale = throttle_webhook(cluster=CLUSTER, factor=None, group_key="g",
                                 starts_at=started - timedelta(minutes=10),
                                 ends_at=started - timedelta(minutes=5))  # fmt: skip
        assert post(first, firing).ok
        wait_until(lambda: quotas.snapshot().get(ALICE, {}).get(P) == 500_000.0, 60,
                   what="alice throttled to half")  # fmt: skip

        def handled() -> float:
            return sum(
                metric(r, "kafka_volume_quota_enforcer_inbox_entries_total") for r in replicas
            )

        def changes() -> float:
            return sum(
                metric(r, "kafka_volume_quota_enforcer_quota_changes_total") for r in replicas
            )

        wait_until(lambda: handled() == 1, 60, what="the firing handled")
        changed = changes()
        assert post(second, firing).ok  # the same notification from another Alertmanager peer
        assert post(second, stale).ok
        wait_until(lambda: handled() == 3, 60, what="the duplicate and the stale one handled")
        assert changes() == changed, "the duplicate changed something again"
        assert quotas.snapshot().get(ALICE, {}).get(P) == 500_000.0, "the stale one changed it"
        assert post(second, throttle_webhook(cluster=CLUSTER, factor=None, group_key="g")).ok
        wait_until(lambda: quotas.snapshot() == before, 60, what="every quota as before")


def test_a_replica_stopped_by_sigterm_hands_the_role_over_at_once(shared_kafka, tmp_path):
    """A rolling update: the new replica is ready (serving HTTP), then the acting one gets
    SIGTERM, so the new one joins the election as the other leaves it. The stopped one stands
    down before it stops serving, and the new one acts."""
    topic = f"kvq-state-{uuid.uuid4().hex[:8]}"
    with contextlib.ExitStack() as stack:
        old = start_replica(stack, shared_kafka, tmp_path / "old", topic)
        wait_until(lambda: acting(old), 60, what="the old replica acting")
        new = start_replica(stack, shared_kafka, tmp_path / "new", topic)
        os.kill(old.pid, signal.SIGTERM)
        wait_until(lambda: acting(new), 60, what="the new replica acting")
        log = (tmp_path / "old" / "enforcer.log").read_text()
        assert "standing by" in log, "the stopped replica stood down before it went"


def test_import_journal_copies_a_sqlite_journal_into_kafka_once(shared_kafka, tmp_path):
    old = Journal(tmp_path / "old.sqlite3")  # an enforcer's journal with the local store
    old.episodes.begin(CLUSTER, {(ALICE, P): 1_000_000.0}, 0.5)
    expected = old.episodes.episode(CLUSTER)
    old.close()
    topic = f"kvq-state-{uuid.uuid4().hex[:8]}"
    config = tmp_path / "kvq.properties"
    settings = {
        **kafka_admin_settings(shared_kafka.admin_properties),
        "kvq.cluster.name": CLUSTER,
        "client.quota.callback.static.storage.per.volume.limit.min.available.ratio": "0.05",
        "kvq.enforcer.state.store": "kafka",
        "kvq.enforcer.state.topic": topic,
    }
    config.write_text("".join(f"{k}={v}\n" for k, v in settings.items()))
    command = [
        sys.executable, "-m", "enforcer.cli", "--config", str(config), "--insecure-no-auth",
        "--import-journal", str(tmp_path / "old.sqlite3"),
    ]  # fmt: skip

    first = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert first.returncode == 0, first.stderr
    assert f"cluster {CLUSTER}: 2 rows imported from" in first.stdout  # the episode, its pair
    again = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stderr
    assert f"cluster {CLUSTER}: Kafka holds its state already; nothing imported" in again.stdout

    state = KafkaState({CLUSTER: StateLog(shared_kafka.admin_properties, topic, "reader")})
    fresh = Journal(tmp_path / "fresh.sqlite3", sink=state)
    try:
        state.take_over(fresh, CLUSTER)
        assert fresh.episodes.episode(CLUSTER) == expected
    finally:
        state.close()
        fresh.close()

"""The acting enforcer replica cut off from Kafka in the middle of an apply, then reconnected
after the other replica has taken over (issue 40): on a 3-node Kafka of its own whose `PROXIED`
listener puts a TCP proxy (devkit/tcp_proxy.py) between replica A and every broker; replica B
connects directly.

The cut is a pulled cable, the harder case: nothing tells A. B takes over once A's group session
expires and finishes the throttle; then the network comes back. The brokers' request logs say
whether any quota write of A was completed after the cut: none may be, or it would land on values
B already wrote (a value written twice), or after B restored them (a value lost). Each test
cuts at another moment of A's apply: as its AlterClientQuotas is on its way, and as the journal
write before it is committed."""

from __future__ import annotations

import contextlib
import json
import re
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import requests

from devkit.alertmanager import throttle_webhook
from devkit.enforcer_process import TOKEN, RunningEnforcer, log_times, running_enforcer
from devkit.kafka_cluster import STRIMZI_ADMIN, KafkaCluster
from devkit.kafka_requests import join_claims, writes_after
from devkit.processes import wait_until
from devkit.tcp_proxy import TcpProxy
from enforcer.quota_client import KafkaQuotaClient
from enforcer.quota_plan import Change
from kvq.kafka.quota_entity import QuotaEntity

pytestmark = pytest.mark.integration

CLUSTER = "cut-off"
P = "producer_byte_rate"
PAIRS = 2_000
FACTOR = 0.5
ALTER_CLIENT_QUOTAS = 49
END_TXN = 26
SETTINGS = {
    "kvq.enforcer.state.store": "kafka",
    "kvq.enforcer.failsafe.after": "PT0S",
    "kvq.enforcer.alter.settle": "PT10S",
}


def status(replica: RunningEnforcer) -> dict:
    answer = requests.get(
        replica.url + "/status", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=10
    )
    answer.raise_for_status()
    return answer.json()


def acting_metric(replica: RunningEnforcer) -> float:
    text = requests.get(replica.url + "/metrics", timeout=10).text
    found = re.search(r"^kafka_volume_quota_enforcer_acting\{[^}]*\} (\S+)$", text, re.M)
    assert found, "no kafka_volume_quota_enforcer_acting in /metrics"
    return float(found.group(1))


def post(replica: RunningEnforcer, factor: float | None) -> None:
    answer = requests.post(
        replica.url + "/webhook",
        data=json.dumps(throttle_webhook(cluster=CLUSTER, factor=factor, group_key="cut")),
        headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"},
        timeout=60,
    )
    assert answer.status_code == 200 and "queued" in answer.json(), answer.text


def quotas_are(client: KafkaQuotaClient, wanted: dict[QuotaEntity, float]) -> bool:
    """Whether every broker shows every one of `wanted` at its value."""
    now = client.describe_agreed()
    return all(now.get(entity, {}).get(P) == value for entity, value in wanted.items())


def start(
    kafka: KafkaCluster, work: Path, name: str, proxied: bool, topic: str, stack
) -> RunningEnforcer:
    (work / name).mkdir()
    settings = {
        **SETTINGS,
        "kvq.enforcer.state.topic": topic,
        "kvq.enforcer.state.group": topic,
        f"{STRIMZI_ADMIN}client.id": f"kvq-enforcer-{name}",
    }
    return stack.enter_context(
        running_enforcer(
            kafka.client_properties(proxied=proxied), work / name, cluster=CLUSTER,
            settings=settings,
        )
    )  # fmt: skip


@dataclass
class Setting:
    kafka: KafkaCluster
    proxy: TcpProxy
    client: KafkaQuotaClient
    before: dict[QuotaEntity, float]


@pytest.fixture(scope="module")
def setting(tmp_path_factory, kafka_dist) -> Iterator[Setting]:
    """A 3-node Kafka of its own with a proxy in front of its PROXIED listener, and PAIRS
    quotas; each test leaves the quotas as it found them."""
    before = {QuotaEntity.user(f"u{i:05d}"): float(1_000_000 + i) for i in range(PAIRS)}
    work = tmp_path_factory.mktemp("cut-off-kafka")
    with contextlib.ExitStack() as stack:
        kafka = stack.enter_context(
            KafkaCluster(work, nodes=3, request_log=True, proxied=True, dist=kafka_dist)
        )
        proxy = stack.enter_context(TcpProxy(kafka.proxy_routes))
        client = KafkaQuotaClient(kafka.admin_properties, timeout_ms=30_000)
        stack.callback(client.close)
        client.alter([Change(entity, P, value) for entity, value in before.items()])
        wait_until(lambda: quotas_are(client, before), 60, what="the quotas set")
        yield Setting(kafka, proxy, client, before)


def cut_off_then_reconnected(setting: Setting, work: Path, cut) -> None:
    """Replica A (through the proxy) acts, B (direct) stands by; a throttle posted to B; `cut()`
    arms the proxy to cut A off in the middle of its apply. B takes over and throttles every
    pair; the network comes back: A stands by, gets no quota write through after the cut and
    leaves the role with B, and B's restore is exact."""
    kafka, proxy, client, before = setting.kafka, setting.proxy, setting.client, setting.before
    throttled = {entity: float(int(value * FACTOR)) for entity, value in before.items()}
    topic = f"kvq-state-{uuid.uuid4().hex[:8]}"
    with contextlib.ExitStack() as stack:
        stack.callback(proxy.heal)
        proxy.check()
        a = start(kafka, work, "a", proxied=True, topic=topic, stack=stack)  # first: it acts
        wait_until(lambda: proxy.check() or status(a)["acting"], 60, what="replica A acting")
        b = start(kafka, work, "b", proxied=False, topic=topic, stack=stack)

        cut()
        post(b, FACTOR)
        wait_until(proxy.cut_event.is_set, 60, what="the cut in the middle of A's apply")
        cut_at = time.time()

        wait_until(lambda: status(b)["acting"], 60, what="replica B taking over")
        wait_until(
            lambda: (
                quotas_are(client, throttled)
                and status(b)["clusters"][CLUSTER]["applied_factor"] == FACTOR
            ),
            60,
            what="B having applied the throttle to every pair",
        )
        proxy.heal()
        wait_until(
            lambda: not status(a)["acting"] and acting_metric(a) == 0,
            60,
            what="A standing by once it is back",
        )

        post(a, None)  # A takes webhooks again as a standby; B restores
        wait_until(lambda: quotas_are(client, before), 60, what="every quota exactly as before")
        assert writes_after(kafka, "kvq-enforcer-a", cut_at) == 0
        assert writes_after(kafka, "kvq-enforcer-b", cut_at) >= 2  # the throttle, the restore
        # A rejoined the group as a new member claiming nothing, so the role stayed with B
        claims = join_claims(kafka, "PROXIED", cut_at)
        assert claims and not any(claims)
        assert not [
            at
            for at in log_times(work / "a" / "enforcer.log", "took over its state")
            if at > cut_at
        ]
        assert not status(a)["acting"] and status(b)["acting"]


def test_a_write_cut_off_on_its_way_never_lands_after_the_other_replica_took_over(
    setting, tmp_path
):
    """The pulled cable catches A's AlterClientQuotas on its way (journaled, sent, held by the
    proxy). A gives up on it after its request timeout and resets the connection, so it is
    dropped, not delivered once the network is back (a plain close would have it delivered)."""
    cut_off_then_reconnected(
        setting, tmp_path, lambda: setting.proxy.cut_at_request(ALTER_CLIENT_QUOTAS, 2)
    )  # the validation, then the write


def test_a_write_journaled_across_the_cut_is_not_sent_once_the_network_is_back(setting, tmp_path):
    """The cable is pulled as A commits the journal write of its AlterClientQuotas: Kafka has
    the commit (so B reads the request as in doubt when it takes over), A gets the answer only
    when the network is back, long after. A does not send the request then: it could land after
    B's settle time, on values B restored meanwhile."""
    cut_off_then_reconnected(
        setting,
        tmp_path,
        lambda: setting.proxy.cut_at_request(
            END_TXN, 1, after=(ALTER_CLIENT_QUOTAS, 1), answer=True
        ),
    )  # the validation, then the journal write's commit goes out, its answer held


def test_an_idle_replica_cut_off_stands_down_before_it_is_back(setting, tmp_path):
    """The cable is pulled while A acts with nothing to apply (most of its life): once its
    heartbeats go unanswered for a session timeout it stands down, still cut off, so it never
    counts as a second replica acting while B acts (KafkaVolumeQuotaEnforcerNotOneActing);
    back, it joins as a new member claiming nothing and the role stays with B. (Cut in the
    middle of an apply, A learns it only once that apply's Kafka calls time out, or from the
    fence when it is back: the tests above.)"""
    proxy, kafka = setting.proxy, setting.kafka
    topic = f"kvq-state-{uuid.uuid4().hex[:8]}"
    with contextlib.ExitStack() as stack:
        stack.callback(proxy.heal)
        a = start(kafka, tmp_path, "a", proxied=True, topic=topic, stack=stack)
        wait_until(lambda: proxy.check() or status(a)["acting"], 60, what="replica A acting")
        b = start(kafka, tmp_path, "b", proxied=False, topic=topic, stack=stack)

        proxy.cut()
        cut_at = time.time()
        wait_until(lambda: status(b)["acting"], 60, what="replica B taking over")
        wait_until(
            lambda: not status(a)["acting"] and acting_metric(a) == 0,
            60,
            what="A standing down while cut off",
        )
        proxy.heal()
        wait_until(lambda: join_claims(kafka, "PROXIED", cut_at), 60, what="A back in the group")
        assert not any(join_claims(kafka, "PROXIED", cut_at))  # claiming nothing
        assert status(b)["acting"] and not status(a)["acting"]

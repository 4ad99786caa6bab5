"""A restore is finished only when Kafka is known to hold the originals: through a crash while an
AlterClientQuotas is in doubt, brokers answering from a lagging metadata view, and a journal disk
that was full. The real CLI against devcluster over TCP, faults set through its control API."""

from __future__ import annotations

import contextlib
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from devcluster.control_client import ControlClient
from devcluster.quota_store import Alteration, Op
from devkit.processes import wait_until
from enforcer.quota_client import KafkaQuotaClient
from kvq.kafka.quota_entity import ORIGINALS_USER, QuotaEntity
from tests.enforcer.test_integration import (
    CLUSTER,
    Enforcer,
    firing,
    key,
    originals_copy,
    quotas,
    resolved,
)

pytestmark = [pytest.mark.integration, pytest.mark.paced]

P = "producer_byte_rate"
C = "consumer_byte_rate"


def _seed_users(dc, users: int) -> dict:
    """`users` users with their own quotas (every other one with a fetch quota too) and a
    client-id quota (mirrored while throttled), set as an operator would."""
    alterations = [
        Alteration(
            (("user", f"user-{i:05d}"),),
            (Op(P, 100_000.0 + i),) + ((Op(C, 50_000.0 + i),) if i % 2 else ()),
        )
        for i in range(users)
    ]
    alterations.append(Alteration((("client-id", "batch"),), (Op(P, 70_000.0),)))
    assert {r.error_code for r in dc.quotas.alter(alterations)} == {0}
    return quotas(dc)


WEBHOOKS_ONLY = {
    "kvq.enforcer.quota.keys": f"{P},{C}",
    "kvq.enforcer.reconcile.interval": "PT1H",  # only the webhooks act
    "kvq.enforcer.throttle.check.interval": "PT0S",
}


@pytest.fixture
def seeded(devcluster) -> tuple:
    """A 3-broker devcluster (whose brokers' views the tests make lag) holding 30 users' quotas:
    (the cluster, the quotas seeded)."""
    dc = devcluster(brokers=3, log_dirs_per_broker=1)
    return dc, _seed_users(dc, 30)


@contextlib.contextmanager
def _started(enforcer: Enforcer) -> Iterator[Enforcer]:
    try:
        yield enforcer.start()
    finally:
        enforcer.stop()


def _wait_until_brokers_show(dc, user: str, values: dict) -> None:
    """Until the brokers' own (lagging) DescribeClientQuotas shows the user's seeded quotas."""
    client = KafkaQuotaClient({"bootstrap.servers": dc.bootstrap, "request.timeout.ms": "5000"})
    try:
        wait_until(
            lambda: client.describe().get(QuotaEntity.user(user)) == values,
            timeout=20,
            what="the brokers' lagging view showing the seeded quotas",
        )
    finally:
        client.close()


GAP_S = 5.0
"""Time between two changes the lagging views below reach back to (each broker's view stays
between them for 2.5 s or more)."""
BEHIND_S = (0.5, 1.5, 2.5)
"""How far into that time each of the three brokers' views reaches back: three different lags."""


def _wait_past(moment: float) -> None:
    """Let monotonic time pass `moment`: the lagging views reach back into a span of time that
    has to have passed first (there is no state to wait for)."""
    time.sleep(max(0.0, moment - time.monotonic()))


def _views_go_back_to(dc, moments: list[float]) -> None:
    """From now on broker b answers DescribeClientQuotas from its view as it was at `moments[b]`
    (monotonic), catching up at the speed of time: its lag is set to now - moments[b] through
    devcluster's control API. Which broker the enforcer asks is kafka-python's random choice, so
    every broker lags (each by a different amount) to make the old view certain."""
    control = ControlClient(dc.control_url)
    for broker, moment in enumerate(moments):
        control.set_faults(broker, quota_metadata_lag_ms=int((time.monotonic() - moment) * 1000))


def _view(dc, broker: int, user: str) -> dict:
    """What broker `broker`'s lagging view holds for `user` now."""
    lag_s = dc.broker(broker).faults.quota_metadata_lag_ms / 1000
    entity = (("user", user),)
    return dict(dc.quotas.describe([], lag_s=lag_s)).get(entity, {})


def _markers(dc, broker: int | None = None) -> set[str]:
    """The episode markers of Kafka's copy of the originals that broker `broker`'s lagging view
    holds now (None: the controller's)."""
    lag_s = 0.0 if broker is None else dc.broker(broker).faults.quota_metadata_lag_ms / 1000
    return {
        dict(entity)["client-id"]
        for entity, _values in dc.quotas.describe([], lag_s=lag_s)
        if dict(entity).get("user") == ORIGINALS_USER
        and dict(entity)["client-id"].startswith("episode=")
    }


def _caught_up(dc) -> None:
    """Every broker's view reaches the controller's again."""
    control = ControlClient(dc.control_url)
    for broker in range(3):
        control.set_faults(broker, quota_metadata_lag_ms=0)


def _resolve_until_200(e: Enforcer, dc, before: dict) -> None:
    """Resolve until answered 200; every 200 must come with the originals back in Kafka."""
    answers: list[tuple[int, bool]] = []

    def resolve() -> bool:
        status, _body = e.post(resolved())
        answers.append((status, quotas(dc) == before))  # the controller's view
        return status == 200

    wait_until(resolve, timeout=30, interval=0.2, what="a resolve answered 200")
    assert all(restored for status, restored in answers if status == 200), (
        f"a 200 while Kafka still held throttled values: {answers}"
    )


def test_an_older_throttle_a_lagging_broker_still_shows_is_ours_never_an_operators_change(
    seeded, tmp_path
):
    """Throttled at 0.5, then at 0.25 (applied and seen); then the brokers asked next lag behind
    by different amounts and still show the 0.5 values the enforcer itself set. Those are not an
    operator's changes: the repeated alert and the resolve write the planned values again and
    the restore finishes only once Kafka is seen to hold every original. A value nobody but an
    operator set (user-00002) is still kept and counted."""
    dc, before = seeded
    with _started(Enforcer(tmp_path, dc, WEBHOOKS_ONLY)) as e:
        assert e.post(firing(0.5))[0] == 200
        half_seen = time.monotonic()
        dc.quotas.alter([Alteration((("user", "user-00002"),), (Op(P, 12_345.0),))])
        _wait_past(half_seen + GAP_S)
        status, body = e.post(firing(0.25))
        assert status == 200 and body["clusters"][CLUSTER]["drift"] == 1, body
        assert quotas(dc)[key(user="user-00001")] == {P: 25_000.0, C: 12_500.0}
        _views_go_back_to(dc, [half_seen + behind for behind in BEHIND_S])
        for broker in range(3):
            assert _view(dc, broker, "user-00001") == {P: 50_000.0, C: 25_000.0}, broker

        e.post(firing(0.25))  # Alertmanager's repeat, answered from the lagging views
        assert e.status()["drift"] == 1, "only the operator's value is drift"
        _resolve_until_200(e, dc, {**before, key(user="user-00002"): {P: 12_345.0}})

        assert quotas(dc) == {**before, key(user="user-00002"): {P: 12_345.0}}
        assert e.metric("kafka_volume_quota_enforcer_drift_changes_total") == 1.0
        assert e.metric("kafka_volume_quota_enforcer_reverted_pairs_total") == 0.0
        assert originals_copy(dc) == [], "the copy goes once the originals were seen"
        assert e.status()["episode"]["state"] == "restored"


SOON_BEHIND_S = (0.3, 0.6, 0.9)
"""Like BEHIND_S, but leaving each view GAP_S - 0.9 s before the next change: a webhook whose
verification fails against them takes a few seconds."""
OPERATOR_P = 200_000.0
"""user-00001's producer_byte_rate as an operator sets it between two throttles (was 100,001)."""


def _throttle_then_restore(e: Enforcer, dc, before: dict) -> tuple[float, float, dict]:
    """Episode A: throttled at 0.5 and, GAP_S later, restored (no lag: at once). Returns when A's
    throttle was seen, when its restore (and the removal of its copy) was answered, and the
    quotas an operator's change made right after that restore leaves."""
    assert e.post(firing(0.5))[0] == 200
    throttled = time.monotonic()
    assert len(_markers(dc)) == 1
    _wait_past(throttled + GAP_S)
    _resolve_until_200(e, dc, before)
    restored = time.monotonic()
    assert originals_copy(dc) == []
    return throttled, restored, {**before, key(user="user-00001"): {P: OPERATOR_P, C: 50_001.0}}


def _operator_changes_user_00001(dc) -> None:
    dc.quotas.alter([Alteration((("user", "user-00001"),), (Op(P, OPERATOR_P),))])


def test_a_new_throttle_right_after_a_restore_is_never_planned_from_a_view_that_still_shows_it(
    seeded, tmp_path
):
    """Episode A is restored (its copy of the originals removed), an operator raises user-00001's
    quota, and the alert fires again while every broker's view still shows A: its copy and its
    throttled values. That view is no lost journal (no recovery of A, no "journal lost"), and
    none of its values are originals: the throttle waits for brokers that caught up, is computed
    from the operator's new value and restores exactly that."""
    dc, before = seeded
    with _started(Enforcer(tmp_path, dc, WEBHOOKS_ONLY)) as e:
        throttled, _restored, operators = _throttle_then_restore(e, dc, before)
        _operator_changes_user_00001(dc)
        _views_go_back_to(dc, [throttled + behind for behind in SOON_BEHIND_S])
        for broker in range(3):
            assert _view(dc, broker, "user-00001") == {P: 50_000.0, C: 25_000.0}, broker
            assert _markers(dc, broker), f"broker {broker} still shows episode A's copy"

        status, body = e.post(firing(0.5))  # a new episode, within the views' lag
        assert status == 503 and "lags" in body["error"], body
        assert quotas(dc) == operators, "nothing is planned from a view that shows episode A"
        _caught_up(dc)
        status, body = e.post(firing(0.5))
        assert status == 200, body
        assert quotas(dc)[key(user="user-00001")] == {P: 100_000.0, C: 25_000.0}, (
            "throttled from the operator's value"
        )
        assert e.status()["drift"] == 0
        _resolve_until_200(e, dc, operators)

        assert quotas(dc) == operators, "the operator's value restored, not A's original"
        assert originals_copy(dc) == []
        assert e.metric("kafka_volume_quota_enforcer_originals_recovered_total") == 0.0
        assert "journal lost" not in e.process.log_text()


def test_a_throttle_answered_from_views_older_than_it_keeps_its_originals_and_finds_no_drift(
    seeded, tmp_path
):
    """Episode B throttles from an operator's value set after episode A's restore. Then the
    brokers asked lag again: first their views still show A (its copy, its throttled values),
    later they are from between A's restore and the operator's change (no copy, the old value).
    Neither is a lost journal (B is kept, nothing recovered) nor an operator's change made while
    B throttles (no drift): B restores exactly the operator's value."""
    dc, before = seeded
    with _started(Enforcer(tmp_path, dc, WEBHOOKS_ONLY)) as e:
        throttled, restored, operators = _throttle_then_restore(e, dc, before)
        _wait_past(restored + GAP_S)
        _operator_changes_user_00001(dc)
        assert e.post(firing(0.5))[0] == 200  # episode B, the brokers caught up
        b_throttle = quotas(dc)
        assert b_throttle[key(user="user-00001")] == {P: 100_000.0, C: 25_000.0}
        (b_marker,) = _markers(dc)

        _views_go_back_to(dc, [throttled + behind for behind in SOON_BEHIND_S])
        for broker in range(3):
            assert _markers(dc, broker) not in (set(), {b_marker}), broker
        e.post(firing(0.5))  # Alertmanager's repeat, answered from views showing A
        assert quotas(dc) == b_throttle, "episode A's originals never came back"
        assert e.status()["drift"] == 0

        _views_go_back_to(dc, [restored + behind for behind in SOON_BEHIND_S])
        for broker in range(3):
            assert _view(dc, broker, "user-00001") == {P: 100_001.0, C: 50_001.0}, broker
            assert _markers(dc, broker) == set(), broker
        e.post(firing(0.5))  # answered from views older than B
        assert e.status()["drift"] == 0, "a view from before B shows no change made during B"
        assert _markers(dc) == {b_marker}, "still episode B"

        _caught_up(dc)
        _resolve_until_200(e, dc, operators)
        assert quotas(dc) == operators, "the operator's value restored, not A's original"
        assert originals_copy(dc) == []
        assert e.metric("kafka_volume_quota_enforcer_originals_recovered_total") == 0.0
        assert e.metric("kafka_volume_quota_enforcer_drift_changes_total") == 0.0
        assert "journal lost" not in e.process.log_text()


def test_a_restart_right_after_a_restore_does_not_take_the_old_episode_back_from_lagging_views(
    seeded, tmp_path
):
    """The enforcer restarts while every broker's view still shows the episode it restored just
    before (copy and throttled values). Reading Kafka's copy at start must not take that episode
    for one whose journal was lost: nothing is held or throttled again, the operator's change
    made after the restore stays."""
    dc, before = seeded
    e = Enforcer(tmp_path, dc, {**WEBHOOKS_ONLY, "kvq.enforcer.reconcile.interval": "PT0.5S"})
    with _started(e):
        assert e.post(firing(0.5))[0] == 200
        throttled = time.monotonic()
        _wait_past(throttled + 3 * GAP_S)  # the restarted enforcer's reads reach back to here
        _resolve_until_200(e, dc, before)
        _operator_changes_user_00001(dc)
        operators = {**before, key(user="user-00001"): {P: OPERATOR_P, C: 50_001.0}}
        e.stop()
        _views_go_back_to(dc, [throttled + behind for behind in SOON_BEHIND_S])
        for broker in range(3):
            assert _markers(dc, broker), f"broker {broker} still shows the restored episode"
        e.start()
        assert quotas(dc) == operators, "nothing throttled again from the old episode"
        assert not e.status()["held_from_kafka"]
        _caught_up(dc)
        wait_until(lambda: e.health()["status"] == "ok", what="/healthz ok once caught up")
        assert quotas(dc) == operators
        assert originals_copy(dc) == []
        assert e.status()["target_factor"] == 1.0 and not e.status()["held_from_kafka"]
        assert e.metric("kafka_volume_quota_enforcer_originals_recovered_total") == 0.0
        assert "journal lost" not in e.process.log_text()


def test_a_lagging_broker_showing_the_originals_while_throttled_is_no_reconciler(seeded, tmp_path):
    """Right after a throttle the brokers asked next still show the originals (their views are
    from before it, each lagging by a different amount). The enforcer writes the throttle again,
    but does not count (or alert on) the originals as a reconciler's undoing; a real reconciler
    putting an original back afterwards still is counted."""
    dc, before = seeded
    seeded_by = time.monotonic()
    with _started(Enforcer(tmp_path, dc, WEBHOOKS_ONLY)) as e:
        _wait_past(seeded_by + GAP_S)
        fired = time.monotonic()
        assert e.post(firing(0.5))[0] == 200
        _views_go_back_to(dc, [fired - GAP_S + behind for behind in BEHIND_S])
        for broker in range(3):
            assert _view(dc, broker, "user-00001") == before[key(user="user-00001")], broker

        wait_until(
            lambda: e.post(firing(0.5))[0] == 200,  # Alertmanager's repeats
            timeout=30,
            interval=0.2,
            what="the repeated alert answered 200 once the views caught up",
        )
        assert e.metric("kafka_volume_quota_enforcer_reverted_pairs_total") == 0.0, (
            "a lagging view is no reconciler"
        )
        assert e.metric("kafka_volume_quota_enforcer_drift_changes_total") == 0.0
        assert quotas(dc)[key(user="user-00001")] == {P: 50_000.0, C: 25_000.0}

        control = ControlClient(dc.control_url)
        for broker in range(3):
            control.set_faults(broker, quota_metadata_lag_ms=0)
        dc.quotas.alter([Alteration((("user", "user-00001"),), (Op(P, 100_001.0),))])
        assert e.post(firing(0.5))[0] == 200
        assert e.metric("kafka_volume_quota_enforcer_reverted_pairs_total") == 1.0
        assert quotas(dc)[key(user="user-00001")] == {P: 50_000.0, C: 25_000.0}
        _resolve_until_200(e, dc, before)
        assert quotas(dc) == before


@pytest.mark.parametrize("lag_ms", [1200, 1500, 3000])
def test_a_restore_against_brokers_with_a_lagging_view_is_done_only_once_seen(
    seeded, tmp_path, lag_ms
):
    """Brokers answer DescribeClientQuotas from metadata that lags the controller's (as Kafka's
    do while its records propagate): right after a throttle they still show the originals. A
    resolve then must write the originals anyway, and answer 200 only once they are seen."""
    dc, before = seeded
    with _started(Enforcer(tmp_path, dc, WEBHOOKS_ONLY)) as e:
        for broker in range(3):
            dc.set_faults(broker, quota_metadata_lag_ms=lag_ms)
        _wait_until_brokers_show(dc, "user-00001", before[key(user="user-00001")])
        e.post(firing(0.5))  # 503 when the brokers show the throttle after the verification
        assert quotas(dc)[key(user="user-00001")] == {P: 50_000.0, C: 25_000.0}, "throttled"
        _resolve_until_200(e, dc, before)
        assert originals_copy(dc) == [], "the copy goes once the originals were seen"
        assert e.status()["episode"]["state"] == "restored"
        assert e.health()["status"] == "ok"


def test_an_alter_in_doubt_when_the_enforcer_is_killed_is_waited_out_after_the_restart(
    devcluster, tmp_path
):
    """The throttle's AlterClientQuotas times out (1.5 s) and lands 15 s late; the enforcer is
    killed (-9) meanwhile and restarted. Its restore must stay "settling" until that request can
    no longer land, then be verified again and repeated. (The restart and the resolve must come
    within the settle time of the request: with 8 s and 10 s a busy machine restarted too late.)"""
    dc = devcluster(brokers=1, log_dirs_per_broker=1)  # every request meets the fault
    before = _seed_users(dc, 50)
    late_s = 15.0
    settings = {
        "kvq.enforcer.alter.settle": "PT20S",  # > late_s: the broker's forwarding time
        "kvq.enforcer.reconcile.interval": "PT0.5S",
    }
    e = Enforcer(tmp_path, dc, settings)
    with _started(e):
        dc.set_faults(
            0,
            alter_client_quotas={
                "delay_ms": int(late_s * 1000),
                "validate_only": False,
                "count": 1,
            },
        )
        sent = time.monotonic()
        status, body = e.post(firing(0.5))
        assert status == 503 and "timed out" in body["error"], body
        e.process.signal(signal.SIGKILL)
        e.process.proc.wait(10)
        e.start()
        status, body = e.post(resolved())
        assert status == 200 and body["clusters"][CLUSTER]["settling"], (
            f"the request sent before the kill may still land: {body}"
        )
        assert time.monotonic() - sent < late_s, "the resolve came before the late alter"
        assert e.status()["episode"]["state"] == "active", "not restored while in doubt"
        wait_until(
            lambda: e.status()["episode"]["state"] == "restored",
            timeout=60,
            what="the restore verified again and repeated once the request could not land",
        )
        assert time.monotonic() - sent > late_s, "the late alter has landed by now"
        assert quotas(dc) == before
        assert originals_copy(dc) == []
        assert not e.status()["settling"]


def _fill(disk: Path) -> Path:
    """Write a file until the disk has no space left."""
    filler = disk / "filler"
    with contextlib.suppress(OSError), open(filler, "wb") as out:
        for chunk in (65536, 4096, 512):
            with contextlib.suppress(OSError):
                while True:
                    out.write(b"x" * chunk)
                    out.flush()
    return filler


def test_a_full_journal_disk_is_recovered_from_once_space_returns(
    devcluster, tmp_path, mount_tmpfs
):
    """Throttled (2,200 users), then the journal's disk fills up: the resolve fails. Once space
    is freed the next resolve must restore every original."""
    dc = devcluster(brokers=1, log_dirs_per_broker=1)
    before = _seed_users(dc, 2200)
    # No broker here is meant to stall: the harness's short request timeout (for the fault tests)
    # would turn a slow answer on a loaded machine into an error that is not the full disk.
    e = Enforcer(
        tmp_path,
        dc,
        {
            "kvq.enforcer.reconcile.interval": "PT0.5S",
            "client.quota.callback.static.kafka.admin.request.timeout.ms": "10000",
        },
    )
    disk = tmp_path / "journal-disk"
    mount_tmpfs(disk, "1m")
    e.journal = disk / "journal.sqlite3"
    with _started(e):
        status, body = e.post(firing(0.5))
        assert status == 200, body
        filler = _fill(disk)
        status, body = e.post(resolved())
        assert status >= 500 and "database or disk is full" in body["error"], body
        filler.unlink()
        wait_until(
            lambda: e.post(resolved())[0] == 200,
            timeout=30,
            interval=0.5,
            what="a resolve answered 200 once the disk has space again",
        )
        assert quotas(dc) == before
        assert originals_copy(dc) == []
        assert e.status()["episode"]["state"] == "restored"
        wait_until(lambda: e.health()["status"] == "ok", what="/healthz ok")

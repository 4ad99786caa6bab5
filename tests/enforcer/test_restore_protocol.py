"""A restore is finished only when Kafka is known to hold the originals: through a crash while an
AlterClientQuotas is in doubt, brokers answering from a lagging metadata view, and a journal disk
that was full. The real CLI against devcluster over TCP, faults set through its control API."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from devcluster.quota_store import Alteration, Op
from devkit.processes import wait_until
from enforcer.quota_client import KafkaQuotaClient
from kvq.kafka.quota_entity import QuotaEntity
from tests.enforcer.test_integration import (
    CLUSTER,
    Enforcer,
    firing,
    key,
    originals_copy,
    quotas,
    resolved,
)

pytestmark = pytest.mark.integration

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


@pytest.mark.parametrize("lag_ms", [1200, 1500, 3000])
def test_a_restore_against_brokers_with_a_lagging_view_is_done_only_once_seen(
    devcluster, tmp_path, lag_ms
):
    """Brokers answer DescribeClientQuotas from metadata that lags the controller's (as Kafka's
    do while its records propagate): right after a throttle they still show the originals. A
    resolve then must write the originals anyway, and answer 200 only once they are seen."""
    dc = devcluster(brokers=3, log_dirs_per_broker=1)
    before = _seed_users(dc, 30)
    settings = {
        "kvq.enforcer.quota.keys": f"{P},{C}",
        "kvq.enforcer.reconcile.interval": "PT1H",  # only the webhooks act, as in the report
    }
    with _started(Enforcer(tmp_path, dc, settings)) as e:
        for broker in range(3):
            dc.set_faults(broker, quota_metadata_lag_ms=lag_ms)
        _wait_until_brokers_show(dc, "user-00001", before[key(user="user-00001")])
        e.post(firing(0.5))  # 503 when the brokers show the throttle after the verification
        assert quotas(dc)[key(user="user-00001")] == {P: 50_000.0, C: 25_000.0}, "throttled"
        answers: list[tuple[int, bool]] = []

        def resolve() -> bool:
            status, _body = e.post(resolved())
            answers.append((status, quotas(dc) == before))  # the controller's view
            return status == 200

        wait_until(resolve, timeout=30, interval=0.2, what="a resolve answered 200")
        assert all(restored for status, restored in answers if status == 200), (
            f"a 200 while Kafka still held throttled values: {answers}"
        )
        assert originals_copy(dc) == [], "the copy goes once the originals were seen"
        assert e.status()["episode"]["state"] == "restored"
        assert e.health()["status"] == "ok"


def test_an_alter_in_doubt_when_the_enforcer_is_killed_is_waited_out_after_the_restart(
    devcluster, tmp_path
):
    """The throttle's AlterClientQuotas times out (1.5 s) and lands 8 s late; the enforcer is
    killed (-9) meanwhile and restarted. Its restore must stay "settling" until that request can
    no longer land, then be verified again and repeated."""
    dc = devcluster(brokers=1, log_dirs_per_broker=1)  # every request meets the fault
    before = _seed_users(dc, 50)
    late_s = 8.0
    settings = {
        "kvq.enforcer.alter.settle": "PT10S",  # > late_s: the broker's forwarding time
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
            timeout=40,
            what="the restore verified again and repeated once the request could not land",
        )
        assert time.monotonic() - sent > late_s, "the late alter has landed by now"
        assert quotas(dc) == before
        assert originals_copy(dc) == []
        assert not e.status()["settling"]


@contextlib.contextmanager
def _tmpfs(path: Path, size: str) -> Iterator[Path]:
    path.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
        capture_output=True,
        text=True,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs: {mounted.stderr.strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=True)


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


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root")
def test_a_full_journal_disk_is_recovered_from_once_space_returns(devcluster, tmp_path):
    """Throttled (2,200 users), then the journal's disk fills up: the resolve fails. Once space
    is freed the next resolve must restore every original."""
    dc = devcluster(brokers=1, log_dirs_per_broker=1)
    before = _seed_users(dc, 2200)
    e = Enforcer(tmp_path, dc, {"kvq.enforcer.reconcile.interval": "PT0.5S"})
    with _tmpfs(tmp_path / "journal-disk", "1m") as disk:
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

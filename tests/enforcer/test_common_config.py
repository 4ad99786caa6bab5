"""The enforcer with the configuration most Strimzi users have (issue 24, item 1), end to end:
the real `kvq-enforcer` process and HTTP server against a 1-broker devcluster over TCP.

`client.quota.callback.static.produce` is a whole number (a Java long), so it reaches the plan
as a Python int; on Python 3.11 an int has no `is_integer()`, which once turned every firing
alert into an HTTP 500 (and every reconcile round into the same error).
"""

from __future__ import annotations

import pytest

from devkit.alertmanager import throttle_webhook
from enforcer.quota_plan import UNLIMITED
from tests.enforcer.test_integration import TOKEN, Enforcer, key, quotas, seed

pytestmark = pytest.mark.integration

P = "producer_byte_rate"
CLUSTER = "bars"
COMMON = {
    "kvq.cluster.name": CLUSTER,
    "client.quota.callback.static.produce": "2000",
    "client.quota.callback.static.excluded.principal.name.list": "User:ops",
    "client.quota.callback.static.storage.per.volume.limit.min.available.ratio": "0.05",
    "kvq.enforcer.throttle.byte.rate.floor": None,  # the default, 8192
}


@pytest.fixture
def enforcer(tmp_path, dc):
    e = Enforcer(tmp_path, dc, COMMON)
    try:
        yield e.start()
    finally:
        e.stop()


def test_factor_zero_with_a_whole_number_base_and_an_excluded_user(dc, enforcer):
    """Exactly the issue's reproduction: 200, the default user set to its base (already below
    the floor), the excluded user unlimited, alice and bob kept (below the floor), restored."""
    seed(dc, {"user": "alice"}, producer_byte_rate=1000.0)
    seed(dc, {"user": "bob", "client-id": "app1"}, producer_byte_rate=500.0)
    before = quotas(dc)
    assert enforcer.config.read_text().count("floor") == 0, "the default floor, 8192"

    status, body = enforcer.post(throttle_webhook(cluster=CLUSTER, factor=0.0), token=TOKEN)

    assert status == 200, body
    assert sorted(body["clusters"][CLUSTER]["changes"]) == [
        "user=<default> producer_byte_rate = 2000",
        f"user=ops producer_byte_rate = {int(UNLIMITED)}",
    ]
    assert quotas(dc) == {
        **before,
        key(user=None): {P: 2000.0},
        key(user="ops"): {P: UNLIMITED},
    }
    assert enforcer.health()["status"] == "ok"
    assert "Traceback" not in enforcer.process.log_text()

    status, body = enforcer.post(throttle_webhook(cluster=CLUSTER, factor=None), token=TOKEN)
    assert status == 200, body
    assert quotas(dc) == before

"""`make demo SCENARIO=slowdown KAFKA=apache --principals N`: the same load from N producers."""

from __future__ import annotations

import pytest

from demo.slowdown import MANY_PRINCIPALS_RATE, SETUP, many_principals, parse
from demo.versus import quota_members
from kvq.kafka.quota_entity import QuotaEntity


def test_forty_principals_offer_the_same_load_from_distinct_clients_and_quota_entities():
    setup = many_principals(40)
    assert setup.producers == 40
    # what the six get through their own quotas, not what they offer: none of the forty's binds
    assert setup.rate == pytest.approx(MANY_PRINCIPALS_RATE) and setup.rate < SETUP.rate
    assert setup.producer_rate * 2 < min(setup.quotas.values()), "two per user, unbound"
    clients = [(user, client_id) for user, client_id, _ in setup.librdkafka + setup.java]
    assert len(set(clients)) == 40, "each producer a client of its own"
    assert all(user in setup.users for user, _ in clients)
    run = type("Run", (), {"setup": setup, "producers": [producer(*c) for c in clients]})
    members = quota_members(run)  # type: ignore[arg-type]
    default = members[QuotaEntity.default_user()]
    own = [e for e in members if e is not None and e.types == ("user",) and e.name("user")]
    assert len(default) > 20 and len(own) > 6, "most under the default user, several their own"


def producer(user: str, client_id: str):
    return type("Producer", (), {"user": user, "client_id": client_id})()


def test_too_few_principals_is_refused_with_what_is_allowed(capsys):
    with pytest.raises(SystemExit):
        parse(["--principals", "3"])
    assert "--principals: 3 is not a number of producers from 7 to 200" in capsys.readouterr().err

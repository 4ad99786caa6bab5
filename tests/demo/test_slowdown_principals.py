"""`make demo SCENARIO=slowdown KAFKA=apache --principals N`: the same load from N producers."""

from __future__ import annotations

import pytest

from demo import producers
from demo.slowdown import MANY_PRINCIPALS_RATE, SETUP, many_principals, parse, setup_of
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


def test_the_producers_buffer_reaches_both_clients(monkeypatch, tmp_path):
    """`--producer-buffer 6`: librdkafka's queue.buffering.max.kbytes=6, and Java's
    buffer.memory no smaller than its 16 KiB batch; `--librdkafka K=V` reaches every
    librdkafka producer."""
    argv = ["--principals", "40", "--producer-buffer", "6", "--librdkafka", "linger.ms=50"]
    setup = setup_of(parse([*argv, "--librdkafka", "enable.idempotence=true"]))
    assert setup.producers == 40 and setup.producer_buffer == 6
    made: list[tuple[str, object]] = []

    class Client:
        def __init__(self, *args, **kwargs) -> None:
            made.append((type(self).__name__, (args, kwargs)))

        def run_steady(self, *args) -> None:
            pass

    class LoadProducer(Client):
        pass

    class JavaPerfProducer(Client):
        pass

    monkeypatch.setattr(producers, "LoadProducer", LoadProducer)
    monkeypatch.setattr(producers, "JavaPerfProducer", JavaPerfProducer)
    stack = type("Stack", (), {"sasl_bootstrap": "x:1", "kafka": object(), "work_dir": tmp_path})
    producers.start_load(stack, [], setup)  # type: ignore[arg-type]
    librdkafka = [kwargs for name, (_, kwargs) in made if name == "LoadProducer"]
    java = [args for name, (args, _) in made if name == "JavaPerfProducer"]
    assert len(librdkafka) == 38 and len(java) == 2
    assert {kwargs["queue.buffering.max.kbytes"] for kwargs in librdkafka} == {6}
    assert all(kwargs["enable.idempotence"] == "true" for kwargs in librdkafka)
    assert all(kwargs["linger.ms"] == "50" for kwargs in librdkafka)
    assert {args[-1]["buffer.memory"] for args in java} == {"16384"}
    assert SETUP.producer_buffer == 64, "the scenario's own: under 1 s of its 75 kB/s"


def test_no_buffer_is_refused_with_what_is_allowed(capsys):
    with pytest.raises(SystemExit):
        parse(["--producer-buffer", "0"])
    assert "--producer-buffer: 0 kB; give 1 or more" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("given", "said"),
    [
        ("enable.idempotance=true", 'No such configuration property: "enable.idempotance"'),
        ("linger.ms=soon", 'Invalid value for configuration property "queue.buffering.max.ms"'),
        ("linger.ms", "give KEY=VALUE, a librdkafka property"),
    ],
)
def test_a_property_librdkafka_refuses_is_refused_in_its_words(capsys, given, said):
    with pytest.raises(SystemExit):
        parse(["--librdkafka", given])
    assert f"--librdkafka: {given!r}: {said}" in capsys.readouterr().err

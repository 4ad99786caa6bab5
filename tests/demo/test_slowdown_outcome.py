"""How `make demo SCENARIO=slowdown` judges recovery: per producer, and per quota entity (the
producers sharing one quota together), from the producers' delivery logs."""

from __future__ import annotations

from types import SimpleNamespace

from demo.producers import Sample
from demo.slowdown import SETUP, Outcome
from devkit.producer_load import DeliveryLog, LoadProducer, Transport

FREED = 100.0


def producer(user: str, client_id: str, rate_before: float, rate_after: float):
    """A producer that acknowledged 1,000-byte messages at `rate_before` B/s, at 2 kB/s while
    throttled in the 30 s before the space was freed, at `rate_after` from 5 s after that."""
    log = DeliveryLog()
    at = 0.0
    while at < FREED + 30:
        rate = rate_before if at < FREED - 30 else 2000 if at < FREED + 5 else rate_after
        log.acked.append((at, 1000))
        at += 1000 / rate
    return SimpleNamespace(user=user, client_id=client_id, kind="librdkafka", log=log)


def outcome(*producers) -> Outcome:
    run = SimpleNamespace(producers=list(producers), setup=SETUP)
    before = {p.client_id: p.log.rate(FREED - 50, FREED - 30) for p in producers}
    return Outcome("graceful-slowdown", run, freed=FREED, before=before)  # type: ignore[arg-type]


def test_producers_sharing_a_quota_are_back_when_their_quota_entity_is():
    """alice's two producers share her user quota: after the restore they split it otherwise
    (web 30 -> 12 kB/s, batch 10 -> 28 kB/s); web alone is not back, alice is."""
    run = outcome(
        producer("alice", "web", 30_000, 12_000),
        producer("alice", "batch", 10_000, 28_000),
        producer("bob", "app", 20_000, 20_000),
    )
    web, batch, app = run.run.producers
    assert run.back_at_rate([web]) is None
    assert 5.0 < run.back_at_rate([batch]) < 8.0  # 80 % over the last 3 s
    assert 5.0 < run.entities_back_at_rate() < 8.0


def test_one_quota_entity_not_back_is_not_back():
    run = outcome(producer("alice", "web", 30_000, 30_000), producer("bob", "app", 20_000, 5_000))
    assert run.entities_back_at_rate() is None


def test_bytes_acknowledged_past_the_limit_are_told_apart():
    """The 0/1 policy rides past the limit: of the episode's bytes, those acknowledged while
    broker 0 was at or past it (from the watch sample that saw it there to the next) are
    counted apart, from the first slowdown on."""
    limit = SETUP.limit
    usable = [limit + 2_000_000] * 40 + [limit - 500_000] * 20 + [limit + 1_000] * 70
    samples = [Sample(float(i), {(0, 0): u}, storage_errors=0) for i, u in enumerate(usable)]
    run = SimpleNamespace(
        producers=[producer("carol", "etl", 10_000, 10_000)],
        setup=SETUP,
        limit=limit,
        watch=SimpleNamespace(samples=samples),
    )
    episode = Outcome("stop-on-violation", run, slowed=30.0, freed=FREED)  # type: ignore[arg-type]
    # 40-60 s past the limit, at 10 kB/s
    assert episode.acked_past_limit() == 20 * 10_000
    assert episode.episode_bytes > episode.acked_past_limit()


def test_a_librdkafka_producers_connections_are_told_in_the_episode_and_after_the_restore():
    """A producer slow to come back because it waited on its connection (requests piled up
    behind a throttle, one timed out, it reconnected) says so beside its row."""
    waited = LoadProducer("127.0.0.1:1", client_id="web", user="alice", password="x")
    calm = LoadProducer("127.0.0.1:1", client_id="app", user="bob", password="x")
    try:
        waited.log.transport += [
            (20.0, Transport(connects=1)),
            (50.0, Transport(1, disconnects=1, request_timeouts=2, retries=5, awaiting=40)),
            (95.0, Transport(connects=2, disconnects=1, request_timeouts=2, retries=5)),
        ]
        calm.log.transport += [(20.0, Transport(connects=1)), (50.0, Transport(1, awaiting=2))]
        run = SimpleNamespace(producers=[waited, calm], setup=SETUP)
        episode = Outcome("graceful-slowdown", run, slowed=30.0, freed=FREED)  # type: ignore[arg-type]
        episode.restored = 90.0
        assert episode.transport_note(waited, back=3.0) == (
            "; connections in the episode: up to 40 requests awaiting an answer, 1 disconnects, "
            "2 requests timed out, 5 retries; after the restore: up to 0 requests awaiting an "
            "answer, 1 reconnects"
        )
        assert episode.transport_note(calm, back=3.0) == (
            "; connections in the episode: up to 2 requests awaiting an answer"
        )
        assert episode.connections_summary() == (
            "up to 40 requests awaiting an answer at once; 1 of 2 had requests time out (2 in all)"
        )
    finally:
        waited.close()
        calm.close()


def test_a_load_slowed_again_after_the_space_was_freed_shows_in_its_rate_after():
    """Back at its rate 5 s after the space was freed and kept there: about its rate before;
    held at a quarter of it instead: a quarter."""
    kept = outcome(producer("alice", "web", 30_000, 30_000), producer("bob", "app", 20_000, 20_000))
    assert 0.95 < kept.kept_after_freed() < 1.05
    slowed = outcome(producer("alice", "web", 30_000, 7_500), producer("bob", "app", 20_000, 5_000))
    assert 0.2 < slowed.kept_after_freed() < 0.3
    lost = Outcome("graceful-slowdown", kept.run, freed=None, before=kept.before)
    assert lost.kept_after_freed() is None


def acking(user: str, client_id: str, *spans: tuple[float, float, float], kind="librdkafka"):
    """A producer acknowledging 1,000-byte messages at each span's rate (B/s) from its start to
    its end (s), nothing between spans."""
    log = DeliveryLog()
    for start, end, rate in spans:
        at = start
        while at < end:
            log.acked.append((at, 1000))
            at += 1000 / rate
    return SimpleNamespace(user=user, client_id=client_id, kind=kind, log=log)


def riding(*producers, throttled_again: float | None, restored: float | None) -> Outcome:
    """The 0/1 policy's episode: its producers' rate before from 50 to 30 s before the space
    was freed, its quotas restored and throttled again as given."""
    episode = outcome(*producers)
    episode.throttled_again, episode.restored = throttled_again, restored
    return episode


def test_writes_before_a_throttle_after_the_space_was_freed_are_no_recovery():
    """Unthrottled as the space was freed, the 0/1 policy throttles once more 1 s later and
    restores at 2 s; its producers, muted for a minute by that factor 0, acknowledge nothing
    for the rest of the watch: not back, though the 3 s before the space was freed were at
    their rate."""
    muted = acking("carol", "etl", (0.0, FREED + 1.0, 20_000), (FREED + 60.0, FREED + 90.0, 20_000))
    assert outcome(muted).back_at_rate([muted]) == 0.0  # as if nothing came after
    run = riding(muted, throttled_again=FREED + 1.0, restored=FREED + 2.0)
    assert run.back_at_rate([muted]) is None
    assert run.entities_back_at_rate() is None
    assert "librdkafka" not in run.kinds_back_at_rate()


def test_after_a_throttle_once_the_space_was_freed_only_what_follows_it_counts():
    """The same, its producer at its rate again from 5 s after the space was freed: back once
    it acknowledged 80 % of 3 s of its rate since, about 2.4 s later."""
    back = acking("carol", "etl", (0.0, FREED + 1.0, 20_000), (FREED + 5.0, FREED + 40.0, 20_000))
    run = riding(back, throttled_again=FREED + 1.0, restored=FREED + 2.0)
    assert 7.2 <= run.back_at_rate([back]) <= 7.8


def test_quotas_throttled_at_the_end_of_the_watch_are_no_recovery():
    steady = acking("carol", "etl", (0.0, FREED + 40.0, 20_000))
    assert riding(steady, throttled_again=FREED + 1.0, restored=None).back_at_rate([steady]) is None


def test_a_kind_is_back_when_each_of_its_producers_is_at_once():
    """Each producer of a kind on its own (alice's two do not make up for each other): the
    librdkafka pair is back when the later one is; the Java producer by itself."""
    early = acking("alice", "web", (0.0, FREED - 30.0, 10_000), (FREED, FREED + 40.0, 10_000))
    late = acking(
        "alice", "batch", (0.0, FREED - 30.0, 10_000), (FREED + 6.0, FREED + 40.0, 10_000)
    )
    java = acking("dave", "java-web", (0.0, FREED + 40.0, 10_000), kind="Java")
    run = outcome(early, late, java)
    back = run.kinds_back_at_rate()
    assert 2.2 <= back["librdkafka"] - 6.0 <= 2.6
    assert back["Java"] == 0.0

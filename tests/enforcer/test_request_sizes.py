"""Request sizes (enforcer/request_sizes.py) and the raises they buy (quota_plan.request_raises):
an entity Kafka answers with long throttle times is raised towards the quota at which its own
requests get no longer ones, within a share of what the throttle allows. Kafka's throttle times
come from devcluster's model of its produce quota (held to Kafka's by the differential tests);
Prometheus' HTTP API is mocked with `responses` (the real one, with Kafka's own sensors, in
test_observed_rates_kafka.py); the journal is real SQLite."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from urllib.parse import parse_qs, urlparse

import pytest
import responses

from devkit.memory_quotas import InMemoryQuotas
from enforcer.applier import Applier
from enforcer.journal import REQUEST_SIZE_KEPT, Journal
from enforcer.observed_rates import DEFAULT_QUERY, ObservedRates
from enforcer.prometheus_check import PrometheusFactor
from enforcer.quota_plan import QuotaPolicy, Requests, plan, request_minimum, request_raises
from enforcer.request_sizes import (
    ASK_SECONDS,
    CLIENT_TIMEOUT_SECONDS,
    DEFAULT_THROTTLE_QUERY,
    HELD_SECONDS,
    RequestSizes,
    drop_share,
    emptied_window,
    harmonic_mean,
    request_size,
    window_excess,
)
from kvq.kafka.quota_entity import QuotaEntity
from tests.clock_support import SettableClock
from tests.enforcer.applier_support import apply_step, observed_rate_applier
from tests.enforcer.produce_model import throttles_at
from tests.enforcer.prometheus_api import vector_answer

URL = "http://prometheus.test:9090"
P = "producer_byte_rate"
JAVA = QuotaEntity.of({"user": "dave", "client-id": "java-web"})
SMALL = QuotaEntity.of({"user": "alice", "client-id": "web"})
WINDOW_S = 11.0
"""Kafka's default quota window (11 samples of 1 s), the model's too."""
POLICY = QuotaPolicy(
    (P,),
    {P: None},
    byte_rate_floor=8192,
    longest_throttle_seconds=60.0,
    request_bytes=32768,
    request_throttle_seconds=8.0,
    request_share=0.1,
)
WHOLE = replace(POLICY, request_share=1.0)
"""Raises up to the whole of what the throttle allows: an entity alone gets all of its own."""


def average_throttle_s(throttles: list[tuple[float, int]], start: float, end: float) -> float:
    """Kafka's `throttle-time`: the average over the throttled requests (in seconds)."""
    times = [ms for when, ms in throttles if start <= when < end and ms > 0]
    return sum(times) / len(times) / 1000.0


@pytest.mark.parametrize(
    ("held", "before", "seconds"),
    [
        ([(0, 2000.0)], None, 0.0),
        ([(0, 1000.0), (5, 2000.0), (10, 4000.0)], None, 0.0),  # raised: nothing of its own
        ([(0, 4000.0)], 8000.0, 11.0),  # the first drop: a whole window at the rate seen
        ([(0, 7300.0), (5, 3650.0), (10, 2000.0)], None, 2.65 * 5 + 0.825 * 5),
        ([(0, 4000.0), (20, 3000.0)], None, 11 / 3),  # 4,000 held a whole window before
        ([(0, 4000.0), (5, 1000.0), (10, 8000.0), (15, 4000.0)], None, 15.0),  # the worst
        ([(0, 4000.0), (20, 3000.0), (40, 2000.0)], None, 5.5),
    ],
)
def test_a_drop_adds_the_windows_bytes_at_the_quotas_before_it(held, before, seconds):
    """(earlier / new - 1) x the seconds each earlier quota holds of the window before the
    new one took effect, the largest over the drops (Kafka's 11 s window)."""
    assert window_excess(held, WINDOW_S, before) == pytest.approx(seconds)


def test_a_quota_falling_step_by_step_adds_only_what_its_window_holds():
    """A fifth every 5 s: each window holds 5 s of the quota before, 5 s of the one before
    that and a second of the third, not 11 s of the highest."""
    held = [(5.0 * step, 10_000 * 0.8**step) for step in range(6)]
    assert window_excess(held, WINDOW_S) == pytest.approx(0.25 * 5 + 0.5625 * 5 + 0.953125)


def test_the_quota_requests_met_is_the_time_weighted_harmonic_mean():
    """Throttle times S / q averaged over requests spread in time: S x the mean of 1 / q."""
    held = [(0.0, 4000.0), (30.0, 1000.0), (60.0, 2000.0)]
    assert harmonic_mean(held, 30.0, 90.0) == pytest.approx(60 / (30 / 1000 + 30 / 2000))
    assert harmonic_mean(held, 10.0, 40.0) == pytest.approx(30 / (20 / 4000 + 10 / 1000))
    assert harmonic_mean(held, 100.0, 120.0) == 2000.0, "the last one holds from its time"


@pytest.mark.parametrize(
    ("quota", "request_bytes", "offered"),
    [(1500.0, 16384, 7300.0), (1500.0, 24_000, 7300.0), (3000.0, 16384, 30_000.0)],
)
def test_a_held_entitys_request_size_is_what_its_throttle_times_say(quota, request_bytes, offered):
    """A producer held at its quota sends its buffer when its throttle ends: its average
    throttle time x the quota is the size of its requests."""
    throttles = throttles_at(quota, request_bytes, offered, seconds=120.0)
    average = average_throttle_s(throttles, 60.0, 120.0)
    size = request_size(average, [(0.0, quota)], 120.0, WINDOW_S)
    assert 0.85 * request_bytes <= size <= 1.1 * request_bytes


@pytest.mark.parametrize(
    ("quota", "request_bytes", "offered"),
    [(1500.0, 16384, 7300.0), (2500.0, 24_000, 7300.0), (3000.0, 16384, 30_000.0)],
)
def test_on_a_3_s_window_a_held_entitys_requests_meet_it_empty(quota, request_bytes, offered):
    """quota.window.num=3: a producer whose throttle times outlast the window sends each
    request into an empty one, and Kafka answers it with S / q less the window's 2 s (less a
    sample): added back, the estimate is its requests' size; without, two thirds of it."""
    throttles = throttles_at(quota, request_bytes, offered, seconds=120.0, window_samples=3)
    average = average_throttle_s(throttles, 60.0, 120.0)
    emptied = emptied_window(3.0, 1.0, POLICY.request_throttle_seconds or 0.0)
    assert emptied == 2.0
    size = request_size(average, [(0.0, quota)], 120.0, 3.0, emptied_seconds=emptied)
    assert 0.95 * request_bytes <= size <= 1.05 * request_bytes
    assert request_size(average, [(0.0, quota)], 120.0, 3.0) <= 0.85 * request_bytes


def test_the_window_is_added_back_only_where_kafka_took_it_off():
    """Only a window shorter than the throttle times a raise is for (half the longest
    allowed) empties before the requests that matter; and only an average at least that long
    has throttle times in it that outlasted the window."""
    assert emptied_window(11.0, 1.0, 8.0) == 0.0, "Kafka's default: requests meet the ones before"
    assert emptied_window(3.0, 1.0, 8.0) == 2.0
    assert emptied_window(5.0, 1.0, 8.0) == 0.0, "4 s: the raised requests' throttle times"
    assert emptied_window(1.0, 1.0, 8.0) == 0.0, "one sample: the rate of one request, no window"
    assert emptied_window(4.0, 2.0, 8.0) == 2.0, "two samples of 2 s: the window less one"
    assert emptied_window(6.0, 3.0, 8.0) == 3.0
    held = [(0.0, 4000.0)]
    assert request_size(1.5, held, 120.0, 3.0, emptied_seconds=2.0) == 6000.0, "shorter"
    assert request_size(2.5, held, 120.0, 3.0, emptied_seconds=2.0) == 18_000.0


def falling(t: float) -> float:
    """A quota lowered by a tenth every 5 s from 7.3 kB/s, from 75 s on held at 1.5 kB/s."""
    return 7300.0 * 0.9 ** min(int(t // 5), 15)


FALLING = [(5.0 * step, falling(5.0 * step)) for step in range(16)]


@pytest.mark.parametrize(
    ("now", "least"),
    [
        (20.0, 0.7),
        (40.0, 0.7),
        (60.0, 0.7),
        (80.0, 0.7),
        (100.0, 0.55),
        (140.0, 0.55),
        (200.0, 0.55),
    ],
)
def test_a_falling_quota_does_not_pass_for_larger_requests(now, least):
    """Graceful slowdown lowers a quota step by step: each step adds a little to the throttle
    times of the requests just after it, the estimate takes that share off and stays below the
    requests' size (16 KiB), and finds most of it while the quota still falls: 0.7 of it and
    more until 80 s (0.6-0.8 with the highest quota of a window over the lowest counted as one
    drop for all of it; taken off every request too, the steps hid them: 0 B until 80 s)."""
    throttles = throttles_at(falling, 16384, 7300.0, seconds=now)
    average = average_throttle_s(throttles, max(now - 60.0, 0.0), now)
    size = request_size(average, held_at(FALLING, now), now, WINDOW_S, first_drop(now))
    assert least * 16384 <= size <= 16384


def test_a_drop_counts_for_the_share_of_the_requests_it_came_before():
    assert drop_share(1.0, WINDOW_S) == WINDOW_S / 60.0, "one request per throttle time"
    assert drop_share(30.0, WINDOW_S) == 0.5
    assert drop_share(60.0, 3.0) == drop_share(90.0, 3.0) == 1.0, "all of the average"
    assert drop_share(1.0, WINDOW_S, 20.0) == WINDOW_S / 20.0, "brokers averaging over 20 s"


def test_a_throttle_time_averaged_over_a_shorter_window_was_answered_at_that_windows_quotas():
    """metrics.sample.window.ms 10 s (2 samples): the average throttle time read now is of the
    requests of the last 20 s, answered at the quota raised 30 s ago, not at the minute's."""
    rising = [(0.0, 2000.0), (30.0, 8000.0)]  # no drop: nothing in the window to take off
    minute = 60.0 / (30.0 / 2000.0 + 30.0 / 8000.0)
    assert request_size(5.0, rising, 60.0, 3.0) == pytest.approx(5.0 * minute)
    assert request_size(5.0, rising, 60.0, 3.0, averaged_seconds=20.0) == 5.0 * 8000.0


def held_at(held: list[tuple[float, float]], now: float) -> list[tuple[float, float]]:
    """What RequestSizes holds `now` of the quotas `held`: those in force within HELD_SECONDS."""
    return [
        (when, quota)
        for i, (when, quota) in enumerate(held)
        if when <= now and (i + 1 == len(held) or held[i + 1][0] > now - HELD_SECONDS)
    ]


def first_drop(now: float, seen_writing: float = 7300.0) -> float:
    """The episode's first drop (at 0 s) while RequestSizes counts it."""
    return seen_writing / falling(0.0) if now <= HELD_SECONDS else 1.0


def test_a_quota_just_lowered_does_not_pass_for_large_requests():
    """Lowered at once from what the entity wrote to a fifth of it: the first throttle times are
    the window's bytes at the old rate, not the requests (2 kB each, well within the quota):
    the estimate counts only what the drop cannot explain, and sees the requests again once
    the drop is out of the held quotas."""
    throttles = throttles_at(lambda t: 7300.0 if t < 60 else 1500.0, 2000, 7300.0, seconds=180)
    just_lowered = average_throttle_s(throttles, 60.0, 120.0)
    assert just_lowered * 1500.0 > 2 * 2000, "read as requests, the drop looks like large ones"
    held = [(0.0, 7300.0), (60.0, 1500.0)]
    assert request_size(just_lowered, held, 120.0, WINDOW_S) <= 2000
    settled = average_throttle_s(throttles, 120.0, 180.0)
    assert request_size(settled, [(60.0, 1500.0)], 180.0, WINDOW_S) <= 1.1 * 2000


def test_the_episodes_first_drop_counts_while_the_average_may_hold_it():
    """Factor 0 at once: every entity gets the longest throttle time allowed (a minute), and
    nothing else while it waits: the average is that minute, not its requests."""
    held = [(0.0, 1000.0)]
    assert request_size(60.0, held, 30.0, WINDOW_S, first_drop=(WINDOW_S + 60) / WINDOW_S) < 1
    assert request_size(60.0, held, 30.0, WINDOW_S) == 60_000.0, "read as requests"


def writers(*entities: QuotaEntity, quota: float) -> dict:
    return {(entity, P): quota for entity in entities}


def test_a_few_entities_sending_large_requests_are_raised_to_their_request_minimum():
    """Two Java producers (16 KiB batches) among forty at 1.6 kB/s: raised to 2 x 16 KiB /
    8 s, which takes 6 % of what the forty are allowed; the others are left as they are."""
    others = [QuotaEntity.of({"user": f"p{i}", "client-id": f"c{i}"}) for i in range(38)]
    desired = writers(JAVA, SMALL, *others, quota=1600.0)
    references = {pair: 7300.0 for pair in desired}
    sizes = {(JAVA, P): 16384.0, (SMALL, P): 16384.0, (others[0], P): 3000.0}
    raised = request_raises(POLICY, desired, references, Requests(sizes), {})
    assert raised == {(JAVA, P): request_minimum(16384, 8.0), (SMALL, P): 4096.0}


def test_many_entities_sending_large_requests_share_what_the_raises_may_add():
    """Forty librdkafka producers sending what they buffered (a megabyte, more than the request
    size the enforcer is told of): each raise is cut so that together they add a tenth of what
    the forty are allowed, and the throttle still holds the volume."""
    entities = [QuotaEntity.of({"user": f"p{i}", "client-id": f"c{i}"}) for i in range(40)]
    desired = writers(*entities, quota=1600.0)
    references = {pair: 7300.0 for pair in desired}
    sizes = {pair: 1_000_000.0 for pair in desired}
    raised = request_raises(POLICY, desired, references, Requests(sizes), {})
    assert set(raised.values()) == {1760.0}
    assert sum(raised.values()) <= 1.1 * sum(desired.values())


DEFAULT = QuotaEntity.default_user()
ERIN = QuotaEntity.user("erin")


def test_a_user_the_default_users_quota_holds_is_raised_alone_by_a_quota_of_its_own():
    """The default user's quota holds twenty users at 1.6 kB/s (erin, a Java producer, among
    them), beside nine users of their own: erin gets a quota of its own at her request minimum;
    the default user's stays where it was for the nineteen others. The allowance counts the
    default user's quota once for each user Kafka throttles under it."""
    own = {(QuotaEntity.user(f"u{i}"), P): 20_000.0 for i in range(9)}
    originals = {(DEFAULT, P): 1_000_000.0, **own}
    references = {pair: 7300.0 for pair in originals}
    unraised = plan(WHOLE, originals, 0.2, (), references)
    requests = Requests({(ERIN, P): 16384.0}, {(DEFAULT, P): 19})
    raised = plan(WHOLE, originals, 0.2, (), references, requests)
    assert raised[(ERIN, P)] == request_minimum(16384, 8.0) == 4096.0
    assert raised == {**unraised, (ERIN, P): 4096.0}
    assert plan(POLICY, originals, 0.2, (), references, requests) == raised, "within a tenth"
    alone = plan(POLICY, originals, 0.2, (), references, Requests({(ERIN, P): 16384.0}))
    default = unraised[(DEFAULT, P)]
    writers = default + sum(unraised[pair] for pair in own) + default  # erin's: her own budget
    assert alone[(ERIN, P)] == int(default + 0.1 * writers) < 4096.0, "the default counted once"


def test_a_separated_user_keeps_its_quota_until_the_restore_removes_it():
    """Once journaled (no original at user=erin), erin's quota is the default user's unless
    raised, never above the default user's original, and the restore removes it; a user
    whose requests need no raise is not separated."""
    originals = {(DEFAULT, P): 1_000_000.0, (ERIN, P): None}
    references = {(DEFAULT, P): 7300.0}
    at_02 = plan(WHOLE, originals, 0.2, (), references)
    assert at_02[(ERIN, P)] == at_02[(DEFAULT, P)]
    capped = plan(
        WHOLE,
        {(DEFAULT, P): 3000.0, (ERIN, P): None},
        0.9,
        (),
        references,
        Requests({(ERIN, P): 32768.0}),
    )
    assert capped[(ERIN, P)] == 3000.0, "never above the default user's original"
    assert plan(WHOLE, originals, 1.0, (), references) == originals
    small = Requests({(QuotaEntity.user("carol"), P): 1000.0})
    assert (QuotaEntity.user("carol"), P) not in plan(WHOLE, originals, 0.2, (), references, small)


def test_an_excluded_user_or_one_with_a_quota_of_its_own_is_not_separated():
    excluded = replace(WHOLE, excluded_users=frozenset({"erin"}))
    originals = {(DEFAULT, P): 1_000_000.0}
    references = {(DEFAULT, P): 7300.0}
    requests = Requests({(ERIN, P): 16384.0})
    assert (ERIN, P) not in plan(excluded, originals, 0.2, (), references, requests)
    own = {(DEFAULT, P): 1_000_000.0, (ERIN, P): 20_000.0}
    raised = plan(WHOLE, own, 0.2, (), {(ERIN, P): 7300.0, (DEFAULT, P): 7300.0}, requests)
    assert raised[(ERIN, P)] == 4096.0, "raised on its own quota"
    assert raised[(DEFAULT, P)] == plan(WHOLE, own, 0.2, (), {(DEFAULT, P): 7300.0})[(DEFAULT, P)]


@pytest.mark.parametrize(
    ("reference", "ceiling", "share", "raised"),
    [
        (7300.0, float("inf"), 0.1, 4096.0),
        (3000.0, float("inf"), 0.1, 3000.0),  # never above what it was seen writing
        (7300.0, 2500.0, 0.1, 2500.0),  # nor its original
        (7300.0, float("inf"), 0.0, None),  # a share of 0: none
    ],
)
def test_a_raise_stays_within_the_rate_seen_the_original_and_the_share(
    reference, ceiling, share, raised
):
    others = [QuotaEntity.of({"user": f"p{i}", "client-id": f"c{i}"}) for i in range(39)]
    desired = writers(JAVA, *others, quota=1600.0)
    references = {pair: 7300.0 for pair in desired} | {(JAVA, P): reference}
    policy = replace(POLICY, request_share=share)
    requests = Requests({(JAVA, P): 16384.0})
    found = request_raises(policy, desired, references, requests, {(JAVA, P): ceiling})
    assert found.get((JAVA, P)) == raised


def test_the_plan_raises_only_while_throttled_and_only_the_entities_with_a_reference():
    originals = {(JAVA, P): None, (SMALL, P): None}
    references = {(JAVA, P): 7300.0}
    sizes = Requests({(JAVA, P): 16384.0, (SMALL, P): 16384.0})
    at_03 = plan(WHOLE, originals, 0.3, (), references, sizes)
    assert at_03[(JAVA, P)] == 4096.0
    assert at_03[(SMALL, P)] == plan(WHOLE, originals, 0.3, (), references)[(SMALL, P)]
    alone = plan(POLICY, originals, 0.3, (), references, sizes)[(JAVA, P)]
    assert alone == int(1.1 * plan(POLICY, originals, 0.3, (), references)[(JAVA, P)])
    assert plan(WHOLE, originals, 1.0, (), references, sizes) == originals


Labels = dict[str, str]
JAVA_SERIES = {"user": "dave", "clientId": "java-web"}


class PrometheusAPI:
    """The mocked /api/v1/query: each series of `rates` writing its rate before the episode
    (by default dave's java-web and alice's web at 7.3 kB/s), java-web then answered with
    `throttle_ms` on average (None: no series yet) and the series of `throttles` with theirs;
    counts the throttle asks."""

    def __init__(
        self, mock: responses.RequestsMock, rates: list[tuple[Labels, float]] | None = None
    ) -> None:
        self.rates = rates or [
            (JAVA_SERIES, 7300.0),
            ({"user": "alice", "clientId": "web"}, 7300.0),
        ]
        self.throttle_ms: float | None = None
        self.throttles: list[tuple[Labels, float]] = []
        self.throttle_asks = 0
        self.unanswered = False
        """The throttle query answered 503 (Prometheus restarting)."""
        mock.add_callback(responses.GET, f"{URL}/api/v1/query", callback=self.answer)

    def answer(self, request):
        query = parse_qs(urlparse(request.url).query)["query"][0]
        if query == DEFAULT_THROTTLE_QUERY:
            self.throttle_asks += 1
            if self.unanswered:
                return (503, {}, "Service Unavailable")
            java = [] if self.throttle_ms is None else [(JAVA_SERIES, self.throttle_ms)]
            return vector_answer(java + self.throttles)
        assert DEFAULT_QUERY in query
        return vector_answer(self.rates)


def sized_applier(kafka: InMemoryQuotas, journal: Journal, clock: SettableClock) -> Applier:
    """Cluster c1's applier with observed rates and request sizes from the mocked Prometheus,
    raising up to the whole of what the throttle allows (WHOLE)."""
    sizes = RequestSizes(PrometheusFactor(URL), monotonic=clock)
    rates = ObservedRates(PrometheusFactor(URL))
    return observed_rate_applier(kafka, journal, WHOLE, rates, request_sizes=sizes)


@pytest.fixture
def prometheus() -> Iterator[PrometheusAPI]:
    with responses.RequestsMock(assert_all_requests_are_fired=False) as mock:
        yield PrometheusAPI(mock)


@pytest.fixture
def journal(tmp_path) -> Iterator[Journal]:
    journal = Journal(tmp_path / "journal.sqlite3")
    yield journal
    journal.close()


def java_raised(
    prometheus: PrometheusAPI, journal: Journal, clock: SettableClock
) -> tuple[InMemoryQuotas, Applier, float]:
    """An episode at factor 0.2 in which java-web, answered for its 16 KiB requests, was
    raised: the store, the applier and the quota the factor gives java-web without a raise."""
    kafka = InMemoryQuotas({JAVA: {P: 1_000_000.0}, SMALL: {P: 1_000_000.0}})
    applier = sized_applier(kafka, journal, clock)
    apply_step(applier, 0.2)
    lowered = kafka.values[JAVA][P]
    clock.now += 100.0  # the drop from 7.3 kB/s is out of the held quotas
    prometheus.throttle_ms = 16384 / lowered * 1000
    apply_step(applier, 0.2)
    assert kafka.values[JAVA][P] == request_minimum(16384, 8.0) == 4096.0
    return kafka, applier, lowered


def raised_then_restored(
    prometheus: PrometheusAPI, journal: Journal, clock: SettableClock
) -> tuple[InMemoryQuotas, Applier, float]:
    """`java_raised`, then restored."""
    kafka, applier, lowered = java_raised(prometheus, journal, clock)
    apply_step(applier, 1.0)
    prometheus.throttle_ms = None  # restored: Kafka throttles nobody
    return kafka, applier, lowered


def test_an_entity_answered_with_long_throttle_times_is_raised_for_the_rest_of_the_episode(
    prometheus, journal, caplog
):
    clock = SettableClock(1000.0)
    caplog.set_level(logging.INFO, "kvq.enforcer")
    kafka, applier, lowered = java_raised(prometheus, journal, clock)
    assert lowered < 2000.0, "the factor's quota (the episode's first plan asks nothing)"
    said = [r.message for r in caplog.records if "produce requests of about" in r.message]
    assert said and "user=dave,client-id=java-web " in said[-1]
    asks = prometheus.throttle_asks
    prometheus.throttle_ms = 100.0  # at the raised quota its requests go through quickly
    apply_step(applier, 0.25)
    assert prometheus.throttle_asks == asks, f"asked again within {ASK_SECONDS} s"
    clock.now += ASK_SECONDS
    apply_step(applier, 0.25)
    assert prometheus.throttle_asks == asks + 1
    assert kafka.values[JAVA][P] == 4096.0, "the episode keeps its largest estimate"
    apply_step(applier, 1.0)
    assert kafka.values[JAVA][P] == 1_000_000.0


def test_a_new_episode_starts_from_the_last_ones_request_sizes(prometheus, journal, caplog):
    """An entity's requests are its clients' batches and buffers: the next episode raises
    java-web from its first quota, before Kafka answers it with a long throttle time."""
    clock = SettableClock(1000.0)
    kafka, applier, _ = raised_then_restored(prometheus, journal, clock)
    clock.now += 3600.0
    with caplog.at_level(logging.INFO, logger="kvq.enforcer"):
        apply_step(applier, 0.2)
    assert kafka.values[JAVA][P] == 4096.0
    said = [r.getMessage() for r in caplog.records if "starts from the request sizes" in r.message]
    assert said == [
        "cluster c1: the episode starts from the request sizes the last episode estimated: "
        "user=dave,client-id=java-web 16384 B"
    ]


def test_a_restarted_enforcer_keeps_the_episodes_request_sizes(prometheus, journal):
    """Nothing learnt is lost on a crash: the estimate is journaled with the episode."""
    clock = SettableClock(1000.0)
    kafka, _, _ = java_raised(prometheus, journal, clock)
    prometheus.throttle_ms = None  # Prometheus without the series after the restart
    apply_step(sized_applier(kafka, journal, clock), 0.2)
    assert kafka.values[JAVA][P] == 4096.0, "its first plan holds what it did before"


def test_a_smaller_estimate_of_an_entity_raised_from_the_start_does_not_replace_the_larger(
    prometheus, journal
):
    """Raised from the start, java-web is throttled less and answered with short throttle
    times (what it buffers while muted is less): that does not make its requests small, and
    the episode after raises it again."""
    clock = SettableClock(1000.0)
    kafka, applier, _ = raised_then_restored(prometheus, journal, clock)
    apply_step(applier, 0.2)
    assert kafka.values[JAVA][P] == 4096.0, "raised from the last episode's estimate"
    clock.now += 100.0
    prometheus.throttle_ms = 100.0  # requests of about 400 B at the raised quota
    apply_step(applier, 0.2)
    apply_step(applier, 1.0)
    prometheus.throttle_ms = None
    apply_step(applier, 0.2)
    assert kafka.values[JAVA][P] == 4096.0


def test_a_size_no_episode_estimated_as_large_again_for_a_month_is_forgotten(prometheus, tmp_path):
    """The entity's clients may have changed: after REQUEST_SIZE_KEPT without an episode
    estimating its requests as large again, java-web is held to the factor's quota."""
    now = [datetime(2026, 12, 1, tzinfo=UTC)]
    journal = Journal(tmp_path / "journal.sqlite3", clock=lambda: now[0])
    try:
        clock = SettableClock(1000.0)
        kafka, applier, lowered = raised_then_restored(prometheus, journal, clock)
        now[0] += REQUEST_SIZE_KEPT - timedelta(minutes=1)
        apply_step(applier, 0.2)
        assert kafka.values[JAVA][P] == 4096.0, "kept for a month"
        apply_step(applier, 1.0)
        now[0] += timedelta(minutes=2)
        apply_step(applier, 0.2)
        assert kafka.values[JAVA][P] == lowered
    finally:
        journal.close()


@pytest.mark.parametrize(
    ("window", "sample", "size"),
    [
        (3.0, 1.0, (4.55 + 2.0) * 2500.0),
        (11.0, 1.0, 4.55 * 2500.0),
        (6.0, 3.0, (4.55 + 3.0) * 2500.0),  # two samples of 3 s: the window less one
    ],
)
def test_the_estimates_take_the_brokers_window(prometheus, window, sample, size):
    """The cluster's quota window and its samples (read from its brokers) decide whether and
    how much of the window throttle times lost: java-web held at 2,500 B/s and answered with
    4.55 s on average."""
    clock = SettableClock(1000.0)
    sizes = RequestSizes(PrometheusFactor(URL), monotonic=clock)
    pair = (JAVA, P)
    sizes.held({pair: 2500.0}, {pair: 7300.0})
    clock.now += 100.0  # the first drop, from the rate seen, is out of Kafka's average
    prometheus.throttle_ms = 4550.0
    policy = replace(POLICY, quota_window_seconds=window, quota_sample_seconds=sample)
    assert sizes.requests("c1", policy, window).sizes[pair] == pytest.approx(size)


def test_no_throttle_series_raises_nothing(prometheus, journal):
    clock = SettableClock(1000.0)
    kafka = InMemoryQuotas({JAVA: {P: 1_000_000.0}, SMALL: {P: 1_000_000.0}})
    applier = sized_applier(kafka, journal, clock)
    apply_step(applier, 0.2)
    lowered = kafka.values[JAVA][P]
    clock.now += 100.0
    apply_step(applier, 0.2)
    assert kafka.values[JAVA][P] == lowered
    assert prometheus.throttle_asks == 1


def test_a_user_under_the_default_users_quota_gets_its_own_until_the_restore(journal):
    """On the applier: erin (a Java producer) and carol write under the standing default-user
    quota; Kafka answers erin with long throttle times. Erin gets a quota of its own, journaled
    with no original before it is sent (a crash restores it to none), set again when a
    reconciler removes it, the default user's stays for carol, and the restore removes
    erin's."""
    clock = SettableClock(1000.0)
    erin, carol = {"user": "erin", "clientId": ""}, {"user": "carol", "clientId": ""}
    kafka = InMemoryQuotas({DEFAULT: {P: 1_000_000.0}})
    with responses.RequestsMock(assert_all_requests_are_fired=False) as mock:
        prometheus = PrometheusAPI(mock, rates=[(erin, 7300.0), (carol, 7300.0)])
        applier = sized_applier(kafka, journal, clock)
        apply_step(applier, 0.2)
        lowered = kafka.values[DEFAULT][P]
        clock.now += 100.0
        prometheus.throttles = [(erin, 16384 / lowered * 1000), (carol, 300.0)]
        apply_step(applier, 0.2)
        assert kafka.values[ERIN][P] == 4096.0
        assert kafka.values[DEFAULT][P] == lowered, "carol's quota is not raised"
        record = journal.for_cluster("c1").episode().pairs[(ERIN, P)]
        assert record.original is None
        kafka.set(ERIN, P, None)  # Strimzi's User Operator: a KafkaUser without spec.quotas
        apply_step(applier, 0.2)
        assert kafka.values[ERIN][P] == 4096.0, "set again, as any value a reconciler resets"
        prometheus.throttles = [(erin, 100.0), (carol, 300.0)]  # as her own quota answers her
        clock.now += ASK_SECONDS
        apply_step(applier, 0.15)
        assert kafka.values[ERIN][P] == 4096.0, "the episode keeps her estimate"
        apply_step(applier, 1.0)
        assert P not in kafka.values.get(ERIN, {})
        assert kafka.values[DEFAULT][P] == 1_000_000.0


def test_the_estimates_of_an_ask_are_said_in_one_line_largest_first(journal, caplog):
    """Twelve users under the default user's quota, each answered with throttle times of its
    own: one line names the five largest estimates, largest first, and counts the rest (an
    episode of hundreds of entities says one line per ask, not one per entity)."""
    clock = SettableClock(1000.0)
    caplog.set_level(logging.INFO, "kvq.enforcer")
    users = [{"user": f"u{n:02d}", "clientId": ""} for n in range(12)]
    kafka = InMemoryQuotas({DEFAULT: {P: 1_000_000.0}})
    with responses.RequestsMock(assert_all_requests_are_fired=False) as mock:
        prometheus = PrometheusAPI(mock, rates=[(user, 7300.0) for user in users])
        applier = sized_applier(kafka, journal, clock)
        apply_step(applier, 0.2)
        clock.now += 100.0
        prometheus.throttles = [(user, 200.0 * (n + 1)) for n, user in enumerate(users)]
        caplog.clear()
        apply_step(applier, 0.2)
    said = [r.message for r in caplog.records if "produce requests of about" in r.message]
    assert len(said) == 1, said
    named = [part.split()[0] for part in said[0].split("about ", 1)[1].split("; ")]
    assert named == ["user=u11", "user=u10", "user=u09", "user=u08", "user=u07"]
    assert said[0].endswith("and 7 more"), said[0]


def test_an_episode_too_short_to_estimate_passes_the_sizes_it_started_from_on(prometheus, journal):
    """A blip (a step below 1 restored a second later) estimates nothing: the episode after
    it still starts from what the long one before it estimated."""
    clock = SettableClock(1000.0)
    kafka, applier, _ = raised_then_restored(prometheus, journal, clock)
    apply_step(applier, 0.9)
    apply_step(applier, 1.0)
    clock.now += 600.0
    apply_step(applier, 0.2)
    assert kafka.values[JAVA][P] == 4096.0


def escaping(applier: Applier) -> float:
    return applier.io.metrics.escaping.labels("c1")._value.get()


def test_entities_answered_past_librdkafkas_timeout_are_said_once_and_counted(
    prometheus, journal, caplog
):
    """alice's librdkafka producer, its backlog sent in 1 MB requests at her minimum, is
    answered with throttle times of ten minutes: it times out after librdkafka's
    socket.timeout.ms, reconnects and is written on, past her quota. One warning names her
    (and what to change); the gauge counts her while Kafka's average says so. dave's requests,
    59 s each at his quota, are answered before his producer would time out."""
    clock = SettableClock(1000.0)
    caplog.set_level(logging.INFO, "kvq.enforcer")
    kafka = InMemoryQuotas({JAVA: {P: 1_000_000.0}, SMALL: {P: 1_000_000.0}})
    applier = sized_applier(kafka, journal, clock)
    apply_step(applier, 0.0)
    assert escaping(applier) == 0.0
    clock.now += 100.0
    prometheus.throttles = [({"user": "alice", "clientId": "web"}, 620_000.0)]
    prometheus.throttle_ms = (CLIENT_TIMEOUT_SECONDS - 1.0) * 1000  # dave waits his out
    apply_step(applier, 0.0)
    said = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(said) == 1, said
    assert said[0].startswith(
        "cluster c1: Kafka throttles each produce request of user=alice,client-id=web (about "
    ), said[0]
    assert ": 620 s) for longer than librdkafka's" in said[0], said[0]
    assert "socket.timeout.ms (60 s by default)" in said[0]
    assert "batch.size" in said[0] and "dave" not in said[0]
    assert escaping(applier) == 1.0
    clock.now += ASK_SECONDS
    apply_step(applier, 0.0)
    assert len([r for r in caplog.records if r.levelno == logging.WARNING]) == 1, "said once"
    assert escaping(applier) == 1.0
    clock.now += ASK_SECONDS
    prometheus.unanswered = True
    apply_step(applier, 0.0)
    assert escaping(applier) == 1.0, "a Prometheus that cannot answer changes nothing"
    prometheus.unanswered = False
    clock.now += ASK_SECONDS
    prometheus.throttles = [({"user": "alice", "clientId": "web"}, 2_000.0)]
    apply_step(applier, 0.0)
    assert escaping(applier) == 0.0
    apply_step(applier, 1.0)
    assert escaping(applier) == 0.0

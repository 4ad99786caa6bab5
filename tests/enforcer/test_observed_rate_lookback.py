"""Observed-rate references that a stale, just-throttled rate cannot poison
(kvq.enforcer.throttle.observed.rate.lookback): the reference is the highest rate over the
lookback before the episode starts, and a previous episode that ended less than the lookback ago
passes its references on. Prometheus' HTTP API is mocked with `responses` (the real Prometheus
evaluates the query in the e2e test at the end); Kafka is devcluster, the journal real SQLite."""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from functools import partial

import pytest
import responses
from prometheus_client import CollectorRegistry, Gauge, start_http_server
from responses import matchers

from devkit.processes import server_port, wait_until
from devkit.prometheus import Prometheus, run_prometheus
from enforcer.applier import Applier
from enforcer.journal import Journal
from enforcer.observed_rates import (
    DEFAULT_QUERY,
    ObservedRate,
    ObservedRates,
    carried_over,
    parse_vector,
)
from enforcer.prometheus_check import PrometheusFactor
from enforcer.quota_client import KafkaQuotaClient
from enforcer.quota_plan import BYTE_RATE_FLOOR, Change, QuotaPolicy
from enforcer.settings import EnforcerSettings
from kvq.kafka.quota_entity import QuotaEntity
from tests.clock_support import SettableClock, wall_clock
from tests.enforcer.applier_support import apply_step, observed_rate_applier
from tests.properties_support import MINIMAL, config_errors

pytestmark = pytest.mark.paced

URL = "http://prometheus.test:9090"
P = "producer_byte_rate"
CAROL = QuotaEntity.user("carol")
DAVE = QuotaEntity.user("dave")
QUOTA = 2_000_000.0
BEFORE = 150_000.0
"""What carol writes before any throttle."""
THROTTLED = 111.0
"""Her rate as Kafka's ~10 s sensor still shows it just after a throttle at the floor."""
POLICY = QuotaPolicy((P,), {P: None}, byte_rate_floor=BYTE_RATE_FLOOR)
LOOKBACK = timedelta(minutes=5)


def rates(**by_user: float) -> dict:
    """Prometheus' answer to the query: one series per user."""
    result = [
        {"metric": {"user": user}, "value": [1763823600.0, str(rate)]}
        for user, rate in by_user.items()
    ]
    return {"status": "success", "data": {"resultType": "vector", "result": result}}


@pytest.fixture
def prometheus_api() -> Iterator[responses.RequestsMock]:
    with responses.RequestsMock() as mock:
        yield mock


@pytest.fixture
def kafka(devcluster) -> Iterator[KafkaQuotaClient]:
    """A devcluster broker holding carol's and dave's 2 MB/s quotas."""
    dc = devcluster(brokers=1, log_dirs_per_broker=1)
    client = KafkaQuotaClient({"bootstrap.servers": dc.bootstrap, "request.timeout.ms": "5000"})
    try:
        client.alter([Change(CAROL, P, QUOTA), Change(DAVE, P, QUOTA)])
        yield client
    finally:
        client.close()


@pytest.fixture
def clock() -> SettableClock[datetime]:
    """The journal's clock: a test moves it past the lookback instead of waiting."""
    return wall_clock(2026, 11, 25, 9)


@pytest.fixture
def journal(tmp_path, clock) -> Iterator[Journal]:
    journal = Journal(tmp_path / "journal.sqlite3", clock=clock)
    try:
        yield journal
    finally:
        journal.close()


def applier(kafka: KafkaQuotaClient, journal: Journal, lookback: timedelta = LOOKBACK) -> Applier:
    rates = ObservedRates(PrometheusFactor(URL), DEFAULT_QUERY, lookback)
    return observed_rate_applier(kafka, journal, POLICY, rates)


def quota(kafka: KafkaQuotaClient, entity: QuotaEntity) -> float:
    return kafka.describe()[entity][P]


def answer(api: responses.RequestsMock, query: str, **kwargs) -> None:
    """Prometheus answers `query` (and only it) with `kwargs` (json=..., status=...)."""
    api.get(f"{URL}/api/v1/query", match=[matchers.query_param_matcher({"query": query})], **kwargs)


def test_the_reference_is_the_highest_rate_now_or_over_the_lookback(prometheus_api):
    """Carol's sensor still shows her throttled rate: the lookback has what she wrote before.
    Dave's rate rose after the subquery's last step (aligned to the evaluation interval, it
    misses the newest samples): the rate now has it."""
    answer(prometheus_api, DEFAULT_QUERY, json=rates(carol=THROTTLED, dave=1.1 * BEFORE))
    over_lookback = f"max_over_time(({DEFAULT_QUERY})[300s:])"
    answer(prometheus_api, over_lookback, json=rates(carol=BEFORE, dave=BEFORE))
    originals = {(CAROL, P): QUOTA, (DAVE, P): QUOTA}
    references = ObservedRates(PrometheusFactor(URL)).references("c1", POLICY, originals)
    assert references == {(CAROL, P): BEFORE, (DAVE, P): 1.1 * BEFORE}


@pytest.mark.parametrize(
    ("lookback", "sent"),
    [
        (
            timedelta(seconds=90),
            [
                "sum by (user) (my_rate)",
                "max_over_time((sum by (user) (my_rate))[90s:])",
                "max_over_time((sum by (user) (my_rate))[90s:] offset 30s)",
            ],
        ),
        (timedelta(0), ["sum by (user) (my_rate)"]),  # off: the user's query alone
    ],
)
def test_a_users_own_query_is_asked_now_and_over_the_lookback(prometheus_api, lookback, sent):
    for query in sent:
        answer(prometheus_api, query, json=rates(carol=BEFORE))
    observed = ObservedRates(PrometheusFactor(URL), "sum by (user) (my_rate)", lookback)
    assert observed.references("c1", POLICY, {(CAROL, P): QUOTA}) == {(CAROL, P): BEFORE}
    assert [call.request.params["query"] for call in prometheus_api.calls] == sent


def test_a_step_just_before_the_episode_leaves_the_reference_from_before_it(prometheus_api):
    """Issue 42: a load step fills the disk and the first slowdown comes seconds after it; the
    rate now and the lookback ending now hold the step's rate (carol: 10x), the lookback ending
    the step window (30 s) earlier what she wrote before. Dave wrote more a minute ago than now:
    both lookbacks see it, no step. Erin started writing within the step window: her rate
    now."""
    answer(prometheus_api, DEFAULT_QUERY, json=rates(carol=10 * BEFORE, dave=BEFORE, erin=BEFORE))
    lookback = f"max_over_time(({DEFAULT_QUERY})[300s:])"
    answer(prometheus_api, lookback, json=rates(carol=10 * BEFORE, dave=2 * BEFORE, erin=BEFORE))
    earlier = f"max_over_time(({DEFAULT_QUERY})[300s:] offset 30s)"
    answer(prometheus_api, earlier, json=rates(carol=BEFORE, dave=2 * BEFORE))
    erin = QuotaEntity.user("erin")
    originals = {(CAROL, P): QUOTA, (DAVE, P): QUOTA, (erin, P): QUOTA}
    references = ObservedRates(PrometheusFactor(URL)).references("c1", POLICY, originals)
    assert references == {(CAROL, P): BEFORE, (DAVE, P): 2 * BEFORE, (erin, P): BEFORE}


def test_without_a_step_window_the_step_is_the_reference(prometheus_api):
    """The behaviour before issue 42's fix (step window PT0S): the step's rate."""
    answer(prometheus_api, DEFAULT_QUERY, json=rates(carol=10 * BEFORE))
    answer(prometheus_api, f"max_over_time(({DEFAULT_QUERY})[300s:])", json=rates(carol=BEFORE))
    observed = ObservedRates(PrometheusFactor(URL), step_window=timedelta(0))
    references = observed.references("c1", POLICY, {(CAROL, P): QUOTA})
    assert references == {(CAROL, P): 10 * BEFORE}
    assert len(prometheus_api.calls) == 2


def test_a_lookback_prometheus_refuses_leaves_the_rate_now(prometheus_api):
    """A query that is no instant vector cannot be a subquery's: the rate now still counts."""
    answer(prometheus_api, DEFAULT_QUERY, json=rates(carol=BEFORE))
    refused = {"status": "error", "errorType": "bad_data", "error": "not an instant vector"}
    answer(prometheus_api, f"max_over_time(({DEFAULT_QUERY})[300s:])", status=400, json=refused)
    references = ObservedRates(PrometheusFactor(URL)).references("c1", POLICY, {(CAROL, P): QUOTA})
    assert references == {(CAROL, P): BEFORE}


def test_an_episode_right_after_another_keeps_its_references(prometheus_api, kafka, journal):
    """The issue's case: space freed, throttle restored, and seconds later another broker starts
    a new episode while Kafka's sensors still show carol's throttled rate: she is scaled from
    what she wrote before the first episode, not held at the floor."""
    prometheus_api.get(f"{URL}/api/v1/query", json=rates(carol=BEFORE, dave=BEFORE))
    enforcer = applier(kafka, journal)
    apply_step(enforcer, 0.5)
    assert quota(kafka, CAROL) == 0.5 * BEFORE
    apply_step(enforcer, 1.0)
    assert quota(kafka, CAROL) == QUOTA, "restored"

    # Dave's rate recovered at once, carol's sensor still shows the throttle; dave now writes
    # more than before (his new reference).
    prometheus_api.replace(
        responses.GET, f"{URL}/api/v1/query", json=rates(carol=THROTTLED, dave=3 * BEFORE)
    )
    apply_step(enforcer, 0.78)
    assert quota(kafka, CAROL) == math.floor(0.78 * BEFORE), (
        "the first episode's reference, not 111 B/s"
    )
    assert quota(kafka, DAVE) == math.floor(0.78 * 3 * BEFORE), "a higher rate observed now wins"


def test_no_carry_over_once_the_previous_episode_is_older_than_the_lookback(
    prometheus_api, kafka, journal, clock
):
    prometheus_api.get(f"{URL}/api/v1/query", json=rates(carol=BEFORE))
    enforcer = applier(kafka, journal)
    apply_step(enforcer, 0.5)
    apply_step(enforcer, 1.0)
    clock.now += LOOKBACK + timedelta(seconds=1)
    prometheus_api.replace(responses.GET, f"{URL}/api/v1/query", json=rates(carol=THROTTLED))
    apply_step(enforcer, 0.5)
    assert quota(kafka, CAROL) == BYTE_RATE_FLOOR, "what she wrote over the whole lookback"


def test_a_lookback_of_zero_takes_the_rate_at_the_start_only(prometheus_api, kafka, journal):
    prometheus_api.get(f"{URL}/api/v1/query", json=rates(carol=BEFORE))
    enforcer = applier(kafka, journal, lookback=timedelta(0))
    apply_step(enforcer, 0.5)
    apply_step(enforcer, 1.0)
    prometheus_api.replace(responses.GET, f"{URL}/api/v1/query", json=rates(carol=THROTTLED))
    apply_step(enforcer, 0.5)
    assert quota(kafka, CAROL) == BYTE_RATE_FLOOR


def test_carried_references_stand_when_prometheus_cannot_answer(prometheus_api, kafka, journal):
    prometheus_api.get(f"{URL}/api/v1/query", json=rates(carol=BEFORE))
    enforcer = applier(kafka, journal)
    apply_step(enforcer, 0.5)
    apply_step(enforcer, 1.0)
    prometheus_api.replace(responses.GET, f"{URL}/api/v1/query", status=503, json={})
    apply_step(enforcer, 0.5)
    assert quota(kafka, CAROL) == 0.5 * BEFORE
    assert quota(kafka, DAVE) == 0.5 * QUOTA, "no reference at all: his quota x factor"


def test_only_pairs_the_new_episode_throttles_are_carried_over():
    previous = {(CAROL, P): BEFORE, (DAVE, P): BEFORE}
    observed = {(CAROL, P): THROTTLED}
    assert carried_over(observed, previous, {(CAROL, P): QUOTA}) == {(CAROL, P): BEFORE}


def test_a_journal_passes_on_the_references_of_an_episode_finished_within_the_window(
    tmp_path, clock
):
    path = tmp_path / "journal.sqlite3"
    journal = Journal(path, clock=clock)
    try:
        clusters = journal.for_cluster("c1")
        clusters.begin({(CAROL, P): QUOTA, (DAVE, P): QUOTA}, 0.5, references={(CAROL, P): BEFORE})
        assert clusters.recent_references(LOOKBACK) == {}, "still active: nothing to pass on"
        clusters.finish()
        assert journal.for_cluster("c2").recent_references(LOOKBACK) == {}, "per cluster"
        assert clusters.recent_references(timedelta(0)) == {}
    finally:
        journal.close()
    clock.now += LOOKBACK - timedelta(seconds=1)
    reopened = Journal(path, clock=clock)  # an enforcer restarted between the episodes
    try:
        clusters = reopened.for_cluster("c1")
        assert clusters.recent_references(LOOKBACK) == {(CAROL, P): BEFORE}
        clock.now += timedelta(seconds=2)
        assert clusters.recent_references(LOOKBACK) == {}, "finished longer ago than the window"
    finally:
        reopened.close()


def test_a_new_episode_replaces_the_references_it_passes_on(tmp_path, clock):
    journal = Journal(tmp_path / "journal.sqlite3", clock=clock)
    try:
        clusters = journal.for_cluster("c1")
        clusters.begin({(CAROL, P): QUOTA}, 0.5, references={(CAROL, P): BEFORE})
        clusters.finish()
        clusters.begin({(CAROL, P): QUOTA}, 0.5, references={(CAROL, P): 2 * BEFORE})
        clusters.finish()
        assert clusters.recent_references(LOOKBACK) == {(CAROL, P): 2 * BEFORE}
    finally:
        journal.close()


def test_the_lookback_setting(tmp_path):
    default = EnforcerSettings.build(MINIMAL, environ={})
    assert default.observed_rate_lookback == timedelta(minutes=5)
    off = EnforcerSettings.build(
        {**MINIMAL, "kvq.enforcer.throttle.observed.rate.lookback": "PT0S"}, environ={}
    )
    assert off.observed_rate_lookback == timedelta(0)
    for bad in ("PT2H", "PT1.5S"):
        (error,) = config_errors(
            EnforcerSettings, **{"kvq.enforcer.throttle.observed.rate.lookback": bad}
        )
        assert error.startswith(
            f"kvq.enforcer.throttle.observed.rate.lookback={bad}: must be whole seconds from "
            "PT0S (off: the rate when the episode starts, no carry-over) to PT1H"
        )
    (error,) = config_errors(
        EnforcerSettings, **{"kvq.enforcer.throttle.observed.rate.lookback": "5m"}
    )
    assert "not an ISO 8601 duration" in error


def test_the_step_window_setting():
    step_window = "kvq.enforcer.throttle.observed.rate.step.window"
    assert EnforcerSettings.build(MINIMAL, environ={}).observed_rate_step_window == timedelta(
        seconds=30
    )
    off = EnforcerSettings.build({**MINIMAL, step_window: "PT0S"}, environ={})
    assert off.observed_rate_step_window == timedelta(0)
    (error,) = config_errors(EnforcerSettings, **{step_window: "PT2H"})
    assert error.startswith(f"{step_window}=PT2H: must be PT0S (off")


@contextmanager
def carols_sensor_scraped(tmp_path) -> Iterator[tuple[Gauge, Prometheus]]:
    """Carol's quota sensor, at BEFORE, served to a real Prometheus that scrapes it each
    second; yields (her sensor, that Prometheus)."""
    registry = CollectorRegistry()
    gauge = Gauge(
        "kafka_server_quota_byte_rate",
        "Kafka's quota sensor",
        ["resource", "user"],
        registry=registry,
    )
    sensor = gauge.labels(resource="Produce", user="carol")
    sensor.set(BEFORE)
    port = server_port()
    server, thread = start_http_server(port, "127.0.0.1", registry)
    try:
        with run_prometheus(
            tmp_path / "prometheus", targets={"kafka": [f"127.0.0.1:{port}"]}
        ) as prometheus:
            yield sensor, prometheus
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def answered(prometheus: Prometheus, query: str) -> float | None:
    """Carol's value in the answer to `query`, if any."""
    found = prometheus.query(query)
    return float(found[0]["value"][1]) if found else None


@pytest.mark.e2e
def test_real_prometheus_answers_the_highest_rate_over_the_lookback(tmp_path):
    """The wrapped query on the real Prometheus: carol's sensor fell to her throttled rate, her
    reference is what she wrote before; with no lookback it is the throttled rate."""
    with carols_sensor_scraped(tmp_path) as (sensor, prometheus):
        now = partial(answered, prometheus, DEFAULT_QUERY)
        wait_until(lambda: now() == BEFORE, 30, what="carol's rate scraped")
        sensor.set(THROTTLED)
        wait_until(lambda: now() == THROTTLED, 30, what="her throttled rate scraped")
        originals = {(CAROL, P): QUOTA}
        looking_back = ObservedRates(PrometheusFactor(prometheus.url), lookback=LOOKBACK)
        assert looking_back.references("c1", POLICY, originals) == {(CAROL, P): BEFORE}
        at_the_start = ObservedRates(PrometheusFactor(prometheus.url), lookback=timedelta(0))
        assert at_the_start.references("c1", POLICY, originals) == {(CAROL, P): THROTTLED}


@pytest.mark.e2e
def test_real_prometheus_answers_as_of_an_episodes_start(tmp_path):
    """An episode begun without references asks for them as of its start
    (enforcer/apply/late_references.py): what carol wrote then, not her throttled rate now."""
    with carols_sensor_scraped(tmp_path) as (sensor, prometheus):
        now = partial(answered, prometheus, DEFAULT_QUERY)
        wait_until(lambda: now() == BEFORE, 30, what="carol's rate scraped")
        started = datetime.now(UTC)
        sensor.set(THROTTLED)
        wait_until(lambda: now() == THROTTLED, 30, what="her throttled rate scraped")
        factor = PrometheusFactor(prometheus.url)
        assert parse_vector(factor.instant("c1", DEFAULT_QUERY, started) or []) == [
            ObservedRate("carol", "", BEFORE)
        ]
        at_the_start = ObservedRates(factor, lookback=timedelta(0))
        originals = {(CAROL, P): QUOTA}
        assert at_the_start.as_of("c1", POLICY, originals, started) == {(CAROL, P): BEFORE}


@pytest.mark.e2e
def test_real_prometheus_answers_the_rate_from_before_a_step(tmp_path):
    """Issue 42's 10x step on the real Prometheus: carol's sensor steps up from what she wrote
    for a while to ten times it, and an episode starts seconds later: her reference is what
    she wrote before the step; with no step window, the step's rate."""
    window = timedelta(seconds=20)
    before = f"max_over_time(({DEFAULT_QUERY})[300s:] offset 20s)"
    with carols_sensor_scraped(tmp_path) as (sensor, prometheus):
        then = partial(answered, prometheus, before)
        wait_until(lambda: then() == BEFORE, 60, what="carol's rate 20 s ago scraped")
        sensor.set(10 * BEFORE)
        now = partial(answered, prometheus, DEFAULT_QUERY)
        wait_until(lambda: now() == 10 * BEFORE, 30, what="her step scraped")
        originals = {(CAROL, P): QUOTA}
        guarded = ObservedRates(PrometheusFactor(prometheus.url), step_window=window)
        assert guarded.references("c1", POLICY, originals) == {(CAROL, P): BEFORE}
        unguarded = ObservedRates(PrometheusFactor(prometheus.url), step_window=timedelta(0))
        assert unguarded.references("c1", POLICY, originals) == {(CAROL, P): 10 * BEFORE}

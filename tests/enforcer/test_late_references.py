"""An episode begun without observed rates asks for them again (enforcer/apply/late_references.py):
one unanswered query at an episode's start would otherwise scale the originals for the whole
episode, far above what the entities write, and bind nothing until the factor nears 0.
Prometheus' HTTP API is mocked with `responses` (a real Prometheus answers as of a moment past in
test_observed_rate_lookback.py); the journal is real SQLite."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from urllib.parse import parse_qs, urlparse

import pytest
import responses

from devkit.memory_quotas import InMemoryQuotas
from enforcer.applier import Applier
from enforcer.apply.late_references import RETRY_SECONDS, LateReferences
from enforcer.journal import Journal, PairRecord
from enforcer.observed_rates import ObservedRates
from enforcer.prometheus_check import PrometheusFactor
from enforcer.quota_plan import BYTE_RATE_FLOOR, QuotaPolicy
from kvq.kafka.quota_entity import QuotaEntity
from tests.clock_support import SettableClock, wall_clock
from tests.enforcer.applier_support import apply_step, observed_rate_applier
from tests.enforcer.prometheus_api import vector_answer

URL = "http://prometheus.test:9090"
P = "producer_byte_rate"
ALICE = QuotaEntity.user("alice")
QUOTA = 2_000_000.0
BEFORE = 300_000.0
"""What alice wrote before the episode."""
POLICY = QuotaPolicy((P,), {P: None}, byte_rate_floor=BYTE_RATE_FLOOR)
STARTED = datetime(2026, 11, 25, 9, tzinfo=UTC)


class PrometheusAPI:
    """The mocked /api/v1/query: fails (503) until `answering`, then has alice at BEFORE;
    records each query's `time` parameter (None: now)."""

    def __init__(self, mock: responses.RequestsMock) -> None:
        self.answering = False
        self.asked_at: list[str | None] = []
        mock.add_callback(responses.GET, f"{URL}/api/v1/query", callback=self.answer)

    def answer(self, request):
        params = parse_qs(urlparse(request.url).query)
        self.asked_at.append(params.get("time", [None])[0])
        if not self.answering:
            return 503, {}, '{"status":"error","error":"overloaded"}'
        return vector_answer([({"user": "alice"}, BEFORE)], STARTED.timestamp())


@pytest.fixture
def prometheus() -> Iterator[PrometheusAPI]:
    with responses.RequestsMock(assert_all_requests_are_fired=False) as mock:
        yield PrometheusAPI(mock)


@pytest.fixture
def journal(tmp_path) -> Iterator[Journal]:
    journal = Journal(tmp_path / "journal.sqlite3", clock=wall_clock(2026, 11, 25, 9))
    try:
        yield journal
    finally:
        journal.close()


def applier(kafka: InMemoryQuotas, journal: Journal, monotonic: SettableClock[float]) -> Applier:
    rates = ObservedRates(PrometheusFactor(URL))
    return observed_rate_applier(
        kafka, journal, POLICY, rates, monotonic=monotonic, sleep=lambda _s: None
    )


def test_an_episode_begun_without_rates_scales_them_once_prometheus_answers(
    prometheus, journal, caplog
):
    kafka = InMemoryQuotas({ALICE: {P: QUOTA}})
    monotonic = SettableClock(1000.0)
    enforcer = applier(kafka, journal, monotonic)
    caplog.set_level(logging.INFO, "kvq.enforcer")
    apply_step(enforcer, 0.5)
    assert kafka.values[ALICE][P] == 0.5 * QUOTA, "from the original while Prometheus fails"
    asked = len(prometheus.asked_at)

    prometheus.answering = True
    monotonic.now += RETRY_SECONDS / 2
    apply_step(enforcer, 0.4)
    assert len(prometheus.asked_at) == asked, "not asked again before RETRY_SECONDS"
    assert kafka.values[ALICE][P] == 0.4 * QUOTA

    monotonic.now += RETRY_SECONDS / 2
    apply_step(enforcer, 0.3)
    assert kafka.values[ALICE][P] == pytest.approx(0.3 * BEFORE), "0.3 x what she wrote"
    late = prometheus.asked_at[asked:]
    assert late and all(float(at) == STARTED.timestamp() for at in late), (
        f"asked as of the episode's start ({STARTED.timestamp()}), not now: {late}"
    )
    episode = journal.for_cluster("c1").episode()
    assert episode is not None and episode.pairs[(ALICE, P)].reference == BEFORE
    assert any("(begun without them) now scales" in r.message for r in caplog.records)

    asked = len(prometheus.asked_at)
    monotonic.now += 10 * RETRY_SECONDS
    apply_step(enforcer, 0.5)
    assert kafka.values[ALICE][P] == pytest.approx(0.5 * BEFORE)
    assert len(prometheus.asked_at) == asked, "references found: never asked again"
    restarted = applier(kafka, journal, monotonic)
    apply_step(restarted, 0.25)
    assert kafka.values[ALICE][P] == pytest.approx(0.25 * BEFORE), "journaled: kept on restart"
    apply_step(restarted, 1.0)
    assert kafka.values[ALICE][P] == QUOTA


def test_while_prometheus_still_fails_the_episode_goes_on_from_the_originals(prometheus, journal):
    kafka = InMemoryQuotas({ALICE: {P: QUOTA}})
    monotonic = SettableClock(1000.0)
    enforcer = applier(kafka, journal, monotonic)
    for step, factor in enumerate((0.5, 0.4, 0.3)):
        monotonic.now += RETRY_SECONDS * step
        apply_step(enforcer, factor)
        assert kafka.values[ALICE][P] == factor * QUOTA
    episode = journal.for_cluster("c1").episode()
    assert episode is not None and episode.pairs[(ALICE, P)].reference is None


class Rates:
    """ObservedRates' `as_of`, counted."""

    lookback = timedelta(minutes=5)

    def __init__(self, found: dict) -> None:
        self.found = found
        self.asked: list[datetime] = []

    def as_of(self, cluster, policy, originals, started):
        self.asked.append(started)
        return dict(self.found)


def test_what_a_check_found_is_kept_for_the_apply_that_journals_it():
    """A throttle check plans (and journals nothing) between applies: the apply after it finds
    the same references without asking again, however soon it comes."""
    rates = Rates({(ALICE, P): BEFORE})
    monotonic = SettableClock(0.0)
    late = LateReferences(rates, monotonic=monotonic)  # type: ignore[arg-type]
    records = {(ALICE, P): PairRecord(QUOTA)}
    stamp = "2026-11-25T09:00:00.000000Z"
    late.asked_first()
    monotonic.now += RETRY_SECONDS
    assert late.found("c1", POLICY, records, "e1", stamp) == {(ALICE, P): BEFORE}
    assert late.found("c1", POLICY, records, "e1", stamp) == {(ALICE, P): BEFORE}
    assert rates.asked == [STARTED]
    journaled = {(ALICE, P): PairRecord(QUOTA, reference=BEFORE)}
    assert late.found("c1", POLICY, journaled, "e1", stamp) == {}
    late.asked_first()
    monotonic.now += RETRY_SECONDS
    assert late.found("c1", POLICY, records, "e2", stamp) == {(ALICE, P): BEFORE}, (
        "a new episode begun without them asks anew"
    )
    assert len(rates.asked) == 2


def test_an_episode_this_process_did_not_begin_is_never_asked_about():
    """An episode recovered from Kafka's copy of the originals began throttled: the rates before
    its start may be the throttle's. One a restarted enforcer takes over keeps what it has."""
    rates = Rates({(ALICE, P): BEFORE})
    monotonic = SettableClock(0.0)
    late = LateReferences(rates, monotonic=monotonic)  # type: ignore[arg-type]
    records = {(ALICE, P): PairRecord(QUOTA)}
    stamp = "2026-11-25T09:00:00.000000Z"
    monotonic.now += 10 * RETRY_SECONDS
    assert late.found("c1", POLICY, records, "recovered", stamp) == {}
    late.asked_first()  # another episode, begun here, ended; then one it did not begin
    monotonic.now += RETRY_SECONDS
    assert late.found("c1", POLICY, records, "e1", stamp) == {(ALICE, P): BEFORE}
    assert late.found("c1", POLICY, records, "recovered", stamp) == {}
    assert len(rates.asked) == 1

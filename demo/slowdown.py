"""`make demo SCENARIO=slowdown KAFKA=apache`: the proposal's 0/1 policy and graceful-slowdown
side by side, on the same load on a fresh real Kafka cluster each.

The load is the side-by-side scenario's (demo/versus.py: four librdkafka and two Java producers at
75 kB/s each, every byte on broker 0's 32 MiB tmpfs, quotas that bind before any crossing for three
of the five principals), on a volume that already holds OTHER_DATA (9 MiB) of other data, with
retention that frees space at a known rate: every topic keeps RETENTION_SECONDS (60 s) of data in
segments of SEGMENT_SECONDS (5 s), checked every second, so a byte stays on broker 0 for 60-66 s.
An equilibrium exists within the episode: the room above the limit (25 % available), 15.7 MB, holds
about 15.7 MB / 64 s = 245 kB/s of retained data; the load at its full rate (its own quotas) puts
about 300 kB/s on broker 0, about 19 MB retained, past the limit; at the enforcer's floor (8 KiB/s
per principal and broker) about 90 kB/s, 5.8 MB retained, well below it. The factor at which
retention holds broker 0 at the limit is therefore about 245 / 300, 0.8 (a factor scales each
principal's rate above the floor); any factor below it settles below the limit. kvq runs with the
recommended intervals (the chart's); graceful-slowdown with observed-rate references (the brokers
run the JMX exporter in both runs, Prometheus scrapes it). Each run: the load warms up for
WARM_UP_SECONDS with a retention of a second (the volume holds next to none of it; Kafka's quota
sensors and the enforcer's references see the load at its steady rate), then the scenario starts:
every topic's retention is raised to RETENTION_SECONDS, the load goes on until the first slowdown
(Kafka's quotas first changed by the enforcer), EPISODE_SECONDS more, then broker 0's volume is
grown (space freed), and AFTER_FREED_SECONDS more. Printed per run: the lowest available bytes
on any volume (against the limit), the bytes acknowledged during the episode (first slowdown ->
space freed) against the most any policy could have acknowledged then without crossing the limit
(`Outcome.bound`) and how many of them came while the volume was at or past the limit, the
longest time any producer went without an acknowledgement then, and the time from space freed
until every producer is back at its rate. Once every run completed, the tables and two pictures
(demo/pictures.py: broker 0's available bytes under each policy, each producer's acknowledged
rate) are written to docs/results/slowdown.md (devkit/results_page.py; `python -m bench.slowdown`
is this).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TypeVar

import confluent_kafka.admin as ck
import requests
from prometheus_client.parser import text_string_to_metric_families

from demo import pictures
from demo.graceful import (
    ALERT_TO_ENFORCE_SECONDS,
    HORIZON,
    LOOP,
    policy_properties,
    response_seconds,
    stack_options,
)
from demo.producers import (
    DiskWatch,
    Run,
    Setup,
    grow_full_volume,
    make_stack,
    name,
    prepare,
    start_load,
    stop_all,
)
from demo.scenario import Timeline
from demo.stack import ENFORCER_JOURNAL, DemoStack
from demo.versus import SETUP as VERSUS
from demo.versus import back_after, kinds_back, limit_distance, quota_members, throttled_now
from devkit.kafka_cluster import KafkaClusterError
from devkit.kafka_dist import KafkaDistError
from devkit.loop_settings import iso_duration
from devkit.processes import wait_until
from devkit.producer_load import (
    LoadProducer,
    Transport,
    librdkafka_refuses,
    librdkafka_settings,
)
from devkit.results_page import Recording
from enforcer.journal import Journal
from enforcer.observed_rates import DEFAULT_STEP_WINDOW
from enforcer.settings import BURST_RATIO, OBSERVED_RATE_BURST_RATIO
from exporter.settings import VIOLATION_CHECK_INTERVAL
from kvq.model.graceful_slowdown import settled_share
from kvq.settings.config import CHECK_INTERVAL, SLOWDOWN_HORIZON
from kvq.settings.durations import format_duration
from kvq.settings.values import Parser, positive_duration

T = TypeVar("T")
RETENTION_SECONDS = 60
SEGMENT_SECONDS = 5
QUOTA_WINDOW_SAMPLES = "quota.window.num"
KAFKA_QUOTA_WINDOW_SAMPLES = 11
METRICS_SAMPLE_WINDOW = "metrics.sample.window.ms"
"""A broker's sample of its own metrics (Kafka's default 30 s, two samples): the average throttle
time of each quota entity, which the enforcer reads its request sizes from, covers two of them."""
OTHER_DATA = 9 << 20
"""Broker 0's volume holds this much other data: 15.7 MB of room above the limit, less than the
load's retained data at its full rate, nearly three times its retained data at the floor."""
SETUP = replace(
    VERSUS,
    other_data=OTHER_DATA,
    loop=LOOP,
    topic_config={
        "retention.ms": str(RETENTION_SECONDS * 1000),
        "segment.ms": str(SEGMENT_SECONDS * 1000),
        "segment.bytes": str(1 << 20),
    },
    broker_properties={"log.retention.check.interval.ms": "1000"},
)
WARM_UP_SECONDS = DEFAULT_STEP_WINDOW.total_seconds() + 40.0
"""The load runs this long at its steady rate before broker 0's volume starts to fill (the
scenario's start): Kafka's quota sensors (a rate over 11 s) and the enforcer's observed-rate
references read from them then hold the rate it writes, as they do for a load that has run for
hours, and the producers are past their start-up (a Java producer favours one partition for its
first seconds). The enforcer's references are no higher than what each entity wrote a step window
(kvq.enforcer.throttle.observed.rate.step.window) before the episode, so the warm-up outlasts it
by the producers' start-up, Kafka's 11 s window and the first slowdown's few seconds: with 30 s,
the episode's references were the producers' first seconds (3.3 kB/s where 40 principals wrote
8.3-8.8 kB/s to their busiest broker)."""
WARM_UP_TOPIC_CONFIG = {"retention.ms": "1000", "segment.ms": "1000"}
"""Every topic's retention while the load warms up: a segment of 1 s, deleted a second after its
newest record, so broker 0's volume holds only the last few seconds of it. The scenario starts
when each topic's retention is raised to SETUP's (an operator keeping more data): what the volume
holds then is kept RETENTION_SECONDS too, and the volume fills until retention frees space."""
POLICIES = ("stop-on-violation", "graceful-slowdown")
VALIDITY = "PT5M"
"""throttle.factor.validity.duration: the chart's and the Strimzi overlay's. Nothing leaves this
scenario's cluster, so the producers scenario's few seconds (a departed broker cached that long)
only turned one late poll into the fallback mid-episode: a restore and a throttle again, whose
first drop handed a Java producer an 11 s throttle time."""


def title(policy: str, horizon: str = HORIZON, short: bool = False, setup: Setup = SETUP) -> str:
    """How the run's lines and table (`short`: its pictures) name `policy`, graceful-slowdown
    with its settings (the response time of `setup`'s loop, and its poll when not the
    recommended; the references' burst ratio when `setup` sets one)."""
    if policy != "graceful-slowdown":
        return "kvq, the proposal's 0/1 policy" if short else "the proposal's policy (0/1)"
    loop = setup.loop
    response = iso_duration(response_seconds(loop))
    settings = f"horizon {horizon}, response time {response}, observed-rate references"
    if setup.burst_ratio is not None:
        settings += f" (burst ratio {setup.burst_ratio:g})"
    if setup.kafka_scrape is not None:
        settings += f", brokers scraped every {setup.kafka_scrape:g} s"
    if loop.poll != LOOP.poll:
        settings = f"poll {iso_duration(loop.poll)}, {settings}"
    return f"kvq, graceful-slowdown ({settings})" if short else f"graceful-slowdown, {settings}"


EPISODE_SECONDS = 150.0
EQUILIBRIUM_START_SECONDS = RETENTION_SECONDS + SEGMENT_SECONDS + 5.0
EQUILIBRIUM_SECONDS = 80.0
"""The bytes of this window, from EQUILIBRIUM_START_SECONDS after the start (retention deleting),
are printed too: the same window for both policies."""
BEFORE_SECONDS = 10.0
"""Each producer's rate before (what it must be back at): over the last this many seconds of the
warm-up, the steady load before the scenario starts (and before any slowdown)."""
AFTER_FREED_SECONDS = 30.0
KEPT_FROM_SECONDS = 10.0
"""The load's rate after the space was freed (`Outcome.kept_after_freed`) is read from this long
after it to AFTER_FREED_SECONDS: the backlog the throttle held comes through first."""
STEP_AFTER_SECONDS = 30.0
"""With --load-step: how long after the first slowdown the load steps up (unless --step-at)."""


@dataclass(frozen=True)
class LoadStep:
    """The same producers offering `times` the load from `at_seconds` after the load started
    (None: STEP_AFTER_SECONDS after the first slowdown)."""

    times: float
    at_seconds: float | None = None

    def before_slowdown(self, stack, active: list, setup: Setup) -> str | None:
        """Step now if this step comes before the first slowdown (what it did, else None)."""
        if self.at_seconds is None:
            return None
        time.sleep(self.at_seconds)
        return self.take(stack, active, setup)

    def take(self, stack, active: list, setup: Setup) -> str:
        step_load(stack, active, self.times, setup)
        return f"load stepped up {self.times:g}x"


FIRST_SLOWDOWN_PATIENCE = 300.0
WARM_UP = "warm-up"
"""Run.marks' key of the moment the load started (the warm-up's start)."""
FULL = (0, 0)
"""(broker, log dir) of the volume every byte of the load lands on."""


RESIDENCE_SECONDS = RETENTION_SECONDS + SEGMENT_SECONDS / 2
"""How long a byte written at a steady rate stays on broker 0: Kafka deletes a segment once its
newest record is RETENTION_SECONDS old, and a segment takes SEGMENT_SECONDS of writes."""


def at_the_limit(room: float, seconds: float) -> float:
    """The bytes (on disk) a load held at the limit for `seconds` writes when `room` bytes above
    the limit hold what it wrote over the last RESIDENCE_SECONDS: room / RESIDENCE_SECONDS a
    second, the rate retention frees space at. What any policy could write in an episode of
    that length without crossing the limit, to a few percent either way: in the model of this
    scenario (tests/kvq/model/test_graceful_slowdown.py) an ideal policy, writing as much as
    fits every second, writes 97-102 % of it over the 150 s episode when the first slowdown
    comes 5-35 s after the start (89 % at 45 s, the room then nearly full). Counting whole
    retention windows, ceil(episode / RETENTION_SECONDS) x room, overstated it: 3 windows where
    150 s holds 2.4 (the ideal policy wrote 78-81 % of that)."""
    return room * seconds / RESIDENCE_SECONDS


@dataclass(frozen=True)
class ShareLedger:
    """Where an episode's share of the bound comes from (disk bytes on broker 0). Each byte
    stays about RESIDENCE_SECONDS (R') and the volume holds only what the scenario wrote, so
    at a time t at least R' into it the volume holds what was written over the R' before:
    the room less the headroom at t. Over an episode [a, b] of E >= 2R' seconds that gives

        written(a, b) = 2 room - headroom(b) - headroom(b - R') + written(a, a + E - 2R')

    against the bound's room x E / R' (`at_the_limit`): the share rests on the headroom left
    at two instants and on what the episode's first E - 2R' seconds wrote (25 s of the 150),
    nothing else. So a policy gains by writing early in the approach and by riding close to
    the limit, and one run's share swings with its headroom at those two instants."""

    room: float
    at_end: float
    """Headroom when the space was freed (b)."""
    residence_before: float
    """Headroom R' before that."""
    first: float
    """Disk bytes written in the episode's first `first_seconds`."""
    first_seconds: float
    seconds: float
    """The episode, E."""

    def share(self) -> float:
        """What the ledger adds up to, as a share of the bound."""
        written = 2 * self.room - self.at_end - self.residence_before + self.first
        return written / at_the_limit(self.room, self.seconds)

    def row(self) -> str:
        mb = 1e6
        return (
            f"{self.share():.0%}: 2 x room {self.room / mb:.1f} MB, less headroom "
            f"{self.at_end / mb:.1f} MB at the end and {self.residence_before / mb:.1f} MB "
            f"{RESIDENCE_SECONDS:g} s before, plus {self.first / mb:.1f} MB written in the "
            f"first {self.first_seconds:.0f} s"
        )


ALERT_TO_ENFORCE = "kafka_volume_quota_enforcer_alert_to_enforce_seconds"


@dataclass(frozen=True)
class AlertToEnforce:
    """The enforcer's alert-to-enforce histogram at the end of a run: how many steps, their
    mean, and the smallest bucket bound that holds all of them."""

    steps: int
    mean: float
    within: float

    @classmethod
    def read(cls, stack) -> AlertToEnforce | None:
        """From the enforcer's /metrics; None before any step was measured."""
        text = requests.get(stack.enforcer_url + "/metrics", timeout=10).text
        (family,) = [f for f in text_string_to_metric_families(text) if f.name == ALERT_TO_ENFORCE]
        sums = {s.name.removeprefix(ALERT_TO_ENFORCE): s.value for s in family.samples}
        buckets = sorted(
            (float(s.labels["le"]), s.value) for s in family.samples if s.name.endswith("_bucket")
        )
        steps = int(sums["_count"])
        if not steps:
            return None
        within = next(bound for bound, count in buckets if count >= steps)
        return cls(steps, sums["_sum"] / steps, within)

    def row(self, response: float) -> str:
        """The histogram's steps, with what of the `response` time (s) was budgeted for them."""
        return (
            f"{self.steps} steps, mean {self.mean:.2f} s, all within {self.within:g} s "
            f"(budgeted {ALERT_TO_ENFORCE_SECONDS:g} s of the {response:g} s response time)"
        )


KAFKA_RATES = 'count(kafka_server_quota_byte_rate{resource="Produce"})'
"""How many produce-rate series of the brokers' quota sensors Prometheus holds: the enforcer's
observed-rate references are read from them."""
LOG_SIGNS = {
    "throttling from the originals": "episodes begun without observed rates",
    "fail-safe: factor": "fail-safe applies",
    "reference(s) from before a rise": "references lowered to before a rise",
}
"""Lines of the enforcer's log that explain a run that bound nothing, and what they count."""


@dataclass(frozen=True)
class LoopHealth:
    """What the loop did besides its steps, read at the end of a run, so that a run that crossed
    the limit says why: how long the exporter was on its fallback factor and the enforcer on its
    fail-safe, the lowest factor published, how often the brokers' rate series were missing, the
    webhooks by outcome, and the signs in the enforcer's log (LOG_SIGNS)."""

    fallback_seconds: float
    failsafe_seconds: float
    lowest_factor: float | None
    rates_missing_seconds: float
    webhooks: dict[str, int]
    signs: dict[str, int]

    @classmethod
    def read(cls, stack, since: float) -> LoopHealth:
        """Over the wall-clock seconds from `since` (time.time()) to now, at Prometheus' 1 s
        resolution (a missing sample counts as not on)."""
        prometheus, now = stack.prometheus, time.time()

        def seconds_at(query: str, predicate: Callable[[float], bool]) -> float:
            series = prometheus.query_range(query, since, now)
            return float(sum(1 for s in series for _, v in s["values"] if predicate(float(v))))

        factors = prometheus.query_range(f"min({FACTOR_METRIC})", since, now)
        values = [float(v) for s in factors for _, v in s["values"]]
        return cls(
            fallback_seconds=seconds_at("max(kafka_volume_quota_fallback_active)", bool),
            failsafe_seconds=seconds_at("max(kafka_volume_quota_enforcer_failsafe_active)", bool),
            lowest_factor=min(values) if values else None,
            rates_missing_seconds=(now - since) - seconds_at(KAFKA_RATES, lambda count: count > 0),
            webhooks=enforcer_webhooks(stack),
            signs=log_signs(stack.processes["enforcer"].log_path),
        )

    def row(self) -> str:
        factor = f"{self.lowest_factor:.3f}" if self.lowest_factor is not None else "none"
        hooks = ", ".join(f"{n} {outcome}" for outcome, n in sorted(self.webhooks.items()) if n)
        signs = ", ".join(f"{n} {LOG_SIGNS[sign]}" for sign, n in self.signs.items() if n)
        return (
            f"lowest factor {factor}; exporter on its fallback {self.fallback_seconds:.0f} s, "
            f"enforcer's fail-safe {self.failsafe_seconds:.0f} s, brokers' rate series missing "
            f"{self.rates_missing_seconds:.0f} s; webhooks: {hooks or 'none'}"
            + (f"; log: {signs}" if signs else "")
        )


FACTOR_METRIC = "kafka_volume_quota_throttle_factor"


def enforcer_webhooks(stack) -> dict[str, int]:
    """The enforcer's webhook requests by outcome (its /metrics)."""
    text = requests.get(stack.enforcer_url + "/metrics", timeout=10).text
    name = "kafka_volume_quota_enforcer_webhooks"
    (family,) = [f for f in text_string_to_metric_families(text) if f.name == name]
    return {s.labels["outcome"]: int(s.value) for s in family.samples if s.name == name + "_total"}


def log_signs(path: Path) -> dict[str, int]:
    """How many lines of the log at `path` hold each of LOG_SIGNS."""
    text = path.read_text(errors="replace") if path.is_file() else ""
    return {sign: text.count(sign) for sign in LOG_SIGNS}


@dataclass
class Outcome:
    policy: str
    run: Run
    slowed: float | None = None
    freed: float | None = None
    growing: float | None = None
    """When broker 0's volume began to grow, just before `freed`: a watch sample taken while it
    grew already sees the space freed."""
    restored: float | None = None
    """When Kafka held no throttled quota any more after the space was freed, for the rest of
    the watch (the enforcer's restore that held; None: a quota was throttled at its end)."""
    throttled_again: float | None = None
    """When Kafka held a quota throttled again after the space was freed and the quotas were
    restored (the 0/1 policy, riding the limit, may throttle once more as the space is freed):
    what the producers wrote before it is no recovery (`back_at_rate`)."""
    events: list[tuple[float, str]] = field(default_factory=list)
    before: dict[str, float] = field(default_factory=dict)
    alert_to_enforce: AlertToEnforce | None = None
    health: LoopHealth | None = None
    horizon: str = HORIZON
    """graceful-slowdown's kvq.throttle.slowdown.horizon in the run (`--horizon`)."""
    repeat: tuple[int, int] = (1, 1)
    """(this run, of how many) of its policy (`--runs`)."""

    @property
    def heading(self) -> str:
        """The policy's title, and which run of several this was."""
        return self.titled()

    def titled(self, short: bool = False) -> str:
        """`title` of the run's policy, and which run of several this was (`short`: for its
        pictures, without how many)."""
        this, of = self.repeat
        which = "" if of == 1 else f", run {this}" if short else f", run {this} of {of}"
        return title(self.policy, self.horizon, short, self.run.setup) + which

    @property
    def episode_bytes(self) -> int:
        if self.slowed is None or self.freed is None:
            return 0
        return sum(p.log.acked_bytes(self.slowed, self.freed) for p in self.run.producers)

    def acked_past_limit(self) -> int:
        """Of `episode_bytes`, those acknowledged while broker 0's volume was at or past the
        limit (from a watch sample that saw it there to the next sample): what a policy that
        crosses the limit writes beyond the bound."""
        start, end = self.slowed or 0.0, self.freed or 0.0
        samples = [s for s in self.run.watch.samples if FULL in s.usable]
        past = 0
        for sample, following in zip(samples, samples[1:], strict=False):
            if sample.usable[FULL] <= self.run.limit:
                since, until = max(sample.at, start), min(following.at, end)
                if until > since:
                    past += sum(p.log.acked_bytes(since, until) for p in self.run.producers)
        return past

    def longest_stall(self) -> tuple[float, str]:
        """(seconds, producer) of the longest time any producer went without an acknowledgement
        during the episode."""
        start, end = self.slowed or 0.0, self.freed or 0.0
        worst = (0.0, "-")
        for producer in self.run.producers:
            times = [start, *(t for t, _ in producer.log.acked if start <= t < end), end]
            gap = max(b - a for a, b in zip(times, times[1:], strict=False))
            worst = max(worst, (gap, f"{producer.user} / {producer.client_id}"))
        return worst

    def equilibrium_window(self) -> tuple[float, float] | None:
        """The same window for every policy, once retention frees space and before the volume
        is grown: where the policies' throughput at the limit compares; None when the episode
        ends before it."""
        start = self.run.load_started + EQUILIBRIUM_START_SECONDS
        if self.freed is None or self.freed < start + EQUILIBRIUM_SECONDS:
            return None
        return start, start + EQUILIBRIUM_SECONDS

    def usable_at(self, at: float, *, before: bool = False) -> int:
        """Broker 0's usable bytes at the last watch sample at or before `at` (`before`: taken
        before it; the first one if none was)."""
        samples = [s for s in self.run.watch.samples if FULL in s.usable]
        taken = [s for s in samples if (s.at < at if before else s.at <= at)]
        return (taken[-1:] or samples[:1])[0].usable[FULL]

    def usable_at_end(self) -> int:
        """Broker 0's usable bytes at the episode's end: the last watch sample taken before its
        volume began to grow (`growing`), else at `freed`."""
        if self.growing is None:
            return self.usable_at(self.freed or 0.0)
        return self.usable_at(self.growing, before=True)

    def disk_per_acked_byte(self) -> float:
        """Bytes broker 0's volume filled by per value byte acknowledged, from SEGMENT_SECONDS
        after the scenario started to SEGMENT_SECONDS before its first RETENTION_SECONDS end:
        no segment is deleted then (a segment goes once its newest record is RETENTION_SECONDS
        old; the warm-up's last segments, with records up to the start, a second or two before
        that, and the files of those deleted just before the start a second after it), so this
        is the load's replication and Kafka's overhead as measured."""
        start = self.run.load_started + SEGMENT_SECONDS
        end = self.run.load_started + RETENTION_SECONDS - SEGMENT_SECONDS
        acked = sum(p.log.acked_bytes(start, end) for p in self.run.producers)
        return (self.usable_at(start) - self.usable_at(end)) / max(acked, 1)

    def bound(self) -> tuple[float, float, float]:
        """(any policy, this run's, disk bytes per acked byte): the most value bytes that could
        have been acknowledged during the episode without broker 0 crossing the limit.
        Any policy: `at_the_limit`, the room above the limit before the load wrote anything (at
        the warm-up's start) refilled at the rate retention frees it, over the episode. This
        run's: the headroom left at the first slowdown plus what retention deleted on broker 0
        during the episode (what reached the disk, acknowledged bytes x the ratio, less what the
        volume filled by), a bound given the deletions this run's own earlier writes made
        possible."""
        ratio = self.disk_per_acked_byte()
        start = self.run.marks.get(WARM_UP, self.run.load_started)
        slowed, freed, limit = self.slowed or 0.0, self.freed or 0.0, self.run.limit
        room = self.usable_at(start) - limit
        filled = self.usable_at(slowed) - self.usable_at_end()
        deleted = ratio * self.episode_bytes - filled
        headroom = self.usable_at(slowed) - limit
        return at_the_limit(room, freed - slowed) / ratio, (headroom + deleted) / ratio, ratio

    def share(self) -> float:
        """The bytes acknowledged during the episode, as a share of the most any policy could
        have acknowledged then without crossing the limit (`bound`)."""
        any_policy, _, _ = self.bound()
        return self.episode_bytes / any_policy

    def ledger(self) -> ShareLedger | None:
        """The share's ledger (`ShareLedger`), with `bound`'s room and disk bytes per acked
        byte; None when the episode is shorter than two residences or did not end."""
        if self.slowed is None or self.freed is None:
            return None
        seconds = self.freed - self.slowed
        first_seconds = seconds - 2 * RESIDENCE_SECONDS
        if first_seconds < 0:
            return None
        limit = self.run.limit
        start = self.run.marks.get(WARM_UP, self.run.load_started)
        first = sum(
            p.log.acked_bytes(self.slowed, self.slowed + first_seconds) for p in self.run.producers
        )
        return ShareLedger(
            room=self.usable_at(start) - limit,
            at_end=self.usable_at_end() - limit,
            residence_before=self.usable_at(self.freed - RESIDENCE_SECONDS) - limit,
            first=self.disk_per_acked_byte() * first,
            first_seconds=first_seconds,
            seconds=seconds,
        )

    def back_at_rate(self, producers: list) -> float | None:
        """Seconds from the space freed until `producers` together were back at their rate
        (`back_when`)."""
        return self.back_when([producers])

    def kinds_back_at_rate(self) -> dict[str, float]:
        """Per client kind, seconds from the space freed until every producer of it was back
        at its rate, each on its own, all at once (`back_when`); the kinds not back left out."""
        return kinds_back(self.run, self.back_when)

    def back_when(self, groups: list[list]) -> float | None:
        """`versus.back_after` for this run: from the space freed, over the watch, counting
        from the last throttle after the space was freed, if any; None without one of the
        producers' rates before."""
        if self.freed is None:
            return None
        return back_after(
            groups,
            self.before,
            self.freed,
            AFTER_FREED_SECONDS,
            self.restored,
            self.throttled_again,
        )

    def kept_after_freed(self) -> float | None:
        """The load's acknowledged rate from KEPT_FROM_SECONDS to AFTER_FREED_SECONDS after the
        space was freed, as a share of its rate before: about 1 when the throttle stayed lifted,
        less when the policy slowed the producers again (None without the space freed)."""
        befores = [self.before.get(p.client_id) for p in self.run.producers]
        if self.freed is None or None in befores:
            return None
        start, end = self.freed + KEPT_FROM_SECONDS, self.freed + AFTER_FREED_SECONDS
        rate = sum(p.log.rate(start, end) for p in self.run.producers)
        return rate / max(sum(b for b in befores if b is not None), 1e-9)

    def entities_back_at_rate(self) -> float | None:
        """Seconds from the space freed until every quota entity was back at its rate: producers
        sharing one quota (alice's two) together, for how they split it is the client's affair;
        a producer without a quota alone. None if one was not back within the watch."""
        groups: list[list] = []
        for entity, producers in quota_members(self.run).items():
            groups += [producers] if entity is not None else [[p] for p in producers]
        times = [self.back_at_rate(group) for group in groups]
        return None if None in times else max(t for t in times if t is not None)

    def per_producer(self) -> list[str]:
        """Per producer: its rate before, the longest it went without an ack in the episode,
        when it was back after the space was freed, the longest throttle time a broker
        reported to it in the episode, and the last one before the restore with when it ended
        (after the restore: what the producer still waited out; librdkafka's throttle_cb, the
        Java client's own log)."""
        start, end = self.slowed or 0.0, self.freed or 0.0
        rows = []
        for producer in self.run.producers:
            times = [start, *(t for t, _ in producer.log.acked if start <= t < end), end]
            gap = max(b - a for a, b in zip(times, times[1:], strict=False))
            back = self.back_at_rate([producer])
            throttles = [(t, ms) for t, ms in producer.log.throttles if t >= start]
            row = (
                f"    {f'{producer.user} / {producer.client_id} ({producer.kind})':33} "
                f"{self.before.get(producer.client_id, 0) / 1000:6.1f} kB/s before, "
                f"longest stall {gap:5.1f} s, back "
                + (f"{back:5.1f} s" if back is not None else "  never")
                + " after space freed"
            )
            if throttles:
                row += f", longest throttle {max(ms for _, ms in throttles) / 1000:.1f} s"
            last = self.last_throttle_before_restore(producer)
            if last is not None and self.restored is not None:
                at, ms = last
                row += (
                    f", last before the restore {ms / 1000:.1f} s, ending "
                    f"{at + ms / 1000 - self.restored:+.1f} s after it"
                )
            rows.append(row + self.transport_note(producer, back))
        return rows

    def transport_note(self, producer, back: float | None) -> str:
        """What a librdkafka producer's connections did in the episode and from the restore
        until it was back (or the watch ended): requests timed out, reconnects, retries and
        returns to the bootstrap servers tell a wait on the connection from a quota's."""
        if not isinstance(producer, LoadProducer):
            return ""  # the Java client's connections are in its own log
        if self.slowed is None or self.restored is None or self.freed is None:
            return ""
        watched = self.freed + (back if back is not None else AFTER_FREED_SECONDS)
        spans = {
            "in the episode": (self.slowed, self.restored),
            "after the restore": (self.restored, watched),
        }
        notes = []
        for span, (start, end) in spans.items():
            counted = producer.transport_between(start, end)
            if counted is not None:
                notes.append(f"{span}: {transport_said(counted)}")
        return f"; connections {'; '.join(notes)}" if notes else ""

    def connections_summary(self) -> str | None:
        """The librdkafka producers' connections from the first slowdown to the restore,
        together: the most requests one had awaiting an answer at once, and how many had a
        request time out (and so reconnected and sent again). None without statistics."""
        if self.slowed is None or self.restored is None:
            return None
        counted = [
            c
            for p in self.run.producers
            if isinstance(p, LoadProducer)
            and (c := p.transport_between(self.slowed, self.restored)) is not None
        ]
        if not counted:
            return None
        timed_out = [c.request_timeouts for c in counted if c.request_timeouts]
        return (
            f"up to {max(c.awaiting for c in counted)} requests awaiting an answer at once; "
            f"{len(timed_out)} of {len(counted)} had requests time out ({sum(timed_out)} in all)"
        )

    def last_throttle_before_restore(self, producer) -> tuple[float, int] | None:
        """(monotonic time, ms) of the last throttle a broker reported to `producer` before the
        quotas were restored, if it was reported after the first slowdown."""
        if self.restored is None or self.slowed is None:
            return None
        before = [(t, ms) for t, ms in producer.log.throttles if self.slowed <= t < self.restored]
        return before[-1] if before else None

    def throttle_summary(self, kind: str) -> str | None:
        """The longest throttle time any `kind` producer got in the episode, and the longest a
        producer of that kind still waited out after the restore (its last throttle before it)."""
        start = self.slowed or 0.0
        of_kind = [p for p in self.run.producers if p.kind == kind]
        longest = max((ms for p in of_kind for t, ms in p.log.throttles if t >= start), default=0)
        if not longest:
            return None
        if self.restored is None:
            return f"longest {longest / 1000:.1f} s"
        lasts = [self.last_throttle_before_restore(p) for p in of_kind]
        ends = [at + ms / 1000 - self.restored for at, ms in filter(None, lasts)]
        after = f", still waited out after the restore: {max(0.0, *ends):.1f} s" if ends else ""
        return f"longest {longest / 1000:.1f} s{after}"


def transport_said(counted: Transport) -> str:
    """The counters that grew, and the most requests it had awaiting an answer at once (a
    librdkafka producer keeps sending into a connection the broker muted for a throttle: each
    request waits out the throttles of those before it), as words."""
    counts = {
        "reconnects": counted.connects,
        "disconnects": counted.disconnects,
        "requests timed out": counted.request_timeouts,
        "retries": counted.retries,
        "back to bootstrap": counted.rebootstraps,
    }
    grew = [f"{n} {what}" for what, n in counts.items() if n > 0]
    return ", ".join([f"up to {counted.awaiting} requests awaiting an answer", *grew])


def step_load(stack, active: list, times: float, setup: Setup = SETUP) -> None:
    """Offer `times` the load from now on: one more librdkafka producer per librdkafka producer,
    with the same user and client-id (Kafka's quotas and the enforcer's references see the same
    entities write more), together offering (times - 1) x the whole load. They are not in the
    per-producer tables; `active` stops them."""
    extra_rate = (times - 1) * setup.rate / len(setup.librdkafka)
    start_load(stack, active, replace(setup, java=(), producer_rate=extra_rate))


def keep_data(stack, setup: Setup = SETUP) -> None:
    """Every topic's retention raised from the warm-up's to `setup`'s (the scenario starts)."""
    admin = ck.AdminClient({"bootstrap.servers": stack.bootstrap, "log_level": 0})
    entries = [
        ck.ConfigEntry(key, value, incremental_operation=ck.AlterConfigOpType.SET)
        for key, value in setup.topic_config.items()
    ]
    resources = [
        ck.ConfigResource(ck.ResourceType.TOPIC, topic, incremental_configs=entries)
        for topic in setup.topics
    ]
    for future in admin.incremental_alter_configs(resources).values():
        future.result(30)


class NotSteady(RuntimeError):
    """The load was slowed while it warmed up: the scenario did not start from a steady load."""


def quiet_before_load(stack, setup: Setup = SETUP, polls: int = 4, patience: float = 120.0) -> None:
    """Start the load only once the exporter has seen the other data in place: written within a
    poll interval or two, it is a burst graceful-slowdown's fill rate takes for a load (one run
    was slowed 6 s after the load started, before Kafka's rate sensors showed the rates the
    observed-rate references are read from). Waits for `polls` polls after it and for the
    throttle, if that burst caused one, to be lifted."""
    for _ in range(polls):
        last = stack.exporter_status()["last_successful_poll"]

        def polled(last: str = last) -> bool:
            return stack.exporter_status()["last_successful_poll"] != last

        wait_until(polled, 30, interval=0.2, what="the exporter's next poll")
    wait_until(
        lambda: (
            stack.exporter_status()["throttle_factor"] == 1.0
            and not throttled_now(stack, setup.quotas)
        ),
        patience,
        interval=0.5,
        what="no throttle before the load",
    )


def drive(
    policy: str,
    stack,
    log: Callable[[str], None],
    active: list,
    episode_seconds: float = EPISODE_SECONDS,
    load_step: LoadStep | None = None,
    setup: Setup = SETUP,
    horizon: str = HORIZON,
) -> Outcome:
    prepare(stack, replace(setup, topic_config={**setup.topic_config, **WARM_UP_TOPIC_CONFIG}))
    quiet_before_load(stack, setup)
    watch = DiskWatch(stack).start()
    active.append(watch)
    warm_up, warm_up_wall = time.monotonic(), time.time()
    producers = start_load(stack, active, setup)
    log(
        f"{title(policy, horizon, setup=setup)}: load started, {setup.rate / 1000:.0f} kB/s "
        f"offered by {setup.producers} producers; warming up for {WARM_UP_SECONDS:.0f} s"
    )
    warm_until = time.monotonic() + WARM_UP_SECONDS
    while time.monotonic() < warm_until:
        if throttled_now(stack, setup.quotas):
            raise NotSteady(f"{policy} slowed the load while it warmed up")
        time.sleep(0.5)
    keep_data(stack, setup)
    run = Run(Timeline(), producers, watch, time.monotonic(), setup.limit, setup)
    run.marks[WARM_UP] = warm_up
    outcome = Outcome(policy, run, horizon=horizon)
    outcome.events.append((warm_up, "load started (retention 1 s)"))
    outcome.events.append((run.load_started, f"retention raised to {RETENTION_SECONDS} s"))
    outcome.before = {
        p.client_id: p.log.rate(run.load_started - BEFORE_SECONDS, run.load_started)
        for p in producers
    }
    log(f"{policy}: retention raised to {RETENTION_SECONDS} s: the scenario starts")
    stepped = load_step.before_slowdown(stack, active, setup) if load_step else None
    if stepped is not None:
        outcome.events.append((time.monotonic(), stepped))
        log(f"{policy}: {stepped}")
    deadline = run.load_started + FIRST_SLOWDOWN_PATIENCE
    while not throttled_now(stack, setup.quotas):
        if time.monotonic() > deadline:
            raise TimeoutError(f"no slowdown within {FIRST_SLOWDOWN_PATIENCE:.0f} s")
        time.sleep(0.5)
    outcome.slowed = time.monotonic()
    outcome.events.append((outcome.slowed, "first slowdown (quotas lowered)"))
    log(f"{policy}: first slowdown {outcome.slowed - run.load_started:.0f} s after the start")
    if load_step is not None and stepped is None:
        time.sleep(STEP_AFTER_SECONDS)
        stepped = load_step.take(stack, active, setup)
        outcome.events.append((time.monotonic(), stepped))
        log(f"{policy}: {stepped}")
        episode_seconds -= STEP_AFTER_SECONDS
    time.sleep(episode_seconds)
    outcome.growing = time.monotonic()
    grow_full_volume(stack, setup)
    run.marks["grown"] = outcome.freed = time.monotonic()
    outcome.events.append((outcome.freed, "broker 0's volume grown (space freed)"))
    log(f"{policy}: broker 0's volume grown; waiting for the producers")
    watch_restore(stack, setup, outcome)
    outcome.alert_to_enforce = AlertToEnforce.read(stack)
    outcome.health = LoopHealth.read(stack, warm_up_wall)
    return outcome


def watch_restore(stack, setup: Setup, outcome: Outcome) -> None:
    """For AFTER_FREED_SECONDS after the space was freed, Kafka's quotas against the originals:
    each restore and each throttle after one, as events; the last of each in `outcome`
    (`restored` None when a quota was throttled at the end)."""
    assert outcome.freed is not None
    throttled: bool | None = None
    while time.monotonic() < outcome.freed + AFTER_FREED_SECONDS:
        now_throttled = throttled_now(stack, setup.quotas)
        now = time.monotonic()
        if throttled is not False and not now_throttled:
            outcome.restored = now  # where the loop's share of "back at their rate" ends
            outcome.events.append((now, "quotas restored by the enforcer"))
        elif throttled is False and now_throttled:
            outcome.throttled_again = now
            outcome.events.append((now, "quotas throttled again"))
        throttled = now_throttled
        time.sleep(0.2)
    if throttled:
        outcome.restored = None
    for kind, took in outcome.kinds_back_at_rate().items():
        outcome.events.append((outcome.freed + took, f"{kind} producers back at their rate"))


def table(outcome: Outcome) -> str:
    run = outcome.run
    lowest, volume = run.watch.lowest()
    stall, who = outcome.longest_stall()
    any_policy, this_run, ratio = outcome.bound()
    acked = outcome.episode_bytes
    past = outcome.acked_past_limit()
    response = response_seconds(run.setup.loop)
    rows = [
        f"  {'lowest available bytes on any volume':52} {lowest:,} (broker {volume[0]}: "
        f"{limit_distance(lowest, run.limit)})",
        f"  {'bytes acknowledged, first slowdown -> space freed':52} {acked:,}",
        f"  {'  most any policy could without crossing the limit':52} {any_policy:,.0f} "
        f"({outcome.share():.0%} of it; {ratio:.2f} disk bytes on broker 0 per acked byte)",
        f"  {'  room at first slowdown + retention deleted (run)':52} {this_run:,.0f} "
        f"({acked / this_run:.0%} of it)",
        f"  {'  acknowledged while at or past the limit':52} {past:,} ({past / acked:.0%})",
    ]
    ledger = outcome.ledger()
    if ledger is not None:
        rows.append(f"  {'  the share, from its ledger (ShareLedger)':52} {ledger.row()}")
    rows += [
        f"  {'longest time a producer went without an ack':52} {stall:.1f} s ({who})",
    ]
    if outcome.policy == "graceful-slowdown":
        share = settled_share(RESIDENCE_SECONDS, response)
        rows.append(
            f"  {'  settled share by design, R / (R + response)':52} {share:.0%} "
            f"(R {RESIDENCE_SECONDS:g} s, response {response:g} s)"
        )
    if outcome.alert_to_enforce is not None:
        what = "alert firing -> quotas written (enforcer's histogram)"
        rows.append(f"  {what:52} {outcome.alert_to_enforce.row(response)}")
    if outcome.health is not None:
        rows.append(f"  {'the loop, from the warm-up to the end':52} {outcome.health.row()}")
    window = outcome.equilibrium_window()
    if window is not None:
        start, end = window
        acked = sum(p.log.acked_bytes(start, end) for p in run.producers)
        what = (
            f"bytes acknowledged, {start - run.load_started:.0f} s -> "
            f"{end - run.load_started:.0f} s after the start"
        )
        rows.append(f"  {what:52} {acked:,} (retention freeing space, before it is grown)")
    kinds_back_at_rate = outcome.kinds_back_at_rate()
    for kind in ("librdkafka", "Java"):
        took = kinds_back_at_rate.get(kind)
        value = f"{took:.1f} s" if took is not None else f"not within {AFTER_FREED_SECONDS:.0f} s"
        rows.append(f"  {'space freed -> ' + kind + ' producers back at their rate':52} {value}")
    took = outcome.entities_back_at_rate()
    value = f"{took:.1f} s" if took is not None else f"not within {AFTER_FREED_SECONDS:.0f} s"
    rows.append(f"  {'space freed -> every quota entity back at its rate':52} {value}")
    kept = outcome.kept_after_freed()
    if kept is not None:
        what = (
            f"space freed -> the load's rate {KEPT_FROM_SECONDS:.0f}-{AFTER_FREED_SECONDS:.0f} s "
            "after"
        )
        rows.append(f"  {what:52} {kept:.0%} of its rate before")
    if outcome.restored is not None and outcome.freed is not None:
        took = outcome.restored - outcome.freed
        rows.append(f"  {'space freed -> quotas restored by the enforcer':52} {took:.1f} s")
    for kind in ("librdkafka", "Java"):
        summary = outcome.throttle_summary(kind)
        if summary is not None:
            rows.append(f"  {'throttle times sent to ' + kind + ' producers':52} {summary}")
    connections = outcome.connections_summary()
    if connections is not None:
        rows.append(f"  {'librdkafka connections, first slowdown -> restore':52} {connections}")
    rows.append("  per producer:")
    rows += outcome.per_producer()
    start = run.load_started
    rows.append("  timeline (s after the load started):")
    rows += [f"    {at - start:7.1f} s  {what}" for at, what in sorted(outcome.events)]
    return "\n".join(rows)


def spread(outcomes: list[Outcome]) -> str:
    """Per policy, over its runs: the lowest, median and highest of each measure `table` prints
    one run's (`--runs`): the share of the bound and its ledger, the headroom left at the lowest,
    the longest stall, the time until every quota entity was back at its rate and the load's
    rate after that."""
    rows = []
    for key in dict.fromkeys((o.policy, o.horizon) for o in outcomes):
        runs = [o for o in outcomes if (o.policy, o.horizon) == key]
        rows.append(f"{title(*key, setup=runs[0].run.setup)}:")
        measures: list[tuple[str, list[float | None], Callable[[float], str]]] = [
            ("share of the most any policy could", [o.share() for o in runs], "{:.0%}".format),
            (
                "  its ledger (ShareLedger)",
                [(ledger.share() if (ledger := o.ledger()) else None) for o in runs],
                "{:.0%}".format,
            ),
            (
                "lowest available bytes, above the limit",
                [(o.run.watch.lowest()[0] - o.run.limit) / 1e6 for o in runs],
                "{:+.1f} MB".format,
            ),
            (
                "longest time a producer went without an ack",
                [o.longest_stall()[0] for o in runs],
                "{:.1f} s".format,
            ),
            (
                "space freed -> every quota entity back",
                [o.entities_back_at_rate() for o in runs],
                "{:.1f} s".format,
            ),
            (
                f"  the load's rate {KEPT_FROM_SECONDS:.0f}-{AFTER_FREED_SECONDS:.0f} s after",
                [o.kept_after_freed() for o in runs],
                "{:.0%}".format,
            ),
        ]
        for what, values, shown in measures:
            rows.append(f"  {what:52} {spread_of(values, shown)}")
    return "\n".join(rows)


def spread_of(values: list[float | None], shown: Callable[[float], str]) -> str:
    """`values` as lowest / median / highest (a None, a measure the run could not take, counts
    as highest and is shown as "-"; the median of an even count is the higher of the two)."""
    ordered = sorted(values, key=lambda v: (v is None, v or 0.0))
    picks = (ordered[0], ordered[len(ordered) // 2], ordered[-1])
    return " / ".join("-" if v is None else shown(v) for v in picks)


def run_policy(
    policy: str,
    work: Path,
    log: Callable[[str], None],
    episode_seconds: float = EPISODE_SECONDS,
    load_step: LoadStep | None = None,
    violation_check_interval: str | None = None,
    setup: Setup = SETUP,
    partition_sizes: bool = False,
    horizon: str = HORIZON,
    retention_forecast: bool = False,
) -> Outcome:
    active: list = []
    graceful = policy_properties(
        policy,
        violation_check_interval,
        partition_sizes,
        horizon,
        retention_forecast,
        setup.loop,
        setup.burst_ratio,
    )
    options = stack_options(policy)
    with make_stack(work / policy, setup, graceful, validity=VALIDITY, **options) as stack:
        try:
            return drive(policy, stack, log, active, episode_seconds, load_step, setup, horizon)
        finally:
            stop_all(active)


def main(argv: list[str] | None = None) -> int:
    """Each policy's run, its table, and (when every run completed) the results page with the
    pictures (docs/results/slowdown.md, devkit.results_page)."""
    with Recording("slowdown", __doc__.splitlines()[0]) as recording:
        args = parse(argv)
        recording.arguments(PARSER, args, ignore=("work",), kafka=True)
        outcomes = run_policies(args)
        if outcomes is None:
            return 1
        setup = setup_of(args)
        print(
            f"\none load ({setup.producers} producers at {setup.producer_rate / 1000:.2f} kB/s, "
            f"{len(setup.users)} users, {setup.producer_buffer} kB buffered each, retention "
            f"{RETENTION_SECONDS} s) on a fresh 3-node Kafka cluster per policy"
            + quota_window(setup)
        )
        for outcome in outcomes:
            print(f"\n{outcome.heading}:")
            print(table(outcome))
        if args.runs > 1:
            print(f"\nover the {args.runs} runs of each policy (lowest / median / highest):")
            print(spread(outcomes))
        pictures.draw(recorded(outcomes, recording.page, recording.footer()), recording, "policy")
        recording.complete()
        return 0


def quota_window(setup: Setup) -> str:
    """The brokers' quota window, when not Kafka's default."""
    samples = setup.broker_properties.get(QUOTA_WINDOW_SAMPLES)
    window = (
        "" if samples is None else f", quotas measured over {samples} s ({QUOTA_WINDOW_SAMPLES})"
    )
    metrics = setup.broker_properties.get(METRICS_SAMPLE_WINDOW)
    if metrics is not None:
        seconds = int(metrics) / 1000
        window += f", throttle times averaged over 2 x {seconds:g} s ({METRICS_SAMPLE_WINDOW})"
    return window


OWN_QUOTA_EVERY = 3
"""One user in this many has a quota of its own (the others: the default user's)."""
MANY_PRINCIPALS_RATE = 290_000.0
"""What the `--principals` producers offer together (value bytes/s): about what the scenario's six
get acknowledged under their own quotas (alice's, bob's and dave's bind: 288 kB/s in
docs/results/slowdown.md), so that broker 0 fills as fast as in the scenario, its headroom lasts
about 50 s at the start (HORIZON) and retention holds it at its limit at about the same factor.
None of the many producers' own quotas bind: offering the six's 450 kB/s, they filled broker 0
1.6 times as fast, from a headroom of 27 s, under half the horizon and two loops' response time."""
MOST_PRINCIPALS = 200
"""One Python process drives every librdkafka producer (a thread each) on this 2-core machine."""


PARSER = argparse.ArgumentParser(prog="make demo SCENARIO=slowdown KAFKA=apache")
PARSER.add_argument(
    "--work", type=Path, help="keep every cluster's logs here (default: a temp dir, removed)"
)
PARSER.add_argument(
    "--policy",
    action="append",
    choices=list(POLICIES),
    help="run only this policy (repeatable; default: every one, in this order)",
)
PARSER.add_argument(
    "--runs",
    type=int,
    default=1,
    metavar="N",
    help="run each policy N times, each on a fresh cluster, and print the spread of each measure "
    "(lowest, median, highest) after the runs' tables (default 1)",
)
PARSER.add_argument(
    "--episode-seconds",
    type=float,
    default=EPISODE_SECONDS,
    help=f"how long the load goes on after the first slowdown (default {EPISODE_SECONDS:.0f}; "
    f"retention {RETENTION_SECONDS} s)",
)
PARSER.add_argument(
    "--load-step",
    type=float,
    metavar="TIMES",
    help=f"{STEP_AFTER_SECONDS:.0f} s after the first slowdown (or --step-at), offer TIMES the "
    "load (e.g. 10)",
)
PARSER.add_argument(
    "--step-at",
    type=float,
    metavar="SECONDS",
    help="with --load-step: step SECONDS after the scenario started (the warm-up's end) instead, "
    "before the first slowdown (e.g. 10)",
)
PARSER.add_argument(
    "--principals",
    type=int,
    metavar="N",
    help=f"N producers instead of {SETUP.producers}, together offering "
    f"{MANY_PRINCIPALS_RATE / 1000:.0f} kB/s (what the scenario's {SETUP.producers} get through "
    f"their own quotas): the scenario's {SETUP.producers} and N - {SETUP.producers} "
    "more librdkafka producers, two per user, one user in three with a quota of its own, the "
    "others under the standing default-user quota (e.g. 40)",
)
PARSER.add_argument(
    "--producer-buffer",
    type=int,
    metavar="KB",
    help=f"kB each producer buffers while throttled (librdkafka's queue.buffering.max.kbytes, "
    f"Java's buffer.memory, at least its 16 KiB batch; default {SETUP.producer_buffer}): what "
    "a throttled producer holds back and sends late, in requests Kafka writes whole",
)
PARSER.add_argument(
    "--librdkafka",
    action="append",
    metavar="KEY=VALUE",
    help="a librdkafka property of every librdkafka producer (repeatable), e.g. "
    "enable.idempotence=true (at most 5 requests in flight per connection, where librdkafka's "
    "default sends without bound into a connection Kafka muted for a throttle)",
)
PARSER.add_argument(
    "--quota-window-samples",
    type=int,
    metavar="N",
    help=f"every broker's {QUOTA_WINDOW_SAMPLES} (Kafka's default {KAFKA_QUOTA_WINDOW_SAMPLES}): "
    "Kafka measures a quota's rate over that many 1 s samples and throttles a producer for "
    "(rate - quota) / quota x that window, so a quota lowered below the rate a producer met "
    "over a shorter window hands out shorter throttle times",
)
PARSER.add_argument(
    "--episode-after",
    action="store_true",
    help="with --runs 2 or more, each policy's runs after the first start the enforcer with the "
    "journal its run before left (on a fresh cluster): the episode after one on the same load, "
    "which starts from the request sizes that one estimated",
)
PARSER.add_argument(
    "--partition-sizes",
    action="store_true",
    help="graceful-slowdown reads the partitions' sizes (kvq.throttle.slowdown.partition.sizes="
    "true): it holds the rate written at what retention frees (default: the totals alone)",
)
PARSER.add_argument(
    "--retention-forecast",
    action="store_true",
    help="with --partition-sizes, graceful-slowdown also reads what retention frees over the "
    "next two minutes as Kafka's offsets foresee it (kvq.throttle.slowdown.retention.forecast="
    "true)",
)
PARSER.add_argument(
    "--horizon",
    metavar="DURATION",
    default=HORIZON,
    help=f"graceful-slowdown's {SLOWDOWN_HORIZON} (default {HORIZON}; the load fills the room "
    "above the limit in about 50 s)",
)
PARSER.add_argument(
    "--poll",
    metavar="DURATION",
    help=f"the exporter's {CHECK_INTERVAL} (default the recommended loop's, "
    f"{iso_duration(LOOP.poll)}); graceful-slowdown's response time follows it: two polls, the "
    f"scrape and the rule, and {ALERT_TO_ENFORCE_SECONDS:g} s to the quotas written (e.g. PT2S: "
    f"{response_seconds(replace(LOOP, poll=2.0)):g} s)",
)
PARSER.add_argument(
    "--burst-ratio",
    metavar="R",
    help=f"the enforcer's {OBSERVED_RATE_BURST_RATIO} in graceful-slowdown's runs (default: its "
    "default, 1): a factor f sets each entity's quota to its reference x f x (1/R + (1 - 1/R) x "
    "f^3), the sustained rate below and the bursts' allowance near 1 (e.g. 1.35)",
)
PARSER.add_argument(
    "--metrics-sample-window",
    metavar="DURATION",
    help=f"every broker's {METRICS_SAMPLE_WINDOW} (Kafka's default PT30S): each quota entity's "
    "average throttle time, which the enforcer reads its request sizes from, covers two such "
    "samples, so a shorter one shows large requests sooner (e.g. PT10S)",
)
PARSER.add_argument(
    "--kafka-scrape",
    metavar="DURATION",
    help="how often Prometheus scrapes the brokers' JMX exporters, whose quota sensors give the "
    "enforcer's observed rates and request sizes (default: every job's 1 s; e.g. PT30S, "
    "kube-prometheus-stack's default for a PodMonitor without an interval, such as Strimzi's)",
)
PARSER.add_argument(
    "--violation-check-interval",
    metavar="DURATION",
    help=f"the exporter's {VIOLATION_CHECK_INTERVAL} (default: its default, PT1S; PT0S: "
    "polls every storage.check.interval at the limit too, as before it existed)",
)


def parse(argv: list[str] | None) -> argparse.Namespace:
    """The arguments, each checked: a value out of range exits 2 naming it and what is allowed."""
    args = PARSER.parse_args(argv)
    args.horizon = checked_duration("--horizon", args.horizon)
    if args.poll is not None:
        args.poll = checked_duration("--poll", args.poll)
    if args.kafka_scrape is not None:
        args.kafka_scrape = checked_duration("--kafka-scrape", args.kafka_scrape)
    if args.metrics_sample_window is not None:
        args.metrics_sample_window = checked_duration(
            "--metrics-sample-window", args.metrics_sample_window
        )
    if args.burst_ratio is not None:
        args.burst_ratio = checked("--burst-ratio", args.burst_ratio, BURST_RATIO)
    if args.retention_forecast and not args.partition_sizes:
        PARSER.error("--retention-forecast: the forecast is read with --partition-sizes only")
    if args.episode_after and args.runs < 2:
        PARSER.error(f"--episode-after: needs --runs 2 or more (given {args.runs})")
    refuse_bad_counts(args)
    for given in args.librdkafka or ():
        if reason := librdkafka_refuses(given):
            PARSER.error(f"--librdkafka: {given!r}: {reason}")
    refuse_bad_load_step(args)
    return args


def checked(option: str, given: str, accepted: Parser[T]) -> T:
    """`given` as `accepted` (the setting's own parser) parses it; exits 2 naming `option`, the
    value and what is allowed if it is refused."""
    try:
        return accepted(given)
    except ValueError as refused:
        PARSER.error(f"{option}: {given!r}: {refused}")


def checked_duration(option: str, given: str) -> str:
    """`given` as a positive ISO 8601 duration in its plain form; exits 2 naming `option` and
    why if it is not one."""
    return format_duration(checked(option, given, positive_duration))


def refuse_bad_counts(args: argparse.Namespace) -> None:
    """--principals, --runs, --quota-window-samples and --producer-buffer within their ranges."""
    if args.principals is not None and not SETUP.producers < args.principals <= MOST_PRINCIPALS:
        PARSER.error(
            f"--principals: {args.principals} is not a number of producers from "
            f"{SETUP.producers + 1} to {MOST_PRINCIPALS}"
        )
    if args.runs < 1:
        PARSER.error(f"--runs: {args.runs}; give 1 or more")
    if args.quota_window_samples is not None and args.quota_window_samples < 1:
        PARSER.error(
            f"--quota-window-samples: {args.quota_window_samples}; give 1 or more (Kafka's "
            f"default is {KAFKA_QUOTA_WINDOW_SAMPLES})"
        )
    if args.producer_buffer is not None and args.producer_buffer < 1:
        PARSER.error(f"--producer-buffer: {args.producer_buffer} kB; give 1 or more")


def refuse_bad_load_step(args: argparse.Namespace) -> None:
    """--load-step above 1, --step-at with it, and an episode that lasts past the step."""
    if args.load_step is not None and args.load_step <= 1:
        PARSER.error(f"--load-step: {args.load_step:g} is no step up; give a number above 1")
    if args.step_at is not None and (args.load_step is None or args.step_at < 0):
        PARSER.error(
            f"--step-at: {args.step_at:g} needs --load-step and a number of seconds from 0"
        )
    if (
        args.load_step is not None
        and args.step_at is None
        and (args.episode_seconds <= STEP_AFTER_SECONDS)
    ):
        PARSER.error(
            f"--episode-seconds: {args.episode_seconds:g} ends before the load step "
            f"({STEP_AFTER_SECONDS:.0f} s after the first slowdown); give more"
        )


def many_principals(count: int) -> Setup:
    """The scenario with `count` producers offering together what its six get through their own
    quotas (MANY_PRINCIPALS_RATE): its own six, and more
    librdkafka producers two per user (pNN), each with a client-id of its own and alternately
    on the two topics; every OWN_QUOTA_EVERYth user has a quota of its own (far above what it
    offers: its own quota entity and reference), the others fall under the standing default-user
    quota (a budget per user, one reference: the busiest of them)."""
    extra = count - SETUP.producers
    users = [f"p{k // 2:02d}" for k in range(extra)]
    producers = tuple(
        (user, f"c{k:03d}", ("orders", "clicks")[k % 2]) for k, user in enumerate(users)
    )
    own = {
        (("user", user),): float(DemoStack.DEFAULT_PRODUCE)
        for n, user in enumerate(sorted(set(users)))
        if n % OWN_QUOTA_EVERY == 0
    }
    return replace(
        SETUP,
        librdkafka=SETUP.librdkafka + producers,
        users={**SETUP.users, **{user: f"{user}-secret" for user in users}},
        quotas={**SETUP.quotas, **own},
        producer_rate=MANY_PRINCIPALS_RATE / count,
    )


def setup_of(args: argparse.Namespace) -> Setup:
    setup = SETUP if args.principals is None else many_principals(args.principals)
    if args.producer_buffer is not None:
        setup = replace(setup, producer_buffer=args.producer_buffer)
    if args.librdkafka:
        setup = replace(setup, librdkafka_config=librdkafka_settings(args.librdkafka))
    if args.quota_window_samples is not None:
        samples = {QUOTA_WINDOW_SAMPLES: str(args.quota_window_samples)}
        setup = replace(setup, broker_properties={**setup.broker_properties, **samples})
    if args.metrics_sample_window is not None:
        window = positive_duration(args.metrics_sample_window).total_seconds()
        metrics = {METRICS_SAMPLE_WINDOW: str(round(window * 1000))}
        setup = replace(setup, broker_properties={**setup.broker_properties, **metrics})
    if args.poll is not None:
        poll = positive_duration(args.poll).total_seconds()
        setup = replace(setup, loop=replace(setup.loop, poll=poll))
    if args.burst_ratio is not None:
        setup = replace(setup, burst_ratio=args.burst_ratio)
    if args.kafka_scrape is not None:
        scrape = positive_duration(args.kafka_scrape).total_seconds()
        setup = replace(setup, kafka_scrape=scrape)
    return setup


def run_policies(args: argparse.Namespace) -> list[Outcome] | None:
    """Each policy's run on a fresh cluster, in order; None (said why) if one failed. Without
    --work the logs go to a temp dir, kept (and named) when a run failed or crossed the limit."""
    log = lambda text: print(f"- {text}", flush=True)  # noqa: E731
    # absolute: Alertmanager and Prometheus read the files it names from their own dirs
    work = (args.work or Path(tempfile.mkdtemp(prefix="kvq-demo-slowdown-"))).resolve()
    outcomes: list[Outcome] = []
    policies = args.policy or POLICIES
    try:
        for repeat, policy in ((r, p) for r in range(1, args.runs + 1) for p in policies):
            if args.runs > 1:
                log(f"{policy}: run {repeat} of {args.runs}, on a fresh cluster")
            run_work = work if args.runs == 1 else work / f"run-{repeat}"
            if args.episode_after and repeat > 1:
                carry_journal(work / f"run-{repeat - 1}" / policy, run_work / policy)
            try:
                outcome = run_policy(
                    policy,
                    run_work,
                    log,
                    args.episode_seconds,
                    LoadStep(args.load_step, args.step_at) if args.load_step else None,
                    args.violation_check_interval,
                    setup_of(args),
                    args.partition_sizes,
                    args.horizon,
                    args.retention_forecast,
                )
                outcomes.append(replace(outcome, repeat=(repeat, args.runs)))
            except (TimeoutError, NotSteady, KafkaClusterError, KafkaDistError) as exc:
                heading = title(policy, args.horizon, setup=setup_of(args))
                print(f"\n{heading}: the run failed: {exc}", file=sys.stderr)
                return None
    finally:
        if args.work is None:
            keep_if_telling(work, outcomes, len(policies) * args.runs)
    return outcomes


def carry_journal(before: Path, after: Path) -> None:
    """The enforcer journal the run in `before` left, as the journal the run in `after` starts
    with (its file, and its write-ahead log if one is left), less the alerts it heard: that
    run's Alertmanager is gone, and would never resolve them."""
    after.mkdir(parents=True, exist_ok=True)
    for suffix in ("", "-wal"):
        left = before / f"{ENFORCER_JOURNAL}{suffix}"
        if left.exists():
            shutil.copyfile(left, after / left.name)
    journal = Journal(after / ENFORCER_JOURNAL)
    try:
        journal.write(lambda db: [db.execute(f"DELETE FROM {t}") for t in ALERT_TABLES])
    finally:
        journal.close()


ALERT_TABLES = ("alert", "alert_episode")
"""The enforcer journal's tables of what it heard from Alertmanager (enforcer/journal.py)."""


def keep_if_telling(work: Path, outcomes: list[Outcome], runs: int) -> None:
    """Remove a temp work dir unless a run failed or crossed the limit: then its logs are what
    explains it (printed where they are)."""
    crossed = [o.policy for o in outcomes if o.run.watch.lowest()[0] < o.run.limit]
    if len(outcomes) == runs and not crossed:
        shutil.rmtree(work, ignore_errors=True)
        return
    why = f"{', '.join(crossed)} crossed the limit" if crossed else "a run did not complete"
    print(f"\n{why}: the runs' logs are kept in {work}", file=sys.stderr)


def series(outcome: Outcome) -> pictures.RunSeries:
    """What the pictures draw of one policy's run (demo/pictures.py)."""
    run = outcome.run
    start, limit = run.load_started, run.limit
    end = run.watch.samples[-1].at if run.watch.samples else time.monotonic()
    moments = [(outcome.slowed, pictures.THROTTLE), (outcome.freed, pictures.FREED)]
    names = {p: name(p, run.setup) for p in run.producers}
    until_freed = [s for s in run.watch.samples if outcome.freed is None or s.at < outcome.freed]
    marks = [
        *(
            pictures.Mark(at, pictures.CROSSING)
            for at in pictures.crossings(until_freed, FULL, limit, start)
        ),
        *(pictures.Mark(round(at - start, 2), kind) for at, kind in moments if at is not None),
    ]
    other = pictures.other_crossing(run.watch.samples, FULL, limit, start)
    return pictures.RunSeries(
        outcome.policy,
        outcome.titled(short=True),
        pictures.available_series(run.watch.samples, FULL, start),
        marks + ([other] if other is not None else []),
        pictures.producer_rates(run.producers, names, start, end),
    )


def recorded(outcomes: list[Outcome], page: str, footer: str) -> pictures.Recorded:
    return pictures.Recorded(
        page,
        f"broker 0's log dir (a {SETUP.capacity >> 20} MiB tmpfs, {OTHER_DATA >> 20} MiB of other "
        f"data, retention {RETENTION_SECONDS} s)",
        SETUP.limit,
        [series(o) for o in outcomes],
        footer,
        legends={pictures.THROTTLE: "first slowdown: the enforcer lowers Kafka's quotas"},
    )


if __name__ == "__main__":
    from devkit.processes import run_until_interrupted

    raise SystemExit(run_until_interrupted(main))

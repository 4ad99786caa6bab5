"""`make demo SCENARIO=versus KAFKA=apache`: one load, five guards, each on a fresh Kafka cluster.

The load is the producers scenario's on real Kafka (demo/producers.py, APACHE): four librdkafka
and two Java producers, five SASL users, six client-ids, 75 kB/s each, replicas that put every
byte on broker 0's 32 MiB tmpfs, Kafka's default retention (7 days: it frees nothing in time).
Here alice, bob/app and dave have quotas that bind *before* any crossing (Kafka enforces a quota
per broker), so each principal's achieved rate can be held against its own quota; carol and erin
have the standing default-user quota (10 MB/s, far above what they offer) that docs/reaction-time.md
recommends. Every guard's cluster gets the same quotas. The guards:

1. none;
2. the Strimzi quota plugin (io.strimzi:kafka-quotas-plugin, what Maven Central has) in every
   broker, `storage.check-interval` 5 s, the same limit (25 % available);
3. the plugin with its default check interval (60 s);
4. kvq (exporter, Prometheus, Alertmanager, enforcer) with the recommended intervals
   (devkit/loop_settings.recommended: the chart's defaults) and the proposal's 0/1 policy, as the
   plugin has it;
5. kvq-graceful: the same with graceful-slowdown and observed-rate references, as
   docs/install-kubernetes.md switches the chart to them (the brokers run the JMX exporter), its
   horizon scaled to this 32 MiB volume (demo/graceful.py, as in `SCENARIO=slowdown`): it slows
   the load before the limit; the volume still fills at what each entity's minimum quota lets
   through, more slowly;
6. (kvq-no-default, only when asked for) kvq without the standing default-user quota: the
   enforcer's throttle creates `user=<default>`, and Kafka measures carol and erin afresh.

Each run: the load until broker 0's volume crosses the limit (kvq: noting when its quotas were
first lowered), then until every producer is held (or a log dir fails); while held, broker 0 is
stopped for 10 s and started again (the plugin's issue #40: does the throttle survive the
restart?); then the volume is grown (the tmpfs remounted twice as large) and the load goes on for
60 s more: are the producers back at their rate?
One table per run. Exit 0 only if kvq kept every volume above 0 bytes with no storage error,
no log dir offline and no broker halted. Once every run completed, the tables and two pictures
(demo/pictures.py: broker 0's available bytes under each guard, each producer's acknowledged rate)
are written to docs/results/versus.md (devkit/results_page.py; `python -m bench.versus` is this).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path

from demo import apache, hops, pictures
from demo.graceful import HORIZON, policy_properties, stack_options
from demo.producers import (
    APACHE,
    AWAY_SECONDS,
    HOLD_SECONDS,
    MIN_AVAILABLE_RATIO,
    DiskWatch,
    Run,
    Setup,
    failed,
    grow_full_volume,
    held,
    make_stack,
    name,
    prepare,
    start_load,
    stop_all,
)
from demo.scenario import Timeline
from demo.stack import DemoStack, described_quotas
from devcluster.produce_quotas import candidates
from devkit.kafka_cluster import (
    DEFAULT_USERS,
    KafkaCluster,
    KafkaClusterError,
    strimzi_quota_callback,
)
from devkit.kafka_dist import KafkaDistError
from devkit.loop_settings import recommended
from devkit.processes import wait_until
from devkit.results_page import Recording
from enforcer.quota_client import KafkaQuotaClient
from kvq.kafka.quota_entity import QuotaEntity

OWN_QUOTAS = {
    # per broker; alice's two producers (orders, clicks) put 75 kB/s on broker 0, 37.5 on 1 and 2
    (("user", "alice"),): 25_000.0,
    # bob/app: 37.5 kB/s on brokers 0 and 1
    (("client-id", "app"), ("user", "bob")): 20_000.0,
    # dave's Java producer: 37.5 kB/s on brokers 0 and 1
    (("user", "dave"),): 20_000.0,
}
"""The principals' own quotas, binding before any crossing."""
STANDING_DEFAULT: dict[tuple, float] = {(("user", None),): float(DemoStack.DEFAULT_PRODUCE)}
"""The recommended setup (docs/reaction-time.md): a standing default-user quota, the enforcer's
base `produce`, far above what carol or erin offer. Every client is then measured against a quota
from the start, as under the plugin's callback, and a throttle changes values in place."""
VERSUS_QUOTAS: dict[tuple, float] = {**OWN_QUOTAS, **STANDING_DEFAULT}
SETUP = replace(APACHE, quotas=VERSUS_QUOTAS)
NO_DEFAULT_SETUP = replace(APACHE, quotas=OWN_QUOTAS)
"""Without the standing default quota, the enforcer's first throttle creates `user=<default>`:
carol's and erin's brokers measure them on new rate sensors from then on."""
GUARDS = ("none", "plugin-5s", "plugin-60s", "kvq", "kvq-graceful", "kvq-no-default")
DEFAULT_GUARDS = GUARDS[:5]
TITLES = {
    "none": "no guard",
    "plugin-5s": "Strimzi plugin, storage.check-interval 5 s",
    "plugin-60s": "Strimzi plugin, storage.check-interval 60 s (its default)",
    "kvq": "kvq, the proposal's 0/1 policy, recommended intervals and standing default-user quota",
    "kvq-graceful": (
        f"kvq, graceful-slowdown (horizon {HORIZON}, observed-rate references), recommended "
        "intervals and standing default-user quota"
    ),
    "kvq-no-default": "kvq, the proposal's 0/1 policy, no standing default-user quota",
}
POLICY = {"kvq-graceful": "graceful-slowdown"}
"""The kvq guards' `kvq.throttle.policy` (the others: stop-on-violation, the default)."""
CROSSING_PATIENCE = 600.0
"""How long a run waits for broker 0's volume to cross the limit: the load alone takes about
90 s; graceful-slowdown slows it long before, down to each entity's minimum quota."""
HELD_PATIENCE = 120.0  # after the crossing: the plugin's 60 s check plus a loaded machine
AFTER_RESTART_SECONDS = 15.0  # how long the throttle is watched once the full broker is back
AFTER_FREED_SECONDS = 60.0
"""Every run goes on exactly this long once the space is freed, whether or not its producers are
back: the runs stay comparable (bytes acknowledged, what a second crossing does)."""


def plugin_properties(check_interval: int | None) -> dict[str, str]:
    """The plugin's keys as 0.3.1 names them (StaticQuotaConfig): the same limit as kvq's."""
    static = {"storage.per.volume.limit.min.available.ratio": str(MIN_AVAILABLE_RATIO)}
    if check_interval is not None:
        static["storage.check-interval"] = str(check_interval)
    return static


class BareKafka:
    """A real Kafka cluster with no kvq around it: what the producers scenario reads of a stack."""

    def __init__(self, kafka: KafkaCluster, work_dir: Path) -> None:
        self.kafka = kafka
        self.work_dir = work_dir
        self.bootstrap = kafka.bootstrap
        self.sasl_bootstrap = kafka.sasl_bootstrap
        self.admin_properties = kafka.admin_properties
        self._quota_client = KafkaQuotaClient(self.admin_properties)

    def quotas(self) -> dict:
        return described_quotas(self._quota_client)

    def close(self) -> None:
        self._quota_client.close()


def limit_distance(available: int, limit: float) -> str:
    """How far `available` bytes are above the limit, or PAST it (the goal: never)."""
    if available >= limit:
        return f"{(available - limit) / 1e6:.1f} MB above the limit"
    return f"{(limit - available) / 1e6:.1f} MB PAST the limit"


def setup_of(guard: str) -> Setup:
    """The load and Kafka's quotas (the same for every guard but kvq-no-default)."""
    return NO_DEFAULT_SETUP if guard == "kvq-no-default" else SETUP


def is_kvq(guard: str) -> bool:
    return guard.startswith("kvq")


@contextmanager
def guarded_cluster(guard: str, work: Path) -> Iterator:
    """A fresh cluster with the guard: a BareKafka (none, plugin) or a kvq DemoStack."""
    if is_kvq(guard):
        policy = POLICY.get(guard)
        with make_stack(
            work,
            replace(setup_of(guard), loop=recommended()),
            policy_properties(policy) if policy else "",
            **(stack_options(policy) if policy else {}),
        ) as stack:
            yield stack
        return
    properties = dict(apache.BROKER_PROPERTIES)
    plugin = None
    if guard.startswith("plugin"):
        plugin = strimzi_quota_callback(plugin_properties(5 if guard == "plugin-5s" else None))

    def node_properties(cluster, node):
        return {**properties, **(plugin(cluster, node) if plugin else {})}

    with KafkaCluster(
        work / "kafka",
        nodes=3,
        log_dirs_per_node=1,
        log_dir_bytes=SETUP.capacity,
        users={**DEFAULT_USERS, **SETUP.users},
        broker_properties=node_properties,
    ) as kafka:
        bare = BareKafka(kafka, work)
        try:
            yield bare
        finally:
            bare.close()


@dataclass
class Outcome:
    guard: str
    run: Run
    crossed: float | None = None
    held: float | None = None
    full: float | None = None
    restart_held: bool | None = None
    rate_after_restart: float = 0.0
    """B/s acknowledged (all producers) in the AFTER_RESTART_SECONDS after broker 0 was back."""
    rate_while_held: float = 0.0
    """B/s acknowledged (all producers) from the hold until broker 0 was stopped."""
    events: list[tuple[float, str]] = field(default_factory=list)
    recovered: dict[str, float] = field(default_factory=dict)
    """client kind -> seconds from space freed until every producer of that kind was back."""
    principals: list[tuple[str, float, float, float | None]] = field(default_factory=list)
    """(entity, offered B/s, achieved B/s, quota per broker) before the crossing."""
    before: dict[str, float] = field(default_factory=dict)
    """client-id -> acknowledged B/s before the crossing: the rate to come back to."""
    throttled: float | None = None
    """When a broker first reported a throttle to a producer it did not throttle before."""
    hops: list[tuple[float | None, str]] = field(default_factory=list)
    """kvq: (monotonic moment or None, hop) of each step of the loop (demo/hops.py)."""
    away: tuple[float, float] | None = None
    """When broker 0 was stopped while held, and when it was back."""
    slowed: float | None = None
    """kvq: when Kafka's quotas were first lowered, if before the crossing."""

    @property
    def lowest(self) -> tuple[int, tuple[int, int]]:
        return self.run.watch.lowest()

    @property
    def storage_errors(self) -> int:
        """Produce requests the producers saw fail with a storage error."""
        return sum(
            count
            for p in self.run.producers
            for code, count in p.log.errors.items()
            if code in (56, "KafkaStorageException")
        )

    @property
    def offline(self) -> int:
        return max((s.storage_errors for s in self.run.watch.samples), default=0)

    @property
    def halted(self) -> int:
        return max((s.halted for s in self.run.watch.samples), default=0)

    @property
    def acked(self) -> int:
        return sum(p.log.acked_bytes() for p in self.run.producers)

    @property
    def protected(self) -> bool:
        return (
            self.lowest[0] > 0
            and self.storage_errors == 0
            and self.offline == 0
            and self.halted == 0
        )


def drive(guard: str, stack, log: Callable[[str], None], active: list) -> Outcome:
    """One run of the load against one guard; see the module docstring."""
    timeline = Timeline()
    setup = setup_of(guard)
    prepare(stack, setup)
    watch = DiskWatch(stack).start()
    active.append(watch)
    producers = start_load(stack, active, setup)
    run = Run(timeline, producers, watch, time.monotonic(), setup.limit, setup)
    outcome = Outcome(guard, run)
    full, limit, capacity = (0, 0), setup.limit, setup.capacity
    log(f"{TITLES[guard]}: load started, {setup.rate / 1000:.0f} kB/s offered")

    def crossed() -> bool:
        if is_kvq(guard) and outcome.slowed is None and throttled_now(stack, setup.quotas):
            outcome.slowed = time.monotonic()
            outcome.events.append((outcome.slowed, "first slowdown (quotas lowered)"))
            after = outcome.slowed - run.load_started
            log(f"{guard}: first slowdown {after:.0f} s after the start")
        return any(s.usable.get(full, capacity) <= limit for s in watch.samples[-3:])

    deadline = time.monotonic() + CROSSING_PATIENCE
    while not crossed():
        if time.monotonic() > deadline:
            if outcome.slowed is None:
                raise TimeoutError(f"no crossing within {CROSSING_PATIENCE:g} s, and no slowdown")
            break  # slowed, and kept above the limit: space is freed all the same
        time.sleep(0.2)
    outcome.crossed = watch.first(lambda s: s.usable.get(full, capacity) <= limit)
    # The rates to come back to: the load's before any guard slowed it.
    before_end = outcome.slowed or outcome.crossed or time.monotonic()
    outcome.principals = principal_rates(run, run.load_started + 5, before_end)
    outcome.before = {p.client_id: p.log.rate(run.load_started + 5, before_end) for p in producers}
    if outcome.crossed is None:
        log(f"{guard}: kept above the limit for {CROSSING_PATIENCE:g} s")
    else:
        outcome.events.append((outcome.crossed, "broker 0's volume crossed the limit"))
        after = outcome.crossed - run.load_started
        log(f"{guard}: crossed the limit {after:.0f} s after the start")
        hold_after_crossing(stack, outcome, log)
        if outcome.full is not None:
            return outcome
    free_and_watch(stack, outcome, log)
    return outcome


def hold_after_crossing(stack, outcome: Outcome, log: Callable[[str], None]) -> None:
    """Until every producer is held (or a log dir fails); then broker 0 restarted while held."""
    run, guard = outcome.run, outcome.guard
    watch, producers = run.watch, run.producers

    def settled() -> bool:
        if watch.samples and failed(watch.samples[-1]):
            return True
        return all(held(p, outcome.crossed or 0.0, SETUP, by_rate=True) for p in producers)

    wait_until(settled, HELD_PATIENCE, interval=0.1, what="producers held or a log dir failed")
    outcome.full = watch.first(failed)
    if outcome.full is not None:
        log(f"{guard}: broker 0's log dir failed")
        time.sleep(3)  # what the producers see after the failure
        return
    outcome.held = time.monotonic()
    outcome.events.append((outcome.held, "every producer held"))
    assert outcome.crossed is not None
    log(f"{guard}: every producer held {outcome.held - outcome.crossed:.1f} s after the crossing")
    note_hops(stack, outcome)
    restart_while_held(stack, outcome, log)


def free_and_watch(stack, outcome: Outcome, log: Callable[[str], None]) -> None:
    """After HOLD_SECONDS, broker 0's volume grown; then AFTER_FREED_SECONDS of the load, noting
    when each kind of producer is back at its rate."""
    run = outcome.run
    time.sleep(HOLD_SECONDS)
    grow_full_volume(stack, SETUP)
    run.marks["grown"] = freed = time.monotonic()
    outcome.events.append((freed, "broker 0's volume grown (space freed)"))
    log(f"{outcome.guard}: broker 0's volume grown; waiting for the producers")
    time.sleep(AFTER_FREED_SECONDS)
    outcome.recovered = kinds_back(
        run, lambda groups: back_after(groups, outcome.before, freed, AFTER_FREED_SECONDS)
    )
    for kind, took in outcome.recovered.items():
        outcome.events.append((freed + took, f"{kind} producers back at their rate"))


def throttled_now(stack, originals: dict) -> bool:
    """Kafka holds some entity below its original producer quota (the enforcer slowed it)."""
    quotas = stack.quotas()
    return any(
        quotas.get(entity, {}).get("producer_byte_rate", value) < value
        for entity, value in originals.items()
    )


def note_hops(stack, outcome: Outcome) -> None:
    """When a broker first throttled a producer it did not throttle before the crossing, and
    (kvq) when each hop of the loop passed the throttle on; nothing for a guard that slowed the
    load before the crossing (its throttle was on already: the hops are the loop's reaction to
    a throttle coming on)."""
    assert outcome.crossed is not None
    if outcome.slowed is not None:
        return
    outcome.throttled = hops.first_new_throttle(outcome.run.producers, outcome.crossed)
    if outcome.throttled is not None:
        outcome.events.append((outcome.throttled, "a broker throttles a producer (first report)"))
    to_monotonic = time.monotonic() - time.time()
    crossed_wall = outcome.crossed - to_monotonic
    if is_kvq(outcome.guard):
        wall_hops = [
            *hops.loop_hops(stack, crossed_wall),
            *hops.broker_quota_hops(stack.kafka, crossed_wall),
        ]
    elif outcome.guard.startswith("plugin"):
        wall_hops = hops.plugin_hops(stack.kafka, crossed_wall)
    else:
        return
    outcome.hops = [(None if at is None else at + to_monotonic, hop) for at, hop in wall_hops]


def restart_while_held(stack, outcome: Outcome, log: Callable[[str], None]) -> None:
    """Stop broker 0 for AWAY_SECONDS, start it, and watch the producers for
    AFTER_RESTART_SECONDS: held throughout, or released (and how much got through)."""
    kafka, run = stack.kafka, outcome.run
    stopping = time.monotonic()
    outcome.rate_while_held = acked_rate(run, outcome.held or stopping, stopping)
    kafka.stop_node(0)
    outcome.events.append((stopping, "broker 0 stopped (throttled, full)"))
    time.sleep(AWAY_SECONDS)
    kafka.start_node(0)
    back = time.monotonic()
    outcome.away = (stopping, back)
    outcome.events.append((back, "broker 0 started again"))
    time.sleep(AFTER_RESTART_SECONDS)
    outcome.rate_after_restart = acked_rate(run, back, time.monotonic())
    # Released: the producers got more than half their rate through. The enforcer's floor alone
    # (8 KiB/s per quota entity and broker) lets about a quarter of this load through.
    outcome.restart_held = outcome.rate_after_restart < 0.5 * SETUP.rate
    outcome.full = run.watch.first(failed)
    log(
        f"{outcome.guard}: after broker 0's restart "
        f"{'held' if outcome.restart_held else 'RELEASED'} "
        f"({outcome.rate_after_restart / 1000:.0f} kB/s acknowledged after it)"
    )


def acked_rate(run: Run, start: float, end: float) -> float:
    return sum(p.log.rate(start, end) for p in run.producers) if end > start else 0.0


BACK_SECONDS = 3.0
"""A producer is back at its rate once it acknowledged 80 % of it over this many seconds."""


def back_after(
    groups: list[list],
    before: Mapping[str, float],
    freed: float,
    watch: float,
    restored: float | None = None,
    throttled_again: float | None = None,
    step: float = 0.2,
) -> float | None:
    """Seconds from `freed` (the space freed) until each group of producers together was back
    at its rate, all at once: 80 % of the rate `before` (per client-id) over the BACK_SECONDS
    before, within `watch` s. When the quotas were throttled again after the space was freed
    (`throttled_again`, then `restored` the restore that held), it counts only what they
    acknowledged since that throttle, from its restore on: what they wrote before is no
    recovery from it (a policy riding the limit, unthrottled as the space was freed, then
    throttling once more, mutes its producers for as long as any throttle). None if not within
    the watch, or throttled at its end."""
    if not groups or any(p.client_id not in before for group in groups for p in group):
        return None
    at, since = freed, float("-inf")
    if throttled_again is not None:
        if restored is None:
            return None
        at, since = restored, throttled_again
    while at <= freed + watch:
        if all(at_rate(group, before, at, since) for group in groups):
            return at - freed
        at += step
    return None


def at_rate(producers: list, before: Mapping[str, float], at: float, since: float) -> bool:
    """Whether `producers` together acknowledged 80 % of their rate `before` over the
    BACK_SECONDS before `at`, counting nothing before `since`."""
    rate = sum(before[p.client_id] for p in producers)
    start = max(at - BACK_SECONDS, since)
    return sum(p.log.acked_bytes(start, at) for p in producers) >= 0.8 * rate * BACK_SECONDS


def kinds_back(run: Run, back: Callable[[list[list]], float | None]) -> dict[str, float]:
    """Per client kind, the seconds `back` gives for every producer of it (each on its own,
    all at once); the kinds not back left out."""
    found = {}
    for kind in sorted({p.kind for p in run.producers}):
        took = back([[p] for p in run.producers if p.kind == kind])
        if took is not None:
            found[kind] = took
    return found


def quota_members(run: Run) -> dict[QuotaEntity | None, list]:
    """The load's producers by the quota entity that applies to each (KIP-55; None: no quota)."""
    quotas = {QuotaEntity.of(e) for e in run.setup.quotas}
    members: dict[QuotaEntity | None, list] = {}
    for p in run.producers:
        user = p.user or "ANONYMOUS"  # every producer of this load logs in (SASL)
        applying = next((e for e in candidates(user, p.client_id) if e in quotas), None)
        members.setdefault(applying, []).append(p)
    return members


def principal_rates(
    run: Run, start: float, end: float
) -> list[tuple[str, float, float, float | None]]:
    """Per quota entity of the load (the one that applies to each producer, KIP-55): offered and
    achieved B/s over [start, end], its quota (None: the producers without any)."""
    quotas = {QuotaEntity.of(e): v for e, v in run.setup.quotas.items()}
    rows = []
    for entity, producers in quota_members(run).items():
        label = "no quota" if entity is None else entity.label()
        if entity is None or any(n is None for _, n in entity.components):  # say whom it holds
            label += f" ({', '.join(sorted({p.user for p in producers}))})"
        achieved = sum(p.log.rate(start, end) for p in producers)
        quota = None if entity is None else quotas[entity]
        rows.append((label, run.setup.producer_rate * len(producers), achieved, quota))
    return rows


def table(outcome: Outcome) -> str:
    """The run's table, as printed and on its results page."""
    run, rows = outcome.run, []
    start = run.load_started

    def line(what: str, value: str) -> None:
        rows.append(f"  {what:52} {value}")

    lowest, volume = outcome.lowest
    if is_kvq(outcome.guard):
        slowed = outcome.slowed
        first = "at the crossing or later" if slowed is None else f"{slowed - start:.1f}"
        line("first slowdown (s after the load started)", first)
    crossing = "never" if outcome.crossed is None else f"{outcome.crossed - start:.1f}"
    line("crossing (s after the load started)", crossing)
    if outcome.held is not None and outcome.crossed is not None:
        line("crossing -> every producer throttled", f"{outcome.held - outcome.crossed:.1f} s")
    else:
        line("crossing -> every producer throttled", "never")
    if outcome.crossed is not None and outcome.slowed is None:
        for at, hop in [*outcome.hops, (outcome.throttled, "a broker throttles a producer")]:
            took = "never" if at is None else f"{at - outcome.crossed:.1f} s"
            line(f"  crossing -> {hop}", took)
    if outcome.held is not None and outcome.crossed is not None:
        rows.append("  per producer, s after the crossing: first throttle reported / held")
        for label, throttled_at, held_at in producer_reactions(outcome):
            rows.append(f"    {label:40} {throttled_at:>18} / {held_at}")
    line(
        "lowest available bytes on any volume",
        f"{lowest:,} (broker {volume[0]}: {limit_distance(lowest, run.limit)})",
    )
    line("produce requests failed with a storage error", str(outcome.storage_errors))
    line("log dirs offline / brokers halted", f"{outcome.offline} / {outcome.halted}")
    line("bytes acknowledged (whole run)", f"{outcome.acked:,}")
    line("full broker restarted while throttled", restart_text(outcome))
    for kind in ("librdkafka", "Java"):
        recovery = outcome.recovered.get(kind)
        if recovery is not None:
            value = f"{recovery:.1f} s"
        else:
            value = "-" if "grown" not in run.marks else f"not within {AFTER_FREED_SECONDS:.0f} s"
        line(f"space freed -> {kind} producers back at their rate", value)
    rows.append("  before the crossing, per principal (offered / achieved / own quota per broker):")
    for label, offered, achieved, quota in outcome.principals:
        bound = f"{quota / 1000:.0f} kB/s" if quota is not None else "none"
        rows.append(f"    {label:32} {offered / 1000:5.0f} / {achieved / 1000:5.0f} kB/s / {bound}")
    rows.append("  timeline (s after the load started):")
    rows.extend(timeline(outcome))
    return "\n".join(rows)


def producer_reactions(outcome: Outcome) -> list[tuple[str, str, str]]:
    """Per producer: its first throttle after the crossing (librdkafka's callback, the Java
    client's log; "throttled before" if it was in the 10 s before) and when it
    was held (its acknowledged rate over 3 s below a quarter, as `held` judges), both in seconds
    after the crossing."""
    run, crossed = outcome.run, outcome.crossed
    assert crossed is not None and outcome.held is not None
    rows = []
    for p in run.producers:
        after = [at for at, _ in p.log.throttles if at >= crossed]
        if any(crossed - 10 <= at < crossed for at, _ in p.log.throttles):
            throttled = "throttled before"
        elif after:
            throttled = f"{after[0] - crossed:.1f}"
        else:
            throttled = "never"
        held_at = next(
            (
                t
                for t in (crossed + 3 + i / 10 for i in range(int((outcome.held - crossed) * 10)))
                if p.log.rate(t - 3, t) < 0.25 * run.setup.producer_rate
            ),
            outcome.held,
        )
        rows.append((name(p, run.setup), throttled, f"{held_at - crossed:.1f}"))
    return rows


def restart_text(outcome: Outcome) -> str:
    if outcome.restart_held is None:
        return "-"
    state = "throttle held" if outcome.restart_held else "throttle LOST"
    return (
        f"{state}: {outcome.rate_after_restart / 1000:.0f} kB/s in the "
        f"{AFTER_RESTART_SECONDS:.0f} s after (held before: {outcome.rate_while_held / 1000:.0f})"
    )


def timeline(outcome: Outcome) -> list[str]:
    """The run's moments (s after the load started), with when the watch saw failures and the
    lowest headroom."""
    watch, start = outcome.run.watch, outcome.run.load_started
    events = list(outcome.events)
    offline = watch.first(lambda s: s.storage_errors > 0)
    if offline is not None:
        events.append((offline, "a log dir offline (DescribeLogDirs)"))
    halted = watch.first(lambda s: s.halted > 0)
    if halted is not None:
        events.append((halted, "a broker's JVM exited (halted)"))
    if watch.samples:
        _, volume = outcome.lowest
        low = watch.lowest_at(volume, start, watch.samples[-1].at)
        events.append((low, f"lowest headroom (broker {volume[0]})"))
    return [f"    {at - start:7.1f} s  {what}" for at, what in sorted(events)]


def run_guard(guard: str, work: Path, log: Callable[[str], None]) -> Outcome:
    active: list = []
    with guarded_cluster(guard, work / guard) as stack:
        try:
            return drive(guard, stack, log, active)
        finally:
            stop_all(active)


def main(argv: list[str] | None = None) -> int:
    """Every guard's run, its table, and (when every run completed) the results page with the
    pictures (docs/results/versus.md, devkit.results_page)."""
    with Recording("versus", __doc__.splitlines()[0]) as recording:
        parser = argparse.ArgumentParser(prog="make demo SCENARIO=versus KAFKA=apache")
        parser.add_argument(
            "--guards",
            default=",".join(DEFAULT_GUARDS),
            help=f"comma-separated, in order, from {', '.join(GUARDS)} (default: all but the last)",
        )
        parser.add_argument(
            "--work",
            type=Path,
            help="keep every cluster's logs here (default: a temp dir, removed)",
        )
        args = parser.parse_args(argv)
        guards = [g for g in args.guards.split(",") if g]
        unknown = [g for g in guards if g not in GUARDS]
        if unknown or not guards:
            parser.error(f"--guards {args.guards!r}: each must be one of {', '.join(GUARDS)}")
        recording.arguments(parser, args, ignore=("work",), kafka=True)
        outcomes = run_guards(guards, args.work)
        if outcomes is None:
            return 1
        report(outcomes)
        pictures.draw(recorded(outcomes, recording.page, recording.footer()), recording, "guard")
        recording.complete()  # a run that did not protect is a result too
        kvq = [o for o in outcomes if is_kvq(o.guard)]
        if kvq and not kvq[0].protected:
            print(
                "\nkvq did NOT keep every volume above 0 without a storage error", file=sys.stderr
            )
            return 1
        if kvq:
            print("\nkvq kept every volume above 0 bytes: no storage error, no log dir offline")
        return 0


def run_guards(guards: list[str], work_dir: Path | None) -> list[Outcome] | None:
    """Each guard's run on a fresh cluster, in order; None (said why) if one failed."""
    log = lambda text: print(f"- {text}", flush=True)  # noqa: E731
    outcomes = []
    with tempfile.TemporaryDirectory(prefix="kvq-demo-versus-") as temp:
        work = work_dir or Path(temp)
        for guard in guards:
            try:
                outcomes.append(run_guard(guard, work, log))
            except (TimeoutError, KafkaClusterError, KafkaDistError) as exc:
                print(f"\n{TITLES[guard]}: the run failed: {exc}", file=sys.stderr)
                return None
    return outcomes


def report(outcomes: list[Outcome]) -> None:
    print(f"\none load ({describe_load()}) on a fresh 3-node Kafka cluster per guard")
    print(f"Kafka's quotas before the load, every guard: {describe_quotas(SETUP)}")
    print(
        "(kvq: the standing default-user quota is the recommended setup, docs/reaction-time.md;"
        " kvq-no-default runs without it; the plugin ignores Kafka's quotas, its issue #32)"
    )
    for outcome in outcomes:
        print(f"\n{TITLES[outcome.guard]}:")
        print(table(outcome))


SHORT_TITLES = {
    "none": "no guard",
    "plugin-5s": "Strimzi plugin, check every 5 s",
    "plugin-60s": "Strimzi plugin, check every 60 s (its default)",
    "kvq": "kvq, 0/1 (recommended intervals)",
    "kvq-graceful": "kvq, graceful-slowdown",
    "kvq-no-default": "kvq, 0/1, no standing default-user quota",
}


def series(outcome: Outcome) -> pictures.RunSeries:
    """What the pictures draw of one guard's run (demo/pictures.py)."""
    run = outcome.run
    start = run.load_started
    end = run.watch.samples[-1].at if run.watch.samples else time.monotonic()
    marks = []

    def mark(at: float | None, kind: str, label: str = "", until: float | None = None) -> None:
        if at is not None:
            later = None if until is None else round(until - start, 2)
            marks.append(pictures.Mark(round(at - start, 2), kind, label, later))

    mark(outcome.crossed, pictures.CROSSING)
    throttle = (outcome.slowed, outcome.throttled, outcome.held)
    mark(next((at for at in throttle if at is not None), None), pictures.THROTTLE)
    if outcome.away is not None:
        mark(outcome.away[0], pictures.RESTART, "broker 0 stopped", until=outcome.away[1])
    mark(run.marks.get("grown"), pictures.FREED)
    failure = "disk full, broker 0 halted" if outcome.halted else "disk full, log dir offline"
    mark(outcome.full, pictures.FAILED, failure)
    other = pictures.other_crossing(run.watch.samples, (0, 0), run.limit, start)
    names = {p: name(p, run.setup) for p in run.producers}
    return pictures.RunSeries(
        outcome.guard,
        SHORT_TITLES[outcome.guard],
        pictures.available_series(run.watch.samples, (0, 0), start),
        marks + ([other] if other is not None else []),
        pictures.producer_rates(run.producers, names, start, end),
    )


def recorded(outcomes: list[Outcome], page: str, footer: str) -> pictures.Recorded:
    return pictures.Recorded(
        page,
        f"broker 0's log dir (a {SETUP.capacity >> 20} MiB tmpfs taking every byte of the load)",
        SETUP.limit,
        [series(o) for o in outcomes],
        footer,
        legends={
            pictures.THROTTLE: (
                "throttle: kvq first lowers the quotas before the crossing, or a broker first "
                "throttles a producer after it"
            )
        },
    )


def describe_quotas(setup: Setup) -> str:
    """producer_byte_rate per broker of each entity, as Kafka renders them."""
    return ", ".join(
        f"{QuotaEntity.of(e).label()} {v / 1000:,.0f} kB/s" for e, v in setup.quotas.items()
    )


def describe_load(setup: Setup = SETUP) -> str:
    kinds = f"{len(setup.librdkafka)} librdkafka + {len(setup.java)} Java producers"
    mib = setup.capacity >> 20
    return f"{kinds} at {setup.producer_rate / 1000:.0f} kB/s each, {mib} MiB log dirs"


if __name__ == "__main__":
    from devkit.processes import run_until_interrupted

    raise SystemExit(run_until_interrupted(main))

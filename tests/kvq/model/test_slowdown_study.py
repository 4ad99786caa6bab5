"""The model study's claims about the settings users can choose (devkit/slowdown_model/study.py
has the model): graceful slowdown on the volume's totals (`kvq.throttle.slowdown.partition.sizes`
and `.retention.forecast` false, the default), on the partitions' sizes, and on the sizes with
Kafka's retention forecast, with bench/slowdown's six producers and its 40 principals.

The variants the study tried and the shipped policy no longer runs are measured by
`python -m bench.policy_study` (docs/results/policy_study.md), not tested: they are a record of
what the model found, not a behaviour a user gets.
"""

from __future__ import annotations

from dataclasses import replace
from functools import partial

import pytest

from demo.slowdown import MANY_PRINCIPALS_RATE, WARM_UP_SECONDS
from devkit.slowdown_model import kafka_load
from devkit.slowdown_model.study import (
    DELAYS,
    EPISODE,
    EXACT,
    FREED,
    KAFKA_RUN,
    LONG_EPISODE,
    ON_KAFKA,
    PHASES,
    POLL,
    PRINCIPALS_40,
    RESPONSE,
    STEPS,
    Poll,
    Spread,
    foresee_deletions,
    graceful,
    gross_fill,
    hold_freed,
    on_kafka,
    paced,
    reading_the_forecast,
    scenario,
    spread_of_40,
    spread_on_kafka,
    step_lowest,
    step_restarts,
)


def test_the_shipped_policy_swings_and_stays_below_85_percent_of_the_bound():
    """The real run's 74 %: over the 150 s episode, 81 % over 600 s; the factor swings from the
    cap to a quarter with a period of about a retention time, since the fill rate shows each
    rise a retention time later."""
    run = scenario(graceful())
    assert 0.7 < run.share(EPISODE) < 0.78 and run.share(LONG_EPISODE) < 0.85
    low, high = run.swing()
    assert high > 0.9 and low < 0.3
    assert run.lowest > 1_000_000


def steady_growth(sizes_every: float) -> float:
    """The partitions' growth between polls over what was written, once retention deletes,
    at a steady factor of 0.9."""
    seen: list[float] = []

    def steady(poll: Poll) -> float:
        seen.append(poll.grown if poll.time >= 100.0 else 0.0)
        return 0.9

    run = scenario(steady, sizes_every=sizes_every)
    return sum(seen) / sum(run.written[96:])


def test_the_scenarios_segments_read_with_each_poll_hide_what_was_written():
    """Each replica rolls a segment every 5 s and retention deletes one every 5 s: read with
    each 5 s poll, a replica's size grew by what was written less the segment it lost, nearly
    nothing; read every second, most of the growth shows."""
    assert steady_growth(POLL) < 0.1
    assert steady_growth(1.0) > 0.7


@pytest.mark.parametrize("sizes_every", [1.0, EXACT])
def test_holding_the_gross_rate_at_what_retention_frees_reaches_85_percent_off_the_limit(
    sizes_every,
):
    """Variant B, with the partitions' growth and drops read every second (or exactly): 85 % or
    more of the bound over the episode and over 600 s, never at the limit with the loop taking
    3, 5 or 8 s from a poll to the quotas."""
    for delay in (3.0, 5.0, 8.0):
        run = scenario(hold_freed(), delay, sizes_every=sizes_every)
        assert run.share(EPISODE) >= 0.85 and run.share(LONG_EPISODE) >= 0.85
        assert run.lowest > 0


def test_the_gross_rate_as_graceful_slowdowns_fill_rate_holds_a_horizon_of_headroom():
    """Variant A: reading no deletions, it keeps the headroom for the horizon at the gross rate
    and settles near R / (R + horizon) = 61 % of the bound, below the shipped policy."""
    run = scenario(gross_fill(), sizes_every=EXACT)
    assert run.share(LONG_EPISODE) < 0.7 and run.lowest > 2_000_000


def test_checks_between_polls_keep_a_step_before_the_first_slowdown_off_the_limit():
    """With polls alone, a 10x step 10 s in (before any slowdown) shows in the fill rate two
    polls late and crosses the limit; with the exporter's check every second it stays above
    it with the demo's 14 s response time and a 3 s loop, and with the default 30 s for loops of
    3 and 5 s."""
    assert scenario(graceful(), 3.0, (10.0, 10)).lowest < 0
    assert scenario(graceful(checks=True), 3.0, (10.0, 10), calls_every=1.0).lowest > 0
    for delay in (3.0, 5.0):
        assert scenario(graceful(30.0, checks=True), delay, (10.0, 10), calls_every=1.0).lowest > 0


@pytest.mark.parametrize("at", STEPS)
def test_a_ten_times_load_step_keeps_the_variants_off_the_limit(at):
    for make in (hold_freed, foresee_deletions):
        for delay in (3.0, 5.0):
            assert scenario(make(), delay, (at, 10), sizes_every=1.0).lowest > 0


def test_b_paced_to_a_third_a_poll_crosses_the_limit_under_a_step_before_the_first_slowdown():
    """B drops its factor to the enforcer's minimum within a poll; held to a third a poll, the
    10x step that comes before the first slowdown crosses the limit (B' needs an escape at
    once, as graceful-slowdown's floor at once)."""
    assert scenario(hold_freed(), 5.0, sizes_every=1.0).steepest() < 0.1
    paced_b = paced(hold_freed(margin_seconds=8.0))
    assert scenario(paced_b, 5.0, (10.0, 10), sizes_every=1.0).lowest < 0


@pytest.mark.parametrize("checks", [False, True], ids=["polls", "checks"])
@pytest.mark.parametrize("delay", [3.0, 5.0, 8.0])
def test_the_shipped_policy_with_sizes_read_every_second_stays_off_the_limit_at_80_percent(
    delay, checks
):
    """With the partitions' sizes read at every check (every second) and handed out with each
    5 s poll, on smooth producers: 78 % or more of the bound over the episode (84 / 81 / 79 %
    with loops of 3 / 5 / 8 s), 81 % or more over 600 s, above the limit with the loop taking
    3, 5 or 8 s from a poll to the quotas, the response time declared as the loop's plus two
    polls (14 s at the least). With 14 s declared and an 8 s loop it stays above it too (0.4 MB
    at the least): the approach's drops follow what the volume fills by, not only the level,
    which counts on its factor being in the quotas 4 s after the reading. The same with the
    checks run as the exporter runs them (`graceful`'s `checks`)."""
    policy = graceful(max(RESPONSE, delay + 2 * POLL), grown=True, checks=checks)
    run = scenario(policy, delay, sizes_every=1.0, calls_every=1.0 if checks else POLL)
    assert run.share(EPISODE) >= 0.78 and run.share(LONG_EPISODE) >= 0.81
    assert run.lowest > 0
    if delay == 8.0:
        every = 1.0 if checks else POLL
        late = scenario(
            graceful(grown=True, checks=checks), delay, sizes_every=1.0, calls_every=every
        )
        assert late.lowest > 0


@pytest.mark.parametrize("sizes_every", [1.0, POLL])
def test_a_ten_times_load_step_after_the_first_slowdown_keeps_the_policy_with_sizes_off_the_limit(
    sizes_every,
):
    """30 s after the first slowdown, with the scenario's response time and the default 30 s,
    loops of 3 and 5 s."""
    for response in (RESPONSE, 30.0):
        for delay in (3.0, 5.0):
            run = scenario(
                graceful(response, grown=True), delay, (45.0, 10), sizes_every=sizes_every
            )
            assert run.lowest > 0


def test_a_ten_times_load_step_10_s_after_the_exporters_start_crosses_the_limit_with_sizes():
    """The policy with the partitions' sizes read is weaker than on the totals alone against a
    10x step that comes 10 s after the exporter (and the load) started, before its window
    (30 s) is whole: the step is met at once by its own level, but retention has freed nothing
    yet and the held floor's paced drops follow; the volume reaches the limit with a 3 s loop
    (by 0.5 MB, the exporter's checks taken in), where the totals' floor at once keeps it
    above. On real Kafka the step comes after the load warmed up (bench/slowdown: 0.7 MB above
    the limit); the shipped default reads the totals."""
    run = scenario(graceful(grown=True, checks=True), 3.0, (10.0, 10), calls_every=1.0)
    assert -1e6 < run.lowest < 0
    assert scenario(graceful(checks=True), 3.0, (10.0, 10), calls_every=1.0).lowest > 0


def test_with_sizes_read_only_with_each_poll_the_shipped_policy_still_gains():
    """Read with each 5 s poll, the scenario's 5 s segments hide most of the growth (a replica
    rolls and loses a segment between two polls): 78 % or more, above the 74 % without, still
    off the limit; the default response time, 30 s, gains most."""
    for response, without in ((RESPONSE, 0.78), (30.0, 0.7)):
        run = scenario(graceful(response, grown=True), sizes_every=POLL)
        assert run.share(EPISODE) > max(without, scenario(graceful(response)).share(EPISODE))
        assert run.lowest > 0


def test_on_kafkas_quotas_the_shipped_policy_writes_what_it_wrote_on_real_kafka():
    """Kafka's quota sensors and the producers' mute-then-burst (`kafka_load`): the shipped
    policy, checked every second as the exporter runs it, writes 70-78 % of the bound at a
    steady load (median 74 %; from a cold start 68-81 %, median 72 %, and real runs then
    71-76 %, docs/results/slowdown.md), stays above the limit (1.1 MB at the least; real from
    a cold start: 1.6-1.9 MB), goes 8.2 s without an acknowledgement at the median (real:
    7.8-9.4 s) and has every quota entity back at its rate 3.8 s after the space was freed at
    the median (real: 0-4.2 s)."""
    spread = Spread.of(ON_KAFKA["shipped: totals, checked, response 14 s"])
    assert spread.shares[0] > 0.65 and Spread.median(spread.shares) < 0.78
    assert spread.lowest[0] > 500_000
    assert Spread.median(spread.stalls) < 10.0 and Spread.median(spread.backs) <= 5.0


def test_on_kafkas_quotas_the_horizon_trades_headroom_not_bytes():
    """The shipped policy (totals, checked) with horizons of 20-60 s, the scenario's load filling
    the room above the limit in about 50 s: none writes 80 % of the bound (median 66 / 76 / 74 /
    70 %), and the shorter the horizon, the less headroom is left at the least (0.09 / 0.61 /
    1.08 / 1.35 MB): the headroom it keeps at the first slowdown is spent by the time retention
    frees, and after that the response time decides (`settled_share`). Real Kafka agrees
    (`python -m bench.slowdown --policy graceful-slowdown --horizon ...`, one run each: 75 / 76 /
    76 / 74 % of the bound, 0.6 / 1.0 / 1.9 / 2.2 MB above the limit), except that at 20 s the
    model's factor falls deeper (66 %, producers stalled 15 s at the median) than Kafka's did
    (75 %, 9.1 s)."""
    horizons = (20.0, 30.0, 40.0, 60.0)
    spreads = [Spread.of(partial(graceful, checks=True, horizon=h)) for h in horizons]
    assert all(Spread.median(spread.shares) < 0.80 for spread in spreads)
    lowest = [spread.lowest[0] for spread in spreads]
    assert lowest == sorted(lowest) and lowest[0] < 200_000 < 1_000_000 < lowest[2]


def test_on_kafkas_quotas_the_shipped_policy_with_sizes_rides_at_83_percent():
    """`kvq.throttle.slowdown.partition.sizes=true` as shipped, on Kafka's quotas: the level
    over the last 30 s, its drops paced, read at each poll: 80-85 % of the bound (median 83 %),
    above the limit in every run (0.47 MB at the least), producers never more than 11 s without
    an acknowledgement (8.4 s at the median), every quota entity back at its rate within 9 s of
    the space freed (3.8 s at the median). What it gave up for the 40 principals (below): before
    the margin of two bursts and the approach's drops paced on what the volume fills by, 82-87 %
    (median 84 %) and 10 s at the most. On real Kafka (docs/policy-study.md) 81 %, 1.5 MB above the
    limit, 10.4 s at the longest."""
    spread = Spread.of(ON_KAFKA["shipped: partition sizes, checked, response 14 s"])
    assert spread.shares[0] > 0.79 and Spread.median(spread.shares) >= 0.82
    assert spread.lowest[0] > 0
    assert spread.stalls[-1] <= 11.0 and Spread.median(spread.backs) <= 5.0


def test_the_model_of_40_principals_is_bench_slowdowns():
    """40 producers (the six and 34 more, two per user), 22 users, 10 quota entities (the six's
    four and every third new user's own), together writing what demo.slowdown offers."""
    load = PRINCIPALS_40
    assert len(load.producers) == 40
    assert len({budget for _, budget, _, _, _ in load.producers}) == 22
    assert len(load.entities) == 10
    offered = len(load.producers) * load.rate / kafka_load.WIRE_PER_VALUE
    assert offered == pytest.approx(MANY_PRINCIPALS_RATE)


def test_the_warm_up_outlasts_the_step_window_so_the_references_are_the_steady_rates():
    """bench/slowdown starts from a steady load: with its warm-up the enforcer's references for
    the 40 principals at the first slowdown are what a load twice as long warmed up gives. With
    the 30 s warm-up it had before (the study's, `kafka_load.WARM_UP`), each reference was no
    higher than what its entity wrote a step window (kvq.enforcer.throttle.observed.rate.step
    .window, 30 s) before the episode, in the producers' first seconds: about a fifth lower
    here, less than half on real Kafka."""

    def references(warm_up: float) -> dict[str, float]:
        run = on_kafka(reading_the_forecast, writers=PRINCIPALS_40, warm_up=warm_up, **FREED)
        assert run.kafka is not None
        return run.kafka.load.references

    steady, longer = references(WARM_UP_SECONDS), references(2 * WARM_UP_SECONDS)
    assert steady.keys() == longer.keys()
    assert all(steady[e] == pytest.approx(longer[e], rel=0.03) for e in steady)
    short = references(kafka_load.WARM_UP)
    assert all(short[e] < 0.9 * steady[e] for e in steady)


def test_with_40_principals_the_level_on_sizes_stays_above_the_limit_as_the_totals_do():
    """`python -m bench.slowdown --principals 40`: each of the 40 writes about 8 kB/s into a
    64 kB buffer, eight seconds of its writes (each of the six's buffers holds under one second
    of its 75 kB/s), and Kafka lets a throttled producer's next request pass before muting it:
    what the producers buffer comes through seconds late, at every quota the level lowers. The
    level alone went past the limit in 21 of the 25 runs (and on real Kafka in both runs, by
    41 kB and 0.3 MB). Now, in the approach, while retention frees less than a tenth of the
    growth, the drops are also paced on what the volume fills by (the totals' depth), the margin
    is at least two of the largest bursts seen (a 5 s window's growth above the 30 s window's
    rate), and a restart keeps the peaks: above the limit in all 25 runs (0.18 MB at the least),
    75-82 % of the bound (80 % at the median), a producer 15 s without an acknowledgement at the
    median. The totals keep at least 0.5 MB above it at 73 % of the bound at the median."""
    sizes = spread_of_40("shipped: partition sizes, checked, response 14 s")
    assert sizes.lowest[0] > 0 and Spread.median(sizes.shares) >= 0.79
    assert Spread.median(sizes.stalls) < 15.0
    totals = Spread.of(ON_KAFKA["shipped: totals, checked, response 14 s"], writers=PRINCIPALS_40)
    assert totals.lowest[0] > 500_000 and Spread.median(totals.shares) >= 0.70
    assert Spread.median(sizes.shares) > Spread.median(totals.shares)


def test_the_shipped_policy_reading_kafkas_retention_forecast_stalls_less():
    """The shipped level on the partitions' sizes with Kafka's forecast of what retention frees
    by each of the next two minutes' 5 s (`reading_the_forecast`, `foreseen_reach`; its margin 2
    s of the window's rate and one burst, its rises held on 2 s of the peak, its drops paced
    only from where a paced descent holds). The 40: 79-86 % of the bound (83 % at the median,
    without the forecast 80 %), above the limit in every run (0.50 MB at the least), no producer
    more than 9.5 s without an acknowledgement (without: 20.8 s). The six: 81-88 % (85 %;
    without: 83 %), 0.29 MB at the least, 10.8 s at the most (with a margin of 4 s: 78-86 %,
    0.74 MB, 9.5 s; on real Kafka with 2 s, 5.8-8.2 s in three runs). A 10x step after the
    first slowdown stays above the limit in every run (0.28 MB at the least), and one 10 s into
    the load, which the level without the forecast lets cross the limit in 11 of the 25 runs
    (by 1.36 MB), in every run too (1.44 MB at the least). The level
    expects its factor times the peak, and the 40 write about 1.4 times that (each quota held at
    its request minimum): it spends the headroom early in the approach; an enforcer calibrated to
    write what the level expects wrote less (docs/policy-study.md)."""
    name = "shipped: partition sizes and Kafka's retention forecast"
    forty, shipped = (
        spread_of_40(name),
        spread_of_40("shipped: partition sizes, checked, response 14 s"),
    )
    assert forty.lowest[0] > 0 and forty.stalls[-1] < shipped.stalls[-1]
    assert Spread.median(forty.shares) >= Spread.median(shipped.shares) - 0.02
    six = spread_on_kafka(name)
    assert six.lowest[0] > 0 and Spread.median(six.shares) >= 0.80 and six.stalls[-1] < 11.0
    assert all(lowest > 0 for lowest in step_lowest(reading_the_forecast, STEPS[1]))
    assert all(lowest > 0 for lowest in step_lowest(reading_the_forecast, STEPS[0]))


def test_foreseeing_retention_a_step_before_the_first_slowdown_is_held_at_once():
    """The 10x step 10 s into the load, with Kafka's forecast read: the step leaves the factor at
    0.4-0.8, far above a level that foresees nothing freed for most of a minute. Held at once no
    higher than the factor from which a paced descent fits in the headroom above the level's
    margin plus what retention frees over the next 20 s (`GracefulSlowdown.paced_reach`), the
    volume stays above its limit in every run (1.44 MB at the least; 0.06 MB with every broker
    measuring quotas over 3 s, the recommended quota.window.num). Paced down from the step
    instead, as before, it crossed (`python -m bench.policy_study`)."""
    assert all(lowest > 0 for lowest in step_lowest(reading_the_forecast, STEPS[0]))
    three = {"quota_window_samples": 3}
    assert all(lowest > 0 for lowest in step_lowest(reading_the_forecast, STEPS[0], **three))


def test_with_40_principals_buffering_under_a_second_the_level_on_sizes_stays_above_the_limit():
    """`python -m bench.slowdown --principals 40 --producer-buffer 6`: each librdkafka producer
    buffers 6 kB, under a second of its 8 kB/s (the Java producers 16 KiB, their batch). Above
    the limit in every run (1.2 MB at the least), 78 % of the bound at the median (84 % before
    the changes above: the margin of two bursts costs them). On real Kafka, before those
    changes, it stayed above the limit in three runs (by 0.8 MB, 0.9 MB and 8 kB) at 83-85 %."""
    spread = Spread.of(
        ON_KAFKA["shipped: partition sizes, checked, response 14 s"],
        writers=kafka_load.principals(40, buffer_kb=6),
    )
    assert spread.lowest[0] > 0 and Spread.median(spread.shares) >= 0.77


def test_on_kafkas_quotas_a_step_before_the_first_slowdown_is_held_by_references_from_before_it():
    """The 10x step 10 s into the load: the first slowdown comes seconds after it, and the
    enforcer's observed-rate references taken then hold the step's rate: until the policy's
    first restart the volume crosses its limit in most of the 25 runs (loops of 2-6 s; the
    variants' too, `python -m bench.policy_study`). With the step window
    (kvq.enforcer.throttle.observed.rate.step.window, `before_step`) the references are what
    the entities wrote before the step, and the first slowdown holds it in every run. What
    crosses then is the restart: retention deleting the step's segments a retention time later
    frees a tenth of the scenario's small volume within one poll, the factor goes back to 1.0
    and the stepped load crosses the limit (most of the runs)."""
    make = ON_KAFKA["shipped: totals, checked, response 14 s"]
    unguarded = step_restarts(make, 10.0, step_window=0.0)
    assert sum(before < 0 for before, _ in unguarded) >= 10
    guarded = step_restarts(make, 10.0)
    assert all(before > 0 for before, _ in guarded)


def test_on_kafkas_quotas_retention_checks_seconds_apart_cost_the_partition_sizes_their_lead():
    """bench/slowdown's broker checks retention every second; Kafka's default is every 5
    minutes. Between two checks retention frees nothing, then a chunk: with the partitions'
    sizes read, the level reads what retention freed over the last 30 s (believed at once when
    it falls over the last 10 s), so checks 5 s apart still hold the volume above its limit,
    but checks 30 s apart (half the retention time; the room filling in about 50 s) leave
    the level riding on chunks, and it crosses the limit in most runs, as the totals do: the
    floor and what the producers buffered fill the room between two checks. Nine of the 25
    runs (`check_table` has them all)."""
    runs = {"delays": (2.0, 4.0, 6.0), "phases": (0, 2, 4)}
    sizes = ON_KAFKA["shipped: partition sizes, checked, response 14 s"]
    totals = ON_KAFKA["shipped: totals, checked, response 14 s"]
    assert Spread.of(sizes, retention_check=5.0, **runs).lowest[0] > 0
    for make in (sizes, totals):
        lowest = Spread.of(make, retention_check=30.0, **runs).lowest
        assert sum(b < 0 for b in lowest) >= 6


WINDOW_3 = {"quota_window_samples": 3}


def approach_runs(burst_ratio: float) -> list:
    """The 40 buffering 24 kB (`--principals 40 --producer-buffer 24 --quota-window-samples 3`)
    under the shipped policy with Kafka's forecast, over DELAYS x PHASES, their references 1.3
    times what they write sustained, as Kafka's 3 s sensors read them on real runs."""
    load = replace(
        kafka_load.principals(40, buffer_kb=24), reference_swing=1.3, burst_ratio=burst_ratio
    )
    return [
        on_kafka(reading_the_forecast, delay, phase=phase, writers=load, **WINDOW_3, **FREED)
        for delay in DELAYS
        for phase in PHASES
    ]


def test_a_burst_ratio_keeps_the_approach_off_the_quotas_that_stall_a_java_producer():
    """With references 1.3 times the sustained rates and a factor scaling them as they are
    (burst ratio 1), the level is overrun (the entities write 1.3 times the share it plans) and
    catches up at the end of its approach with factors of 0.11-0.14 at the least, where a Java
    producer's 24 kB request waits more than 10 s in 2 runs of 25 (11.2 s); on real Kafka,
    0.10-0.15 and 10.4-13.6 s in 3 runs of 9. Scaling the sustained rate below 1
    (kvq.enforcer.throttle.observed.rate.burst.ratio 1.35, `sustained_share`) ends the approach
    at 0.33 or above (0.37 at the median), no stall reaches 7.2 s, and the median share is the
    same (82 %)."""

    def lowest_factor(run) -> float:
        return min(f for t, f in run.factors if run.slowed <= t < run.slowed + EPISODE)

    scaled, sustained = approach_runs(1.0), approach_runs(1.35)
    lowest = [sorted(map(lowest_factor, runs)) for runs in (scaled, sustained)]
    assert lowest[0][0] < 0.15 and lowest[1][0] > 0.2
    assert Spread.median(lowest[1]) > Spread.median(lowest[0]) + 0.1
    assert max(run.stall() for run in scaled) > 10.0 > max(run.stall() for run in sustained)
    assert all(run.lowest > 0 for run in scaled + sustained)
    shares = [sorted(run.share(EPISODE) for run in runs) for runs in (scaled, sustained)]
    assert Spread.median(shares[1]) >= Spread.median(shares[0]) - 0.01


def test_a_ten_times_load_step_in_the_grace_after_the_space_is_freed_stays_off_the_limit():
    """Within the grace after the space is freed (the loop's response and a step's window: 19 s)
    a step is taken for the backlog of the quotas' lift: it enters neither the peak nor the
    level at once, and the level on the window's rate alone slows it. A 10x step 1 to 10 s
    after the space (32 MB) was freed leaves 19.4-23.4 MB above the limit at the least, more
    than one 40 s after, which is met as any step (10.9 MB; loops of 2, 3 and 5 s; the six, the
    forecast read, every broker measuring quotas over 3 s)."""
    for delay in (2.0, 3.0, 5.0):
        after_the_grace = step_after_freed(delay, 40.0)
        assert 0 < after_the_grace < min(step_after_freed(delay, s) for s in (1.0, 5.0, 10.0))


def step_after_freed(delay: float, seconds: float) -> float:
    """The lowest headroom after the space is freed under a 10x load step `seconds` after it
    (`reading_the_forecast`, a loop of `delay` s, quota.window.num 3)."""
    three = {"quota_window_samples": 3}
    freed = on_kafka(reading_the_forecast, delay, **three, **FREED).kafka
    assert freed is not None and freed.freed is not None
    step = {"load_step": (freed.freed + seconds, 10), "duration": KAFKA_RUN + 60}
    run = on_kafka(reading_the_forecast, delay, freed_after=EPISODE, **three, **step)
    assert run.kafka is not None and run.kafka.lowest_after_freed is not None
    return run.kafka.lowest_after_freed

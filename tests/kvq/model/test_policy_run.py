"""PolicyRun: a policy applied to successive observations, each volume's previous readings kept."""

from dataclasses import dataclass
from typing import ClassVar

from kvq.model.limits import MinAvailableBytes
from kvq.model.policy_run import PolicyRun
from kvq.model.throttle_factor_policy import UNTHROTTLED
from kvq.model.volume import Volume


@dataclass(frozen=True)
class SlowDownWhileShrinking:
    """A policy with history, as the next one will be: 0.5 while a volume shrinks, else 1.0."""

    limit: MinAvailableBytes
    history: ClassVar[int] = 1
    growth_windows: ClassVar[tuple[float, ...]] = ()
    looks_back: ClassVar[tuple[float, ...]] = ()
    reads_forecast: ClassVar[bool] = False
    accumulates: ClassVar[bool] = False
    gauges: ClassVar[tuple[str, ...]] = ()

    def volume_factor(self, reading, previous, depth, ops):
        if not previous:
            return UNTHROTTLED
        shrinking = reading.available_bytes < previous[0].available_bytes
        return ops.choose(shrinking, 0.5, UNTHROTTLED)


def test_a_policy_run_hands_each_volume_its_previous_reading_and_cached_volumes_keep_their_factor():
    run = PolicyRun(SlowDownWhileShrinking(MinAvailableBytes(10)))
    a, b = Volume(0, "/a", 100, 90), Volume(1, "/a", 100, 90)
    assert run.calculate([a, b], time=0.0).factor == 1.0  # no previous reading yet
    shrunk = Volume(0, "/a", 100, 80)
    assert run.calculate([shrunk, b], time=60.0).factor == 0.5
    # /a of broker 0 missing from this observation: judged from cache, with the factor it got
    assert run.calculate([b], cached=[shrunk], time=120.0).factor == 0.5
    # seen again, unchanged since its previous reading (the one at 60 s): no longer shrinking
    assert run.calculate([shrunk, b], time=180.0).factor == 1.0

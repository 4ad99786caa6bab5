"""graceful-slowdown as the real-Kafka demos run it (`make demo SCENARIO=slowdown` and the
`kvq-graceful` guard of `SCENARIO=versus`): the policy and enforcer references
docs/install-kubernetes.md switches the chart to, with a horizon scaled to their 32 MiB volumes
and the response time of the recommended loop."""

from __future__ import annotations

from typing import TypedDict

from devkit.loop_settings import LoopSettings, iso_duration, recommended
from enforcer.settings import OBSERVED_RATE_BURST_RATIO
from exporter.settings import VIOLATION_CHECK_INTERVAL
from kvq.settings.config import (
    SLOWDOWN_HORIZON,
    SLOWDOWN_PARTITION_SIZES,
    SLOWDOWN_RESPONSE,
    SLOWDOWN_RETENTION_FORECAST,
)

HORIZON = "PT40S"
"""kvq.throttle.slowdown.horizon: the demos' loads would fill their volume's room above the limit
in about a minute (the default PT10M suits disks that fill over hours), so graceful-slowdown
slows them well before the limit; the loop (poll, scrape, rule, Alertmanager, enforcer) takes
about 10 s to act on a factor."""
ALERT_TO_ENFORCE_SECONDS = 2.0
"""From a step's alert firing to Kafka's quotas written and verified at its factor: Alertmanager's
group_interval (1 s: a step while the alert fires) and the enforcer's write on this real Kafka
cluster; the slowdown scenario prints what the enforcer measured (its alert-to-enforce
histogram)."""
LOOP = recommended()
"""The loop the real-Kafka demos run: the chart's intervals (devkit/loop_settings.recommended)."""


def response_seconds(loop: LoopSettings) -> float:
    """kvq.throttle.slowdown.response.time for `loop`, from a change of a volume's fill rate to
    the quotas following it: two polls (the fill rate, a median of three intervals, shows a
    change two polls later), the scrape and the rule, then ALERT_TO_ENFORCE_SECONDS; 14 s with
    the recommended loop's 5 s polls."""
    return 2 * loop.poll + loop.scrape + loop.evaluation + ALERT_TO_ENFORCE_SECONDS


RESPONSE_SECONDS = response_seconds(LOOP)
"""The recommended loop's response time (`response_seconds`)."""
ENFORCER_PROPERTIES = {
    # The factor scales what each principal was writing when the episode started (Kafka's quota
    # sensors via the brokers' JMX exporter and Prometheus), not its quota: a quota far above
    # the rate it meets would not slow it.
    "graceful-slowdown": "kvq.enforcer.throttle.reference=observed-rate\n",
}


def policy_properties(
    policy: str,
    violation_check_interval: str | None = None,
    partition_sizes: bool = False,
    horizon: str = HORIZON,
    retention_forecast: bool = False,
    loop: LoopSettings = LOOP,
    burst_ratio: float | None = None,
) -> str:
    """The kvq.properties lines of `policy`'s run: the policy, its horizon (the demos' HORIZON
    unless given) and `loop`'s response time, the enforcer's reference (with `burst_ratio`, its
    burst ratio), the exporter's check interval if given, and for graceful-slowdown with
    `partition_sizes` the partitions' sizes read (and with `retention_forecast` too, Kafka's
    retention forecast)."""
    text = (
        f"kvq.throttle.policy={policy}\n{SLOWDOWN_HORIZON}={horizon}\n"
        f"{SLOWDOWN_RESPONSE}={iso_duration(response_seconds(loop))}\n"
    )
    text += ENFORCER_PROPERTIES.get(policy, "")
    if burst_ratio is not None and policy in ENFORCER_PROPERTIES:
        text += f"{OBSERVED_RATE_BURST_RATIO}={burst_ratio:g}\n"
    if violation_check_interval is not None:
        text += f"{VIOLATION_CHECK_INTERVAL}={violation_check_interval}\n"
    if partition_sizes and policy == "graceful-slowdown":
        text += f"{SLOWDOWN_PARTITION_SIZES}=true\n"
        if retention_forecast:
            text += f"{SLOWDOWN_RETENTION_FORECAST}=true\n"
    return text


class StackOptions(TypedDict, total=False):
    """The DemoStack options a policy's run sets."""

    jmx_exporter: bool
    enforcer_prometheus: bool


def stack_options(policy: str) -> StackOptions:
    """The DemoStack options of `policy`'s run: the brokers carry the JMX exporter (for every
    policy, so that runs side by side share their brokers' setup); only an observed-rate
    enforcer asks Prometheus."""
    return {"jmx_exporter": True, "enforcer_prometheus": policy in ENFORCER_PROPERTIES}

"""RetentionCheckAudit: whether the brokers check retention often enough for the partitions'
sizes (kvq.throttle.slowdown.partition.sizes) to be what the policy counts on."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

from exporter.cluster_client import ClusterError
from kvq.model.observation import Observation

log = logging.getLogger("kvq.exporter")

RETENTION_CHECK = "log.retention.check.interval.ms"
LONGEST_CHECK_MS = 5_000
"""The longest interval between retention checks the level on the sizes holds the model's
scenario above its limit with (docs/policy-study.md#retention-checks-seconds-apart)."""
KAFKA_DEFAULT_MS = 300_000
DOCS = "docs/policies.md#riding-what-retention-frees-the-partitions-sizes"

Ask = Callable[[Iterable[int], str], dict[int, str | ClusterError]]


class RetentionCheckAudit:
    """Once, at the first successful observation: asks every active broker its
    `log.retention.check.interval.ms` and warns about those that check less often than
    LONGEST_CHECK_MS (Kafka's default is 5 minutes: between two checks retention frees nothing,
    then a chunk, and the level on the sizes rides on the chunks), or that could not be asked."""

    def __init__(self, ask: Ask) -> None:
        self._ask = ask
        self.done = False

    def __call__(self, observation: Observation) -> None:
        if self.done or not observation.succeeded:
            return
        self.done = True
        answers = self._ask(observation.active_brokers, RETENTION_CHECK)
        intervals = {b: _ms(v) for b, v in answers.items() if isinstance(v, str)}
        rare = {b: ms for b, ms in intervals.items() if ms > LONGEST_CHECK_MS}
        failed = {b: v for b, v in answers.items() if isinstance(v, ClusterError)}
        if rare:
            log.warning(
                "brokers %s check retention every %s ms (%s): the partitions' sizes are read, and "
                "graceful slowdown counts on checks at most %d ms apart (between two checks "
                "nothing is freed, then a chunk); lower it on these brokers, or read the totals "
                "alone (%s)",
                ", ".join(map(str, sorted(rare))),
                "/".join(map(str, sorted(set(rare.values())))),
                RETENTION_CHECK,
                LONGEST_CHECK_MS,
                DOCS,
            )
        if failed:
            first = next(iter(failed.values()))
            log.warning(
                "could not read %s of brokers %s (%s): the partitions' sizes count on retention "
                "checks at most %d ms apart; check it yourself (%s)",
                RETENTION_CHECK,
                ", ".join(map(str, sorted(failed))),
                first,
                LONGEST_CHECK_MS,
                DOCS,
            )


def _ms(value: str) -> int:
    """A broker's `log.retention.check.interval.ms` (unset: Kafka's default, 5 minutes; not a
    number: 0, no warning)."""
    try:
        return int(value or KAFKA_DEFAULT_MS)
    except ValueError:
        return 0

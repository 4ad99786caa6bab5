"""RetentionCheckAudit: whether the brokers check retention often enough for the partitions'
sizes (kvq.throttle.slowdown.partition.sizes) to be what the policy counts on."""

from __future__ import annotations

import logging
import threading
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
    then a chunk, and the level on the sizes rides on the chunks), or that could not be asked.
    In a thread of its own: a broker that does not answer delays no poll."""

    def __init__(self, ask: Ask) -> None:
        self._ask = ask
        self.done = False
        self._thread: threading.Thread | None = None

    def __call__(self, observation: Observation) -> None:
        if self.done or not observation.succeeded:
            return
        self.done = True
        brokers = observation.active_brokers
        self._thread = threading.Thread(
            target=self._audit, args=(brokers,), name="kvq-retention-check-audit", daemon=True
        )
        self._thread.start()

    def join(self, timeout: float | None = None) -> None:
        """Wait for the audit begun, if any."""
        if self._thread is not None:
            self._thread.join(timeout)

    def _audit(self, brokers: tuple[int, ...]) -> None:
        try:
            answers = self._ask(brokers, RETENTION_CHECK)
        except Exception as exc:  # noqa: BLE001 - e.g. the exporter stopping: nothing to warn of
            log.debug("retention check audit ended: %s", exc)
            return
        intervals = {b: check_interval_ms(v) or 0 for b, v in answers.items() if isinstance(v, str)}
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


def check_interval_ms(value: str) -> int | None:
    """A broker's `log.retention.check.interval.ms` (unset: Kafka's default, 5 minutes; not a
    number: None)."""
    try:
        return int(value or KAFKA_DEFAULT_MS)
    except ValueError:
        return None

"""ActingRole: which enforcer replica acts, decided by a Kafka consumer group.

Every replica of an installation joins consumer group `kvq.enforcer.state.group` on the state
topic of its first cluster (one partition). The member Kafka assigns that partition to is the
one that acts; when it stops heartbeating (its process or node died, it was cut off) for
`session.timeout.ms`, Kafka assigns the partition to another member, which then takes over:
this is how Kafka Connect elects its leader. The cooperative sticky assignor keeps the partition
where it is when a member joins or leaves: a restarted standby does not move the role.

Being assigned the partition is not what makes writes safe (two members may both believe they
hold it for a moment: a cut-off member learns it lost the partition only when it is back); the
fence is the state log's transactional id (state_log.py), which the new holder takes over before
acting. The group only decides who should act, and wakes the standby up when the actor is gone.

The actor also reads the partition: webhooks a standby received are appended there
(inbox.py), and the actor handles them in order, committing the group's offset after each, so a
notification a standby accepted is handled exactly once by whoever acts, even across a failover
(the new actor resumes after the last offset committed; a notification handled twice changes
nothing twice anyway: the enforcer's alert state is idempotent).

The poll loop runs on its own thread; `on_acting(True)` / `on_acting(False)` and the inbox
handler run on it too, never inside kafka-python's IO loop (which must keep heartbeating).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

from enforcer.state_log import client_keywords, close_quietly
from kvq.kafka.admin_session import describe_error

log = logging.getLogger("kvq.enforcer.state")

SESSION_TIMEOUT_MS = 6_000
"""How long a silent actor keeps the role: the brokers' lowest allowed value by default
(group.min.session.timeout.ms), so that a failover starts within about 6 s of a crash."""
HEARTBEAT_INTERVAL_MS = 1_000
POLL_TIMEOUT_MS = 200
RETRY_S = 1.0
"""After a failed take-over (Kafka unreachable), how long before trying again."""


class ActingRole:
    """One replica's membership in the election; `acting` says whether it acts now."""

    def __init__(
        self,
        admin_properties: Mapping[str, str],
        topic: str,
        group_id: str,
        on_acting: Callable[[bool], bool],
        on_inbox: Callable[[str, bytes], None],
        is_inbox: Callable[[str], bool],
        client_id: str = "kvq-enforcer-election",
        session_timeout_ms: int = SESSION_TIMEOUT_MS,
        before_join: Callable[[], None] = lambda: None,
    ) -> None:
        """`on_acting(True)`: take over (returns False if it could not: tried again later);
        `on_acting(False)`: stop acting. `on_inbox(key, value)`: handle one inbox record
        (raising leaves it to be handled again); `is_inbox(key)`: whether a record is one.
        `before_join()`: what must hold before joining (the topic exists); retried until it
        does not raise."""
        self._before_join = before_join
        self.topic = topic
        self.group_id = group_id
        self._properties = dict(admin_properties)
        self._on_acting = on_acting
        self._on_inbox = on_inbox
        self._is_inbox = is_inbox
        self._client_id = client_id
        self._session_timeout_ms = session_timeout_ms
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._acting = False
        self._lost = threading.Event()
        self._afresh = threading.Event()
        """Set: stand down, drop this membership and join as a new member (see _leave)."""
        self._retry_at = 0.0
        self.error: str | None = None
        """Why the last poll or take-over failed (None: it did not)."""
        self.member_id: str | None = None
        """This replica's membership in the group, as `kafka-consumer-groups.sh --describe
        --members` lists it (None while it has none)."""

    @property
    def acting(self) -> bool:
        return self._acting

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="kvq-election", daemon=True)
        self._thread.start()

    def stop(self, timeout_s: float = 10.0) -> None:
        """Leave the group (another member takes over at once) and stop acting."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout_s)

    def _run(self) -> None:
        consumer = None
        try:
            while not self._stop.is_set():
                if consumer is not None and self._afresh.is_set():
                    self._leave(consumer)
                    consumer = None
                if consumer is None:
                    consumer = self._joined()
                    if consumer is None:
                        self._stop.wait(RETRY_S)
                        continue
                try:
                    records = consumer.poll(timeout_ms=POLL_TIMEOUT_MS)
                    self.member_id = _member_id(consumer)
                    astray = _astray(consumer)
                    if astray:
                        log.warning(
                            "group %s, member %s: %s; joining afresh",
                            self.group_id,
                            self.member_id,
                            astray,
                        )
                        self._afresh.set()
                        continue
                    self._follow(self._holds(consumer))
                    if self._acting:
                        self._handle(consumer, records)
                except Exception as exc:  # noqa: BLE001 - the election must survive anything
                    self._failed(f"polling group {self.group_id} failed: {describe_error(exc)}")
                    self._drop(consumer)
                    consumer = None
                    self._stop.wait(RETRY_S)
        finally:
            self._follow(False)
            if consumer is not None:
                close_quietly(partial(consumer.close, autocommit=False))

    def _joined(self) -> Any:
        from kafka import KafkaConsumer
        from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyAssignor

        keywords = client_keywords(self._properties, 30_000, self._client_id)
        try:
            self._before_join()
            consumer = KafkaConsumer(
                **keywords,
                group_id=self.group_id,
                enable_auto_commit=False,
                auto_offset_reset="earliest",
                session_timeout_ms=self._session_timeout_ms,
                heartbeat_interval_ms=min(HEARTBEAT_INTERVAL_MS, self._session_timeout_ms // 3),
                partition_assignment_strategy=[CooperativeStickyAssignor],
            )
            # the topic's partition known before the first join: a leader assigning it in a
            # second, metadata-triggered rebalance is what can wedge the client (see _wedged)
            consumer.partitions_for_topic(self.topic)
            consumer.subscribe([self.topic])
        except Exception as exc:  # noqa: BLE001
            self._failed(f"cannot join group {self.group_id}: {describe_error(exc)}")
            return None
        return consumer

    def _holds(self, consumer: Any) -> bool:
        return any(tp.topic == self.topic for tp in consumer.assignment())

    def _follow(self, holds: bool) -> None:
        """Act if the group says so (taking over first), stop if it no longer does or the fence
        said another replica took over (then take over again later if the group still says)."""
        if self._lost.is_set():
            self._lost.clear()
            if self._acting:
                self._acting = False
                self._retry_at = time.monotonic() + RETRY_S
                self._on_acting(False)
        if holds and not self._acting and time.monotonic() >= self._retry_at:
            self._acting = self._on_acting(True)
            if not self._acting:
                self._retry_at = time.monotonic() + RETRY_S
            else:
                self.error = None
        elif not holds and self._acting:
            self._acting = False
            self._on_acting(False)

    def lost(self, fenced: bool = True) -> None:
        """A write failed: stop acting at the next poll (and take over again later if the group
        still says so). `fenced`: the fence refused it, another replica took over: then leave
        the group and join it afresh before polling again. Callable from any thread."""
        if fenced:
            self._afresh.set()
        self._lost.set()

    def _leave(self, consumer: Any) -> None:
        """Stand down and drop this membership. A member that lost its membership while cut off
        (the group gave the partition to another) rejoins claiming the partition it held, as
        kafka-python keeps it in its subscription, and the assignor may hand it back: the role
        would move back to a replica that has just been fenced. A fresh member claims nothing,
        and the role stays where it is. Also how a member whose join the client wedged
        (_wedged) gets back into the group."""
        self._afresh.clear()
        self._drop(consumer)

    def _drop(self, consumer: Any) -> None:
        """Stand down and close the client: its membership goes with it."""
        self._follow(False)
        self.member_id = None
        close_quietly(partial(consumer.close, autocommit=False))

    def _handle(self, consumer: Any, records: Mapping[Any, list[Any]]) -> None:
        """Hand every inbox record to `on_inbox` in order; commit the offset after the last
        one handled. One that fails is read again at the next poll (after RETRY_S)."""
        from kafka.structs import OffsetAndMetadata

        for partition, batch in records.items():
            done = None
            for record in batch:
                key = record.key.decode() if record.key is not None else ""
                if record.value is not None and self._is_inbox(key):
                    try:
                        self._on_inbox(key, record.value)
                    except Exception as exc:  # noqa: BLE001 - retried, never skipped
                        self._failed(f"handling {key} failed (retrying): {describe_error(exc)}")
                        consumer.seek(partition, record.offset)
                        self._stop.wait(RETRY_S)
                        break
                done = record.offset + 1
            if done is not None:
                consumer.commit({partition: OffsetAndMetadata(done, "", -1)})

    def _failed(self, message: str) -> None:
        if message != self.error:
            log.warning("%s", message)
        self.error = message


def _member_id(consumer: Any) -> str | None:
    """The member id the group gave this client (None before it joined). Private state of
    the client's group coordinator, like _astray's: kafka-python makes none of it public."""
    generation = getattr(getattr(consumer, "_coordinator", None), "_generation", None)
    member_id = getattr(generation, "member_id", "")
    return member_id or None


def _astray(consumer: Any) -> str | None:
    """Why this membership no longer reflects the group (None: it does). Read from the
    client's group coordinator, private state: there is no public sign of either."""
    coordinator: Any = getattr(consumer, "_coordinator", None)
    if coordinator is None:
        return None
    if _wedged(coordinator):
        return "the client left its join unfinished"
    if _out_of_touch(coordinator):
        return "no answer from the group's coordinator for a session timeout"
    return None


def _out_of_touch(coordinator: Any) -> bool:
    """Whether no heartbeat of this member has been answered for `session.timeout.ms` while its
    group was stable. The coordinator has then evicted it and may have given the partition to
    another member: acting on would make it the second replica acting (which the fence keeps
    from writing, but its metrics and status would still say it acts), so it stands down, and
    rejoins as a new member claiming nothing once it reaches Kafka again. A member cut off in
    the middle of a rebalance waits for its JoinGroup's timeout instead (the rebalance's)."""
    heartbeat = getattr(coordinator, "heartbeat", None)
    enabled = bool(getattr(coordinator, "_heartbeat_enabled", False))
    return heartbeat is not None and enabled and bool(heartbeat.session_timeout_expired())


def _wedged(coordinator: Any) -> bool:
    """Whether kafka-python (3.0.x) left a finished join unprocessed: its group leader records
    the assignment it computes as it computes it, so when a rejoin was needed only because the
    topic's metadata changed and the poll returned before the SyncGroup answer, the next poll
    no longer sees a rejoin as needed and never completes the join. The member then neither
    holds the partition nor heartbeats, and the group evicts it: nobody would act."""
    task = getattr(coordinator, "_join_task", None)
    return task is not None and bool(task.is_done) and not coordinator.need_rejoin()

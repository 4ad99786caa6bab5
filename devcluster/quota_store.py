"""Client quotas with the semantics of a KRaft controller (ClientQuotaControlManager).

An *entity* is a mapping of entity type (``user``, ``client-id``, ``ip``) to a name, where a
``None`` name is the default entity of that type. The store holds, per entity, quota key -> value
(float, as Kafka stores them). This module does no network I/O; it may persist to a snapshot and
a journal (``quota_files``).

Kafka behaviour reproduced here (and relied upon by the tests):
- AlterClientQuotas validates every entry on its own; an invalid entry gets INVALID_REQUEST with
  Kafka's message and changes nothing, the valid entries of the same request are applied.
- An entry's entity is read into a map: a type named twice keeps its last name.
- Keys: ``producer_byte_rate``, ``consumer_byte_rate`` (long), ``request_percentage``,
  ``controller_mutation_rate`` (double) for user / client-id entities; ``connection_creation_rate``
  (int) for ip entities. ``value <= 0`` is rejected; for an integral key, a value above the type's
  maximum (compared in double: 2^63 - 1 passes) or with a fraction over 1e-6. Up to Kafka 4.3,
  NaN passes every check and is stored (and +inf for the double keys); from 4.4 every non-finite
  value is refused first ("must be a finite number"): ``QuotaStore(kafka_version=...)``.
  Removals are never validated.
- One record per changed value or removed stored key; more than 10,000 records fail the whole
  request with POLICY_VIOLATION on every entry, nothing applied.
- Removing a key that is not set is a no-op; an entity without keys disappears.
- ``validate_only`` validates and reports, but stores nothing.
- DescribeClientQuotas filter: exact name, default (null) name, or "specified" (any entity that
  has the type, the default included); ``strict`` requires exactly the filtered types.
"""

from __future__ import annotations

import ipaddress
import math
import threading
import time
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from .kafka_version import DEFAULT_VERSION, FINITE_QUOTAS, Version
from .quota_files import Entity, QuotaFiles, apply

USER = "user"
CLIENT_ID = "client-id"
IP = "ip"
ENTITY_TYPES = (USER, CLIENT_ID, IP)

NONE = 0
UNKNOWN_SERVER_ERROR = -1
UNSUPPORTED_VERSION = 35
INVALID_REQUEST = 42
POLICY_VIOLATION = 44

MATCH_EXACT = 0
MATCH_DEFAULT = 1
MATCH_SPECIFIED = 2

_LONG, _INT, _DOUBLE = "long", "int", "double"
USER_CLIENT_KEYS = {
    "producer_byte_rate": _LONG,
    "consumer_byte_rate": _LONG,
    "request_percentage": _DOUBLE,
    "controller_mutation_rate": _DOUBLE,
}
IP_KEYS = {"connection_creation_rate": _INT}
_LIMITS = {_LONG: float(2**63 - 1), _INT: float(2**31 - 1)}  # Java widens them to double
# The order of entity types in the HashMap Kafka reads an entity into (buckets of a 4-slot table).
_JAVA_MAP_ORDER = {CLIENT_ID: (0, ""), USER: (1, ""), IP: (3, "")}

# QuorumController.MAX_RECORDS_PER_USER_OP: records one AlterClientQuotas may produce.
MAX_RECORDS_PER_USER_OP = 10_000
POLICY_VIOLATION_MESSAGE = "Request parameters do not satisfy the configured policy."
HISTORY_S = 600.0  # how far back a lagging broker's view can reach (the lag fault's maximum)


def entity_key(entity: Mapping[str, str | None] | Iterable[tuple[str, str | None]]) -> Entity:
    pairs = entity.items() if isinstance(entity, Mapping) else entity
    return tuple(sorted(pairs, key=lambda p: _type_order(p[0])))


def _type_order(entity_type: str) -> tuple[int, str]:
    try:
        return ENTITY_TYPES.index(entity_type), entity_type
    except ValueError:
        return len(ENTITY_TYPES), entity_type


@dataclass(frozen=True)
class Op:
    key: str
    value: float
    remove: bool = False


@dataclass(frozen=True)
class Alteration:
    """One entry of an AlterClientQuotas request: the entity as sent (pairs, possibly repeated)."""

    entity: tuple[tuple[str, str | None], ...]
    ops: tuple[Op, ...]


@dataclass(frozen=True)
class Result:
    entity: tuple[tuple[str, str | None], ...]
    error_code: int = NONE
    error_message: str | None = None


@dataclass(frozen=True)
class FilterComponent:
    entity_type: str
    match_type: int
    match: str | None = None


class QuotaError(Exception):
    """A DescribeClientQuotas filter Kafka rejects as a whole."""

    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True)
class _EntityFilter:
    """A DescribeClientQuotas filter, checked as Kafka checks it (QuotaError otherwise)."""

    exact: dict[str, str | None]
    """Entity type -> the name it must have (None: the default entity of that type)."""
    specified: frozenset[str]
    """Entity types it must have, under any name (the default included)."""
    strict: bool
    """Only entities of exactly the filtered types."""

    @classmethod
    def of(cls, components: Iterable[FilterComponent], strict: bool) -> _EntityFilter:
        exact: dict[str, str | None] = {}
        specified: set[str] = set()
        for c in components:
            _check_entity_type(c, set(exact) | specified)
            _check_match(c)
            if c.match_type == MATCH_SPECIFIED:
                specified.add(c.entity_type)
            else:
                exact[c.entity_type] = c.match  # None for MATCH_DEFAULT
        filtered = set(exact) | specified
        if IP in filtered and (USER in filtered or CLIENT_ID in filtered):
            raise QuotaError(
                INVALID_REQUEST,
                "Invalid entity filter component combination. IP filter component should not be "
                "used with user or clientId filter component.",
            )
        return cls(exact, frozenset(specified), strict)

    def matches(self, key: Entity) -> bool:
        entity = dict(key)
        if self.strict and len(entity) != len(self.exact) + len(self.specified):
            return False
        if any(t not in entity or entity[t] != n for t, n in self.exact.items()):
            return False
        return all(t in entity for t in self.specified)


def _check_entity_type(c: FilterComponent, seen: set[str]) -> None:
    if c.entity_type == "":
        raise QuotaError(INVALID_REQUEST, "Invalid empty entity type.")
    if c.entity_type in seen:
        raise QuotaError(
            INVALID_REQUEST,
            f"Entity type {c.entity_type} cannot appear more than once in the filter.",
        )
    if c.entity_type not in ENTITY_TYPES:
        raise QuotaError(UNSUPPORTED_VERSION, f"Unsupported entity type {c.entity_type}")


def _check_match(c: FilterComponent) -> None:
    """The match string as the match type wants it: given for EXACT only."""
    if c.match_type == MATCH_EXACT and c.match is None:
        raise QuotaError(
            INVALID_REQUEST, "Request specified MATCH_TYPE_EXACT, but set match string to null."
        )
    if c.match_type == MATCH_DEFAULT and c.match is not None:
        raise QuotaError(
            INVALID_REQUEST,
            "Request specified MATCH_TYPE_DEFAULT, but also specified a match string.",
        )
    if c.match_type == MATCH_SPECIFIED and c.match is not None:
        raise QuotaError(
            INVALID_REQUEST,
            "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string.",
        )
    if c.match_type not in (MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED):
        raise QuotaError(INVALID_REQUEST, f"Unknown match type {c.match_type}")


class QuotaStore:
    """Thread-safe quota storage; every change persisted when ``path`` is given: a JSON snapshot
    there and a journal of the changes since (``quota_files``)."""

    def __init__(self, path: Path | None = None, kafka_version: Version = DEFAULT_VERSION):
        self.finite_only = kafka_version >= FINITE_QUOTAS
        """Kafka 4.4+: AlterClientQuotas refuses NaN and infinities (stored ones stay)."""
        self._files = None if path is None else QuotaFiles(path, entity_key)
        self._lock = threading.Lock()
        self._data: dict[Entity, dict[str, float]] = {}
        self.generation = 0
        """Counts applied changes: whoever caches the quotas reads them again when it moves."""
        # Applied changes, oldest first: (monotonic time, entity, key, value before, value after),
        # to answer as a broker whose metadata lags (see ``describe``).
        self._history: deque[tuple[float, Entity, str, float | None, float | None]] = deque()
        if self._files is not None:
            self._data = self._files.load()

    # ---- AlterClientQuotas -------------------------------------------------------------------
    def alter(
        self,
        alterations: Iterable[Alteration],
        validate_only: bool = False,
        forced_errors: Mapping[Entity, tuple[int, str]] | None = None,
    ) -> list[Result]:
        """Validate and (unless validate_only) apply; one result per distinct entity, in order.

        As the controller does, the records (one per changed or removed pair) go into a list
        bounded at ``MAX_RECORDS_PER_USER_OP``: one more fails the whole request, every entry
        answered POLICY_VIOLATION and nothing applied (``validate_only`` too). Entities in
        ``forced_errors`` get that (code, message) and change nothing (a fault)."""
        alterations = list(alterations)
        with self._lock:
            results: dict[Entity, Result] = {}
            records: list[tuple[Entity, str, float | None]] = []
            for alt in alterations:
                key = entity_key(dict(alt.entity))  # read into a map: the last name of a type wins
                if forced_errors and key in forced_errors and key not in results:
                    results[key] = Result(key, *forced_errors[key])
                    continue
                keys = [op.key for op in alt.ops]
                if key in results or len(set(keys)) < len(keys):
                    # Kafka records "Duplicate quota key" for a repeated key, then overwrites it
                    # with this message, since the entity now has a result.
                    message = f"Ignoring duplicate entity {java_entity(key)}"
                    results[key] = Result(key, INVALID_REQUEST, message)
                    continue
                error, entity_records = self._check(key, alt.ops)
                if error is not None:
                    results[key] = Result(key, INVALID_REQUEST, error)
                    continue
                if len(records) + len(entity_records) > MAX_RECORDS_PER_USER_OP:
                    return failed_request(alterations, POLICY_VIOLATION, POLICY_VIOLATION_MESSAGE)
                records.extend((key, k, v) for k, v in entity_records)
                results[key] = Result(key)
            if not validate_only and records:
                now = time.monotonic()
                while self._history and self._history[0][0] < now - HISTORY_S:
                    self._history.popleft()
                for record in records:
                    key, quota_key, value = record
                    old = self._data.get(key, {}).get(quota_key)
                    self._history.append((now, key, quota_key, old, value))
                    apply(self._data, record)
                self.generation += 1
                if self._files is not None:
                    self._files.append(records, self._data)
            return [results[key] for key in java_hash_map_order(list(results))]

    def _check(
        self, entity: Entity, ops: Iterable[Op]
    ) -> tuple[str | None, list[tuple[str, float | None]]]:
        """Kafka's error for this entry, or the records it makes: one per value that differs from
        the stored one (NaN equals NaN, as ``Double.equals``), one per removal of a stored key."""
        if not entity:
            return "Invalid empty client quota entity", []
        types = dict(entity)
        for entity_type, name in entity:
            if entity_type not in ENTITY_TYPES:
                return f"Unhandled client quota entity type: {entity_type}", []
            if name is not None and name == "":
                return f"Empty {entity_type} not supported", []
        if IP in types:
            if USER in types or CLIENT_ID in types:
                # Kafka's message, missing space included.
                return (
                    "Invalid quota entity combination, IP entity shouldnot be combined with "
                    "User or ClientId"
                ), []
            if not _valid_ip(types[IP]):
                return f"{types[IP]} is not a valid IP or resolvable host.", []
            valid_keys = IP_KEYS
        else:
            valid_keys = USER_CLIENT_KEYS
        current = self._data.get(entity, {})
        records: list[tuple[str, float | None]] = []
        for op in ops:
            if op.remove:  # never validated; a record only when the key is stored
                if op.key in current:
                    records.append((op.key, None))
                continue
            value = float(op.value)
            error = _check_value(valid_keys, op.key, value, self.finite_only)
            if error:
                return error, []
            if op.key not in current or not _same_double(current[op.key], value):
                records.append((op.key, value))
        return None, records

    # ---- DescribeClientQuotas ----------------------------------------------------------------
    def describe(
        self, components: Iterable[FilterComponent], strict: bool = False, lag_s: float = 0.0
    ) -> list[tuple[Entity, dict[str, float]]]:
        """Entities matching the filter, with their values. Raises QuotaError like Kafka.

        ``lag_s``: answer as a broker whose metadata image is that far behind the controller
        (changes applied within the last ``lag_s`` seconds are not seen yet)."""
        wanted = _EntityFilter.of(components, strict)
        with self._lock:
            data = self._as_of(time.monotonic() - lag_s) if lag_s > 0 else self._data
            out = [(key, dict(values)) for key, values in data.items() if wanted.matches(key)]
        return sorted(out, key=lambda kv: [(_type_order(t), n or "") for t, n in kv[0]])

    def _as_of(self, moment: float) -> dict[Entity, dict[str, float]]:
        """The quotas as they were at ``moment`` (monotonic): later changes undone."""
        view = dict(self._data)
        for when, key, quota_key, before, _ in reversed(self._history):
            if when <= moment:
                break
            values = dict(view.get(key, {}))
            if before is None:
                values.pop(quota_key, None)
            else:
                values[quota_key] = before
            if values:
                view[key] = values
            else:
                view.pop(key, None)
        return view

    def snapshot(self) -> list[dict]:
        """Everything stored, JSON-ready: ``[{"entity": {type: name}, "values": {key: value}}]``."""
        return [{"entity": dict(e), "values": v} for e, v in self.describe([])]


def failed_request(alterations: Iterable[Alteration], code: int, message: str) -> list[Result]:
    """Kafka's error response to a whole AlterClientQuotas request: every entry, its entity as
    sent, the same error; nothing applied."""
    return [Result(alt.entity, code, message) for alt in alterations]


def java_order(entity: Entity) -> Entity:
    """The entity's pairs in the order of the HashMap Kafka holds it in (client-id, user, ip):
    the order of Kafka's AlterClientQuotas response entities and messages."""
    return tuple(
        sorted(entity, key=lambda p: _JAVA_MAP_ORDER.get(p[0], (len(_JAVA_MAP_ORDER), p[0])))
    )


def java_hash_map_order(entities: list[Entity]) -> list[Entity]:
    """`entities` (distinct, in insertion order) in the iteration order of a java.util.HashMap
    keyed by ClientQuotaEntity, the order of Kafka's AlterClientQuotas answers: by bucket of the
    spread hash in the table the map grew to (16 doubling past 0.75 full), insertion order within
    a bucket. (A bucket of 8 or more entities, which HashMap turns into a tree, is not modelled.)"""
    capacity = 16
    while len(entities) > capacity * 3 // 4:
        capacity *= 2

    def bucket(entity: Entity) -> int:
        h = _java_entity_hash(entity)
        return (h ^ (h >> 16)) & (capacity - 1)

    indexed = sorted(enumerate(entities), key=lambda item: (bucket(item[1]), item[0]))
    return [entity for _, entity in indexed]


def _java_entity_hash(entity: Entity) -> int:
    """ClientQuotaEntity.hashCode, Objects.hash(entries): 31 + its map's hash code, the sum of
    key.hashCode() ^ value.hashCode() (null: 0) over the entries; unsigned 32-bit."""
    total = 31
    for entity_type, name in entity:
        total += _java_string_hash(entity_type) ^ (0 if name is None else _java_string_hash(name))
    return total & 0xFFFFFFFF


def _java_string_hash(text: str) -> int:
    """String.hashCode over UTF-16 code units, unsigned 32-bit."""
    units = text.encode("utf-16-be")
    h = 0
    for i in range(0, len(units), 2):
        h = (31 * h + (units[i] << 8 | units[i + 1])) & 0xFFFFFFFF
    return h


def java_entity(entity: Entity) -> str:
    """How Kafka prints a ClientQuotaEntity in messages (``toString`` of its map)."""
    pairs = ", ".join(f"{t}={n}" for t, n in java_order(entity))
    return "ClientQuotaEntity(entries={" + pairs + "})"


def _same_double(a: float, b: float) -> bool:
    """``Double.equals``: NaN equals NaN (and 0.0 differs from -0.0, which <= 0 rejects anyway)."""
    return (math.isnan(a) and math.isnan(b)) or a == b


def _valid_ip(name: str | None) -> bool:
    # Kafka resolves host names with InetAddress.getByName; the devcluster has no DNS, so it accepts
    # IP literals (and the default entity) only.
    if name is None:
        return True
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def _check_value(
    valid_keys: Mapping[str, str], key: str, value: float, finite_only: bool
) -> str | None:
    """Kafka's ``validateQuotaKeyValue``: every comparison in double, so NaN passes them all and
    Long.MAX_VALUE (2^63 as a double) is not "too large"; from 4.4 (`finite_only`) a non-finite
    value is refused before any comparison."""
    kind = valid_keys.get(key)
    if kind is None:
        return f"Invalid configuration key {key}"
    if finite_only and not math.isfinite(value):
        return f"Quota {key} must be a finite number"
    if value <= 0.0:
        return f"Quota {key} must be greater than 0"
    if kind == _DOUBLE:
        return None
    if value > _LIMITS[kind]:
        article = "a" if kind == _LONG else "an"
        return f"Proposed value for {key} is too large for {article} {kind.upper()}."
    if abs(value % 1.0) > 1e-6:
        return f"{key} cannot be a fractional value."
    return None

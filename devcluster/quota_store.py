"""Client quotas with the semantics of a KRaft controller (ClientQuotaControlManager).

An *entity* is a mapping of entity type (``user``, ``client-id``, ``ip``) to a name, where a
``None`` name is the default entity of that type. The store holds, per entity, quota key -> value
(float, as Kafka stores them). This module does no network I/O; it may persist to a JSON file.

Kafka behaviour reproduced here (and relied upon by the tests):
- AlterClientQuotas validates every entry on its own; an invalid entry gets INVALID_REQUEST with
  Kafka's message and changes nothing, the valid entries of the same request are applied.
- Keys: ``producer_byte_rate``, ``consumer_byte_rate`` (long), ``request_percentage``,
  ``controller_mutation_rate`` (double) for user / client-id entities; ``connection_creation_rate``
  (int) for ip entities. A value <= 0 or a fractional value for an integral key is rejected.
- Removing a key that is not set is a no-op; an entity without keys disappears.
- ``validate_only`` validates and reports, but stores nothing.
- DescribeClientQuotas filter: exact name, default (null) name, or "specified" (any entity that
  has the type, the default included); ``strict`` requires exactly the filtered types.
"""

from __future__ import annotations

import ipaddress
import json
import os
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

USER = "user"
CLIENT_ID = "client-id"
IP = "ip"
ENTITY_TYPES = (USER, CLIENT_ID, IP)

NONE = 0
UNKNOWN_SERVER_ERROR = -1
UNSUPPORTED_VERSION = 35
INVALID_REQUEST = 42

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
_LIMITS = {_LONG: 2**63 - 1, _INT: 2**31 - 1}

# An entity as a hashable value: sorted (type, name) pairs.
Entity = tuple[tuple[str, str | None], ...]


def entity_key(entity: Mapping[str, str | None] | Iterable[tuple[str, str | None]]) -> Entity:
    pairs = entity.items() if isinstance(entity, Mapping) else entity
    return tuple(sorted(pairs, key=lambda p: _type_order(p[0])))


def _type_order(entity_type: str) -> tuple[int, str]:
    try:
        return ENTITY_TYPES.index(entity_type), entity_type
    except ValueError:
        return len(ENTITY_TYPES), entity_type


def entity_label(entity: Entity) -> str:
    """Kafka's own rendering, e.g. ``user=alice,client-id=<default>``."""
    return ",".join(f"{t}={'<default>' if n is None else n}" for t, n in entity)


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


class QuotaStore:
    """Thread-safe quota storage; persisted to ``path`` (JSON) after every change when given."""

    def __init__(self, path: Path | None = None):
        self._path = path
        self._lock = threading.Lock()
        self._data: dict[Entity, dict[str, float]] = {}
        if path is not None and path.exists():
            for item in json.loads(path.read_text()):
                self._data[entity_key(item["entity"])] = {
                    k: float(v) for k, v in item["values"].items()
                }

    # ---- AlterClientQuotas -------------------------------------------------------------------
    def alter(self, alterations: Iterable[Alteration], validate_only: bool = False) -> list[Result]:
        """Validate and (unless validate_only) apply; one result per distinct entity, in order."""
        with self._lock:
            results: dict[Entity, Result] = {}
            changes: list[tuple[Entity, str, float | None]] = []
            for alt in alterations:
                key = entity_key(alt.entity)
                if key in results:
                    results[key] = Result(
                        alt.entity, INVALID_REQUEST, f"Ignoring duplicate entity {_render(alt)}"
                    )
                    continue
                error, entity_changes = self._check(alt)
                if error is None:
                    results[key] = Result(alt.entity)
                    changes.extend((key, k, v) for k, v in entity_changes)
                else:
                    results[key] = Result(alt.entity, INVALID_REQUEST, error)
            if not validate_only and changes:
                for key, quota_key, value in changes:
                    if value is None:
                        values = self._data.get(key)
                        if values is not None:
                            values.pop(quota_key, None)
                            if not values:
                                del self._data[key]
                    else:
                        self._data.setdefault(key, {})[quota_key] = value
                self._save()
            return list(results.values())

    def _check(self, alt: Alteration) -> tuple[str | None, list[tuple[str, float | None]]]:
        seen_keys: set[str] = set()
        for op in alt.ops:
            if op.key in seen_keys:
                return f"Duplicate quota key {op.key} not updating quota for this entity", []
            seen_keys.add(op.key)
        if not alt.entity:
            return "Invalid empty client quota entity", []
        types: dict[str, str | None] = {}
        for entity_type, name in alt.entity:
            if entity_type in types:
                return f"Invalid client quota entity, duplicate entity entry {entity_type}", []
            if entity_type not in ENTITY_TYPES:
                return f"Unhandled client quota entity type: {entity_type}", []
            if name is not None and name == "":
                return f"Empty {entity_type} not supported", []
            types[entity_type] = name
        if IP in types:
            if USER in types or CLIENT_ID in types:
                return (
                    "Invalid quota entity combination, IP entity should not be combined with "
                    "User or ClientId"
                ), []
            if not _valid_ip(types[IP]):
                return f"{types[IP]} is not a valid IP or resolvable host.", []
            valid_keys = IP_KEYS
        else:
            valid_keys = USER_CLIENT_KEYS
        changes: list[tuple[str, float | None]] = []
        for op in alt.ops:
            if op.remove:
                changes.append((op.key, None))
                continue
            error = _check_value(valid_keys, op.key, op.value)
            if error:
                return error, []
            changes.append((op.key, float(op.value)))
        return None, changes

    # ---- DescribeClientQuotas ----------------------------------------------------------------
    def describe(
        self, components: Iterable[FilterComponent], strict: bool = False
    ) -> list[tuple[Entity, dict[str, float]]]:
        """Entities matching the filter, with their values. Raises QuotaError like Kafka."""
        exact: dict[str, str | None] = {}
        typed: set[str] = set()
        for c in components:
            if c.entity_type == "":
                raise QuotaError(INVALID_REQUEST, "Invalid empty entity type.")
            if c.entity_type in exact or c.entity_type in typed:
                raise QuotaError(
                    INVALID_REQUEST,
                    f"Entity type {c.entity_type} cannot appear more than once in the filter.",
                )
            if c.entity_type not in ENTITY_TYPES:
                raise QuotaError(UNSUPPORTED_VERSION, f"Unsupported entity type {c.entity_type}")
            if c.match_type == MATCH_EXACT:
                if c.match is None:
                    raise QuotaError(
                        INVALID_REQUEST,
                        "Request specified MATCH_TYPE_EXACT, but set match to null.",
                    )
                exact[c.entity_type] = c.match
            elif c.match_type == MATCH_DEFAULT:
                if c.match is not None:
                    raise QuotaError(
                        INVALID_REQUEST,
                        "Request specified MATCH_TYPE_DEFAULT, but also specified a match string.",
                    )
                exact[c.entity_type] = None
            elif c.match_type == MATCH_SPECIFIED:
                if c.match is not None:
                    raise QuotaError(
                        INVALID_REQUEST,
                        "Request specified MATCH_TYPE_SPECIFIED, but also specified a match "
                        "string.",
                    )
                typed.add(c.entity_type)
            else:
                raise QuotaError(INVALID_REQUEST, f"Unexpected match type: {c.match_type}")
        filtered = set(exact) | typed
        if IP in filtered and (USER in filtered or CLIENT_ID in filtered):
            raise QuotaError(
                INVALID_REQUEST,
                "Invalid entity filter component combination. IP filter component should not be "
                "used with user or clientId filter component.",
            )
        with self._lock:
            out = []
            for key, values in self._data.items():
                entity = dict(key)
                if strict and len(entity) != len(filtered):
                    continue
                if any(t not in entity or entity[t] != n for t, n in exact.items()):
                    continue
                if any(t not in entity for t in typed):
                    continue
                out.append((key, dict(values)))
            return sorted(out, key=lambda kv: [(_type_order(t), n or "") for t, n in kv[0]])

    def snapshot(self) -> list[dict]:
        """Everything stored, JSON-ready: ``[{"entity": {type: name}, "values": {key: value}}]``."""
        return [{"entity": dict(e), "values": v} for e, v in self.describe([])]

    def _save(self) -> None:
        if self._path is None:
            return
        tmp = self._path.with_name(self._path.name + ".tmp")
        tmp.write_text(
            json.dumps([{"entity": dict(e), "values": v} for e, v in self._data.items()], indent=1)
        )
        os.replace(tmp, self._path)


def _render(alt: Alteration) -> str:
    return entity_label(entity_key(alt.entity))


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


def _check_value(valid_keys: Mapping[str, str], key: str, value: float) -> str | None:
    kind = valid_keys.get(key)
    if kind is None:
        return f"Invalid configuration key {key}"
    if not value > 0.0:  # also catches NaN
        return f"Quota {key} must be greater than 0"
    if kind == _DOUBLE:
        return None
    if value > _LIMITS[kind]:
        article = "a" if kind == _LONG else "an"
        return f"Proposed value for {key} is too large for {article} {kind.upper()}."
    if abs(value % 1.0) > 1e-6:
        return f"{key} cannot be a fractional value."
    return None

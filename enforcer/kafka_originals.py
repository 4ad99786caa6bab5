"""The second copy of a throttle's originals, kept in the cluster's own quota metadata.

The local journal can be lost (a pod without a persistent volume, a deleted file, a `-wal` file
removed after a kill). Kafka itself is available whenever the enforcer can act at all, so every
original is also written there, before the first change that depends on it.

Kafka accepts only its own quota keys (ClientQuotaControlManager: `Invalid configuration key`),
but any non-empty user / client-id name. So the copy is a set of quota entities of the user
`__kvq_enforcer_originals` (no real client authenticates as it) whose client-id names carry the
data, each with `controller_mutation_rate=1` (a double key: any value > 0 is stored as is):

- `client-id=episode=<id>`: the marker of throttle episode <id>; written after all its records,
  removed first at the end, so records without a marker are leftovers and never trusted. Its
  value is 1 + the factor being applied (updated before each plan's changes; 2 while restoring),
  so a lost journal also learns how far the cluster was throttled;
- `client-id=<id> <json>`: one record per managed pair, `[[[type, name], ...], key, original]`
  with the original as text (`"1000.0"`, `"nan"`, `null` for unset: repr round-trips every
  double exactly).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from enforcer.quota_plan import CONTROLLER_MUTATION_RATE, Change, Pair, Snapshot, same_value
from kvq.kafka.quota_entity import CLIENT_ID, ORIGINALS_USER, USER, QuotaEntity
from kvq.model.throttle_factor_policy import UNTHROTTLED

RECORD_KEY = CONTROLLER_MUTATION_RATE
RECORD_VALUE = 1.0
_MARKER = "episode="


class OriginalsUnknown(RuntimeError):
    """The enforcer cannot know the originals of a throttle it may have left in Kafka."""


def marker_entity(episode_id: str) -> QuotaEntity:
    return QuotaEntity.of([(USER, ORIGINALS_USER), (CLIENT_ID, _MARKER + episode_id)])


def record_entity(episode_id: str, pair: Pair, original: float | None) -> QuotaEntity:
    entity, key = pair
    text = None if original is None else repr(float(original))
    payload = json.dumps([[list(c) for c in entity.components], key, text], separators=(",", ":"))
    return QuotaEntity.of([(USER, ORIGINALS_USER), (CLIENT_ID, f"{episode_id} {payload}")])


@dataclass
class KafkaOriginals:
    """What the copy in a DescribeClientQuotas snapshot says."""

    episodes: dict[str, dict[Pair, float | None]] = field(default_factory=dict)
    """Records per episode id (marked or not)."""
    marked: dict[str, float] = field(default_factory=dict)
    """Marked episode ids with the factor their marker says is being applied."""
    entities: dict[str, set[QuotaEntity]] = field(default_factory=dict)
    """The record and marker entities per episode id, as Kafka holds them."""
    malformed: list[str] = field(default_factory=list)

    def factor(self, episode_id: str) -> float:
        """The factor the episode's marker says was being applied (UNTHROTTLED: restoring)."""
        return self.marked.get(episode_id, UNTHROTTLED)

    def current(self) -> str | None:
        """The one marked episode; OriginalsUnknown when the copy cannot be trusted."""
        if self.malformed:
            raise OriginalsUnknown(
                f"{len(self.malformed)} entit(y/ies) of user {ORIGINALS_USER} cannot be read "
                f"(changed by hand?): {', '.join(self.malformed[:3])}"
            )
        if len(self.marked) > 1:
            raise OriginalsUnknown(
                f"Kafka holds the originals of {len(self.marked)} throttles at once "
                f"({', '.join(sorted(self.marked))}); only one can be current"
            )
        return next(iter(self.marked), None)

    def leftovers(self, keep: str | None) -> list[QuotaEntity]:
        """Entities of every episode but `keep` (restored, or never started)."""
        return [e for i, found in self.entities.items() if i != keep for e in sorted(found)]


def split(full: Snapshot) -> tuple[dict[QuotaEntity, dict[str, float]], KafkaOriginals]:
    """The real quotas, and the copy of the originals, of one DescribeClientQuotas snapshot."""
    quotas: dict[QuotaEntity, dict[str, float]] = {}
    copy = KafkaOriginals()
    for entity, values in full.items():
        if not entity.is_originals_record:
            quotas[entity] = dict(values)
            continue
        _read(entity, values, copy)
    return quotas, copy


def _read(entity: QuotaEntity, values: Mapping[str, float], copy: KafkaOriginals) -> None:
    name = entity.name(CLIENT_ID) if CLIENT_ID in entity.types else None
    if entity.types != (USER, CLIENT_ID) or name is None:
        copy.malformed.append(entity.label())
        return
    if name.startswith(_MARKER):
        episode_id = name[len(_MARKER) :]
        value = float(values.get(RECORD_KEY, 2.0))
        factor = UNTHROTTLED if math.isnan(value) else min(max(value - 1.0, 0.0), UNTHROTTLED)
        copy.marked[episode_id] = factor
        copy.entities.setdefault(episode_id, set()).add(entity)
        return
    episode_id, _, payload = name.partition(" ")
    try:
        components, key, text = json.loads(payload)
        pair_entity = QuotaEntity.of([(t, n) for t, n in components])
        original = None if text is None else float(text)
        if not isinstance(key, str) or not pair_entity.is_user_or_client:
            raise ValueError(key)
    except (ValueError, TypeError):
        copy.malformed.append(entity.label())
        return
    copy.episodes.setdefault(episode_id, {})[(pair_entity, key)] = original
    copy.entities.setdefault(episode_id, set()).add(entity)


def missing_records(
    episode_id: str,
    originals: Mapping[Pair, float | None],
    copy: KafkaOriginals,
    factor: float,
) -> list[Change]:
    """Records Kafka still lacks for this episode, then the marker when it is missing or names
    another factor, in writing order."""
    held = copy.episodes.get(episode_id, {})
    out = [
        Change(record_entity(episode_id, pair, original), RECORD_KEY, RECORD_VALUE)
        for pair, original in sorted(originals.items(), key=lambda item: item[0][0].label())
        if pair not in held or not same_value(held[pair], original)
    ]
    factor = min(max(factor, 0.0), 1.0)
    if copy.marked.get(episode_id) != factor:
        out.append(Change(marker_entity(episode_id), RECORD_KEY, 1.0 + factor))
    return out


def removals(entities: Iterable[QuotaEntity]) -> list[Change]:
    """Remove entities of the copy, markers first (records without a marker are never used)."""
    ordered = sorted(entities, key=lambda e: (not _is_marker(e), e))
    return [Change(e, RECORD_KEY, None) for e in ordered]


def _is_marker(entity: QuotaEntity) -> bool:
    name = entity.name(CLIENT_ID)
    return name is not None and name.startswith(_MARKER)

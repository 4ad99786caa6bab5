"""A Kafka client-quota entity (KIP-55/KIP-546) and Kafka's precedence among entities.

An entity is a set of (type, name) components, type `user` and/or `client-id`; a name of None is
the default entity of that type. For a client (user U, client-id C) the broker uses, per quota key,
the first of these that holds the key (KIP-55):

  1 user=U,client-id=C   2 user=U,client-id=<default>   3 user=U
  4 user=<default>,client-id=C   5 user=<default>,client-id=<default>   6 user=<default>
  7 client-id=C   8 client-id=<default>
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass

USER = "user"
CLIENT_ID = "client-id"
ENTITY_TYPES = (USER, CLIENT_ID)
ORIGINALS_USER = "__kvq_enforcer_originals"
"""User name of the entities that hold the enforcer's copy of the originals in Kafka."""


@dataclass(frozen=True, order=True, slots=True)
class QuotaEntity:
    """One quota entity. `user`/`client_id`: a name, None for the default, or absent."""

    components: tuple[tuple[str, str | None], ...]

    @classmethod
    def of(cls, pairs) -> QuotaEntity:
        """From (type, name) pairs in any order; types must be distinct."""
        items = [(t, n) for t, n in (pairs.items() if isinstance(pairs, dict) else pairs)]
        if len(items) == 1:  # most entities (one per user): nothing to check or sort
            return cls((items[0],))
        types = [t for t, _ in items]
        if len(set(types)) != len(types):
            raise ValueError(f"entity repeats a type: {items!r}")
        return cls(tuple(sorted(items, key=_component_order)))

    @classmethod
    def user(cls, name: str | None) -> QuotaEntity:
        return cls.of([(USER, name)])

    @classmethod
    def default_user(cls) -> QuotaEntity:
        return cls.user(None)

    @property
    def types(self) -> tuple[str, ...]:
        return tuple(t for t, _ in self.components)

    def name(self, entity_type: str) -> str | None:
        for t, n in self.components:
            if t == entity_type:
                return n
        raise KeyError(entity_type)

    @property
    def is_user_or_client(self) -> bool:
        """Only user / client-id components (ip entities carry no client quotas we manage)."""
        return bool(self.components) and all(t in ENTITY_TYPES for t in self.types)

    @property
    def is_originals_record(self) -> bool:
        """An entity of the enforcer's copy of the originals (never a real client's quota)."""
        return (USER, ORIGINALS_USER) in self.components

    def belongs_to_user(self, name: str) -> bool:
        """True when the entity names this user explicitly (any client-id)."""
        return USER in self.types and self.name(USER) == name

    @property
    def precedence(self) -> int:
        """KIP-55 level, 1 (most specific) .. 8; 0 for an entity outside the table."""
        has_user, has_client = USER in self.types, CLIENT_ID in self.types
        if not self.is_user_or_client:
            return 0
        user_default = has_user and self.name(USER) is None
        client_default = has_client and self.name(CLIENT_ID) is None
        if has_user and has_client:
            return (4 if user_default else 1) + (1 if client_default else 0)
        if has_user:
            return 6 if user_default else 3
        return 8 if client_default else 7

    def label(self) -> str:
        """Kafka's rendering, e.g. `user=alice,client-id=<default>`."""
        return ",".join(f"{t}={'<default>' if n is None else n}" for t, n in self.components)

    def to_json(self) -> str:
        """Stable text form (journal key)."""
        return _components_json(self.components)

    @classmethod
    def from_json(cls, text: str) -> QuotaEntity:
        return cls.of(json.loads(text))

    def to_dict(self) -> dict[str, str | None]:
        return dict(self.components)


_TYPE_ORDER = {t: i for i, t in enumerate(ENTITY_TYPES)}


def _component_order(component: tuple[str, str | None]) -> tuple[int, str]:
    """User before client-id (Kafka's order), any other type after them by name."""
    return _TYPE_ORDER.get(component[0], 9), component[0]


@functools.lru_cache(maxsize=1 << 16)
def _components_json(components: tuple[tuple[str, str | None], ...]) -> str:
    """`QuotaEntity.to_json`, encoded once per entity: an apply of 20,000 pairs keys several
    journal writes by it."""
    return json.dumps([[t, n] for t, n in components], separators=(",", ":"))


def parse_principal(principal: str) -> str:
    """`User:CN=a,O=b` -> `CN=a,O=b` (the quota user entity name)."""
    prefix = "User:"
    if not principal.startswith(prefix) or principal == prefix:
        raise ValueError(f"principal {principal!r} must look like User:<name>")
    return principal[len(prefix) :]

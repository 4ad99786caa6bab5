"""The quota store on disk: a snapshot and a journal of the changes since, as a KRaft controller
keeps a metadata snapshot and the log after it.

``quotas.json`` holds every quota (``[{"entity": {type: name}, "values": {key: value}}]``), written
whole under a temporary name and renamed. ``quotas.journal`` gets one line per applied
AlterClientQuotas: its records, ``[[entity, key, value or null], ...]`` (null: removed). So an
alteration writes what it changed, not the store; once the journal holds more records than the
store has entities (and at least ``COMPACT_AFTER``), a new snapshot replaces it and the journal
starts again, so a record costs a constant number of written bytes on average.

Crash safety (a crash at any point, the process killed mid-write): the last journal line may be
torn; loading drops it (its alteration was not answered yet) and cuts it off, so the next line
starts clean. A complete line always parses (JSON without indent has no newline of its own). A
crash while compacting leaves either the old snapshot and the whole journal (the temporary file
not renamed yet) or the new snapshot and the old journal, whose records replayed on it change
nothing: each record sets or removes one value, so replaying them in order ends where they ended.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable
from pathlib import Path

Entity = tuple[tuple[str, str | None], ...]
"""An entity as a hashable value: its (type, name) pairs, sorted by type."""
Record = tuple[Entity, str, float | None]
"""(entity, quota key, new value or None for a removal)."""
Quotas = dict[Entity, dict[str, float]]

COMPACT_AFTER = 10_000
"""Journal records below which the snapshot is never rewritten."""


def apply(quotas: Quotas, record: Record) -> None:
    """One record applied: the value set, or removed (an entity without values disappears). A
    removal of what is not there does nothing: a journal replayed on a snapshot that holds it."""
    entity, key, value = record
    if value is None:
        values = quotas.get(entity, {})
        values.pop(key, None)
        if not values:
            quotas.pop(entity, None)
    else:
        quotas.setdefault(entity, {})[key] = value


class QuotaFiles:
    """``snapshot`` (e.g. ``DIR/quotas.json``) and its journal next to it (``.journal``)."""

    def __init__(self, snapshot: Path, entity_key: Callable[[dict[str, str | None]], Entity]):
        self.snapshot = snapshot
        self.journal = snapshot.with_suffix(".journal")
        self._entity_key = entity_key
        self._journal_records = 0

    def load(self) -> Quotas:
        """The snapshot with the journal's complete lines applied; a torn last line cut off."""
        quotas: Quotas = {}
        if self.snapshot.exists():
            for item in json.loads(self.snapshot.read_text()):
                entity = self._entity_key(item["entity"])
                quotas[entity] = {k: float(v) for k, v in item["values"].items()}
        if not self.journal.exists():
            return quotas
        content = self.journal.read_bytes()
        complete = 0
        for number, line in enumerate(content.splitlines(keepends=True), 1):
            if not line.endswith(b"\n"):
                break  # torn by a crash: never answered
            try:
                records = json.loads(line)
            except ValueError:
                raise ValueError(f"{self.journal}:{number}: not a journal line") from None
            for entity, key, value in records:
                number_or_none = None if value is None else float(value)
                apply(quotas, (self._entity_key(entity), key, number_or_none))
            complete += len(line)
            self._journal_records += len(records)
        if complete < len(content):
            os.truncate(self.journal, complete)
        return quotas

    def append(self, records: Iterable[Record], quotas: Quotas) -> None:
        """`records`, already applied to `quotas`, made durable (as one journal line)."""
        encoded = [[dict(entity), key, value] for entity, key, value in records]
        with open(self.journal, "ab") as journal:
            journal.write(json.dumps(encoded).encode() + b"\n")
        self._journal_records += len(encoded)
        if self._journal_records > max(COMPACT_AFTER, len(quotas)):
            self.compact(quotas)

    def compact(self, quotas: Quotas) -> None:
        """A new snapshot of `quotas`, then an empty journal."""
        partial = self.snapshot.with_name(self.snapshot.name + ".tmp")
        items = [{"entity": dict(e), "values": v} for e, v in quotas.items()]
        partial.write_text(json.dumps(items, indent=1))
        os.replace(partial, self.snapshot)
        with open(self.journal, "wb"):
            pass
        self._journal_records = 0

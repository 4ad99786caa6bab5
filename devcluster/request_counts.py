"""Requests received, by broker and Kafka API name, so tests can assert how many calls happened."""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any


class RequestCounter:
    """Thread-safe counts; ``snapshot()`` is the JSON of ``GET /requests``."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: Counter[tuple[int, str]] = Counter()

    def count(self, broker_id: int, api: str) -> None:
        with self._lock:
            self._counts[broker_id, api] += 1

    def reset(self) -> None:
        with self._lock:
            self._counts.clear()

    def snapshot(self) -> dict[str, Any]:
        """``{"by_broker": {"0": {"AlterClientQuotas": 3}}, "total": {"AlterClientQuotas": 3}}``"""
        with self._lock:
            counts = sorted(self._counts.items())
        by_broker: dict[str, dict[str, int]] = {}
        total: Counter[str] = Counter()
        for (broker_id, api), n in counts:
            by_broker.setdefault(str(broker_id), {})[api] = n
            total[api] += n
        return {"by_broker": by_broker, "total": dict(sorted(total.items()))}

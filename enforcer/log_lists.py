"""Lists in log lines: an episode can touch hundreds of quota entities, and a line that named
them all would be as long as the cluster is wide, so a line names the first few and counts the
rest."""

from __future__ import annotations

from collections.abc import Iterable

FEW = 5
"""Items a log line names before it says how many more there are."""


def first_few(labels: Iterable[str]) -> str:
    """The first FEW of `labels`, joined by "; ", then how many more there are."""
    shown: list[str] = []
    more = 0
    for label in labels:
        if len(shown) < FEW:
            shown.append(label)
        else:
            more += 1
    return "; ".join(shown) + (f" and {more} more" if more else "")

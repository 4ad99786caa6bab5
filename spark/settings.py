"""The backfill's own settings (`kvq.backfill.*`), typed and validated with the shared config."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import ClassVar

from kvq.settings import values
from kvq.settings.app_settings import AppSettings, setting
from kvq.settings.durations import parse_duration

STEP = "kvq.backfill.step"


@values.parser(
    "duration", "a whole number of seconds, at least PT1S (promtool keeps whole seconds exactly)"
)
def grid_step(text: str) -> timedelta:
    value = parse_duration(text)
    if value < timedelta(seconds=1) or value % timedelta(seconds=1):
        raise values.NotAccepted
    return value


@dataclass(frozen=True)
class BackfillSettings(AppSettings):
    NAMESPACE: ClassVar[str] = "backfill"

    step: timedelta = setting(
        STEP,
        grid_step,
        "PT1M",
        "The evaluation grid's step: the backfill writes what the exporter would have "
        "published at every multiple of it inside the archive's span.",
    )

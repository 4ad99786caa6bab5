"""The backfill's own settings (`kvq.backfill.*`), typed and validated with the shared config."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import ClassVar

from kvq.settings import values
from kvq.settings.app_settings import AppSettings, setting


@dataclass(frozen=True)
class BackfillSettings(AppSettings):
    NAMESPACE: ClassVar[str] = "backfill"

    step: timedelta = setting(
        "kvq.backfill.step", values.positive_duration, "PT1M", "evaluation grid step"
    )

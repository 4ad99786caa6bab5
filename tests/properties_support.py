"""The smallest valid properties, and the errors an app's settings report for more."""

from __future__ import annotations

import pytest

from kvq.model.limits import MIN_AVAILABLE_RATIO
from kvq.settings.app_settings import AppSettings
from kvq.settings.config import BOOTSTRAP_SERVERS, ConfigError

MINIMAL = {BOOTSTRAP_SERVERS: "k:9092", MIN_AVAILABLE_RATIO: "0.05"}


def config_errors(settings: type[AppSettings], **props: str) -> list[str]:
    """The errors `settings` reports for MINIMAL plus `props` (it must report some)."""
    with pytest.raises(ConfigError) as info:
        settings.build({**MINIMAL, **props}, environ={})
    return info.value.errors

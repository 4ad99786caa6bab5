"""What every `kvq-*` command does alike: load the configuration or exit 2 with its errors."""

from __future__ import annotations

import sys
from collections.abc import Mapping

from kvq.settings.config import Config, ConfigError, load_config, print_warnings

EXIT_CONFIG_ERROR = 2


def load_or_exit(path: str, overrides: Mapping[str, str] | None = None) -> Config:
    """Load the configuration, print its warnings; on errors print them all and exit 2."""
    try:
        config = load_config(path, overrides)
    except ConfigError as exc:
        print(f"kvq: {exc}", file=sys.stderr)
        raise SystemExit(EXIT_CONFIG_ERROR) from None
    print_warnings(config)
    return config

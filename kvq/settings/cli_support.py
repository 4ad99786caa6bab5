"""What every `kvq-*` command does alike: its argparse head, and loading the configuration or
exiting 2 with its errors."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TypeVar

import kvq
from kvq.settings.app_settings import AppSettings
from kvq.settings.config import ConfigError
from kvq.settings.logging_setup import add_logging_flags, setup_logging

EXIT_CONFIG_ERROR = 2
log = logging.getLogger("kvq.settings")
S = TypeVar("S", bound=AppSettings)


def new_parser(
    prog: str, description: str | None, epilog: str, log_level: str = "info"
) -> argparse.ArgumentParser:
    """The parser every `kvq-*` command starts from: its docstring, an epilog of examples,
    `--version`, `--log.level` (default `log_level`) and `--log.format`."""
    parser = argparse.ArgumentParser(
        prog=prog,
        description=description,
        epilog=epilog,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {kvq.__version__}")
    add_logging_flags(parser, log_level)
    return parser


def start_logging(args: argparse.Namespace) -> None:
    """Set up logging as `--log.level` and `--log.format` ask."""
    setup_logging(args.log_level, args.log_format)


def load_or_exit(
    settings: type[S], path: str | Path, overrides: Mapping[str, str] | None = None
) -> S:
    """Load an app's settings and log their warnings; on errors print them all and exit 2."""
    try:
        loaded = settings.load(path, overrides)
    except ConfigError as exc:
        print(f"kvq: {exc}", file=sys.stderr)
        raise SystemExit(EXIT_CONFIG_ERROR) from None
    for warning in loaded.config.warnings:
        log.warning("%s: %s", loaded.config.source, warning)
    return loaded


def print_effective(settings: AppSettings) -> None:
    """`--check-config`: every property in force, secrets masked."""
    print(f"# effective configuration of {settings.config.source}")
    for key, value in settings.effective():
        print(f"{key}={value}")

"""What every `kvq-*` command does alike: its argparse head, and loading the configuration or
exiting 2 with its errors."""

from __future__ import annotations

import argparse
import logging
import platform
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TypeVar

import kvq
from kvq.settings.app_settings import AppSettings
from kvq.settings.config import CLUSTER_LABEL, SHARED_SETTINGS, ConfigError
from kvq.settings.logging_setup import add_logging_flags, setup_logging
from kvq.settings.setting import Setting

EXIT_CONFIG_ERROR = 2
_OVERRIDES = "kvq_overrides"
"""The attribute of an argparse action naming the property its flag overrides."""
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
    parser.add_argument("--version", action="version", version=version_text(prog))
    add_logging_flags(parser, log_level)
    return parser


def version_text(prog: str) -> str:
    """What `--version` prints, as Prometheus exporters print theirs: the version and the source
    revision of the build (the same as `kafka_volume_quota_build_info` and the landing page),
    then the runtime."""
    return (
        f"{prog}, version {kvq.__version__} (revision: {kvq.revision()})\n"
        f"  python version: {platform.python_version()}\n"
        f"  platform:       {platform.system().lower()}/{platform.machine()}"
    )


def start_logging(args: argparse.Namespace) -> None:
    """Set up logging as `--log.level` and `--log.format` ask."""
    setup_logging(args.log_level, args.log_format)


def flag_value(parse: Callable[[str], object]) -> Callable[[str], str]:
    """argparse `type` of a flag that overrides a property: the value is checked with the
    property's parser, so a bad one is refused by argparse naming the flag (exit 2), not the
    property; it is kept as written, for the properties it overrides."""

    def check(text: str) -> str:
        try:
            parse(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(f"{text!r}: {exc}") from None
        return text

    return check


_PATH = re.compile(r"^/[A-Za-z0-9._~!$&'()*+,;=:@%/-]*$")


def telemetry_path(taken: Sequence[str]) -> Callable[[str], str]:
    """argparse `type` of `--web.telemetry-path`: an absolute URL path, not one of `taken`."""

    def check(text: str) -> str:
        if not _PATH.match(text) or text == "/":
            raise argparse.ArgumentTypeError(
                f"{text!r}: must be a URL path below /, e.g. /metrics (no spaces, ? or #)"
            )
        if text in taken:
            raise argparse.ArgumentTypeError(
                f"{text!r} is already served; taken: {', '.join(['/', *taken])}"
            )
        return text

    return check


def overrides(action: argparse.Action, key: str) -> None:
    """Mark `action`'s flag as the one that overrides property `key`: the configuration
    reference lists it beside the property (`override_flags`)."""
    setattr(action, _OVERRIDES, key)


def override_flags(parser: argparse.ArgumentParser) -> list[tuple[tuple[str, ...], str]]:
    """(option strings, property) of every flag of `parser` that overrides a property."""
    marked = [(action, getattr(action, _OVERRIDES, None)) for action in parser._actions]
    return [(tuple(action.option_strings), key) for action, key in marked if key is not None]


def add_web_flags(
    parser: argparse.ArgumentParser, listen: Setting, taken: Sequence[str], config_file_note: str
) -> None:
    """`--web.listen-address` (alias `--listen`), `--web.telemetry-path` and `--web.config.file`,
    as Prometheus exporters (exporter-toolkit) spell them; `listen` is the property the address
    overrides, `taken` the paths the server has besides /metrics, `config_file_note` what the
    web config file's help adds for this program."""
    action = parser.add_argument(
        "--web.listen-address",
        "--listen",
        dest="listen",
        metavar="[HOST]:PORT",
        type=flag_value(listen.parse),
        help=f"address to serve on; :PORT means every interface (overrides {listen.key})",
    )
    overrides(action, listen.key)
    parser.add_argument(
        "--web.telemetry-path",
        dest="telemetry_path",
        metavar="PATH",
        default="/metrics",
        type=telemetry_path(taken),
        help="path of the Prometheus metrics (default /metrics)",
    )
    parser.add_argument(
        "--web.config.file",
        dest="web_config_file",
        metavar="FILE",
        help="TLS and basic auth in exporter-toolkit's format (tls_server_config, "
        f"basic_auth_users with bcrypt hashes); {config_file_note}",
    )


def add_override_flag(
    parser: argparse.ArgumentParser,
    flag: str,
    setting: Setting,
    metavar: str,
    help_text: str | None = None,
) -> None:
    """A flag that overrides the property `setting`, its value checked with the property's
    parser (see `flag_value`); its help is the property's, unless `help_text`, and says which
    property it overrides."""
    default = f"; default {setting.default}" if setting.default is not None else ""
    action = parser.add_argument(
        flag,
        metavar=metavar,
        type=flag_value(setting.parse),
        help=help_text or f"{setting.help} (overrides {setting.key}{default})",
    )
    overrides(action, setting.key)


def add_cluster_label_flag(parser: argparse.ArgumentParser) -> None:
    """`--cluster-label NAME`, overriding kvq.cluster.label (the same in every app; the Helm
    chart's clusterLabel sets them all)."""
    add_override_flag(parser, "--cluster-label", SHARED_SETTINGS[CLUSTER_LABEL], "NAME")


def given_overrides(flags: Mapping[str, str | None]) -> dict[str, str]:
    """property -> value of the flags that override a property, those not given left out."""
    return {key: value for key, value in flags.items() if value is not None}


def load_or_exit(
    settings: type[S], path: str | Path, overrides: Mapping[str, str] | None = None
) -> S:
    """Load an app's settings and log their warnings; on errors print them all, each line
    naming the program (`kvq-<app>:`), and exit 2."""
    try:
        loaded = settings.load(path, overrides)
    except ConfigError as exc:
        print(f"kvq-{settings.NAMESPACE}: {exc}", file=sys.stderr)
        raise SystemExit(EXIT_CONFIG_ERROR) from None
    for warning in loaded.config.warnings:
        log.warning("%s: %s", loaded.config.source, warning)
    return loaded


def print_effective(settings: AppSettings) -> None:
    """`--check-config`: every property in force, secrets masked."""
    print(f"# effective configuration of {settings.config.source}")
    for key, value in settings.effective():
        print(f"{key}={value}")

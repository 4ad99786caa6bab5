"""Write the configuration reference, docs/configuration-reference.md, from the settings' own
declarations (do not edit the page).

    python -m devkit.config_reference          # rewrite the page (`make config-reference`)
    python -m devkit.config_reference --check  # exit 1 if it is not current

What the page says of a setting is what the code declares and reads: its key, default and help
(`Setting`, kvq/settings/setting.py), its type and the values it accepts (its parser,
kvq/settings/values.py: the same words a refused value is told, "must be ..."), and the flags
that override it (marked where each program declares them, kvq/settings/cli_support.py). The
generator lives in devkit, not in the product: it needs every app's settings and programs, and
kvq/ (the shared base) imports no app. tests/docs/test_config_reference.py fails when the page
differs from what this writes, or when a setting is missing from it or has another default.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from pathlib import Path

from enforcer import cli as enforcer_cli
from enforcer.server_config import SERVER_WIDE
from enforcer.settings import EnforcerSettings
from exporter import cli as exporter_cli
from exporter.settings import ExporterSettings
from kvq.model.limits import PREFIX
from kvq.settings.cli_support import override_flags
from kvq.settings.config import (
    IGNORED_PLUGIN_KEYS,
    PROPOSAL_SETTINGS,
    SHARED_KVQ_SETTINGS,
)
from kvq.settings.setting import Setting
from spark import cli as backfill_cli
from spark.settings import BackfillSettings

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "configuration-reference.md"
COMMAND = "python -m devkit.config_reference"
UNSET = "unset"
"""The default column of a setting without a default."""
COLUMNS = ("Property", "Type", "Default", "Allowed", "Meaning")


_MARKUP = re.compile(r"([\\*_<>\[\]|])")
"""What Markdown could read as markup in plain text: emphasis, HTML, links, a table's cell end."""


def text(value: str) -> str:
    """`value` as plain text in a table cell: what is in backticks stays code, the rest escaped."""
    parts = value.split("`")
    for i, part in enumerate(parts):
        inside_code = i % 2 == 1
        parts[i] = _cell(part) if inside_code else _MARKUP.sub(r"\\\1", part)
    return "`".join(parts)


def code(value: str) -> str:
    return f"`{_cell(value)}`"


def _cell(value: str) -> str:
    """A table cell ends at an unescaped |, even inside code."""
    return value.replace("|", "\\|")


def row(cells: Sequence[str]) -> str:
    return "| " + " | ".join(cells) + " |"


@dataclass(frozen=True)
class Section:
    """One table of settings: the settings of one app, or the ones every app reads."""

    title: str
    intro: str
    settings: tuple[Setting, ...]
    prefix: str = ""
    """Left out of every name in the table (the intro says so)."""
    program: Callable[[], argparse.ArgumentParser] | None = None
    """The app's argument parser, whose flags that override a property are listed."""
    footer: Callable[[], list[str]] | None = None
    """What the section says after its table."""

    def name(self, setting: Setting) -> str:
        return setting.key.removeprefix(self.prefix)


def settings_table(section: Section) -> list[str]:
    lines = [row(COLUMNS), row(["---"] * len(COLUMNS))]
    for setting in section.settings:
        default = UNSET if setting.default is None else code(setting.default)
        parse = setting.parse
        cells = (code(section.name(setting)), parse.kind, default, text(parse.accepts))
        lines.append(row([*cells, text(setting.help)]))
    return lines


def flags_table(program: Callable[[], argparse.ArgumentParser]) -> list[str]:
    parser = program()
    lines = [
        f"Flags of `{parser.prog}` that override a property (every flag: `{parser.prog} --help`):",
        "",
        row(("Flag", "Overrides")),
        row(("---", "---")),
    ]
    for options, key in override_flags(parser):
        lines.append(row((", ".join(code(option) for option in options), code(key))))
    return lines


def ignored_plugin_keys() -> list[str]:
    keys_by_reason: dict[str, list[str]] = {}
    for key, why in IGNORED_PLUGIN_KEYS.items():
        keys_by_reason.setdefault(why, []).append(code(key.removeprefix(PREFIX)))
    return [
        "Keys of the Strimzi plugin that kvq does not use are warnings that say why, not errors "
        "(a pasted broker line may carry them); any other unknown key with this prefix is an "
        "error:",
        "",
        row(("Plugin keys", "Why kvq ignores them")),
        row(("---", "---")),
        *(row((", ".join(keys), text(why))) for why, keys in keys_by_reason.items()),
    ]


def _server_wide_keys() -> str:
    """The enforcer's settings the one server has once, as its --config files name them."""
    key_of = {f.name: f.metadata["setting"].key for f in fields(EnforcerSettings) if f.metadata}
    return ", ".join(f"`{key_of[name]}`" for name in SERVER_WIDE)


SECTIONS = (
    Section(
        "The Strimzi proposal's properties",
        "The quota plugin's properties as the Strimzi proposal names them, read by every app, so "
        "a Strimzi user can paste their broker lines unchanged. Every name in this table starts "
        f"with `{PREFIX}`.",
        PROPOSAL_SETTINGS,
        prefix=PREFIX,
        footer=ignored_plugin_keys,
    ),
    Section(
        "Settings every app reads",
        "kvq's own settings for the whole cluster: the exporter decides with them, the backfill "
        "replays with them, the enforcer matches alerts by the cluster's name and label.",
        SHARED_KVQ_SETTINGS,
    ),
    Section(
        "kvq-exporter",
        "`kvq-exporter` reads the two tables above and these.",
        ExporterSettings.declared(),
        program=exporter_cli.build_parser,
    ),
    Section(
        "kvq-enforcer",
        "`kvq-enforcer` reads the two tables above and these, one file per cluster (`--config` "
        "repeated). The one server has these once, so they must be the same in every file: "
        f"{_server_wide_keys()}.",
        EnforcerSettings.declared(),
        program=enforcer_cli.build_parser,
    ),
    Section(
        "kvq-backfill",
        "`kvq-backfill` replays the two tables above (`--set KEY=VALUE` changes any of them for "
        "a what-if `--scenario`) and reads this one.",
        BackfillSettings.declared(),
        program=backfill_cli.build_parser,
    ),
)


def render() -> str:
    lines = [
        "# Configuration reference",
        "",
        f"Generated from the settings' own declarations by `make config-reference` (`{COMMAND}`): "
        "edit the declarations in the code, not this page. How to write the properties file, "
        "with examples: [Configuration](configuration.md).",
        "",
        "Every app reads one Java properties file (`--config FILE`); one file may serve the "
        "exporter, the enforcer and the backfill, each checking its own `kvq.<app>.*` settings. "
        "Durations are ISO 8601 (`PT30S`, `PT5M`, `P1D`). A value outside *Allowed* is refused "
        "at start-up and by `--check-config`, naming the property, the value and what is "
        "allowed.",
    ]
    for section in SECTIONS:
        lines += ["", f"## {section.title}", "", section.intro, "", *settings_table(section)]
        if section.footer is not None:
            lines += ["", *section.footer()]
        if section.program is not None:
            lines += ["", *flags_table(section.program)]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the page is not current")
    args = parser.parse_args(argv)
    page = render()
    if args.check:
        current = PAGE.exists() and PAGE.read_text() == page
        if not current:
            print(f"{PAGE.relative_to(ROOT)} is not current: run `make config-reference`")
        return 0 if current else 1
    PAGE.write_text(page)
    print(f"wrote {PAGE.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

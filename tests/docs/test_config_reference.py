"""The configuration reference (docs/configuration-reference.md) is what the settings' own
declarations say: the committed page is what `python -m devkit.config_reference` writes, and,
read back as a reader reads it, it lists every declared setting with the default the code uses."""

from __future__ import annotations

import re

import pytest

from devkit import config_reference
from devkit.config_reference import COMMAND, PAGE, UNSET
from enforcer.settings import EnforcerSettings
from exporter.settings import ExporterSettings
from kvq.model.limits import PREFIX
from kvq.settings.cli_support import override_flags
from kvq.settings.config import (
    CHECK_INTERVAL,
    FALLBACK,
    PROPOSAL_SETTINGS,
    SHARED_KVQ_SETTINGS,
)
from kvq.settings.setting import Setting
from spark.settings import BackfillSettings

DECLARED: dict[str, Setting] = {
    setting.key: setting
    for setting in (
        *PROPOSAL_SETTINGS,
        *SHARED_KVQ_SETTINGS,
        *ExporterSettings.declared(),
        *EnforcerSettings.declared(),
        *BackfillSettings.declared(),
    )
}
SETTING_ROW = re.compile(
    r"^\| `(?P<name>[^`]+)` \| [^|]+ \| (?P<default>`(?:[^`\\]|\\.)*`|\w+) \|", re.M
)
"""A row of a settings table: | `name` | type | `default` or unset | ..."""


def documented_defaults(page: str) -> dict[str, str | None]:
    """Property -> default (None: unset) of every row of the page's settings tables. A name
    that does not start with `kvq.` is the Strimzi proposal's, written without its prefix."""
    documented: dict[str, str | None] = {}
    for match in SETTING_ROW.finditer(page):
        name, default = match["name"], match["default"]
        key = name if name.startswith("kvq.") else PREFIX + name
        documented[key] = None if default == UNSET else default.strip("`").replace("\\|", "|")
    return documented


def problems(page: str) -> list[str]:
    """What the page gets wrong about the declared settings: missing, unknown, wrong default
    (compared as the code parses them, so `1.0` and `1` would be the same default)."""
    documented = documented_defaults(page)
    found = [f"{key} is not on the page" for key in DECLARED if key not in documented]
    for key, default in documented.items():
        setting = DECLARED.get(key)
        if setting is None:
            found.append(f"{key} is on the page but declared nowhere")
        elif (default is None) != (setting.default is None) or (
            default is not None and setting.parse(default) != setting.parse(setting.default or "")
        ):
            found.append(f"{key}: the page says {default}, the code {setting.default}")
    return found


def test_the_committed_page_is_what_the_generator_writes() -> None:
    assert PAGE.read_text() == config_reference.render(), (
        f"{PAGE.name} is not current: run `make config-reference` ({COMMAND})"
    )


def test_every_declared_setting_is_on_the_page_with_the_default_the_code_uses() -> None:
    assert problems(PAGE.read_text()) == []
    assert len(documented_defaults(PAGE.read_text())) == len(DECLARED)


def test_the_check_finds_a_missing_setting_and_a_wrong_default() -> None:
    page = PAGE.read_text()
    fallback = FALLBACK.removeprefix(PREFIX)
    without = "".join(
        line for line in page.splitlines(keepends=True) if not line.startswith(f"| `{fallback}`")
    )
    assert problems(without) == [f"{FALLBACK} is not on the page"]
    interval = CHECK_INTERVAL.removeprefix(PREFIX)
    wrong = page.replace(
        f"| `{interval}` | duration | `PT5S` |", f"| `{interval}` | duration | `PT1M` |"
    )
    assert problems(wrong) == [f"{CHECK_INTERVAL}: the page says PT1M, the code PT5S"]
    assert problems(page.replace("`PT5S`", "`pt5s`", 1)) == []  # the same duration, as parsed


@pytest.mark.parametrize("section", [s for s in config_reference.SECTIONS if s.program])
def test_every_flag_that_overrides_a_property_names_a_declared_one(section) -> None:
    flags = override_flags(section.program())
    assert flags
    assert [key for _, key in flags if key not in DECLARED] == []


def test_the_page_says_it_is_generated_and_links_the_guide() -> None:
    head = PAGE.read_text().split("\n## ", 1)[0]
    assert "make config-reference" in head and COMMAND in head
    assert "](configuration.md)" in head


PROSE_DEFAULT = re.compile(r"`(?P<key>[\w.-]+)`[^`\n|]{0,60}?\(?default:? `?(?P<value>[^`\s),;:]+)")
"""`some.key` ... (default `VALUE`), as the pages' prose and tables state a setting's default."""


def prose_defaults() -> list[tuple[str, str, str]]:
    """(page, key, value) of every default the hand-written pages state for a declared setting
    (the Strimzi proposal's names may come without their prefix)."""
    pages = sorted(PAGE.parent.glob("*.md"))
    stated = []
    for page in (p for p in pages if p != PAGE):
        for match in PROSE_DEFAULT.finditer(page.read_text()):
            key = match["key"]
            key = key if key in DECLARED else PREFIX + key
            if key in DECLARED:
                stated.append((page.name, key, match["value"]))
    return stated


def test_the_defaults_the_pages_state_are_the_code_s() -> None:
    """A hand-written page that says "`kvq.enforcer.alter.settle` (default `PT75S`)" says what
    the code does: each such default parses to the declared one."""
    stated = prose_defaults()
    assert len(stated) >= 10, stated  # the pattern still finds the pages' defaults
    wrong = [
        f"{page}: {key} default {value}, the code {DECLARED[key].default}"
        for page, key, value in stated
        if DECLARED[key].parse(value) != DECLARED[key].parse(DECLARED[key].default or "")
    ]
    assert wrong == []

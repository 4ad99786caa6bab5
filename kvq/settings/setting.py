"""Setting: one property as the code declares it, the only description of it there is.

Each is read through its declaration (config.py for the shared properties, app_settings.py for
an app's own), and the configuration reference (docs/configuration-reference.md, written by
`python -m devkit.config_reference`) is rendered from the same declarations: its name, its
parser's kind and what it accepts, its default and its help.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kvq.settings.values import Parser


@dataclass(frozen=True, slots=True)
class Setting:
    """One property: its key, how to parse it, its default (None: unset) and what it does."""

    key: str
    parse: Parser[Any]
    default: str | None
    help: str

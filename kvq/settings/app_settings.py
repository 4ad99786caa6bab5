"""Each app's typed, frozen settings: the shared Config plus the app's own `kvq.<app>.*` values.

An app declares its settings as dataclass fields made with `setting(...)`:

    @dataclass(frozen=True)
    class ExporterSettings(AppSettings):
        NAMESPACE: ClassVar[str] = "exporter"
        listen: tuple[str, int] = setting("kvq.exporter.listen", values.listen, "127.0.0.1:9898",
                                          "exporter HTTP address")

and gets them, validated with everything else (all errors at once), from `ExporterSettings.load`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, ClassVar, Self

from kvq.settings.config import Config, read_config, read_with_overrides
from kvq.settings.setting import Setting
from kvq.settings.values import Parser


def setting(key: str, parse: Parser[Any], default: str | None, help: str) -> Any:
    """A dataclass field holding the parsed value of property `key` (`default` when unset)."""
    return field(metadata={"setting": Setting(key, parse, default, help)})


@dataclass(frozen=True)
class AppSettings:
    """Base of ExporterSettings, EnforcerSettings, BackfillSettings."""

    config: Config
    NAMESPACE: ClassVar[str]
    """`kvq.<NAMESPACE>.*` is this app's; a key there that it does not declare is an error."""

    @classmethod
    def declared(cls) -> tuple[Setting, ...]:
        """The app's own settings, in declaration order."""
        return tuple(f.metadata["setting"] for f in fields(cls) if "setting" in f.metadata)

    @classmethod
    def declaration(cls, key: str) -> Setting:
        """The declaration of the app's own setting `key` (KeyError if it has none)."""
        return {setting.key: setting for setting in cls.declared()}[key]

    @classmethod
    def kafka_problems(cls, admin_properties: Mapping[str, str]) -> list[str]:
        """What the app's Kafka clients would refuse in `kafka.admin.*`; none by default."""
        return []

    @classmethod
    def build(
        cls,
        raw: Mapping[str, str],
        source: str = "<properties>",
        environ: Mapping[str, str] | None = None,
    ) -> Self:
        """Validate a mapping of properties; raises ConfigError listing every problem."""
        config, parsed = read_config(
            raw, source, environ, cls.NAMESPACE, cls.declared(), cls.kafka_problems
        )
        own = {f.name: parsed[f.metadata["setting"].key] for f in fields(cls) if f.metadata}
        return cls(config, **own)

    @classmethod
    def load(
        cls,
        path: str | Path,
        overrides: Mapping[str, str] | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> Self:
        """Read, expand and validate a properties file; `overrides` (from flags) win over it."""
        return cls.build(read_with_overrides(path, overrides), str(path), environ)

    def effective(self) -> list[tuple[str, str]]:
        """Every property in force for this app (defaults included), secrets masked, sorted."""
        return self.config.effective(self.declared())

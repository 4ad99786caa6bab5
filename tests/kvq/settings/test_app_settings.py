"""AppSettings: an app's own `kvq.<app>.*` settings, typed, frozen, validated with the rest."""

from dataclasses import FrozenInstanceError, dataclass
from datetime import timedelta
from typing import ClassVar

import pytest

from kvq.settings import values
from kvq.settings.app_settings import AppSettings, setting
from kvq.settings.config import FALLBACK
from tests.properties_support import MINIMAL, config_errors


@dataclass(frozen=True)
class SampleSettings(AppSettings):
    NAMESPACE: ClassVar[str] = "exporter"

    every: timedelta = setting("kvq.exporter.every", values.positive_duration, "PT1M", "how often")
    target: str | None = setting("kvq.exporter.target", values.text, None, "where")

    @classmethod
    def kafka_problems(cls, admin_properties):
        return ["no TLS here"] if "security.protocol" in admin_properties else []


def test_own_settings_are_typed_attributes_with_defaults_and_frozen():
    settings = SampleSettings.build({**MINIMAL, "kvq.exporter.target": " /tmp/x "}, environ={})
    assert settings.every == timedelta(minutes=1)
    assert settings.target == "/tmp/x"
    assert settings.config.cluster_name == "kafka"
    with pytest.raises(FrozenInstanceError):
        settings.every = timedelta(0)  # type: ignore[misc]


def test_a_typo_in_its_own_namespace_is_an_error_listing_what_it_knows():
    (error,) = config_errors(SampleSettings, **{"kvq.exporter.evry": "PT1M"})
    assert error.startswith("kvq.exporter.evry is not a known setting")
    assert "kvq.exporter.every, kvq.exporter.target" in error


def test_other_apps_settings_in_a_shared_file_are_theirs_to_check():
    settings = SampleSettings.build(
        {**MINIMAL, "kvq.enforcer.whatever": "x", "kvq.backfill.step": "not checked here"},
        environ={},
    )
    assert ("kvq.enforcer.whatever", "x") in settings.effective()


def test_an_unknown_top_level_namespace_is_an_error():
    (error,) = config_errors(SampleSettings, **{"kvq.enforcr.journal": "j"})
    assert error.startswith("kvq.enforcr.journal is not a known setting")


def test_every_error_at_once_with_the_kafka_problems():
    errors = config_errors(
        SampleSettings,
        **{
            FALLBACK: "2",
            "kvq.exporter.every": "PT0S",
            "client.quota.callback.static.kafka.admin.security.protocol": "SSL",
        },
    )
    assert len(errors) == 3
    assert errors[-1] == "no TLS here"
    assert errors[1].startswith("kvq.exporter.every=PT0S: must be a positive ISO 8601 duration")


def test_effective_shows_own_defaults_only():
    shown = dict(SampleSettings.build(MINIMAL, environ={}).effective())
    assert shown["kvq.exporter.every"] == "PT1M"
    assert "kvq.exporter.target" not in shown
    assert not any(key.startswith("kvq.enforcer.") for key in shown)

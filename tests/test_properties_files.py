"""One properties file serves every app; every properties example in a README, and the whole
file docs/configuration.md shows, pastes cleanly."""

from __future__ import annotations

import re
from pathlib import Path

import certifi
import pytest

from enforcer import cli as enforcer_cli
from enforcer.settings import EnforcerSettings
from exporter import cli as exporter_cli
from exporter.settings import ExporterSettings
from spark.settings import BackfillSettings
from tests.properties_support import MINIMAL

ROOT = Path(__file__).resolve().parent.parent
APPS = (ExporterSettings, EnforcerSettings, BackfillSettings)
BLOCK = re.compile(r"^```properties\n(.*?)^```", re.M | re.S)
ENV_REF = re.compile(r"\$\{env:([A-Za-z_][A-Za-z0-9_]*)\}")


WHOLE_FILES = (ROOT / "docs" / "configuration.md", ROOT / "docs" / "policies.md")
"""Docs pages whose properties blocks are whole files (docs/strimzi.md's are lines to add)."""


def documented_blocks() -> list:
    readmes = sorted(p for p in ROOT.rglob("README*.md") if ".venv" not in p.parts)
    return [
        pytest.param(block, id=f"{doc.relative_to(ROOT)} block {n}")
        for doc in (*readmes, *WHOLE_FILES)
        for n, block in enumerate(BLOCK.findall(doc.read_text()), 1)
    ]


def test_the_docs_have_properties_examples():
    assert documented_blocks(), "no ```properties block found: the paste test would test nothing"
    assert any("docs/configuration.md" in p.id for p in documented_blocks())


@pytest.mark.parametrize("block", documented_blocks())
@pytest.mark.parametrize("app", APPS, ids=lambda app: app.__name__)
def test_every_documented_properties_block_loads_in_every_app(tmp_path, block, app):
    environ = {name: "from-the-environment" for name in ENV_REF.findall(block)}
    # certificate paths of the example do not exist here: any real PEM file stands in for them
    text = re.sub(r"=/\S+\.pem$", f"={certifi.where()}", block, flags=re.M)
    path = tmp_path / "pasted.properties"
    path.write_text(text)
    settings = app.load(path, environ=environ)
    assert settings.config.warnings == ()
    commented = [k for k, v in settings.config.properties.items() if " #" in v]
    assert not commented, f"values keep a trailing comment: {commented}"


def test_one_file_with_every_apps_settings_loads_in_every_app(tmp_path):
    shared = {
        **MINIMAL,
        "kvq.cluster.name": "eu-1",
        "kvq.exporter.listen": "0.0.0.0:9898",
        "kvq.enforcer.journal": "/var/lib/kvq/journal.sqlite3",
        "kvq.enforcer.dry.run": "true",
        "kvq.backfill.step": "PT5M",
    }
    path = tmp_path / "kvq.properties"
    path.write_text("".join(f"{k}={v}\n" for k, v in shared.items()))
    exporter, enforcer, backfill = (app.load(path, environ={}) for app in APPS)
    assert exporter.listen == ("0.0.0.0", 9898)
    assert enforcer.journal == "/var/lib/kvq/journal.sqlite3" and enforcer.dry_run
    assert backfill.step.total_seconds() == 300
    assert {s.config.cluster_name for s in (exporter, enforcer, backfill)} == {"eu-1"}


HELP_EXAMPLE = re.compile(r"^  ((?:kvq|client\.quota)\.\S+=.*)$", re.M)


@pytest.mark.parametrize(
    ("epilog", "app"),
    [(exporter_cli.EPILOG, ExporterSettings), (enforcer_cli.EPILOG, EnforcerSettings)],
    ids=["kvq-exporter", "kvq-enforcer"],
)
def test_the_help_examples_load(tmp_path, epilog, app):
    lines = HELP_EXAMPLE.findall(epilog)
    assert len(lines) >= 5
    path = tmp_path / "from-help.properties"
    path.write_text("\n".join(lines) + "\n")
    assert app.load(path, environ={}).config.warnings == ()

"""What `pip install kafka-volume-quotas` gives: the wheel's files and requirements, and apps that
work without the optional PySpark."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SHARE = "kafka_volume_quotas-{version}.data/data/share/kafka-volume-quotas/"
WITHOUT_PYSPARK = "import sys; sys.modules['pyspark'] = None  # import pyspark -> ImportError\n"


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> zipfile.ZipFile:
    out = tmp_path_factory.mktemp("wheel")
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(ROOT)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert build.returncode == 0, build.stderr
    (path,) = out.glob("kafka_volume_quotas-*.whl")
    with zipfile.ZipFile(path) as archive:
        yield archive


def metadata(wheel: zipfile.ZipFile):
    (name,) = [n for n in wheel.namelist() if n.endswith(".dist-info/METADATA")]
    return Parser().parsestr(wheel.read(name).decode())


def test_wheel_ships_rules_dashboards_and_license(wheel) -> None:
    share = SHARE.format(version=metadata(wheel)["Version"])
    shipped = {
        "rules/kafka-volume-quotas.rules.yml",
        "rules/alertmanager.example.yml",
        *(f"rules/tests/{p.name}" for p in (ROOT / "rules" / "tests").glob("*.yml")),
        *(f"grafana/dashboards/{p.name}" for p in (ROOT / "grafana" / "dashboards").glob("*")),
    }
    for relative in shipped:
        assert wheel.read(share + relative) == (ROOT / relative).read_bytes(), relative
    (license_file,) = [n for n in wheel.namelist() if n.endswith(".dist-info/licenses/LICENSE")]
    assert b"Apache License" in wheel.read(license_file)
    assert metadata(wheel)["License-Expression"] == "Apache-2.0"


def test_pyspark_is_only_the_spark_extra_and_kafka_python_is_pinned(wheel) -> None:
    requires = metadata(wheel).get_all("Requires-Dist")
    spark = [r for r in requires if r.startswith("pyspark")]
    extras = ('extra == "spark"', 'extra == "spark-connect"')  # never the base's
    assert spark and all(any(extra in r for extra in extras) for r in spark), spark
    (kafka_python,) = [r for r in requires if r.startswith("kafka-python")]
    assert "<3.1" in kafka_python  # kvq/kafka uses kafka-python 3.0's internals
    assert metadata(wheel)["Provides-Extra"] is not None


def run_python(code: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", WITHOUT_PYSPARK + code, *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )


def test_exporter_and_enforcer_need_no_pyspark() -> None:
    """Every module of the base and of the two servers imports with PySpark missing."""
    code = (
        "import importlib, pkgutil\n"
        "for package in ('kvq', 'exporter', 'enforcer'):\n"
        "    root = importlib.import_module(package)\n"
        "    for info in pkgutil.walk_packages(root.__path__, package + '.'):\n"
        "        importlib.import_module(info.name)\n"
        "from exporter.cli import main\n"
        "main(['--help'])\n"
    )
    result = run_python(code)
    assert result.returncode == 0, result.stderr
    assert "kvq-exporter" in result.stdout


def test_backfill_without_pyspark_says_how_to_install_it(tmp_path) -> None:
    code = "from spark.cli import main; sys.exit(main(sys.argv[1:]))"
    args = ["--archive", str(tmp_path), "--config", str(tmp_path / "x"), "--output", "out"]
    result = run_python(code, *args)
    assert result.returncode == 2
    assert "pip install 'kafka-volume-quotas[spark]'" in result.stderr
    assert "Java" in result.stderr and "Traceback" not in result.stderr
    help_text = run_python(code, "--help")  # --help works without it
    assert help_text.returncode == 0 and "kvq-backfill" in help_text.stdout


def test_changelog_names_every_metric_family() -> None:
    """Metric names are a contract: a new family is listed in CHANGELOG.md when it is added."""
    import re

    from enforcer.metrics import EnforcerMetrics
    from kvq.contract.cluster_identity import ClusterIdentity
    from kvq.contract.metric_samples import families
    from kvq.model.limits import MinAvailableBytes, MinAvailableRatio
    from kvq.model.stop_on_violation import StopOnViolation
    from kvq.model.throttle_factor_source import ThrottleFactorSource
    from kvq.settings.config import CLUSTER_LABEL_DEFAULT

    prod = ClusterIdentity("prod", CLUSTER_LABEL_DEFAULT)
    names = set()
    for limit in (MinAvailableBytes(5), MinAvailableRatio(0.1)):
        source = ThrottleFactorSource(StopOnViolation(limit), 120, 0.0, 0)
        names |= {f.name for f in families(source, 0.0, prod, limit, 5.0)}
    rendered = EnforcerMetrics((prod.name,), prod.label).render()
    text = rendered.decode() if isinstance(rendered, bytes) else rendered
    names |= set(re.findall(r"^# TYPE (kafka_volume_quota_\S+?)(?:_created)? ", text, re.M))
    changelog = (ROOT / "CHANGELOG.md").read_text()
    listed = set(re.findall(r"`(kafka_volume_quota_[a-z_]+)`", changelog))
    missing = {n for n in names if n not in listed and f"{n}_total" not in listed}
    assert not missing, f"add to CHANGELOG.md (metric names are a contract): {sorted(missing)}"

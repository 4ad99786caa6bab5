"""Kafka's jars come from Maven into a cache outside the repo: complete or absent, never half there,
and a failure says why in one line."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from devkit.kafka_dist import KAFKA_VERSION, KAFKA_VERSIONS, KafkaDistError, dist_dir, fetch


def test_a_cached_distribution_is_used_without_running_maven(kafka_dist):
    assert fetch(mvn="no-such-mvn") == kafka_dist
    jars = {path.name for path in kafka_dist.lib.glob("*.jar")}
    assert f"kafka_2.13-{KAFKA_VERSION}.jar" in jars
    assert {"kafka-quotas-plugin-0.3.1.jar", "log4j-slf4j-impl-2.25.3.jar"} <= jars
    assert kafka_dist.jmx_agent.is_file(), "the JMX exporter agent is fetched too"
    assert not any(name.startswith("jmx_prometheus") for name in jars), "not on the classpath"


def test_without_maven_the_error_says_so_and_nothing_is_left(tmp_path):
    with pytest.raises(KafkaDistError, match=r"Maven \(no-such-mvn\) is not installed"):
        fetch(root=tmp_path, mvn="no-such-mvn")
    assert list(tmp_path.iterdir()) == []


def test_an_unresolvable_version_names_the_artifact_and_leaves_no_partial_copy(tmp_path):
    pom = tmp_path / "pom.xml"
    pom.write_text(
        Path(__file__)
        .parents[2]
        .joinpath("devkit/kafka/pom.xml")
        .read_text()
        .replace(f"<kafka.version>{KAFKA_VERSION}<", "<kafka.version>0.0.404<")
    )
    cache = tmp_path / "cache"
    with pytest.raises(KafkaDistError) as failure:
        fetch(root=cache, pom=pom)
    message = str(failure.value)
    assert "Kafka 0.0.404" in message and "kafka_2.13:jar:0.0.404" in message
    assert "\n" not in message
    assert list(cache.iterdir()) == []


def test_a_partial_copy_left_by_a_killed_fetch_is_replaced_by_a_complete_one(tmp_path):
    home = dist_dir(tmp_path)
    abandoned = home.with_name(f"{home.name}.partial-999999999") / "lib"
    abandoned.mkdir(parents=True)
    (abandoned / "half-written.jar").write_bytes(b"PK")

    dist = fetch(root=tmp_path)

    assert dist.home == home
    assert sorted(p.name for p in tmp_path.iterdir()) == [home.name]
    assert not (dist.lib / "half-written.jar").exists()


def test_the_command_exits_1_with_one_line_when_maven_is_missing(tmp_path):
    env = {**os.environ, "PATH": str(tmp_path), "KVQ_KAFKA_CACHE": str(tmp_path / "cache")}
    done = subprocess.run(
        [sys.executable, "-m", "devkit.kafka_dist"], env=env, capture_output=True, text=True
    )
    assert done.returncode == 1
    assert done.stderr == "kafka-deps: Maven (mvn) is not installed: apt-get install maven\n"
    assert done.stdout == ""


def test_the_newest_supported_version_is_fetched_apart_and_says_its_version(tmp_path):
    """`make kafka-deps` fetches every version the suite runs, each into a directory of its own."""
    oldest, newest = fetch(version=KAFKA_VERSIONS[0]), fetch(version=KAFKA_VERSIONS[-1])
    assert (oldest.version, newest.version) == KAFKA_VERSIONS
    assert oldest.home != newest.home
    assert (newest.lib / f"kafka-clients-{newest.version}.jar").is_file()


def test_a_version_that_is_not_a_release_number_is_refused_naming_it(tmp_path):
    env = {**os.environ, "KVQ_KAFKA_VERSION": "4.4", "KVQ_KAFKA_CACHE": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-m", "devkit.kafka_dist"], env=env, capture_output=True, text=True
    )
    assert done.returncode == 1
    assert done.stderr == (
        f"kafka-deps: Kafka version '4.4' is not a release number such as {KAFKA_VERSION} "
        f"(tested: {', '.join(KAFKA_VERSIONS)})\n"
    )
    assert list(tmp_path.iterdir()) == []

"""Kafka's class archive (devkit.kafka_class_archive): written by the first node of a cluster
that finds it missing, published only once complete, mapped by every JVM after."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from devkit.kafka_class_archive import KafkaClassArchive
from devkit.kafka_cluster import KafkaCluster
from devkit.kafka_dist import KafkaDist
from spark.class_archive import java_binary

JAVA = java_binary()


def written_by_java_version(path: Path) -> None:
    """A small real archive: the classes `java -version` loads."""
    command = [str(JAVA), *KafkaClassArchive.writing(path), "-version"]
    subprocess.run(command, capture_output=True, check=True)


def test_a_complete_archive_is_published_and_then_mapped(tmp_path):
    archive = KafkaClassArchive.of(tmp_path, JAVA)
    assert archive.mapping() == []
    pending = archive.pending()
    assert pending is not None and pending.parent == tmp_path
    written_by_java_version(pending)
    archive.publish(pending)
    assert archive.path.is_file() and not pending.exists()
    assert archive.pending() is None  # nothing more to write
    assert f"-XX:SharedArchiveFile={archive.path}" in archive.mapping()


def test_a_truncated_archive_is_not_published(tmp_path):
    """A JVM killed while it wrote: the file would crash every JVM mapping it (SIGABRT)."""
    archive = KafkaClassArchive.of(tmp_path, JAVA)
    pending = archive.pending()
    assert pending is not None
    written_by_java_version(pending)
    pending.write_bytes(pending.read_bytes()[:1000])
    archive.publish(pending)
    assert not archive.path.exists() and not pending.exists()
    assert archive.mapping() == []


def mapped(cluster: KafkaCluster, archive: Path) -> list[bool]:
    """Whether each node's JVM maps `archive`, from /proc/<pid>/maps."""
    maps = [Path(f"/proc/{n.process.proc.pid}/maps") for n in cluster.node_list if n.process]
    return [str(archive) in m.read_text() for m in maps]


@pytest.mark.integration
def test_the_first_cluster_writes_the_archive_as_it_stops_and_the_next_maps_it(
    tmp_path, kafka_dist
):
    """A distribution of its own (Kafka's jars linked), so that its archive is this test's."""
    home = tmp_path / "dist"
    home.mkdir()
    for folder in ("lib", "agents"):
        (home / folder).symlink_to(kafka_dist.home / folder)
    dist = KafkaDist(home)
    archive = dist.class_archive(JAVA).path
    with KafkaCluster(tmp_path / "agents", nodes=1, dist=dist, jmx_exporter=True) as agents:
        # A JVM with an agent refuses to start when asked to write the archive: the first
        # cluster on a fresh machine with the JMX exporter (the slowdown demo's) must start.
        assert not any(n.writes_class_archive for n in agents.node_list)
    assert not archive.exists()
    with KafkaCluster(tmp_path / "first", nodes=2, dist=dist) as first:
        assert mapped(first, archive) == [False, False]
        writers = [n.node_id for n in first.node_list if n.writes_class_archive]
        assert len(writers) == 1  # as it exits
    assert archive.is_file() and not list(home.glob("*.tmp"))
    with KafkaCluster(tmp_path / "next", nodes=2, dist=dist) as following:
        assert mapped(following, archive) == [True, True]
    with KafkaCluster(tmp_path / "off", nodes=1, dist=dist, class_archive=False) as off:
        assert mapped(off, archive) == [False]

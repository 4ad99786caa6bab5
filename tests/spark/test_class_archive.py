"""A local backfill's JVM writes Spark's classes to an archive in the user's cache when it exits,
the next one starts from it, and a damaged archive never stops a run."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from spark.class_archive import ClassArchive, cache_dir, mappable, prune_unused

START = """
from spark.class_archive import ClassArchive
from spark.session import spark_session
spark = spark_session("local[1]", classes=ClassArchive.for_this_install())
arguments = spark.sparkContext._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean()
print(spark.range(3).count())
print(" ".join(arguments.getInputArguments()))
"""


def start_spark(cache) -> tuple[str, str]:
    """A fresh process starting a local session with the class archive: (count, JVM options)."""
    env = {**os.environ, "KVQ_CACHE_DIR": str(cache)}
    done = subprocess.run(
        [sys.executable, "-c", START], env=env, capture_output=True, text=True, timeout=240
    )
    assert done.returncode == 0, done.stderr[-3000:]
    count, options = done.stdout.strip().splitlines()[-2:]
    return count, options


def test_the_cache_follows_kvq_then_xdg_then_home(tmp_path, monkeypatch):
    monkeypatch.setenv("KVQ_CACHE_DIR", str(tmp_path / "mine"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert cache_dir() == tmp_path / "mine"
    monkeypatch.delenv("KVQ_CACHE_DIR")
    assert cache_dir() == tmp_path / "kvq"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache_dir() == tmp_path / "home" / ".cache" / "kvq"


def test_each_spark_installation_has_an_archive_of_its_own(tmp_path, monkeypatch):
    """The JVM ignores, without a word, an archive written for another class path: a second
    virtualenv sharing the cache would never start from the first one's."""
    mine = ClassArchive.for_this_install(tmp_path)
    other_home = tmp_path / "other-venv" / "pyspark"
    (other_home / "jars").mkdir(parents=True)
    monkeypatch.setenv("SPARK_HOME", str(other_home))
    other = ClassArchive.for_this_install(tmp_path)
    assert mine is not None and other is not None
    assert other.path != mine.path
    assert other.path.parent == mine.path.parent == tmp_path


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    """A cache in which a first run wrote the archive: (cache, archive, that run's JVM options)."""
    cache = tmp_path_factory.mktemp("cache")
    archive = ClassArchive.for_this_install(cache)
    assert archive is not None
    count, options = start_spark(cache)
    assert count == "3"
    return cache, archive, options


def test_the_first_run_writes_the_archive_the_next_starts_from_it(written):
    cache, archive, options = written
    assert f"-XX:ArchiveClassesAtExit={archive.path}." in options
    assert archive.path.is_file(), "the archive is published when the JVM exits"
    assert sorted(p.name for p in cache.iterdir()) == sorted(
        [archive.path.name, archive.checked_stamp.name]
    ), "no temp left"

    count, options = start_spark(cache)
    assert count == "3"
    assert f"-XX:SharedArchiveFile={archive.path}" in options


def test_a_truncated_archive_is_written_again_not_fatal(written, tmp_path):
    """What a full disk or a half copy leaves; mapped as it is, the JVM dies of SIGBUS."""
    _, archive, _ = written
    damaged = ClassArchive.for_this_install(tmp_path)
    assert damaged is not None
    # Its stamp too, as the good archive left it: a start skips the check only for that file.
    damaged.checked_stamp.write_text(archive.checked_stamp.read_text())
    damaged.path.write_bytes(archive.path.read_bytes()[: archive.path.stat().st_size // 3])

    count, _ = start_spark(tmp_path)
    assert count == "3"
    assert mappable(damaged.path), "the damaged archive was removed and written again"


def test_only_the_most_recently_used_archives_stay_in_the_cache(tmp_path):
    """Each installation writes an archive of its own (~170 MB): the cache keeps this one and the
    two used last, by when a JVM last mapped them (the `.checked` stamp) or else was written."""
    now = time.time()
    for age, name in enumerate(["a", "b", "c", "d"]):
        path = tmp_path / f"spark-4.3.0-{name}.jsa"
        path.write_bytes(b"x")
        os.utime(path, (now - 100 * age, now - 100 * age))
    stamp = tmp_path / "spark-4.3.0-d.jsa.checked"  # written long ago, mapped just now
    stamp.write_text("1 0\n")
    this = ClassArchive(tmp_path / "spark-4.3.0-new.jsa")
    prune_unused(this)
    left = sorted(p.name for p in tmp_path.iterdir())
    assert left == ["spark-4.3.0-a.jsa", "spark-4.3.0-d.jsa", "spark-4.3.0-d.jsa.checked"]

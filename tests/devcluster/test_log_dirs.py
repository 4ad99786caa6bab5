"""LogDir: sizes measured like Kafka (statvfs), virtual capacities, pins, real fill files."""

import os
from concurrent.futures import ThreadPoolExecutor

import pytest

from devcluster.log_dirs import DiskFull, LogDir, tree_size


def statvfs_numbers(path):
    st = os.statvfs(path)
    return st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize


def test_without_capacity_the_numbers_are_the_file_systems(tmp_path):
    log_dir = LogDir(tmp_path / "broker-0" / "logdir-0")
    assert log_dir.path.is_dir()  # created
    space = log_dir.space()
    total, usable = statvfs_numbers(log_dir.path)
    assert space.total_bytes == total
    assert abs(space.usable_bytes - usable) < 64 << 20  # other writers on this disk


def test_capacity_minus_the_files_under_the_directory_never_below_zero(tmp_path):
    log_dir = LogDir(tmp_path / "d", capacity_bytes=10_000)
    assert (log_dir.space().total_bytes, log_dir.space().usable_bytes) == (10_000, 10_000)
    (log_dir.path / "orders-0").mkdir()
    (log_dir.path / "orders-0" / "0.log").write_bytes(b"x" * 3_000)
    log_dir.fill(1_000)
    assert log_dir.space().usable_bytes == 6_000
    assert tree_size(log_dir.path) == 4_000
    log_dir.capacity_bytes = 3_500  # shrunk below what the files hold
    assert log_dir.space().usable_bytes == 0


def test_a_fill_stops_where_the_virtual_disk_is_full(tmp_path):
    log_dir = LogDir(tmp_path / "d", capacity_bytes=10_000)
    log_dir.fill(4_000)
    with pytest.raises(DiskFull) as full:
        log_dir.fill(50_000_000)  # the real disk under the virtual one must not get 50 MB
    assert full.value.written == 6_000  # what fit stays, as on a real disk
    assert tree_size(log_dir.path) == 10_000
    assert log_dir.space().usable_bytes == 0
    with pytest.raises(DiskFull) as again:
        log_dir.fill(1)
    assert again.value.written == 0
    assert len(list(log_dir.path.iterdir())) == 2  # no empty fill file left behind


def test_concurrent_fills_each_get_a_file_of_their_own(tmp_path):
    log_dir = LogDir(tmp_path / "d")
    with ThreadPoolExecutor(8) as pool:
        files = list(pool.map(lambda _: log_dir.fill(100), range(40)))
    assert len(set(files)) == 40
    assert tree_size(log_dir.path) == 40 * 100


def test_files_and_partitions_deleted_during_a_measure_are_skipped(tmp_path, monkeypatch):
    """Segments deleted by retention, or fill files cleared, while DescribeLogDirs measures the
    dir: it is not offline (no spurious KAFKA_STORAGE_ERROR), the vanished bytes not counted."""
    log_dir = LogDir(tmp_path / "d", capacity_bytes=10_000)
    (log_dir.path / "orders-0").mkdir()
    (log_dir.path / "orders-0" / "00000000000000000000.log").write_bytes(b"x" * 100)
    (log_dir.path / "orders-1").mkdir()
    log_dir.fill(200)
    real_scandir = os.scandir

    class VanishingScandir:
        """Deletes each segment file and partition orders-1 just before handing out its entry."""

        def __init__(self, path):
            self._entries = real_scandir(path)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self._entries.close()

        def __iter__(self):
            for entry in self._entries:
                if entry.name.endswith(".log"):
                    os.unlink(entry.path)
                elif entry.name == "orders-1":
                    os.rmdir(entry.path)
                yield entry

    monkeypatch.setattr(os, "scandir", VanishingScandir)
    assert log_dir.space().usable_bytes == 10_000 - 200
    (log_dir.path / "orders-1").mkdir()
    (log_dir.path / "orders-0" / "00000000000000000000.log").write_bytes(b"x" * 100)
    assert log_dir.partitions() == [("orders", 0, 0)]


def test_fill_writes_real_bytes_each_call_a_new_file(tmp_path):
    log_dir = LogDir(tmp_path / "d")
    first, second = log_dir.fill(1_500_000), log_dir.fill(10)
    assert first != second
    assert (first.stat().st_size, second.stat().st_size) == (1_500_000, 10)
    assert first.stat().st_blocks * 512 >= 1_500_000  # not a sparse file: the disk sees it


def test_pinned_usable_overrides_but_never_exceeds_the_total(tmp_path):
    log_dir = LogDir(tmp_path / "d", capacity_bytes=1_000)
    log_dir.pinned_usable_bytes = 10
    assert log_dir.space().usable_bytes == 10
    log_dir.pinned_usable_bytes = 5_000
    assert log_dir.space().usable_bytes == 1_000


def test_clear_removes_fill_files_and_restores_the_start_up_capacity(tmp_path):
    log_dir = LogDir(tmp_path / "d", capacity_bytes=1_000)
    (log_dir.path / "mine.txt").write_bytes(b"kept")
    log_dir.fill(100)
    log_dir.capacity_bytes, log_dir.pinned_usable_bytes = 50, 1
    log_dir.clear()
    assert (log_dir.capacity_bytes, log_dir.pinned_usable_bytes) == (1_000, None)
    assert [p.name for p in log_dir.path.iterdir()] == ["mine.txt"]


def test_partition_directories_with_their_sizes(tmp_path):
    log_dir = LogDir(tmp_path / "d")
    for name, size in (("orders-0", 10), ("orders-11", 20), ("my.topic_x-2", 5)):
        (log_dir.path / name).mkdir()
        (log_dir.path / name / "00000000000000000000.log").write_bytes(b"x" * size)
    (log_dir.path / "not-a-partition").mkdir()
    assert log_dir.partitions() == [("my.topic_x", 2, 5), ("orders", 0, 10), ("orders", 11, 20)]


@pytest.fixture
def tmpfs(tmp_path, mount_tmpfs):
    """A real 8 MiB tmpfs mounted where a log dir will be."""
    mount_point = tmp_path / "broker-0" / "logdir-0"
    mount_tmpfs(mount_point, "8m")
    return mount_point


def test_a_tmpfs_log_dir_reports_its_real_numbers_through_the_wire(tmpfs, tmp_path):
    from kafka.admin import KafkaAdminClient

    from devcluster.cluster import DevCluster

    with DevCluster(brokers=1, log_dirs_per_broker=2, data_dir=tmp_path) as dc:
        admin = KafkaAdminClient(bootstrap_servers=dc.bootstrap)
        try:
            [first, second] = admin.describe_log_dirs(topic_partitions={})[0]["log_dirs"]
            assert first["log_dir"] == str(tmpfs)
            assert first["total_bytes"] == 8 << 20 == statvfs_numbers(tmpfs)[0]
            assert second["total_bytes"] != 8 << 20  # the other dir is on the ordinary disk
            dc.set_log_dir(0, 0, fill_bytes=3 << 20)
            [first, _] = admin.describe_log_dirs(topic_partitions={})[0]["log_dirs"]
            assert first["usable_bytes"] == statvfs_numbers(tmpfs)[1] <= (8 << 20) - (3 << 20)
        finally:
            admin.close()


def test_filling_a_tmpfs_past_its_size_is_a_clear_error(tmpfs, tmp_path):
    from devcluster.cluster import DevCluster
    from devcluster.validation import ControlError

    with DevCluster(brokers=1, log_dirs_per_broker=1, data_dir=tmp_path) as dc:
        with pytest.raises(ControlError) as caught:
            dc.set_log_dir(0, 0, fill_bytes=20 << 20)
        assert caught.value.status == 507 and "is full" in caught.value.message
        assert dc.state()["brokers"][0]["log_dirs"][0]["usable_bytes"] == 0


def test_a_partition_s_size_is_its_segments_alone_as_kafka_reports_it(tmp_path):
    """Kafka's DescribeLogDirs gives UnifiedLog.size: the .log segments, not the (preallocated)
    index files, the leader-epoch checkpoint or partition.metadata beside them."""
    log_dir = LogDir(tmp_path / "d")
    partition = log_dir.path / "orders-0"
    partition.mkdir()
    sizes = {
        "00000000000000000000.log": 1_000,
        "00000000000000000042.log": 500,
        "00000000000000000000.index": 8_192,
        "00000000000000000000.timeindex": 12,
        "00000000000000000042.snapshot": 10,
        "leader-epoch-checkpoint": 14,
        "partition.metadata": 40,
    }
    for name, size in sizes.items():
        (partition / name).write_bytes(b"x" * size)
    assert log_dir.partitions() == [("orders", 0, 1_500)]
    assert log_dir.space()  # the log dir's own sizes still count every file (a disk does)

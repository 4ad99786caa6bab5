"""ReplicaGrowth: each log dir's grown bytes, summed replica by replica over every read since
the last observation taken in (the checks the exporter dropped included)."""

from exporter.cluster_client import Broker
from exporter.cluster_volume_source import ClusterVolumeSource
from exporter.replica_growth import ReplicaGrowth, replica_growth
from kvq.model.observation import Observation
from kvq.model.volume import LogDirDescription


def described(sizes, used=0, error_code=0, broker=0, path="/d"):
    """Broker 0's log dir /d with these replica sizes ({partition: bytes} of topic t)."""
    replicas = None if sizes is None else {("t", p, False): b for p, b in sizes.items()}
    total = 10_000_000
    return LogDirDescription(broker, path, total, total - used, error_code, None, replicas)


def take(growth, *log_dirs, time=0.0):
    """One read, taken in as a poll; its log dirs."""
    read = growth.read(log_dirs)
    growth.taken_in(Observation(time, (0,), read))
    return read


def test_growth_is_summed_per_replica_so_a_deleted_segment_hides_no_other_replicas_writes():
    assert (
        replica_growth(
            {("t", 0, False): 100, ("t", 1, False): 500},
            {("t", 0, False): 300, ("t", 1, False): 50},
        )
        == 200
    )


def test_checks_dropped_between_polls_hand_their_growth_to_the_next_observation_taken_in():
    growth = ReplicaGrowth()
    [first] = take(growth, described({0: 1000}))
    assert first.grown_bytes is None  # nothing to count from yet
    [polled] = take(growth, described({0: 1500}))
    assert polled.grown_bytes == 500
    # Two checks, dropped: replica 0 grows by 300, then loses a 1000-byte segment (and grows
    # by 200, which the drop hides: the reason to read every second).
    [dropped] = growth.read([described({0: 1800})])
    assert dropped.grown_bytes == 300
    growth.read([described({0: 1000})])
    [polled] = take(growth, described({0: 1100}))
    assert polled.grown_bytes == 400  # 300 + 100: what showed since the last poll
    [polled] = take(growth, described({0: 1100}))
    assert polled.grown_bytes == 0


def test_a_replica_new_to_the_log_dir_counts_from_its_first_size_not_from_zero():
    """A reassignment (or a move between log dirs) onto the disk copies data: not writes."""
    growth = ReplicaGrowth()
    take(growth, described({0: 1000}))
    take(growth, described({0: 1000}))
    [moved_in] = take(growth, described({0: 1100, 1: 50_000}))
    assert moved_in.grown_bytes == 100
    [after] = take(growth, described({0: 1100, 1: 50_700}))
    assert after.grown_bytes == 700  # its writes from there on count
    [gone] = take(growth, described({0: 1200}))
    assert gone.grown_bytes == 100


def test_a_log_dir_with_an_error_or_missing_from_a_read_starts_its_count_again():
    growth = ReplicaGrowth()
    take(growth, described({0: 1000}))
    take(growth, described({0: 2000}))
    growth.read([described(None, error_code=56)])  # a check: the dir offline
    [back] = take(growth, described({0: 9000}))
    assert back.grown_bytes is None
    [then] = take(growth, described({0: 9500}))
    assert then.grown_bytes == 500
    growth.read([described({0: 9600}, path="/other")])  # a check without it
    [again] = take(growth, described({0: 9900}))
    assert again.grown_bytes is None


def test_a_failed_observation_hands_nothing_out():
    growth = ReplicaGrowth()
    take(growth, described({0: 1000}))
    take(growth, described({0: 1000}))
    read = growth.read([described({0: 1400})])
    growth.taken_in(
        Observation.failed(1.0, "describe_log_dirs", "broker 1: timeout", log_dirs=read)
    )
    [polled] = take(growth, described({0: 1500}))
    assert polled.grown_bytes == 500


class OneBroker:
    """Broker 0 answering with the sizes the test sets; asked for partition sizes or not."""

    def __init__(self):
        self.sizes = {0: 1000}
        self.asked = []

    def active_brokers(self):
        return [Broker(0, "h", 9092)]

    def describe_log_dirs(self, broker_ids, partition_sizes=False):
        self.asked.append(partition_sizes)
        return {0: [described(self.sizes if partition_sizes else None)]}


def test_the_source_reads_partition_sizes_only_when_asked_and_archives_no_replica_sizes():
    client = OneBroker()
    plain = ClusterVolumeSource(client, clock=lambda: 1.0)
    [only_totals] = plain.observe().log_dirs
    assert client.asked == [False] and only_totals.grown_bytes is None
    sizes = ClusterVolumeSource(client, clock=lambda: 1.0, partition_sizes=True)
    sizes.taken_in(sizes.observe())
    sizes.taken_in(sizes.observe())
    client.sizes = {0: 1700}
    sizes.observe()  # a check the exporter dropped
    client.sizes = {0: 1900}
    [log_dir] = sizes.observe().log_dirs
    assert client.asked[1:] == [True] * 4
    assert log_dir.grown_bytes == 900 and log_dir.replica_sizes is None

"""ClusterVolumeSource: a poll succeeds only if every active broker described its log dirs."""

from exporter.cluster_client import Broker, ClusterError
from exporter.cluster_volume_source import ClusterVolumeSource
from kvq.model.observation import STAGE_DESCRIBE_CLUSTER, STAGE_DESCRIBE_LOG_DIRS
from kvq.model.volume import LogDirDescription


class ScriptedClient:
    """Answers as a cluster would; the integration tests use the real client and devcluster."""

    def __init__(self, brokers, answers):
        self.brokers = brokers
        self.answers = answers

    def active_brokers(self):
        if isinstance(self.brokers, ClusterError):
            raise self.brokers
        return [Broker(b, "h", 9092) for b in self.brokers]

    def describe_log_dirs(self, broker_ids):
        return {b: self.answers[b] for b in broker_ids if b in self.answers}


def source(client):
    return ClusterVolumeSource(client, clock=lambda: 42.0)


def test_every_broker_answered_is_a_successful_observation():
    dirs = {
        1: [LogDirDescription(1, "/a", 10, 5)],
        2: [LogDirDescription(2, "/a", 10, 5, error_code=56)],
    }
    observation = source(ScriptedClient([1, 2], dirs)).observe()
    assert observation.succeeded
    assert observation.time == 42.0
    assert observation.active_brokers == (1, 2)
    assert len(observation.log_dirs) == 2  # a log dir error is data, not a failed poll


def test_describe_cluster_failure_fails_at_that_stage():
    observation = source(ScriptedClient(ClusterError("KafkaException: timed out"), {})).observe()
    assert observation.failure_stage == STAGE_DESCRIBE_CLUSTER
    assert "timed out" in observation.error


def test_broker_that_did_not_answer_fails_the_observation_keeping_what_was_seen():
    client = ScriptedClient(
        [1, 2, 3], {1: [LogDirDescription(1, "/a", 10, 5)], 2: ClusterError("refused")}
    )
    observation = source(client).observe()
    assert observation.failure_stage == STAGE_DESCRIBE_LOG_DIRS
    assert observation.error == "broker 2: refused; broker 3: no answer"
    assert observation.active_brokers == (1, 2, 3)
    assert observation.log_dirs == (LogDirDescription(1, "/a", 10, 5),)


def test_no_active_brokers_is_not_a_healthy_cluster():
    observation = source(ScriptedClient([], {})).observe()
    assert observation.failure_stage == STAGE_DESCRIBE_CLUSTER


class SizedClient(ScriptedClient):
    def describe_log_dirs(self, broker_ids, partition_sizes=False):
        assert partition_sizes
        return super().describe_log_dirs(broker_ids)


class Forecaster:
    def __init__(self) -> None:
        self.asked = 0

    def forecast(self, log_dirs):
        self.asked += 1
        return {d.key: (d.broker_id, 2 * d.broker_id) for d in log_dirs if d.replica_sizes}


def test_a_polls_log_dirs_carry_the_forecast_and_a_checks_do_not():
    sized = {("t", 0, False): 100}
    dirs = {
        1: [LogDirDescription(1, "/a", 10, 5, replica_sizes=sized)],
        2: [LogDirDescription(2, "/a", 10, 5, replica_sizes=sized)],
    }
    forecaster = Forecaster()
    polled = ClusterVolumeSource(SizedClient([1, 2], dirs), lambda: 42.0, True, forecaster)
    poll = polled.observe(poll=True)
    assert [d.retention_freed for d in poll.log_dirs] == [(1, 2), (2, 4)]
    assert [v.retention_freed for v in poll.volumes] == [(1, 2), (2, 4)]
    check = polled.observe()
    assert [d.retention_freed for d in check.log_dirs] == [None, None]
    failed = ClusterVolumeSource(SizedClient([1, 2, 3], dirs), lambda: 42.0, True, forecaster)
    assert not failed.observe(poll=True).succeeded  # broker 3 did not answer: nothing asked
    assert forecaster.asked == 1


class Broken:
    def forecast(self, log_dirs):
        raise RuntimeError("a reply kafka-python could not parse")


def test_a_forecast_that_fails_costs_the_poll_nothing_but_the_forecast(caplog):
    dirs = {1: [LogDirDescription(1, "/a", 10, 5, replica_sizes={("t", 0, False): 1})]}
    polled = ClusterVolumeSource(SizedClient([1], dirs), lambda: 42.0, True, Broken())
    poll = polled.observe(poll=True)
    assert poll.succeeded and [d.retention_freed for d in poll.log_dirs] == [None]
    assert "retention forecast failed" in caplog.text

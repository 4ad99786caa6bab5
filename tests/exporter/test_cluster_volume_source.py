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

"""DescribeConfigs of brokers, as Kafka's ConfigHelper answers it, through kafka-python's and
confluent-kafka's admin clients and on the wire: how the enforcer finds out whether a quota
plugin (``client.quota.callback.class``) makes Kafka ignore client quotas."""

import confluent_kafka.admin as ck
import pytest
from kafka.admin import ConfigResource, ConfigResourceType
from kafka.protocol.admin import DescribeConfigsRequest

from devcluster.control_client import ControlClient, ControlClientError
from devkit.devcluster_wire import exchange

pytestmark = pytest.mark.integration

CALLBACK = "client.quota.callback.class"
STRIMZI = "io.strimzi.kafka.quotas.StaticQuotaCallback"
INVALID_REQUEST = 42
BROKER, TOPIC = 4, 2


@pytest.fixture
def dc(devcluster):
    return devcluster(brokers=2, log_dirs_per_broker=1)


def kafka_python_configs(admin, broker, **kwargs):
    resource = ConfigResource(
        ConfigResourceType.BROKER, str(broker), configs=kwargs.pop("keys", None)
    )
    return admin.describe_configs([resource], **kwargs)["broker"][str(broker)]


def test_kafka_python_sees_no_callback_by_default(dc, admin):
    configs = kafka_python_configs(admin, 1, config_filter="all")
    entry = configs[CALLBACK]
    assert entry["value"] is None and entry["config_source"] == "DEFAULT_CONFIG"
    assert entry["read_only"] is True and entry["config_type"] == "CLASS"
    assert configs["node.id"]["value"] == "1" and configs["process.roles"]["value"] == "broker"
    assert configs["log.dirs"]["value"] == str(dc.log_dir_path(1, 0))
    assert configs["quota.window.num"] == {
        **configs["quota.window.num"],
        "value": "11",
        "config_source": "DEFAULT_CONFIG",
    }
    # kafka-python's default filter ("modified") keeps dynamic configs only.
    assert CALLBACK not in kafka_python_configs(admin, 1)


def test_kafka_python_sees_the_plugin_set_on_the_command_line(devcluster):
    from kafka.admin import KafkaAdminClient

    dc = devcluster(brokers=2, log_dirs_per_broker=1, client_quota_callback_class=STRIMZI)
    admin = KafkaAdminClient(bootstrap_servers=dc.bootstrap, request_timeout_ms=5000)
    try:
        for broker in (0, 1):
            configs = kafka_python_configs(
                admin, broker, keys=[CALLBACK], include_synonyms=True, config_filter="all"
            )
            assert list(configs) == [CALLBACK]
            # A static config: kafka-python's default filter ("modified") hides it.
            assert kafka_python_configs(admin, broker, keys=[CALLBACK]) == {}
            assert configs[CALLBACK]["value"] == STRIMZI
            assert configs[CALLBACK]["config_source"] == "STATIC_BROKER_CONFIG"
            assert configs[CALLBACK]["synonyms"] == [
                {"name": CALLBACK, "value": STRIMZI, "source": "STATIC_BROKER_CONFIG"}
            ]
    finally:
        admin.close()


def test_the_control_api_sets_and_unsets_it_per_broker(dc, admin):
    cc = ControlClient(dc.control_url)
    assert cc.set_broker_config(1, {CALLBACK: STRIMZI}) == {CALLBACK: STRIMZI}
    assert cc.broker(1)["config"] == {CALLBACK: STRIMZI} and cc.broker(0)["config"] == {}

    def callback(broker):
        found = kafka_python_configs(admin, broker, keys=[CALLBACK], config_filter="all")
        return found[CALLBACK]["value"]

    assert callback(1) == STRIMZI
    assert callback(0) is None  # a rolling restart half done: brokers may disagree
    assert cc.set_broker_config(1, {CALLBACK: None}) == {}
    assert callback(1) is None


def test_the_retention_check_interval_is_kafkas_default_until_set_as_server_properties_would(
    dc, admin
):
    """Kafka's `log.retention.check.interval.ms`: a LONG, 300000 by default, static."""
    check = "log.retention.check.interval.ms"

    def interval(broker):
        return kafka_python_configs(admin, broker, keys=[check], config_filter="all")[check]

    assert interval(0)["value"] == "300000"
    assert interval(0)["config_source"] == "DEFAULT_CONFIG" and interval(0)["read_only"]
    cc = ControlClient(dc.control_url)
    assert cc.set_broker_config(0, {check: "1000"}) == {check: "1000"}
    assert interval(0)["value"] == "1000"
    assert interval(0)["config_source"] == "STATIC_BROKER_CONFIG"
    assert interval(1)["value"] == "300000"


@pytest.mark.parametrize(
    "body, words",
    [
        ({"log.retention.check.interval.ms": 0}, "whole number of milliseconds, at least 1"),
        ({"log.retention.check.interval.ms": "5s"}, "whole number of milliseconds, at least 1"),
        ({CALLBACK: "not a class"}, "must be a Java class name"),
        ({CALLBACK: 5}, "must be a Java class name"),
        ({"message.max.bytes": "1"}, "unknown field(s) message.max.bytes"),
        ({}, "empty request"),
    ],
)
def test_bad_config_bodies_are_400_naming_the_problem(dc, body, words):
    with pytest.raises(ControlClientError) as err:
        ControlClient(dc.control_url).set_broker_config(0, body)
    assert err.value.status == 400 and words in err.value.message


def confluent_configs(dc, broker):
    admin = ck.AdminClient({"bootstrap.servers": dc.bootstrap, "log_level": 0})
    resource = ck.ConfigResource(ck.ResourceType.BROKER, str(broker))
    [future] = admin.describe_configs([resource], request_timeout=10).values()
    return future.result()


def test_confluent_kafka_sees_the_callback_and_its_absence(dc):
    entry = confluent_configs(dc, 0)[CALLBACK]
    assert entry.value is None and entry.source == ck.ConfigSource.DEFAULT_CONFIG.value
    assert entry.is_read_only and not entry.is_sensitive
    ControlClient(dc.control_url).set_broker_config(0, {CALLBACK: STRIMZI})
    entry = confluent_configs(dc, 0)[CALLBACK]
    assert entry.value == STRIMZI and entry.source == ck.ConfigSource.STATIC_BROKER_CONFIG.value
    assert [(s.name, s.value) for s in entry.synonyms.values()] == [(CALLBACK, STRIMZI)]


# ---- on the wire: Kafka's per-resource rules -------------------------------------------------
def describe(dc, broker, resources, version=4, synonyms=False, documentation=False):
    request = DescribeConfigsRequest(
        version=version,
        resources=[
            DescribeConfigsRequest.DescribeConfigsResource(
                resource_type=t, resource_name=n, configuration_keys=k
            )
            for t, n, k in resources
        ],
        include_synonyms=synonyms,
        include_documentation=documentation,
    )
    [response] = exchange(("127.0.0.1", dc.broker_ports[broker]), [request])
    return response.results


def test_each_resource_is_answered_on_its_own(dc):
    own, empty, other, garbage, topic = describe(
        dc,
        0,
        [(BROKER, "0", [CALLBACK]), (BROKER, "", None), (BROKER, "1", None), (BROKER, "x", None),
         (TOPIC, "t", None)],
    )  # fmt: skip
    assert (own.error_code, [c.name for c in own.configs]) == (0, [CALLBACK])
    assert (empty.error_code, empty.configs) == (0, [])  # no dynamic cluster-wide defaults
    assert (other.error_code, other.error_message) == (
        INVALID_REQUEST,
        "Unexpected broker id, expected 0 or empty string, but received 1",
    )
    assert (garbage.error_code, garbage.error_message) == (
        INVALID_REQUEST,
        "Broker id must be an integer, but it is: x",
    )
    assert topic.error_code == INVALID_REQUEST and topic.resource_name == "t"


def test_no_keys_or_an_empty_list_is_every_config_and_unknown_keys_are_left_out(dc):
    every, also_every, some = describe(
        dc, 0, [(BROKER, "0", None), (BROKER, "0", []), (BROKER, "0", [CALLBACK, "no.such.key"])]
    )
    assert len(every.configs) > 10 and [c.name for c in every.configs] == [
        c.name for c in also_every.configs
    ]
    assert [c.name for c in some.configs] == [CALLBACK]


def test_an_unknown_resource_type_fails_every_resource(dc):
    results = describe(dc, 0, [(BROKER, "0", None), (99, "x", None)])
    assert [(r.error_code, r.configs) for r in results] == [(INVALID_REQUEST, [])] * 2


@pytest.mark.parametrize("version", [1, 2, 3, 4])
def test_synonyms_and_documentation_only_when_asked(dc, version):
    [plain] = describe(dc, 0, [(BROKER, "0", ["quota.window.num"])], version)
    [rich] = describe(dc, 0, [(BROKER, "0", ["quota.window.num"])], version, True, True)
    assert plain.configs[0].synonyms == [] and plain.configs[0].value == "11"
    assert [(s.name, s.value, s.source) for s in rich.configs[0].synonyms] == [
        ("quota.window.num", "11", 5)
    ]
    if version >= 3:
        assert plain.configs[0].documentation is None and rich.configs[0].documentation

"""Configuration: the proposal's keys verbatim, kvq.* settings, errors that say what is allowed."""

from datetime import timedelta

import pytest

from kvq.model.graceful_slowdown import GracefulSlowdown, settled_share
from kvq.model.limits import (
    MIN_AVAILABLE_BYTES,
    MIN_AVAILABLE_RATIO,
    MinAvailableBytes,
    MinAvailableRatio,
)
from kvq.model.stop_on_violation import StopOnViolation
from kvq.settings.config import (
    BOOTSTRAP_SERVERS,
    CHECK_INTERVAL,
    EXCLUDED,
    FALLBACK,
    PLUGIN_CHECK_INTERVAL,
    SLOWDOWN_HORIZON,
    SLOWDOWN_PARTITION_SIZES,
    SLOWDOWN_PEAK_MEMORY,
    SLOWDOWN_RESPONSE,
    SLOWDOWN_RETENTION_FORECAST,
    THROTTLE_POLICY,
    VALIDITY,
    VIOLATION_HOLD,
    ConfigError,
    build_config,
    load_config,
)

P = "client.quota.callback.static."
BASE = {BOOTSTRAP_SERVERS: "k0:9092,k1:9092", MIN_AVAILABLE_RATIO: "0.05"}


def config(**extra):
    return build_config({**BASE, **extra})


def errors_of(props, environ=None):
    with pytest.raises(ConfigError) as info:
        build_config(props, environ=environ or {})
    return info.value.errors


def test_strimzi_broker_lines_paste_unchanged(tmp_path):
    path = tmp_path / "server.properties"
    path.write_text(
        "client.quota.callback.class=io.strimzi.kafka.quotas.StaticQuotaCallback\n"
        f"{P}produce=1000000\n{P}fetch=2000000\n{P}request=40.5\n"
        f"{P}excluded.principal.name.list=User:CN=replicator,O=acme;User:admin\n"
        f"{P}kafka.admin.bootstrap.servers=kafka-0:9091\n"
        f"{P}kafka.admin.security.protocol=SSL\n"
        f"{P}storage.per.volume.limit.min.available.bytes=1000000000\n"
        f"{P}storage.check.interval=PT30S\n"
        f"{P}throttle.factor.fallback=0.0\n"
        f"{P}throttle.factor.validity.duration=PT2M\n"
    )
    cfg = load_config(path, environ={})
    assert cfg.bootstrap_servers == "kafka-0:9091"
    assert cfg.admin_properties == {
        "bootstrap.servers": "kafka-0:9091",
        "security.protocol": "SSL",
    }
    assert cfg.limit == MinAvailableBytes(1_000_000_000)
    assert cfg.check_interval == timedelta(seconds=30)
    assert cfg.validity == timedelta(minutes=2)
    assert cfg.fallback_factor == 0.0
    assert (cfg.produce, cfg.fetch, cfg.request) == (1_000_000, 2_000_000, 40.5)
    assert cfg.excluded_principals == ("User:CN=replicator,O=acme", "User:admin")
    assert cfg.warnings == ()


def test_defaults_follow_the_proposal_except_the_recommended_check_interval():
    cfg = config()
    assert cfg.check_interval == timedelta(seconds=5)  # the proposal: PT1M (docs/reaction-time.md)
    assert cfg.validity == timedelta(minutes=5)
    assert cfg.fallback_factor == 1.0
    assert cfg.limit == MinAvailableRatio(0.05)
    assert (cfg.produce, cfg.fetch, cfg.request) == (None, None, None)
    assert cfg.cluster_name == "kafka"


def test_zero_interval_disables_polling():
    assert config(**{CHECK_INTERVAL: "PT0S"}).check_interval == timedelta(0)


def test_the_plugins_shipped_interval_key_in_seconds_is_an_alias_without_warning():
    cfg = config(**{PLUGIN_CHECK_INTERVAL: "30"})
    assert cfg.check_interval == timedelta(seconds=30)
    assert cfg.warnings == ()
    assert config(**{PLUGIN_CHECK_INTERVAL: "0"}).check_interval == timedelta(0)


def test_both_interval_properties_is_an_error_naming_both():
    (error,) = errors_of({**BASE, PLUGIN_CHECK_INTERVAL: "30", CHECK_INTERVAL: "PT30S"})
    assert PLUGIN_CHECK_INTERVAL in error and CHECK_INTERVAL in error


@pytest.mark.parametrize("limits", [{}, {MIN_AVAILABLE_BYTES: "5", MIN_AVAILABLE_RATIO: "0.05"}])
def test_zero_or_two_limits_is_an_error_naming_both_properties(limits):
    props = {BOOTSTRAP_SERVERS: "k:9092", **limits}
    (error,) = errors_of(props)
    assert MIN_AVAILABLE_BYTES in error and MIN_AVAILABLE_RATIO in error
    assert ("both are set" if limits else "neither is set") in error


@pytest.mark.parametrize(
    ("key", "value", "allowed"),
    [
        (MIN_AVAILABLE_BYTES, "0", "greater than 0"),
        (MIN_AVAILABLE_BYTES, "1.5", "whole number"),
        (MIN_AVAILABLE_BYTES, str(2**63), "Java long"),
        (MIN_AVAILABLE_RATIO, "0", "between 0.0 and 1.0"),
        (MIN_AVAILABLE_RATIO, "1", "between 0.0 and 1.0"),
        (MIN_AVAILABLE_RATIO, "five", "must be a number"),
        (FALLBACK, "1.5", "from 0.0 to 1.0"),
        (FALLBACK, "-0.1", "from 0.0 to 1.0"),
        (FALLBACK, "nan", "finite"),
        (VALIDITY, "5m", "ISO 8601"),
        (VALIDITY, "PT0S", "positive"),
        (CHECK_INTERVAL, "P1M", "no fixed length"),
        (PLUGIN_CHECK_INTERVAL, "-1", "whole number of seconds"),
        (P + "produce", "0", "greater than 0"),
        (P + "request", "-3", "greater than 0"),
        (EXCLUDED, "admin;User:b", "'User:<name>'"),
        ("kvq.cluster.name", "bad name!", "A-Z a-z 0-9"),
        ("kvq.cluster.label", "kafka-cluster", "must be a Prometheus label name"),
        ("kvq.cluster.label", "__cluster", "not starting with __"),
        ("kvq.cluster.label", "broker_id", "a label the series or alerts already carry"),
        ("kvq.cluster.label", "instance", "a label the series or alerts already carry"),
    ],
)
def test_bad_values_name_the_property_the_value_and_what_is_allowed(key, value, allowed):
    props = {**BASE, key: value}
    if key == MIN_AVAILABLE_BYTES:
        del props[MIN_AVAILABLE_RATIO]
    (error,) = errors_of(props)
    assert error.startswith(f"{key}={value}")
    assert allowed in error


def test_missing_bootstrap_servers_is_required():
    (error,) = errors_of({MIN_AVAILABLE_RATIO: "0.05"})
    assert BOOTSTRAP_SERVERS in error and "required" in error


def test_every_error_is_reported_at_once():
    errors = errors_of({FALLBACK: "2", VALIDITY: "x", "kvq.nope": "1"})
    assert len(errors) == 5  # bootstrap, limit, fallback, validity, unknown kvq key


def test_unknown_kvq_namespace_and_unknown_plugin_key_are_errors_with_a_did_you_mean():
    (error,) = errors_of({**BASE, "kvq.exporer.listen": "x"})
    assert "kvq.exporer.listen is not a known setting" in error
    assert "kvq.exporter.*" in error
    (error,) = errors_of({**BASE, P + "excluded.principal.names.list": "User:admin"})
    assert error.startswith(
        f"{P}excluded.principal.names.list is not a property of the quota plugin; "
        f"did you mean {EXCLUDED}?"
    )
    (error,) = errors_of({**BASE, P + "storage.chek.interval": "PT1M"})
    assert f"did you mean {P}storage.check.interval?" in error


def test_plugin_keys_we_deliberately_ignore_are_warnings_naming_them_as_such():
    cfg = config(**{P + "kafka.clientIdPrefix": "__strimzi", P + "storage.volume.source": "x"})
    assert sorted(cfg.warnings) == [
        f"{P}kafka.clientIdPrefix is a Strimzi plugin key this tool ignores: kvq names its own "
        "Kafka clients; set kafka.admin.client.id to choose the client id",
        f"{P}storage.volume.source is a Strimzi plugin key this tool ignores: every log dir is "
        "read from the brokers (DescribeLogDirs)",
    ]


def test_a_validity_not_longer_than_the_check_interval_is_a_warning_naming_both():
    cfg = config(**{CHECK_INTERVAL: "PT5S", VALIDITY: "PT5S"})
    assert cfg.warnings == (
        f"{VALIDITY} PT5S is not longer than the check interval PT5S: a poll that ends late lets "
        "the fallback factor apply in between; keep it several intervals long (default PT5M)",
    )
    assert config(**{CHECK_INTERVAL: "PT5S", VALIDITY: "PT7S"}).warnings == ()
    assert config(**{CHECK_INTERVAL: "PT0S", VALIDITY: "PT5S"}).warnings == ()


def test_removed_soft_and_hard_limits_are_ignored_with_a_warning():
    cfg = config(**{P + "storage.soft": "100", P + "storage.hard": "200"})
    assert sum("removed aggregate soft/hard limits" in w for w in cfg.warnings) == 2


def test_excluded_principals_may_contain_commas_and_empty_entries_are_ignored():
    cfg = config(**{EXCLUDED: "User:CN=a,OU=b,O=c; ;User:d;"})
    assert cfg.excluded_principals == ("User:CN=a,OU=b,O=c", "User:d")


def test_environment_variables_supply_secrets_and_are_masked():
    jaas = P + "kafka.admin.sasl.jaas.config"
    cfg = build_config(
        {**BASE, jaas: 'PlainLoginModule required username="u" password="${env:KAFKA_PW}";'},
        environ={"KAFKA_PW": "s3cret"},
    )
    assert cfg.admin_properties["sasl.jaas.config"].endswith('password="s3cret";')
    shown = dict(cfg.effective())
    assert shown[jaas] == "********"
    assert "s3cret" not in repr(cfg.effective())


def test_unset_environment_variable_is_named():
    (error,) = errors_of({**BASE, P + "kafka.admin.sasl.password": "${env:NOPE}"})
    assert "NOPE" in error and "not set" in error


def test_flag_overrides_win_and_a_limit_override_replaces_the_other_limit(tmp_path):
    path = tmp_path / "c.properties"
    path.write_text(f"{BOOTSTRAP_SERVERS}=k:9092\n{MIN_AVAILABLE_BYTES}=100\nkvq.cluster.name=a\n")
    cfg = load_config(path, {"kvq.cluster.name": "b", MIN_AVAILABLE_RATIO: "0.2"}, environ={})
    assert cfg.cluster_name == "b"
    assert cfg.limit == MinAvailableRatio(0.2)


def test_effective_configuration_lists_defaults():
    shown = dict(config().effective())
    assert shown[VALIDITY] == "PT5M"
    assert shown[CHECK_INTERVAL] == "PT5S"
    assert shown[FALLBACK] == "1.0"
    assert shown["kvq.cluster.name"] == "kafka"
    assert shown[P + "produce"] == "unlimited"


@pytest.mark.parametrize(
    "key",
    [
        "ssl.key.pem",
        "ssl.keystore.key",
        "ssl.key.password",
        "sasl.oauthbearer.config",
        "sasl.oauthbearer.client.secret",
        "sasl.password",
    ],
)
def test_every_secret_bearing_kafka_setting_is_masked(key):
    shown = dict(config(**{P + "kafka.admin." + key: "private-material"}).effective())
    assert shown[P + "kafka.admin." + key] == "********"


def test_paths_to_secrets_are_shown():
    shown = dict(config(**{P + "kafka.admin.ssl.key.location": "/etc/kvq/key.pem"}).effective())
    assert shown[P + "kafka.admin.ssl.key.location"] == "/etc/kvq/key.pem"


def test_a_value_from_the_environment_is_never_printed():
    username = P + "kafka.admin.sasl.username"
    cfg = build_config({**BASE, username: "${env:KVQ_USER}"}, environ={"KVQ_USER": "alice"})
    assert cfg.admin_properties["sasl.username"] == "alice"
    assert dict(cfg.effective())[username] == "${env:KVQ_USER}"
    (error,) = errors_of({**BASE, FALLBACK: "${env:KVQ_FALLBACK}"}, {"KVQ_FALLBACK": "2-secret"})
    assert error.startswith(f"{FALLBACK}=${{env:KVQ_FALLBACK}}: must be a number")
    assert "2-secret" not in error


def test_a_failing_value_with_a_trailing_comment_says_so():
    (error,) = errors_of({**BASE, FALLBACK: "1.0         # 0.0..1.0, default 1.0"})
    assert "looks like a trailing # comment" in error
    assert "put the comment on its own line" in error


def test_violation_hold_defaults_to_an_hour_and_names_itself_when_bad():
    assert config().violation_hold == timedelta(hours=1)
    assert config(**{VIOLATION_HOLD: "PT0S"}).violation_hold == timedelta(0)
    (error,) = errors_of({**BASE, VIOLATION_HOLD: "1h"})
    assert VIOLATION_HOLD in error and "1h" in error


def test_the_proposals_policy_is_the_default_and_graceful_slowdown_is_chosen_by_name():
    assert isinstance(config().policy, StopOnViolation)
    chosen = config(**{THROTTLE_POLICY: "graceful-slowdown", SLOWDOWN_HORIZON: "PT2M"}).policy
    assert chosen == GracefulSlowdown(config().limit, 120.0)
    assert config(**{THROTTLE_POLICY: "graceful-slowdown"}).policy.horizon_seconds == 600.0


def test_graceful_slowdowns_response_time_is_30_s_unless_set_to_the_loops_own():
    """The policy every app builds carries it (the exporter and the backfill alike), and it
    sets the share of what retention frees that a steady load settles at: R / (R + response)."""
    graceful = {THROTTLE_POLICY: "graceful-slowdown"}
    assert config(**graceful).policy.response_seconds == 30.0
    chosen = config(**graceful, **{SLOWDOWN_RESPONSE: "PT14S", SLOWDOWN_HORIZON: "PT2M"}).policy
    assert chosen == GracefulSlowdown(config().limit, 120.0, 14.0)
    assert settled_share(60.0, chosen.response_seconds) == pytest.approx(60 / 74)


def test_graceful_slowdowns_peaks_remember_an_hour_of_calm_unless_set():
    graceful = {THROTTLE_POLICY: "graceful-slowdown"}
    assert config(**graceful).policy.peak_memory_seconds == 3600.0
    chosen = config(**graceful, **{SLOWDOWN_PEAK_MEMORY: "P1D"}).policy
    assert chosen == GracefulSlowdown(config().limit, 600.0, 30.0, 86400.0)


def test_the_retention_forecast_is_asked_for_only_with_graceful_slowdown_and_the_sizes():
    """The forecast is read from the partitions the log dirs' sizes name: without them, or under
    the proposal's policy (which reads no forecast), nothing is asked."""
    on = {SLOWDOWN_RETENTION_FORECAST: "true"}
    sizes = {THROTTLE_POLICY: "graceful-slowdown", SLOWDOWN_PARTITION_SIZES: "true"}
    assert config(**sizes, **on).reads_retention_forecast
    assert not config(**sizes).reads_retention_forecast
    assert not config(**{**sizes, SLOWDOWN_PARTITION_SIZES: "false"}, **on).reads_retention_forecast
    assert not config(**on).reads_retention_forecast


def test_a_response_time_shorter_than_two_polls_is_warned_about_under_graceful_slowdown():
    """The fill rate shows a change two polls late: a shorter response time makes the factor
    swing. Under the proposal's policy the setting means nothing and is not checked."""
    short = {SLOWDOWN_RESPONSE: "PT9S", CHECK_INTERVAL: "PT5S"}
    (warning,) = config(**short, **{THROTTLE_POLICY: "graceful-slowdown"}).warnings
    assert warning.startswith(f"{SLOWDOWN_RESPONSE} PT9S is shorter than two polls")
    assert f"{CHECK_INTERVAL} PT5S" in warning and "at least PT10S" in warning
    assert config(**short).warnings == ()
    slow_polls = {THROTTLE_POLICY: "graceful-slowdown", CHECK_INTERVAL: "PT1M"}
    assert "at least PT2M" in config(**slow_polls).warnings[0]  # the default, 30 s
    assert config(**{**short, SLOWDOWN_RESPONSE: "PT10S"}).warnings == ()


@pytest.mark.parametrize(
    ("key", "value", "allowed"),
    [
        (THROTTLE_POLICY, "gentle", "one of stop-on-violation, graceful-slowdown"),
        (SLOWDOWN_HORIZON, "PT0S", "positive"),
        (SLOWDOWN_HORIZON, "10m", "ISO 8601"),
        (SLOWDOWN_RESPONSE, "PT0.5S", "from PT1S to PT1H"),
        (SLOWDOWN_RESPONSE, "PT2H", "from PT1S to PT1H"),
        (SLOWDOWN_RESPONSE, "14s", "ISO 8601"),
        (SLOWDOWN_PEAK_MEMORY, "PT30S", "from PT1M to P30D"),
        (SLOWDOWN_PEAK_MEMORY, "P60D", "from PT1M to P30D"),
        (SLOWDOWN_RETENTION_FORECAST, "maybe", "true or false"),
    ],
)
def test_a_bad_policy_setting_names_itself_and_what_is_allowed(key, value, allowed):
    (error,) = errors_of({**BASE, key: value})
    assert error.startswith(f"{key}={value}") and allowed in error

"""DescribeConfigs of a broker, answered as Kafka's ``ConfigHelper`` does (Kafka 4.x, KRaft).

A devcluster broker has a small static configuration: what it derives from its own setup (ids,
roles, listeners, log dirs) plus ``client.quota.callback.class`` when the devcluster was told to
have one (the Strimzi quota plugin's switch, which makes Kafka ignore client quotas) and
``log.retention.check.interval.ms`` when set (how often retention frees space). Everything else
of the table below reports Kafka's default. Kafka's rules reproduced:

- A BROKER resource named after the answering broker gets its configuration; the empty name gets
  the cluster-wide dynamic defaults (none here); another broker id is INVALID_REQUEST
  ``Unexpected broker id, expected 0 or empty string, but received 1``; a name that is no integer
  is INVALID_REQUEST ``Broker id must be an integer, but it is: x``. Each resource is answered on
  its own.
- ``configuration_keys`` null or empty lists every config; otherwise only the named ones that
  exist (unknown names are left out, no error).
- A statically set config has source STATIC_BROKER_CONFIG (4); an unset one DEFAULT_CONFIG (5) with
  Kafka's default, ``null`` for a config without default (``client.quota.callback.class``).
  Synonyms (v1+, when asked): the static value then the default, a null default omitted.
- Read-only unless Kafka can change the config dynamically; documentation (v3+) only when asked.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

NONE = 0
INVALID_REQUEST = 42
INVALID_REQUEST_MESSAGE = (
    "This most likely occurs because of a request being malformed by the client library or the "
    "message was sent to an incompatible broker. See the broker logs for more details."
)

# ConfigResource.Type ids
TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP = 2, 4, 8, 16, 32
RESOURCE_TYPES = {TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP}

# DescribeConfigsResponse.ConfigSource / ConfigType ids
STATIC_BROKER_CONFIG, DEFAULT_CONFIG = 4, 5
BOOLEAN, STRING, INT, LONG, LIST, CLASS = 1, 2, 3, 5, 7, 8

CLIENT_QUOTA_CALLBACK_CLASS = "client.quota.callback.class"
LOG_RETENTION_CHECK_INTERVAL = "log.retention.check.interval.ms"
SETTABLE = (CLIENT_QUOTA_CALLBACK_CLASS, LOG_RETENTION_CHECK_INTERVAL)
_JAVA_CLASS_NAME = re.compile(r"[A-Za-z_$][\w$]*(\.[A-Za-z_$][\w$]*)*")


@dataclass(frozen=True)
class ConfigKey:
    name: str
    type: int
    default: str | None
    dynamic: bool
    doc: str


# Kafka's definitions (name, type, default as Kafka prints it, dynamically changeable).
CONFIG_KEYS: tuple[ConfigKey, ...] = (
    ConfigKey("node.id", INT, "-1", False, "The node ID of this process."),
    ConfigKey("broker.id", INT, "-1", False, "The broker id for this server."),
    ConfigKey("process.roles", LIST, "", False, "The roles that this process plays."),
    ConfigKey("listeners", STRING, "PLAINTEXT://:9092", False, "Listener List."),
    ConfigKey("advertised.listeners", STRING, None, False, "Listeners for clients to use."),
    ConfigKey("log.dirs", STRING, None, False, "The directories where the log data is stored."),
    ConfigKey("auto.create.topics.enable", BOOLEAN, "true", False, "Auto-create topics."),
    ConfigKey(
        CLIENT_QUOTA_CALLBACK_CLASS,
        CLASS,
        None,
        False,
        "The fully qualified name of a class that implements the ClientQuotaCallback interface, "
        "which is used to determine quota limits applied to client requests.",
    ),
    ConfigKey(
        LOG_RETENTION_CHECK_INTERVAL,
        LONG,
        "300000",
        False,
        "The frequency in milliseconds that the log cleaner checks whether any log is eligible "
        "for deletion",
    ),
    ConfigKey("quota.window.num", INT, "11", False, "Samples kept in memory for client quotas."),
    ConfigKey("quota.window.size.seconds", INT, "1", False, "Time span of a quota sample."),
    ConfigKey("metrics.num.samples", INT, "2", False, "Samples maintained to compute metrics."),
    ConfigKey("metrics.sample.window.ms", LONG, "30000", False, "Time span of a metrics sample."),
    ConfigKey("message.max.bytes", INT, "1048588", True, "The largest record batch size."),
    ConfigKey("num.io.threads", INT, "8", True, "Threads processing requests."),
    ConfigKey("num.network.threads", INT, "3", True, "Threads serving the network."),
    ConfigKey("socket.request.max.bytes", INT, "104857600", False, "Largest socket request."),
)


@dataclass(frozen=True)
class Config:
    """One config as a broker reports it."""

    name: str
    value: str | None
    source: int
    read_only: bool
    type: int
    synonyms: tuple[tuple[str, str | None, int], ...]
    """(name, value, source), most important first."""
    doc: str


@dataclass(frozen=True)
class ResourceResult:
    error_code: int
    error_message: str | None
    configs: tuple[Config, ...] = ()


def static_config(
    broker_id: int, host: str, port: int, log_dirs: Sequence[str], extra: Mapping[str, str]
) -> dict[str, str]:
    """The broker's ``server.properties``: what a devcluster broker is, plus ``extra``."""
    listener = f"PLAINTEXT://{host}:{port}"
    return {
        "node.id": str(broker_id),
        "broker.id": str(broker_id),
        "process.roles": "broker",
        "listeners": listener,
        "advertised.listeners": listener,
        "log.dirs": ",".join(log_dirs),
        "auto.create.topics.enable": "false",  # devcluster never creates a topic on Metadata
        **extra,
    }


def describe_broker(
    broker_id: int, name: str, keys: Sequence[str] | None, config: Mapping[str, str]
) -> ResourceResult:
    """The answer for one BROKER resource named ``name`` sent to broker ``broker_id``."""
    if name == "":
        return ResourceResult(NONE, None)  # no dynamic cluster-wide defaults are ever set here
    if not re.fullmatch(r"[+-]?[0-9]+", name) or not -(2**31) <= int(name) < 2**31:
        return ResourceResult(INVALID_REQUEST, f"Broker id must be an integer, but it is: {name}")
    if int(name) != broker_id:
        return ResourceResult(
            INVALID_REQUEST,
            f"Unexpected broker id, expected {broker_id} or empty string, but received {name}",
        )
    wanted = set(keys) if keys else None
    return ResourceResult(
        NONE,
        None,
        tuple(_config(k, config) for k in CONFIG_KEYS if wanted is None or k.name in wanted),
    )


def _config(key: ConfigKey, config: Mapping[str, str]) -> Config:
    synonyms = []
    if key.name in config:
        synonyms.append((key.name, config[key.name], STATIC_BROKER_CONFIG))
    if key.default is not None:
        synonyms.append((key.name, key.default, DEFAULT_CONFIG))
    return Config(
        name=key.name,
        value=config.get(key.name, key.default),
        source=synonyms[0][2] if synonyms else DEFAULT_CONFIG,
        read_only=not key.dynamic,
        type=key.type,
        synonyms=tuple(synonyms),
        doc=key.doc,
    )


def check_setting(field: str, value: object) -> str | None:
    """A value of one of the SETTABLE configs, or None (unset); raises ValueError naming the
    field and what it takes otherwise."""
    if field == LOG_RETENTION_CHECK_INTERVAL:
        return check_milliseconds(field, value)
    return check_class_name(field, value)


def check_milliseconds(field: str, value: object) -> str | None:
    """A whole number of milliseconds, at least 1 (Kafka's `atLeast(1)`), as a number or as
    ``server.properties`` writes it, or None (unset)."""
    if value is None:
        return None
    if isinstance(value, str) and value.isdigit():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(
            f"{field} must be a whole number of milliseconds, at least 1, got {value!r}"
        )
    return str(value)


def check_class_name(field: str, value: object) -> str | None:
    """A Java class name or None (unset); raises ValueError naming the field otherwise."""
    if value is None:
        return None
    if not isinstance(value, str) or not _JAVA_CLASS_NAME.fullmatch(value):
        raise ValueError(
            f"{field} must be a Java class name (e.g. io.strimzi.kafka.quotas.StaticQuotaCallback)"
            f" or null, got {value!r}"
        )
    return value

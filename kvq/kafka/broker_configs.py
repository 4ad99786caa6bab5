"""DescribeConfigs of one broker's own configuration (a broker answers only for itself), and of
topics (any broker answers)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kafka import errors as kafka_errors
from kafka.protocol.admin import DescribeConfigsRequest

BROKER_RESOURCE = 4
"""ConfigResource.Type BROKER."""
TOPIC_RESOURCE = 2
"""ConfigResource.Type TOPIC."""


class BrokerConfigError(Exception):
    """A broker answered DescribeConfigs with an error; the message names it."""


def broker_config_request(node_id: int, keys: Sequence[str]) -> DescribeConfigsRequest:
    """DescribeConfigs of `keys` of broker `node_id` (to be sent to that broker)."""
    return config_request(BROKER_RESOURCE, [str(node_id)], keys)


def config_request(
    resource_type: int, names: Sequence[str], keys: Sequence[str], version: int | None = None
) -> DescribeConfigsRequest:
    """DescribeConfigs of `keys` of the resources `names` of one type (each with its value, or
    its default: a topic's unset config answers with the broker's)."""
    resources = [
        DescribeConfigsRequest.DescribeConfigsResource(
            resource_type=resource_type, resource_name=name, configuration_keys=list(keys)
        )
        for name in names
    ]
    versioned = {} if version is None else {"version": version}
    return DescribeConfigsRequest(
        resources=resources, include_synonyms=False, include_documentation=False, **versioned
    )


def resource_config_values(
    response: Any, kind: str
) -> dict[str, dict[str, str | None] | BrokerConfigError]:
    """Per resource (a `kind`: broker, topic) its configs by name (None: set to nothing), or the
    error it was answered with."""
    results: dict[str, dict[str, str | None] | BrokerConfigError] = {}
    for result in response.results:
        if result.error_code:
            results[result.resource_name] = BrokerConfigError(
                f"DescribeConfigs of {kind} {result.resource_name} failed: "
                f"{error_name(result.error_code)}{error_detail(result.error_message)}"
            )
        else:
            results[result.resource_name] = {c.name: c.value for c in result.configs}
    return results


def broker_config_values(response: Any) -> dict[str, str | None]:
    """The configs a broker reported, by name (None: set to nothing); BrokerConfigError for an
    error code."""
    values: dict[str, str | None] = {}
    for configs in resource_config_values(response, "broker").values():
        if isinstance(configs, BrokerConfigError):
            raise configs
        values.update(configs)
    return values


def error_name(code: int) -> str:
    """kafka-python's name for a Kafka error code ("error N" for a code it does not know)."""
    try:
        return kafka_errors.for_code(code).__name__
    except Exception:  # noqa: BLE001 - unknown codes still get reported
        return f"error {code}"


def error_detail(message: str | None) -> str:
    """ ": <message>" after an error's name, or nothing without one."""
    return f": {message}" if message else ""

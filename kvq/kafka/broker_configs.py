"""DescribeConfigs of one broker's own configuration (a broker answers only for itself)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kafka import errors as kafka_errors
from kafka.protocol.admin import DescribeConfigsRequest

BROKER_RESOURCE = 4
"""ConfigResource.Type BROKER."""


class BrokerConfigError(Exception):
    """A broker answered DescribeConfigs with an error; the message names it."""


def broker_config_request(node_id: int, keys: Sequence[str]) -> DescribeConfigsRequest:
    """DescribeConfigs of `keys` of broker `node_id` (to be sent to that broker)."""
    resource = DescribeConfigsRequest.DescribeConfigsResource(
        resource_type=BROKER_RESOURCE, resource_name=str(node_id), configuration_keys=list(keys)
    )
    return DescribeConfigsRequest(
        resources=[resource], include_synonyms=False, include_documentation=False
    )


def broker_config_values(response: Any) -> dict[str, str | None]:
    """The configs a broker reported, by name (None: set to nothing); BrokerConfigError for an
    error code."""
    values: dict[str, str | None] = {}
    for result in response.results:
        if result.error_code:
            raise BrokerConfigError(
                f"DescribeConfigs of broker {result.resource_name} failed: "
                f"{error_name(result.error_code)}{error_detail(result.error_message)}"
            )
        for config in result.configs:
            values[config.name] = config.value
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

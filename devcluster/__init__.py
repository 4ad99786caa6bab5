"""A multi-broker Kafka wire-protocol server for tests and the demo (``kvq-devcluster``).

Real Apache Kafka cannot be installed here, so the devcluster speaks the protocol itself, with
kafka-python's message classes: ApiVersions, Metadata, DescribeCluster, DescribeLogDirs v1-v4,
Describe/AlterClientQuotas, DescribeConfigs, CreateTopics, Produce (replicated to real segment
files), SASL/PLAIN; log dirs backed by real directories, KRaft quota semantics, Kafka's produce
quotas, and faults injected through a JSON control API. See README.md next to this file.
"""

from .cluster import DevCluster
from .control_client import ControlClient, ControlClientError
from .validation import ControlError

__all__ = ["ControlClient", "ControlClientError", "ControlError", "DevCluster"]

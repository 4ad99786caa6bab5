"""What a broker and the API handlers see of the cluster and of the brokers: Protocols.

The handlers (``api_handlers``, ``produce_api``, ``topics_api``, ``sasl_api``) and ``Broker`` are
written against these, not against ``Broker`` or ``DevCluster`` themselves, so no module below
``cluster.py`` imports back up to it: ``cluster.py`` makes the brokers, the stores and the control
API and wires them together; ``DevCluster`` and ``Broker`` satisfy the Protocols.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Protocol

from .cluster_acls import ClusterAcls
from .faults import AlterFault
from .mutation_quotas import MutationQuotas
from .produce_quotas import ProduceQuotas
from .quota_store import QuotaStore
from .replicas import ReplicaHost, ReplicaStore
from .request_counts import RequestCounter
from .sasl import SaslUsers
from .topics import NewTopic


class BrokerNode(ReplicaHost, Protocol):
    """A broker as the others see it: Metadata and DescribeCluster list it."""

    host: str
    port: int

    def port_for(self, listener: str) -> int: ...


class ClusterView(Protocol):
    """The cluster as its brokers read and change it, on the event loop: the topics and their
    replicas, the quota store (KRaft's controller), ACLs, SASL users, request counts."""

    cluster_id: str
    quotas: QuotaStore
    mutation_quotas: MutationQuotas
    replicas: ReplicaStore
    requests: RequestCounter

    @property
    def acls(self) -> ClusterAcls | None:
        """ACLs on the cluster resource; None: no authorizer."""

    @property
    def sasl_users(self) -> SaslUsers | None:
        """None: no SASL listener."""

    @property
    def brokers(self) -> Sequence[BrokerNode]:
        """Every broker, stopped ones included, by broker id."""

    def live_brokers(self) -> Sequence[BrokerNode]: ...

    def topics(self) -> dict[str, dict[int, list[int]]]: ...

    def topic_id(self, topic: str) -> uuid.UUID: ...

    def partition_replicas(self, topic: str, partition: int) -> list[int] | None: ...

    def create_topic(
        self, topic: NewTopic, validate_only: bool = False
    ) -> dict[int, list[int]]: ...

    def next_producer_id(self) -> int: ...

    def producer_quotas(self) -> dict:
        """The stored quotas as ``{QuotaEntity: {key: value}}``, what produce quotas enforce."""

    def take_alter_fault(self, broker: BrokerNode, validate_only: bool) -> AlterFault | None: ...

    def disarm_leave_fault(self, broker: BrokerNode) -> None: ...
    def spend_drop_fault(self, broker: BrokerNode) -> None: ...


class ServingBroker(BrokerNode, Protocol):
    """The broker answering a request, as its handler reads it."""

    config_overrides: dict[str, str]
    produce_quotas: ProduceQuotas

    @property
    def cluster(self) -> ClusterView: ...

    def api_versions(self) -> dict[int, tuple[int, int]]: ...

    def static_config(self) -> dict[str, str]: ...

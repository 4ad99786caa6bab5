"""ACLs on the cluster resource, checked as Kafka's StandardAuthorizer checks them.

Without ACLs (``None``) the devcluster runs without an authorizer: everything is allowed, as on a
Kafka without ``authorizer.class.name``. With them, a principal may do on the cluster exactly
what its ALLOW entries grant, with Kafka's implications (``Alter`` grants ``Describe``,
``AlterConfigs`` grants ``DescribeConfigs``, ``All`` grants everything), and nothing else (Kafka's
``allow.everyone.if.no.acl.found=false``). Where Kafka checks the cluster resource:

| request | operation |
|---|---|
| DescribeLogDirs | Describe |
| DescribeClientQuotas, DescribeConfigs of a broker | DescribeConfigs |
| AlterClientQuotas | AlterConfigs |

Topic and group ACLs are not modelled: topics stay open to every principal.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .validation import ControlError, read_json_file

# AclOperation: name -> code (the bits of authorized_operations)
CODES = {
    "All": 2,
    "Create": 5,
    "Alter": 7,
    "Describe": 8,
    "ClusterAction": 9,
    "DescribeConfigs": 10,
    "AlterConfigs": 11,
    "IdempotentWrite": 12,
}
CLUSTER_OPERATIONS = frozenset(CODES) - {"All"}
_IMPLIED_BY = {"Describe": {"Alter"}, "DescribeConfigs": {"AlterConfigs"}}
_BY_LOWER = {name.lower(): name for name in CODES}

CLUSTER_AUTHORIZATION_FAILED = 31
CLUSTER_AUTHORIZATION_FAILED_MESSAGE = "Cluster authorization failed."


class ClusterAcls:
    """principal (``User:name``) -> the cluster operations its ALLOW entries name."""

    def __init__(self, grants: Mapping[str, frozenset[str]]):
        self._grants = dict(grants)

    @classmethod
    def parse(cls, body: Any) -> ClusterAcls:
        """``{"User:kvq-exporter": ["Describe"], "User:kvq-enforcer": ["DescribeConfigs",
        "AlterConfigs"]}``; operation names are case-insensitive, as Kafka's."""
        if not isinstance(body, Mapping):
            raise ControlError(
                400, 'cluster ACLs must be a JSON object {"User:name": ["Describe", ...]}'
            )
        grants = {}
        for principal, operations in body.items():
            if (
                not isinstance(principal, str)
                or not principal.startswith("User:")
                or principal == "User:"
            ):
                raise ControlError(
                    400, f"an ACL principal must look like User:name, got {principal!r}"
                )
            if not isinstance(operations, list) or not all(isinstance(o, str) for o in operations):
                raise ControlError(
                    400,
                    f"the operations of {principal} must be a list of names, got {operations!r}",
                )
            unknown = [o for o in operations if o.lower() not in _BY_LOWER]
            if unknown:
                raise ControlError(
                    400,
                    f"unknown cluster operation(s) {', '.join(unknown)} for {principal}; "
                    f"allowed: {', '.join(CODES)}",
                )
            grants[principal] = frozenset(_BY_LOWER[o.lower()] for o in operations)
        return cls(grants)

    def allows(self, principal: str, operation: str) -> bool:
        granted = self._grants.get(principal, frozenset())
        return bool({operation, "All", *_IMPLIED_BY.get(operation, ())} & granted)

    def authorized_operations(self, principal: str) -> set[int]:
        """The cluster's authorized_operations bits for this principal."""
        return {CODES[op] for op in CLUSTER_OPERATIONS if self.allows(principal, op)}

    @classmethod
    def from_file(cls, path: Path) -> ClusterAcls:
        """A JSON file holding what ``parse`` takes; ValueError naming the problem."""
        data = read_json_file(path, "cluster ACLs file")
        try:
            return cls.parse(data)
        except ControlError as exc:
            raise ValueError(f"cluster ACLs file {path}: {exc.message}") from None

    def snapshot(self) -> dict[str, list[str]]:
        return {p: sorted(ops) for p, ops in sorted(self._grants.items())}

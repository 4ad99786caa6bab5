"""A dry run: instead of acting, Kafka validates the plan (validate_only) and it is logged."""

from __future__ import annotations

import logging

from enforcer.apply.cluster_io import ClusterIO
from enforcer.apply.plan import Plan
from enforcer.apply.result import ApplyResult
from enforcer.apply.verify import check_quota_callback

log = logging.getLogger("kvq.enforcer")


def dry_run(io: ClusterIO, planned: Plan) -> ApplyResult:
    """Validate `planned` with Kafka, log what it would set (at debug, as an apply) and say
    whether the brokers would take client quotas at all; nothing is written."""
    io.client.alter(planned.todo, validate_only=True)
    if log.isEnabledFor(logging.DEBUG):  # as an apply: its summary at info, the values here
        for change in planned.todo:
            log.debug("cluster %s: dry run, would set %s", io.name, change.describe())
    check_quota_callback(io)
    return ApplyResult(io.name, planned.factor, tuple(planned.todo), planned.drift, dry_run=True)

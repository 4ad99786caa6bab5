"""Verify: describe until every broker shows what was sent (what did land is journaled when not
all did), and refuse to report success where brokers ignore client quotas."""

from __future__ import annotations

from enforcer.apply.cluster_io import ClusterIO
from enforcer.apply.plan import Plan
from enforcer.apply.result import ApplyError, QuotaCallbackActive
from enforcer.quota_plan import Change, Pair, Snapshot, current_value, same_value


def verify(io: ClusterIO, planned: Plan, sent: list[Change]) -> tuple[float, Snapshot]:
    """(monotonic time, quotas) of a DescribeClientQuotas showing the plan's changes `sent`;
    the plan's own view when it had none."""
    if not planned.todo:
        return planned.view.described_at, planned.view.snapshot
    described_at = io.monotonic()
    return described_at, described_until_landed(io, planned, sent)


def described_until_landed(io: ClusterIO, planned: Plan, sent: list[Change]) -> Snapshot:
    """Describe again (a few times: brokers learn quota changes from the metadata log a
    moment later) until every broker shows `sent`; otherwise journal what landed and raise
    ApplyError."""
    for attempt in range(io.verify_attempts):
        after = io.client.describe_agreed()
        missing = [
            c for c in sent if not same_value(current_value(after, (c.entity, c.key)), c.value)
        ]
        if not missing:
            return after
        if attempt + 1 < io.verify_attempts:
            io.sleep(io.verify_delay_s)
    io.journal.confirm(landed(planned.desired, after), None)
    raise ApplyError(
        f"after AlterClientQuotas, {len(missing)} value(s) differ from the plan "
        f"at factor {planned.factor}: " + "; ".join(c.describe() for c in missing[:5])
    )


def landed(desired: dict[Pair, float | None], snapshot: Snapshot) -> dict[Pair, float | None]:
    """The desired values `snapshot` shows."""
    return {
        pair: value
        for pair, value in desired.items()
        if same_value(current_value(snapshot, pair), value)
    }


def check_quota_callback(io: ClusterIO) -> None:
    """Refuse to report success when brokers ignore client quotas (DescribeConfigs)."""
    found = io.client.quota_callbacks()
    if found:
        classes = sorted(set(found.values()))
        raise QuotaCallbackActive(
            f"broker(s) {', '.join(map(str, sorted(found)))} set client.quota.callback.class="
            f"{', '.join(classes)}: Kafka hands every quota decision to that plugin and "
            "ignores client quotas, so the quotas set here have no effect; turn the plugin "
            "off (Strimzi: spec.kafka.quotas.type other than strimzi) to let the enforcer "
            "protect the disks"
        )

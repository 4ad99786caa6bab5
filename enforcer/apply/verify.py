"""Verify: describe until every broker shows what was sent (what did land is journaled when not
all did), and refuse to report success where brokers ignore client quotas."""

from __future__ import annotations

import logging
from collections.abc import Mapping

from enforcer.apply.cluster_io import ClusterIO
from enforcer.apply.plan import Plan
from enforcer.apply.result import ApplyError, QuotaCallbackActive
from enforcer.log_lists import first_few
from enforcer.quota_plan import Change, Pair, Snapshot, current_value, same_value

log = logging.getLogger(__name__)

REWRITE_AFTER_DESCRIBES = 2
"""Describes that may show a pair at its original before it is written again: a broker's
metadata lags behind by well under the time between them (`verify_delay_s`, 0.2 s), while a
reconciler's reset stays."""


def verify(
    io: ClusterIO, planned: Plan, sent: list[Change], originals: Mapping[Pair, float | None]
) -> tuple[float, Snapshot]:
    """(monotonic time, quotas) of a DescribeClientQuotas showing the plan's changes `sent`;
    the plan's own view when it had none. A value a reconciler reset to its original
    (`originals`) between the write and the check is written again."""
    if not planned.todo:
        return planned.view.described_at, planned.view.snapshot
    described_at = io.monotonic()
    return described_at, described_until_landed(io, planned, sent, originals)


def described_until_landed(
    io: ClusterIO,
    planned: Plan,
    sent: list[Change],
    originals: Mapping[Pair, float | None] | None = None,
) -> Snapshot:
    """Describe again (a few times: brokers learn quota changes from the metadata log a
    moment later) until every broker shows `sent`; otherwise journal what landed and raise
    ApplyError. With `originals`, values still shown at their original after the first
    describes are written again: Strimzi's operators reconcile every few seconds, and one may
    reset a value between its write and this check (the throttle checks would find it later,
    but the webhook's answer would be a failure)."""
    for attempt in range(io.verify_attempts):
        after = io.client.describe_agreed()
        missing = [
            c for c in sent if not same_value(current_value(after, (c.entity, c.key)), c.value)
        ]
        if not missing:
            return after
        if attempt + 1 < io.verify_attempts:
            if originals is not None and attempt + 1 >= REWRITE_AFTER_DESCRIBES:
                _write_resets_again(io, after, missing, originals)
            io.sleep(io.verify_delay_s)
    io.journal.confirm(landed(planned.desired, after), None)
    raise ApplyError(
        f"after AlterClientQuotas, {len(missing)} value(s) differ from the plan "
        f"at factor {planned.factor}: " + "; ".join(c.describe() for c in missing[:5])
    )


def _write_resets_again(
    io: ClusterIO, after: Snapshot, missing: list[Change], originals: Mapping[Pair, float | None]
) -> None:
    """Write again the values of `missing` that `after` shows at their original (pending in
    the journal already, so a crash meanwhile knows them as ours); an operator's new value
    is left for the next plan to keep. Not counted as a reconciler's reset: a lagging
    broker's view looks the same here (the throttle checks count the resets that stay)."""
    reset = [
        c
        for c in missing
        if (c.entity, c.key) in originals
        and same_value(current_value(after, (c.entity, c.key)), originals[(c.entity, c.key)])
    ]
    if not reset:
        return
    log.info(
        "cluster %s: %d value(s) still shown at their original after they were written (a "
        "broker's view behind, or a reconciler such as Strimzi's User Operator resetting "
        "them); writing them again: %s",
        io.name,
        len(reset),
        first_few(f"{c.entity.label()} {c.key}" for c in reset),
    )
    io.alter(reset)


def landed(desired: dict[Pair, float | None], snapshot: Snapshot) -> dict[Pair, float | None]:
    """The desired values `snapshot` shows."""
    return {
        pair: value
        for pair, value in desired.items()
        if same_value(current_value(snapshot, pair), value)
    }


def check_quota_callback(io: ClusterIO) -> None:
    """Refuse to report success when brokers ignore client quotas (DescribeConfigs); the quota
    window they answer with is what the next plans count on (`QuotaWindow`)."""
    settings = io.client.quota_settings()
    io.quota_window.learned(settings)
    found = settings.callbacks
    if found:
        classes = sorted(set(found.values()))
        raise QuotaCallbackActive(
            f"broker(s) {', '.join(map(str, sorted(found)))} set client.quota.callback.class="
            f"{', '.join(classes)}: Kafka hands every quota decision to that plugin and "
            "ignores client quotas, so the quotas set here have no effect; turn the plugin "
            "off (Strimzi: spec.kafka.quotas.type other than strimzi) to let the enforcer "
            "protect the disks"
        )

"""The /status document: what the exporter decided, since when, and why."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from kvq.model.limits import Limit
from kvq.model.throttle_factor_source import ThrottleFactorSource
from kvq.model.volume_cache import CachedVolume


def iso(time: float | None) -> str | None:
    return None if time is None else datetime.fromtimestamp(time, UTC).isoformat()


def seen(entry: Any, **more: Any) -> dict[str, Any]:
    """A cached volume (broker, log dir, when last seen), with `more` fields."""
    volume = entry.volume
    return {
        "broker_id": volume.broker_id,
        "log_dir": volume.log_dir,
        "seen_at": iso(entry.seen_at),
        **more,
    }


def unseen_problem(entry: CachedVolume) -> str:
    """Why a volume whose violation hold expired is a problem, in the operator's words."""
    if entry.offline:
        why = (
            f"log dir {entry.volume.log_dir} of broker {entry.volume.broker_id} went offline "
            "(an error code, no sizes) while this volume violated the limit"
        )
    else:
        why = f"broker {entry.volume.broker_id} left while this volume violated the limit"
    return why + " and has not been seen since; the throttle no longer counts it"


def status_document(
    throttle: ThrottleFactorSource, now: float, cluster: str, limit: Limit
) -> dict[str, Any]:
    factor = throttle.factor_at(now)
    state = throttle.state
    hold_seconds = throttle.cache.hold_seconds
    failure = state.last_failure
    return {
        "cluster": cluster,
        "throttle_factor": factor.value,
        "state": "disabled"
        if not throttle.checking
        else ("fallback" if factor.fallback else "valid"),
        "since": iso(factor.since),
        "calculated_at": iso(factor.calculated_at),
        "expires_at": iso(factor.expires_at),
        "limit": {"property": limit.property_name, "value": limit.threshold},
        "violating_volumes": [
            {
                "broker_id": v.broker_id,
                "log_dir": v.log_dir,
                "total_bytes": v.total_bytes,
                "available_bytes": v.available_bytes,
                "available_ratio": v.available_ratio,
            }
            for v in state.violating
        ],
        "active_brokers": state.active_brokers,
        "active_log_dirs": len(state.volumes),
        "cached_log_dirs": [seen(entry) for entry in state.cached],
        "held_log_dirs": [
            seen(entry, held_until=iso(entry.seen_at + hold_seconds), offline=entry.offline)
            for entry in state.held
        ],
        "violation_hold_expired": [
            seen(
                entry,
                hold_expired_at=iso(entry.seen_at + hold_seconds),
                offline=entry.offline,
                problem=unseen_problem(entry),
            )
            for entry in state.hold_expired
        ],
        "unusable_log_dirs": [
            {"broker_id": d.broker_id, "log_dir": d.log_dir, "reason": d.unusable_reason}
            for d in state.unusable
        ],
        "last_successful_poll": iso(state.last_success),
        "last_error": None
        if failure is None
        else {"stage": failure.failure_stage, "error": failure.error, "at": iso(failure.time)},
        "counters": {
            "limit_violated": state.limit_violated_total,
            "fallback_throttle_factor_applied": state.fallback_applied_total,
            "log_dir_evictions": state.evictions_total,
            "poll_failures": dict(state.failures_by_stage),
        },
    }

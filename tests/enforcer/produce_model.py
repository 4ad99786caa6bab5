"""One producer against Kafka's produce quota as devcluster models it (the differential tests
hold it to Kafka's): the throttle times it is answered with."""

from collections.abc import Callable

from devcluster.produce_quotas import WINDOW_NUM, ProduceQuotas
from kvq.kafka.quota_entity import QuotaEntity

TICKS_PER_S = 200


def throttles_at(
    quota: float | Callable[[float], float],
    request_bytes: float,
    offered: float,
    seconds: float = 300.0,
    window_samples: int = WINDOW_NUM,
) -> list[tuple[float, int]]:
    """(when, throttle time in ms) of each request of one producer offering `offered` B/s at
    `quota` (B/s, or a function of the time in seconds): it buffers what it offers up to
    `request_bytes` and sends all of it once its throttle ended (KIP-219), a linger of 5 ms
    after the last send; Kafka's window of `window_samples` seconds (quota.window.num)."""
    quota_at = quota if callable(quota) else (lambda _t: quota)
    clock = [0.0]
    user = QuotaEntity.user("alice")
    quotas = ProduceQuotas(
        lambda: {user: {"producer_byte_rate": quota_at(clock[0])}},
        clock=lambda: clock[0],
        window_samples=window_samples,
    )
    buffered, next_send, out = 0.0, 0.0, []
    for tick in range(int(seconds * TICKS_PER_S)):
        clock[0] = tick / TICKS_PER_S
        buffered = min(request_bytes, buffered + offered / TICKS_PER_S)
        if clock[0] >= next_send:
            throttle_ms = quotas.record("alice", "app", int(buffered))
            buffered, next_send = 0.0, clock[0] + max(throttle_ms / 1000, 0.005)
            out.append((clock[0], throttle_ms))
    return out

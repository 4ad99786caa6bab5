"""BrokerQuotaSettings: what the brokers say of how they enforce client quotas (DescribeConfigs
of each broker's own configuration): whether a quota callback replaces them, the window each one
measures a quota's rate over, and how far back it averages each quota entity's throttle times."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

QUOTA_CALLBACK_CLASS = "client.quota.callback.class"
QUOTA_WINDOW_NUM = "quota.window.num"
QUOTA_WINDOW_SIZE = "quota.window.size.seconds"
METRICS_NUM_SAMPLES = "metrics.num.samples"
METRICS_SAMPLE_WINDOW_MS = "metrics.sample.window.ms"
KEYS = (
    QUOTA_CALLBACK_CLASS,
    QUOTA_WINDOW_NUM,
    QUOTA_WINDOW_SIZE,
    METRICS_NUM_SAMPLES,
    METRICS_SAMPLE_WINDOW_MS,
)
"""What is asked of every broker, in one request each."""


@dataclass(frozen=True, slots=True)
class BrokerQuotaSettings:
    """The brokers' answers, by broker id (brokers that could not be asked are absent)."""

    callbacks: dict[int, str] = field(default_factory=dict)
    """Brokers whose `client.quota.callback.class` is set, with the class: Kafka then hands
    every quota decision to it and ignores client quotas."""
    windows: dict[int, float] = field(default_factory=dict)
    """Each broker's quota window in seconds, `quota.window.num` x `quota.window.size.seconds`:
    the W of its throttle time (rate - quota) / quota x W."""
    samples: dict[int, float] = field(default_factory=dict)
    """Each broker's `quota.window.size.seconds`: the rate of a request that meets no other
    bytes in the window is measured over the window less one such sample (Rate.windowSize)."""
    averages: dict[int, float] = field(default_factory=dict)
    """Each broker's `metrics.num.samples` x `metrics.sample.window.ms`, in seconds: how far back
    its average throttle time of each quota entity reaches (the sensor's `Avg` keeps the
    broker's default metric samples)."""

    @property
    def longest_window(self) -> float | None:
        """The longest window of any broker (None: none said): the one at which a quota hands
        out the longest throttle times."""
        return max(self.windows.values(), default=None)

    @property
    def longest_sample(self) -> float | None:
        """The longest sample of any broker (None: none said): the least of the window Kafka
        may leave out of a throttle time."""
        return max(self.samples.values(), default=None)

    @property
    def longest_average(self) -> float | None:
        """The furthest back any broker averages throttle times (None: none said)."""
        return max(self.averages.values(), default=None)

    def with_broker(self, node_id: int, values: Mapping[str, str | None]) -> BrokerQuotaSettings:
        """These settings and what broker `node_id` answered."""
        callbacks, windows = dict(self.callbacks), dict(self.windows)
        samples, averages = dict(self.samples), dict(self.averages)
        if values.get(QUOTA_CALLBACK_CLASS):
            callbacks[node_id] = str(values[QUOTA_CALLBACK_CLASS])
        said = quota_window(values)
        if said is not None:
            count, size = said
            windows[node_id], samples[node_id] = float(count * size), float(size)
        average = throttle_average(values)
        if average is not None:
            averages[node_id] = average
        return BrokerQuotaSettings(callbacks, windows, samples, averages)


def quota_window(values: Mapping[str, str | None]) -> tuple[int, int] | None:
    """(`quota.window.num`, `quota.window.size.seconds`) as a broker reports them; None when
    either is missing or not a positive whole number."""
    return positive_pair(values, QUOTA_WINDOW_NUM, QUOTA_WINDOW_SIZE)


def throttle_average(values: Mapping[str, str | None]) -> float | None:
    """Seconds of `metrics.num.samples` x `metrics.sample.window.ms` as a broker reports them;
    None when either is missing or not a positive whole number."""
    said = positive_pair(values, METRICS_NUM_SAMPLES, METRICS_SAMPLE_WINDOW_MS)
    return None if said is None else said[0] * said[1] / 1000.0


def positive_pair(
    values: Mapping[str, str | None], first: str, second: str
) -> tuple[int, int] | None:
    """The configs `first` and `second` as positive whole numbers; None unless both are."""
    try:
        pair = int(values.get(first) or ""), int(values.get(second) or "")
    except ValueError:
        return None
    return pair if min(pair) >= 1 else None

"""The metric families the exporter publishes (name, type, help, order), read from the exporter.

`kvq.contract.metric_samples.families` is the single definition; the catalog evaluates it once on a
tiny synthetic state so the Spark job writes the same names, types and help texts in the same order.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvq.contract.metric_samples import COUNTER, families
from kvq.model.limits import Limit
from kvq.model.observation import Observation
from kvq.model.throttle_factor_policy import ThrottleFactorPolicy
from kvq.model.throttle_factor_source import ThrottleFactorSource
from kvq.model.volume import LogDir


@dataclass(frozen=True, slots=True)
class FamilyInfo:
    """One family: OpenMetrics name (counters without `_total`), type and help text."""

    name: str
    type: str
    help: str

    @property
    def sample_name(self) -> str:
        """The name its samples carry: counters end in `_total`."""
        return self.name + "_total" if self.type == COUNTER else self.name


def catalog(limit: Limit) -> list[FamilyInfo]:
    """Every family published with `limit` configured, in the exporter's order."""
    source = ThrottleFactorSource(ThrottleFactorPolicy(limit), 300.0, 1.0, 0.0)
    source.observe(Observation(1.0, (0,), (LogDir(0, "/catalog", 100, 50),)))
    return [FamilyInfo(f.name, f.type, f.help) for f in families(source, 1.0, "c", limit, 60.0)]

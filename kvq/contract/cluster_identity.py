"""ClusterIdentity: a Kafka cluster as its series, alerts and queries name it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ClusterIdentity:
    """The cluster's name (kvq.cluster.name) and the label that carries it (kvq.cluster.label).

    Both come from the settings (`kvq.settings.config.Config.cluster`), which hold the defaults;
    nothing that takes an identity defaults either part, so a label set in the settings reaches
    every series, alert matcher and query."""

    name: str
    label: str

    @property
    def labels(self) -> dict[str, str]:
        """The one label pair every series of the cluster carries."""
        return {self.label: self.name}

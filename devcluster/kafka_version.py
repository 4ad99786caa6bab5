"""The Apache Kafka release devcluster imitates, and the answers that changed between releases.

devcluster answers as the release it is configured to imitate (``DevCluster(kafka_version=...)``,
``--kafka-version``; default DEFAULT, the oldest kvq supports). Where Kafka changed an answer, the
release that changed it is named here, read from Kafka's code (and checked against real brokers by
tests/differential, which runs devcluster imitating the Kafka version the suite starts):
"""

from __future__ import annotations

import re

DEFAULT = "4.1.2"

FINITE_QUOTAS = (4, 4)
"""ClientQuotaControlManager.validateQuotaKeyValue checks `Double.isFinite` first (right after the
key): NaN and infinities get INVALID_REQUEST "Quota <key> must be a finite number". Before, NaN
passed every comparison and was stored, and +inf was stored for the double keys."""

CORDONED_LOG_DIRS = (4, 3)
"""CreateTopics' replication-factor error names cordoned log dirs (KIP-1066) after "registered":
"... only N broker(s) are registered or some brokers have all their log directories cordoned.\""""

_FORMAT = re.compile(r"([1-9][0-9]*)\.([0-9]+)\.([0-9]+)")

Version = tuple[int, int, int]


def parse(text: str) -> Version:
    """`4.4.0` -> (4, 4, 0); ValueError naming the value otherwise."""
    found = _FORMAT.fullmatch(str(text))
    if found is None:
        raise ValueError(
            f"kafka_version {text!r}: must be a Kafka release number such as {DEFAULT}"
        )
    major, minor, patch = (int(part) for part in found.groups())
    return major, minor, patch


DEFAULT_VERSION: Version = parse(DEFAULT)

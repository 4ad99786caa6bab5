"""kafka-volume-quotas: the shared base the exporter, the enforcer and the Spark backfill stand on.

- `kvq.model`: the pure decision core (volume, limits, observation, volume cache, throttle factor
  policy and source); no I/O, time passed in.
- `kvq.settings`: properties files, durations, the shared config and each app's settings base,
  CLI support and logging setup.
- `kvq.kafka`: Kafka client settings and the one session that owns kafka-python's internals.
- `kvq.contract`: what other programs read: metric families and the archive record.
- `kvq.web`: the HTTP server of the exporter and the enforcer, its web config (TLS, basic auth)
  and the metrics every server publishes (build info, process, connections).
"""

import os
from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("kafka-volume-quotas")
except PackageNotFoundError:  # running from a checkout that was never installed
    __version__ = "0.0.0+unknown"

REVISION_ENV = "KVQ_REVISION"
"""Set by the container image to the source revision it was built from (Containerfile)."""


def revision() -> str:
    """The source revision of this build: the image's KVQ_REVISION, else "unknown" (a checkout or
    a package installed another way)."""
    return os.environ.get(REVISION_ENV) or "unknown"

"""Exporter: polls every broker's log dirs and publishes the throttle factor as Prometheus metrics.

The pure policy core (volume, limits, throttle_factor_policy, volume_cache, throttle_factor_source)
does no I/O and takes time as an argument; it is shared with the Spark backfill and the enforcer.
"""

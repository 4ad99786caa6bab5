"""Exporter: polls every broker's log dirs and publishes the throttle factor as Prometheus metrics.

The decision itself is `kvq.model` (pure, clock passed in); the series it publishes are the table
in `kvq.contract.metric_families`.
"""

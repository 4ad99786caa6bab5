"""The demo stack: devcluster, exporter, enforcer, Prometheus and Alertmanager on loopback."""

"""Not shipped: launchers (Prometheus, Alertmanager, processes), fakes, data generators
and the plain-Python replay oracle, used by `demo/`, `bench/` and `tests/`. Product packages never
import it.
"""

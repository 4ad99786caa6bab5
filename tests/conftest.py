"""Shared pytest fixtures. Other parts of the project may append their own below."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from devcluster.cluster import DevCluster
from tests.kafka_support import SHARED_KAFKA_LOG_DIR_BYTES


def pytest_configure(config):
    """kvq's cache (kvq-backfill's class archive) goes to a temp dir, never the user's home.
    Kafka's jars stay where `make kafka-deps` put them (a download cache, not test state).

    SIGTERM (`kill`, `timeout`, a CI job cancelled) unwinds the run as Ctrl-C does: the test
    stops, every fixture's finalizer runs (servers stopped, tmpfs unmounted, the shared Kafka
    cluster stopped). Python's default SIGTERM ends the process at once and leaves them behind."""
    from devkit.kafka_dist import CACHE_ENV, dist_cache_root
    from kvq import interrupts

    os.environ[CACHE_ENV] = str(dist_cache_root())
    shared = getattr(config, "workerinput", {}).get("kvq_cache")
    config.kvq_cache = shared or tempfile.mkdtemp(prefix="kvq-test-cache-")
    config.kvq_cache_owned = shared is None  # else the xdist controller's, removed by it
    os.environ["KVQ_CACHE_DIR"] = config.kvq_cache
    config.kvq_signals = contextlib.ExitStack()
    config.kvq_signals.enter_context(interrupts.raised())
    if getattr(config.option, "dist", "no") == "loadfile":
        # The order of pytest_collection_modifyitems kept: pytest-xdist otherwise queues the
        # files by their number of tests, most first (--loadscope-reorder, its default), and the
        # few-test modules that take minutes start last, one worker waiting them out alone.
        config.option.loadscopereorder = False


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node):
    """pytest-xdist's controller: its workers share its cache, so that Spark's class archive (a
    local kvq-backfill's first JVM writes it at exit: ~30 s of CPU, ~170 MB) is written once
    for the run, not once per worker."""
    node.workerinput["kvq_cache"] = node.config.kvq_cache


SPARK_RUNNERS = ("tests/spark", "tests/docs", "tests/system")
"""The folders whose tests start a local kvq-backfill with the run's cache."""


def runs_local_backfills(config) -> bool:
    """Whether the run's paths hold (or are inside) one of SPARK_RUNNERS."""
    root = Path(config.rootpath)
    for arg in config.args:
        path = (config.invocation_params.dir / arg.split("::")[0]).resolve()
        for folder in (root / runner for runner in SPARK_RUNNERS):
            if path == folder or folder in path.parents or path in folder.parents:
                return True
    return False


def pytest_sessionstart(session):
    """pytest-xdist's controller writes Spark's class archive into the cache its workers share,
    at the lowest priority, while they start on their first modules (they start a local
    kvq-backfill only minutes in): each worker's first local run then starts from the archive,
    not writes it (tests/spark/test_class_archive.py writes archives of its own)."""
    config = session.config
    if hasattr(config, "workerinput") or not getattr(config.option, "numprocesses", None):
        return
    if config.option.collectonly:
        return
    if not runs_local_backfills(config) or shutil.which("java") is None:
        return
    import importlib.util

    if importlib.util.find_spec("pyspark") is None:
        return
    config.kvq_warm_up = subprocess.Popen(
        ["nice", "-n", "19", sys.executable, "-m", "spark.warm_up"],
        cwd=config.rootpath,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # its JVM with it in a group of their own
    )


def pytest_unconfigure(config):
    warm_up = getattr(config, "kvq_warm_up", None)
    if warm_up is not None and warm_up.poll() is None:  # a run ended early (Ctrl-C): not kept
        with contextlib.suppress(ProcessLookupError):
            os.killpg(warm_up.pid, signal.SIGKILL)
        warm_up.wait()
    if getattr(config, "kvq_cache_owned", False):
        shutil.rmtree(config.kvq_cache, ignore_errors=True)
    signals = getattr(config, "kvq_signals", None)
    if signals is not None:
        signals.close()  # the handlers the process had before


LONGEST_FIRST = (
    "tests/spark/test_backfill_output.py",
    "tests/system/test_producers_scenario.py",
    "tests/kvq/model/test_slowdown_study.py",
    "tests/spark/test_equivalence.py",
    "tests/enforcer/test_integration.py",
    "tests/spark/test_spark_connect.py",
    "tests/system/test_demo_kafka.py",
    "tests/spark/test_class_archive.py",
    "tests/spark/test_spark_submit.py",
    "tests/enforcer/test_large_cluster.py",
    "tests/docs/test_examples_live.py",
    "tests/spark/test_cli.py",
    "tests/system/test_enforcer_cut_off.py",
)
"""Modules that take a minute or more (their tests' durations summed): they start first, longest
first (the producers demo on real Kafka among the first two: `PACED_ORDER` starts the paced lane's
real-Kafka modules once it is done), so that under `make test`'s two workers (one module at a
time each) the last minutes are short modules on both workers, not one long module alone."""

PACED_ORDER = (
    "tests/enforcer/test_restore_protocol.py",
    "tests/system/test_failsafe_loop.py",
    "tests/system/test_e2e_loop.py",
    "tests/enforcer/test_observed_rate_lookback.py",
    "tests/system/test_rules_live_exporter.py",
    "tests/system/test_grafana_dashboard.py",
    "tests/system/test_rules_prometheus.py",
    "tests/system/test_graceful_slowdown_loop.py",
    "tests/system/test_backfill_live_exporter.py",
    "tests/devcluster/test_alter_faults.py",
    "tests/enforcer/test_entity_minimum_kafka.py",
    "tests/enforcer/test_observed_rates_kafka.py",
    "tests/enforcer/test_acting_role.py",
    "tests/enforcer/test_kafka_store_crashes.py",
    "tests/system/test_enforcer_replicas.py",
    "tests/devkit/test_java_producer.py",
    "tests/kvq/kafka/test_oauthbearer_kafka.py",
    "tests/exporter/test_retention_forecast_kafka.py",
)
"""The `paced` modules in the order `make test`'s paced lane takes them: those on devcluster and
Prometheus first, those on real Kafka (their brokers and producers) once the workers' first,
heaviest modules are done, which include the producers demo on real Kafka: beside it they took
CPU its producers' rates needed."""


def pytest_collection_modifyitems(items):
    order = {path: rank for rank, path in enumerate((*LONGEST_FIRST, *PACED_ORDER))}
    items.sort(key=lambda item: order.get(item.nodeid.split("::")[0], len(order)))  # stable


@pytest.fixture
def devcluster(tmp_path_factory) -> Iterator[Callable[..., DevCluster]]:
    """Factory: ``devcluster(brokers=3, log_dirs_per_broker=2, capacity_bytes=1 TiB, **more)``
    returns a started DevCluster on free loopback ports with its data in a fresh tmp dir; every
    cluster it started is stopped at teardown, even when the test fails. ``**more`` goes to
    DevCluster as is (e.g. ``cluster_id=...``). Its log dirs have a virtual capacity of their own,
    so that a nearly full disk on the test machine does not throttle them; ``capacity_bytes=None``
    reports the host's disk as Kafka would."""
    started: list[DevCluster] = []

    def start(
        brokers: int = 3,
        log_dirs_per_broker: int = 2,
        capacity_bytes: int | None = 1 << 40,
        **more,
    ) -> DevCluster:
        cluster = DevCluster(
            brokers=brokers,
            log_dirs_per_broker=log_dirs_per_broker,
            data_dir=tmp_path_factory.mktemp("devcluster"),
            capacity_bytes=capacity_bytes,
            **more,
        )
        started.append(cluster)
        return cluster.start()

    try:
        yield start
    finally:
        for cluster in reversed(started):
            cluster.stop()


@pytest.fixture
def admin(dc):
    """kafka-python's admin client on the `dc` devcluster the test module defines."""
    from kafka.admin import KafkaAdminClient

    client = KafkaAdminClient(bootstrap_servers=dc.bootstrap, request_timeout_ms=5000)
    yield client
    client.close()


@pytest.fixture
def mount_tmpfs() -> Iterator[Callable[..., None]]:
    """Factory: ``mount_tmpfs(path, size="8m")`` mounts a real tmpfs (a small real disk) at
    ``path``; every mount is undone at teardown. Mounting needs root: CI and these machines run
    as root, so there a non-root run is an error; elsewhere the test is skipped, saying why."""
    if os.geteuid() != 0:
        reason = "mounts a real tmpfs, which needs root (CI runs as root)"
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    mounted: list[Path] = []

    def mount(path: Path, size: str = "8m") -> None:
        path.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], check=True
        )
        mounted.append(path)

    try:
        yield mount
    finally:
        for path in reversed(mounted):
            subprocess.run(["umount", "-l", str(path)], check=False)


@pytest.fixture(scope="session")
def spark():
    """The one local SparkSession of the test run (started once, on first use), for inputs as
    small as the tests' (the JIT as kvq-backfill compiles for a small archive)."""
    from spark.session import spark_session

    return spark_session(input_bytes=lambda: 0)


@pytest.fixture(scope="session")
def kafka_dist():
    """Apache Kafka's jars (fetched with Maven on first use; `make test` fetches them first)."""
    from devkit.kafka_dist import fetch

    return fetch()


@pytest.fixture(scope="session")
def shared_kafka(tmp_path_factory, kafka_dist):
    """One real 3-node Apache Kafka cluster for the whole run (SASL users admin/alice/bob, 64 MiB
    tmpfs log dirs), for tests that leave it as they found it: quotas they set are removed, topics
    have unique names, and a node a test stops is started again before the test ends (start_node
    returns once every node lists it). A test that fills a disk or changes the brokers' settings
    starts a cluster of its own. Started on first use (~15-30 s), stopped at the end of the run."""
    from devkit.kafka_cluster import KafkaCluster

    with KafkaCluster(
        tmp_path_factory.mktemp("shared-kafka"),
        nodes=3,
        log_dir_bytes=SHARED_KAFKA_LOG_DIR_BYTES,
        dist=kafka_dist,
    ) as kafka:
        yield kafka

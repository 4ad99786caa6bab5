"""The documented examples that need something running: the shipped configuration files against
a devcluster (exporter --once, the enforcer throttling and restoring, SIGTERM as Kubernetes sends
it), the enforcer's Alertmanager receiver with a real Alertmanager, the devcluster's own command
lines, and the backfill's how-to with Spark and a real Prometheus loading its blocks.

Only what cannot run here is changed: the Kafka connection (devcluster speaks neither TLS nor
SCRAM: the bootstrap address replaces every `kafka.admin.*` line), the listen port, and files
under /etc and /var, which move under the test's directory (`localize`)."""

from __future__ import annotations

import json
import re
import shlex
import signal
import subprocess
import sys
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
import yaml

from devcluster.quota_store import Alteration, Op
from devkit import kubernetes_manifests
from devkit.alertmanager import THROTTLE_ALERT, Alertmanager, throttle_webhook
from devkit.archive_generator import DEFAULT_START, ArchivePlan, generate
from devkit.processes import (
    ManagedProcess,
    http_ok,
    server_port,
    start_dying_with_parent,
    wait_until,
)
from devkit.prometheus import PROMETHEUS, PROMTOOL
from enforcer import cli as enforcer_cli
from kvq.kafka.quota_entity import ORIGINALS_USER
from kvq.settings.properties import parse_properties
from spark import cli as backfill_cli
from tests.deploy.rendering import command_of, config_files, documents, workloads
from tests.docs.blocks import ROOT, block, commands, localize
from tests.docs.test_examples import run
from tests.spark.backfill_cli import dumped_samples

pytestmark = pytest.mark.integration

P = "producer_byte_rate"
ENV = {"KVQ_KAFKA_PASSWORD": "s3cret-from-env"}
PREFIX = "client.quota.callback.static."


def help_properties(epilog: str) -> str:
    return "\n".join(re.findall(r"^  ((?:kvq|client\.quota)\.\S+=.*)$", epilog, re.M)) + "\n"


SHIPPED = {
    "docs/configuration.md": lambda: (
        block("docs/configuration.md", "--- the Strimzi proposal's properties").text
    ),
    "helm chart": lambda: chart_properties(),
    "helm chart, graceful slowdown": lambda: chart_properties("# graceful-values.yaml"),
    "strimzi": lambda: (ROOT / "deploy/kubernetes/overlays/strimzi/kvq.properties").read_text(),
    "kvq-enforcer --help": lambda: help_properties(enforcer_cli.EPILOG),
}


def chart_properties(*more: str) -> str:
    """The properties the chart gives the enforcer (the exporter's differ only in its user) with
    the install page's values, and the page's blocks starting `more` after them, as `helm
    install ... -f my-values.yaml [-f graceful-values.yaml]` deploys it."""
    with tempfile.TemporaryDirectory() as where:
        arguments = []
        for index, start in enumerate(("# my-values.yaml", *more)):
            values = Path(where) / f"values-{index}.yaml"
            values.write_text(block("docs/install-kubernetes.md", start).text)
            arguments += ["-f", str(values)]
        docs = documents(kubernetes_manifests.helm_template(*arguments))
    (enforcer,) = [w for w in workloads(docs) if command_of(w) == "kvq-enforcer"]
    ((text, _),) = config_files(docs, enforcer)
    return text


def against(text: str, bootstrap: str, root: Path) -> str:
    """`text` with its Kafka connection replaced by `bootstrap`, its files moved under `root`."""
    lines = []
    for line in localize(text, root).splitlines():
        key = line.split("=", 1)[0]
        if key == PREFIX + "kafka.admin.bootstrap.servers":
            line = f"{key}={bootstrap}"
        elif key.startswith(PREFIX + "kafka.admin."):
            continue
        lines.append(line)
    return "\n".join(lines) + "\n"


def seed(dc, entity: dict, **values: float) -> None:
    ops = tuple(Op(k, v) for k, v in values.items())
    (result,) = dc.quotas.alter([Alteration(tuple(entity.items()), ops)])
    assert result.error_code == 0, result


def quotas(dc) -> dict[str, dict[str, float]]:
    """Every client quota but the enforcer's copy of the originals, by entity text."""
    return {
        json.dumps(item["entity"], sort_keys=True): item["values"]
        for item in dc.quota_state()
        if item["entity"].get("user") != ORIGINALS_USER
    }


def post(url: str, token: str, body: dict) -> tuple[int, dict]:
    request = urllib.request.Request(
        url,
        json.dumps(body).encode(),
        {"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}")


class EnforcerFromFile:
    """`kvq-enforcer --config kvq.properties --listen 127.0.0.1:PORT` in `cwd`; always stopped."""

    def __init__(self, cwd: Path, env: dict[str, str] | None = None) -> None:
        self.port = server_port()
        self.url = f"http://127.0.0.1:{self.port}"
        argv = [sys.executable, "-m", "enforcer.cli", "--config", "kvq.properties"]
        argv += ["--listen", f"127.0.0.1:{self.port}"]
        self.process = ManagedProcess(argv, cwd / "enforcer.log", env=env, cwd=cwd)
        try:
            wait_until(
                lambda: self._alive() and http_ok(self.url + "/ready"), 30, what="kvq-enforcer"
            )
        except BaseException:
            self.process.stop()
            raise

    def _alive(self) -> bool:
        assert self.process.running, self.process.log_text()
        return True

    def __enter__(self) -> EnforcerFromFile:
        return self

    def __exit__(self, *exc) -> None:
        self.process.stop()


@pytest.mark.parametrize("source", sorted(SHIPPED))
def test_shipped_configuration_runs_against_a_cluster(devcluster, tmp_path, source) -> None:
    """Each shipped configuration, as a user deploys it: `kvq-exporter --once` observes the
    cluster; the enforcer throttles the quotas a Strimzi cluster typically holds on a firing
    alert (excluded principals untouched; graceful slowdown's observed-rate references with no
    Prometheus answering scale the originals), restores them byte for byte on the resolved one,
    and stops cleanly on SIGTERM, as Kubernetes stops a pod."""
    # A volume of its own size (1 TiB, nearly all free), not the host's disk, whose free share
    # may be below the configurations' limit (5 %): the exporter must see a healthy broker.
    dc = devcluster(brokers=1, log_dirs_per_broker=1, capacity_bytes=1 << 40)
    # devcluster has no transactions nor consumer groups: the state in Kafka that the chart and
    # the Strimzi overlay turn on runs on real Kafka (tests/system/test_enforcer_acls.py,
    # test_enforcer_replicas.py); here the enforcer keeps it in its journal
    text = SHIPPED[source]().replace(
        "kvq.enforcer.state.store=kafka", "kvq.enforcer.state.store=local"
    )
    (tmp_path / "kvq.properties").write_text(against(text, dc.bootstrap, tmp_path / "root"))
    properties = parse_properties((tmp_path / "kvq.properties").read_text())
    once = run([sys.executable, "-m", "exporter.cli", "--config", "kvq.properties", "--once"],
               tmp_path, env=ENV)  # fmt: skip
    assert once.returncode == 0, once.stdout + once.stderr
    assert json.loads(once.stdout)["status"]["throttle_factor"] == 1.0

    cluster = properties.get("kvq.cluster.name", "kafka")
    token = Path(properties["kvq.enforcer.auth.bearer.token.file"]).read_text().strip()
    excluded = [
        p.removeprefix("User:")
        for p in properties.get(PREFIX + "excluded.principal.name.list", "").split(";")
        if p
    ]
    seed(dc, {"user": "alice"}, **{P: 1_048_576})
    seed(dc, {"user": "bob", "client-id": "app1"}, **{P: 524_288})
    if excluded:
        seed(dc, {"user": excluded[0]}, **{P: 2_097_152})
    before = quotas(dc)
    with EnforcerFromFile(tmp_path, env=ENV) as enforcer:
        if properties.get("kvq.enforcer.throttle.reference") == "observed-rate":
            # graceful slowdown's first step with its Prometheus out of reach (here: the
            # shipped Service address resolves nowhere): each quota scaled from its original
            half = throttle_webhook(cluster=cluster, factor=0.5)
            status, answer = post(enforcer.url + "/webhook", token, half)
            assert (status, answer.get("outcome")) == (200, "applied"), answer
            assert quotas(dc)['{"user": "alice"}'][P] == 524_288
            assert "throttling from the originals" in enforcer.process.log_text()
        status, answer = post(enforcer.url + "/webhook", token, throttle_webhook(cluster=cluster))
        assert (status, answer.get("outcome")) == (200, "applied"), answer
        throttled = quotas(dc)
        assert throttled['{"user": "alice"}'][P] == 8192  # the byte-rate floor
        assert throttled['{"client-id": "app1", "user": "bob"}'][P] == 8192
        if excluded:
            assert throttled[json.dumps({"user": excluded[0]})][P] == 2_097_152
        resolved = throttle_webhook(cluster=cluster, factor=None)
        status, answer = post(enforcer.url + "/webhook", token, resolved)
        assert status == 200, answer
        assert quotas(dc) == before
        enforcer.process.signal(signal.SIGTERM)
        assert enforcer.process.proc.wait(15) == 0, enforcer.process.log_text()
    assert "Traceback" not in enforcer.process.log_text()


def test_the_enforcer_readme_receiver_delivers_alerts(devcluster, tmp_path) -> None:
    """A real Alertmanager with docs/enforcer.md's receiver (its URL's port and its token
    file moved here) throttles through the enforcer and restores on the resolve."""
    dc = devcluster(brokers=1, log_dirs_per_broker=1)
    seed(dc, {"user": "alice"}, **{P: 1_048_576})
    receivers = yaml.safe_load(localize(block("docs/enforcer.md", "receivers:").text,
                                        tmp_path / "root"))  # fmt: skip
    (hook,) = receivers["receivers"][0]["webhook_configs"]
    token_file = hook["http_config"]["authorization"]["credentials_file"]
    config = {
        "kvq.cluster.name": "prod-eu-1",
        PREFIX + "kafka.admin.bootstrap.servers": dc.bootstrap,
        PREFIX + "storage.per.volume.limit.min.available.ratio": "0.05",
        "kvq.enforcer.auth.bearer.token.file": token_file,
        "kvq.enforcer.journal": str(tmp_path / "journal.sqlite3"),
    }
    (tmp_path / "kvq.properties").write_text("".join(f"{k}={v}\n" for k, v in config.items()))
    with EnforcerFromFile(tmp_path) as enforcer:
        hook["url"] = hook["url"].replace("127.0.0.1:9899", f"127.0.0.1:{enforcer.port}")
        route = {"receiver": "kvq-enforcer", "group_by": ["cluster"], "group_wait": "0s",
                 "group_interval": "1s", "repeat_interval": "1h"}  # fmt: skip
        manager = Alertmanager(tmp_path / "am", json.dumps({"route": route, **receivers}))
        try:
            labels = {"alertname": THROTTLE_ALERT, "cluster": "prod-eu-1"}
            manager.fire(labels, {"throttle_factor": "0"})
            wait_until(lambda: quotas(dc)['{"user": "alice"}'][P] == 8192, 30, what="throttle")
            manager.resolve(labels)
            wait_until(lambda: quotas(dc)['{"user": "alice"}'][P] == 1_048_576, 30, what="restore")
        finally:
            manager.stop()


# --- devcluster -------------------------------------------------------------------------------


def json_after(lines: list[str], start: int) -> object | None:
    """The JSON a command prints, as the block shows it on the lines after it (or None)."""
    text = []
    for line in lines[start + 1 :]:
        if line.startswith(("curl", "#")):
            break
        text.append(line)
    return json.loads("\n".join(text)) if text else None


def keys_of(sample: object) -> set:
    return set(sample) if isinstance(sample, dict) else set()


def test_the_devcluster_readme_commands_answer_as_shown(tmp_path) -> None:
    """`kvq-devcluster --brokers 3 --log-dirs-per-broker 2 --data-dir /tmp/kvq` (the help's
    example; free ports instead of 19092/19100, which other programs may hold) prints the
    README's three lines; every curl line of the README and of --help answers, with the
    documented answer where one is shown; /state, /quotas and /requests have the documented
    fields."""
    from devcluster import cli as devcluster_cli

    epilog = devcluster_cli.parser().epilog or ""
    (start,) = [line.strip() for line in epilog.splitlines()
                if line.strip().startswith("kvq-devcluster --brokers 3")]  # fmt: skip
    data_dir = tmp_path / "kvq"
    argv = shlex.split(start.replace("/tmp/kvq", str(data_dir)))[1:]
    argv = [sys.executable, "-m", "devcluster.cli", *argv, "--base-port", "0"]
    process = start_dying_with_parent(
        argv + ["--control-port", "0"], stdout=subprocess.PIPE, text=True
    )
    try:
        printed = [process.stdout.readline().strip() for _ in range(3)]
        shown = block("devcluster/README.md", "bootstrap=127.0.0.1:19092").text.splitlines()
        for line, example in zip(printed, shown, strict=True):
            pattern = re.escape(example).replace("19092", r"\d+").replace("19093", r"\d+")
            pattern = pattern.replace("19094", r"\d+").replace("19100", r"\d+")
            assert re.fullmatch(pattern, line), (line, example)
        port = printed[1].rsplit(":", 1)[1]

        def curl(line: str) -> object:
            line = line.replace("localhost:19100", f"localhost:{port}")
            result = run(line, tmp_path)
            assert result.returncode == 0, f"{line}: {result.stderr}"
            return json.loads(result.stdout)

        readme_blocks = [
            block("devcluster/README.md", text)
            for text in ("brokers/0/log-dirs/0", "brokers/1/faults", "brokers/0/config",
                         "# every alter fails with NOT_CONTROLLER")
        ]  # fmt: skip
        for example in readme_blocks:
            lines = example.text.replace("/tmp/kvq", str(data_dir)).splitlines()
            for n, line in enumerate(lines):
                if line.startswith("curl"):
                    answer = curl(line)
                    documented = json_after(lines, n)
                    assert documented is None or answer == documented, (line, answer)
        for line in epilog.splitlines():
            if line.strip().startswith("curl"):
                curl(line.strip())
        state = curl(f"curl -s localhost:{port}/state")
        sample = json.loads(
            re.sub(
                r",\s*\[\.\.\.\]", "", block("devcluster/README.md", '"cluster_id": "OYk').text
            ).replace('"log_dirs": [...]', '"log_dirs": []')
        )
        assert keys_of(sample) == keys_of(state)
        assert keys_of(sample["brokers"][0]) <= keys_of(state["brokers"][0])
        assert keys_of(sample["brokers"][0]["log_dirs"][0]) <= keys_of(
            state["brokers"][0]["log_dirs"][0]
        )
        assert curl(f"curl -s localhost:{port}/quotas") == []
        requests = curl(f"curl -s localhost:{port}/requests")
        assert keys_of(requests) == keys_of(
            json.loads(block("devcluster/README.md", '{"by_broker"').text)
        )
    finally:
        process.send_signal(signal.SIGINT)
        assert process.wait(15) == 0
        process.stdout.close()


# --- the backfill -----------------------------------------------------------------------------

SPARK_TIMEOUT = pytest.mark.timeout(900)  # a Spark run takes minutes on a loaded 2-core machine


def archive_and_config(tmp_path: Path, start: float) -> None:
    """docs/configuration.md's kvq.properties in tmp_path, and an archive of its cluster where
    docs/backfill.md keeps it (/var/lib/kvq/archive, moved under tmp_path/root)."""
    text = block("docs/configuration.md", "--- the Strimzi proposal's properties").text
    (tmp_path / "kvq.properties").write_text(localize(text, tmp_path / "root"))
    plan = ArchivePlan("prod-eu-1", brokers=2, dirs_per_broker=1, start=start, hours=2)
    generate(plan, tmp_path / "root" / "var/lib/kvq/archive")


def backfill(line: str, tmp_path: Path) -> subprocess.CompletedProcess:
    """A kvq-backfill command line as shown, run in tmp_path, its /var paths moved there too."""
    line = localize(line, tmp_path / "root").replace(
        " A ", f" {tmp_path}/root/var/lib/kvq/archive "
    )
    result = run(line, tmp_path, timeout=900, env=ENV)  # Spark: minutes on a loaded machine
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    return result


def block_names(folder: Path) -> set[str]:
    return {p.name for p in folder.iterdir() if p.is_dir()}


@SPARK_TIMEOUT
def test_the_backfill_how_to(tmp_path) -> None:
    """docs/backfill.md's three steps in a fresh folder (relative --config and --output): the
    backfill as shown, then `cp -r out/blocks/* ...` into a Prometheus' storage (kept for 10
    years, the pitfall), which then answers for the archive. The same command again replaces the
    blocks in the output: only the second run's are there."""
    archive_and_config(tmp_path, DEFAULT_START)
    how_to = block("docs/backfill.md", "# 1. the history as TSDB blocks")
    (command,) = commands(how_to, "kvq-backfill")
    backfill(command, tmp_path)
    out = tmp_path / "out"
    assert sorted(p.name for p in out.iterdir()) == ["blocks"]
    first = block_names(out / "blocks")
    assert first and all((out / "blocks" / name / "meta.json").is_file() for name in first)
    (copy,) = commands(how_to, "cp")
    storage = tmp_path / "root" / "var/lib/prometheus/metrics2"
    storage.mkdir(parents=True)
    result = run(localize(copy, tmp_path / "root"), tmp_path)
    assert result.returncode == 0, result.stderr
    assert block_names(storage) == first
    port = server_port()
    (tmp_path / "prometheus.yml").write_text("scrape_configs: []\n")
    argv = [
        PROMETHEUS,
        "--config.file=prometheus.yml",
        f"--storage.tsdb.path={storage}",
        f"--web.listen-address=127.0.0.1:{port}",
        "--storage.tsdb.retention.time=10y",
    ]
    with ManagedProcess(argv, tmp_path / "prometheus.log", cwd=tmp_path) as prometheus:
        url = f"http://127.0.0.1:{port}"
        wait_until(lambda: prometheus.running and http_ok(url + "/-/ready"), 30, what="ready")
        query = 'kafka_volume_quota_throttle_factor{cluster="prod-eu-1"}'
        at = DEFAULT_START + 3600
        with urllib.request.urlopen(
            f"{url}/api/v1/query?query={urllib.parse.quote(query)}&time={at}", timeout=10
        ) as response:
            (sample,) = json.loads(response.read())["data"]["result"]
        assert float(sample["value"][1]) in (0.0, 0.5, 1.0)

    again = backfill(command, tmp_path)
    second = block_names(out / "blocks")
    assert second and not second & first, "a block of the first run is still there"
    listing = run([PROMTOOL, "tsdb", "list", "out/blocks"], tmp_path)
    assert listing.returncode == 0, listing.stderr
    assert [line.split()[0] for line in listing.stdout.splitlines()[1:]] == sorted(second)
    assert sorted(p.name for p in out.iterdir()) == ["blocks"]
    assert "replaced" in again.stderr and f"cp -r {out / 'blocks'}/*" in again.stdout


def what_if_examples() -> list:
    (page,) = commands(block("docs/backfill.md", "--scenario ratio5"), "kvq-backfill")
    epilog = backfill_cli.build_parser().epilog or ""
    joined = re.sub(r"\\\n\s*", "", epilog).splitlines()
    printed = [line.strip() for line in joined if "--scenario ratio5" in line]
    return [
        pytest.param(page, "what-if", id="docs/backfill.md"),
        *[pytest.param(line, "out", id="kvq-backfill --help") for line in printed],
    ]


@SPARK_TIMEOUT
@pytest.mark.parametrize(("command", "output"), what_if_examples())
def test_the_backfill_what_if_examples(tmp_path, command, output) -> None:
    """The what-if replay of October 2026 as shown, on an archive of two hours in it: every
    series of the blocks it writes carries scenario="ratio5"."""
    archive_and_config(tmp_path, 1_791_590_400.0)  # 2026-10-10T00:00:00Z
    backfill(command, tmp_path)
    samples = dumped_samples(tmp_path / output / "blocks", tmp_path)
    assert samples and all('scenario="ratio5"' in labels for _name, labels in samples)

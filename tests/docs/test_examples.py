"""Every example a user copies from the documentation runs as shown: command lines are run,
configuration files loaded by the program that reads them, manifests rendered and validated.
Examples that need a running Kafka, Prometheus or Spark are in test_examples_live.py; the
inventory below says, for every fenced block of every page, which test runs it."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from devcluster import cli as devcluster_cli
from devkit.prometheus import PROMTOOL
from enforcer import cli as enforcer_cli
from exporter import cli as exporter_cli
from kvq.contract.archive_record import from_line
from kvq.kafka.quota_entity import ORIGINALS_USER
from spark import cli as backfill_cli
from tests.docs.blocks import (
    DOCS,
    ROOT,
    Block,
    block,
    blocks,
    command_lines,
    commands,
    localize,
)

HERE = "tests/docs/test_examples.py"
LIVE = "tests/docs/test_examples_live.py"
HELM = "tests/deploy/test_helm.py"
OAUTH = "tests/kvq/kafka/test_oauthbearer_kafka.py"
INSTALL = "docs/install-kubernetes.md"
INSTALL_STEPS = "make tools"
"""A text only the install page's steps hold (their step 0)."""
CREDENTIALS = "tests/system/test_strimzi_credentials.py"
DOCUMENTED_PKCS12 = "test_the_documented_pkcs12_setup_runs_as_shown"
DOCUMENTED_SCRAM = "test_the_documented_scram_setup_runs_as_shown"
STRIMZI_OVERLAY = (
    "tests/deploy/test_kubernetes.py::test_strimzi_overlay_is_the_setup_docs_strimzi_describes"
)
# (page, a text only that block holds) -> the test that runs it, or why nothing can run it.
INVENTORY: dict[tuple[str, str], str] = {
    ("README.md", "make demo   #"): f"{HERE}::test_the_two_commands_are_make_targets",
    ("docs/getting-started.md", "make demo   #"): f"{HERE}::test_the_two_commands_are_make_targets",
    ("docs/getting-started.md", "volume crossed the limit (devcluster broker 1"): (
        "tests/system/test_e2e_loop.py (the demo's scenario, every step asserted): its output"
    ),
    ("README.md", "volume crossed the limit (devcluster broker 1"): (
        "tests/system/test_e2e_loop.py (the demo's scenario, every step asserted): its output"
    ),
    (INSTALL, INSTALL_STEPS): f"{HERE}::test_the_install_steps_install_what_they_check",
    (INSTALL, "# my-values.yaml"): (
        f"{HERE}::test_the_install_steps_install_what_they_check; "
        f"{HELM}::test_the_install_page_values_render_and_validate"
    ),
    ("deploy/helm/kafka-volume-quotas/README.md", "helm template kvq"): (
        f"{HERE}::test_the_chart_readme_renders_what_the_install_steps_check"
    ),
    (INSTALL, "# graceful-values.yaml"): (
        "tests/docs/test_examples_live.py::test_shipped_configuration_runs_against_a_cluster "
        "(helm chart, graceful slowdown); "
        "tests/demo/test_versus_guards.py::test_the_graceful_guard_runs_what_the_install_page_"
        "switches_on"
    ),
    (INSTALL, "# my-kvq/kustomization.yaml"): (
        f"{HELM}::test_the_install_page_kustomize_overlay_renders_and_validates"
    ),
    (INSTALL, "enforcer.state.importFrom="): (
        f"{HELM}::test_the_install_page_upgrade_steps_name_what_the_chart_renders"
    ),
    ("README.md", "Kafka brokers ──DescribeCluster"): "a diagram",
    ("docs/architecture.md", "Kafka brokers ──DescribeCluster"): "a diagram",
    ("docs/policies.md", "kvq.throttle.policy=graceful-slowdown"): (
        "tests/test_properties_files.py::test_every_documented_properties_block_loads_in_every_app"
    ),
    ("docs/configuration.md", "--check-config   # effective"): (
        f"{HERE}::test_the_documented_configuration_passes_both_check_config_commands"
    ),
    ("docs/configuration.md", "sasl.mechanism=OAUTHBEARER"): (
        f"{OAUTH}::test_the_documented_settings_run_against_kafka; "
        "tests/test_properties_files.py::test_every_documented_properties_block_loads_in_every_app"
    ),
    ("docs/configuration.md", "--- the Strimzi proposal's properties"): (
        "tests/test_properties_files.py::"
        "test_every_documented_properties_block_loads_in_every_app; "
        f"{HERE}::test_the_documented_configuration_passes_both_check_config_commands; "
        f"{LIVE}::test_shipped_configuration_runs_against_a_cluster"
    ),
    ("docs/http.md", "tls_server_config:"): (
        "tests/kvq/web/test_web_config.py::test_the_documented_example_loads_with_real_files"
    ),
    ("docs/exporter.md", "kvq-exporter --config kvq.properties [--web.listen-address"): (
        f"{HERE}::test_every_usage_synopsis_parses"
    ),
    ("docs/exporter.md", '{"schema": 1,'): f"{HERE}::test_the_archive_record_example_reads",
    ("docs/enforcer.md", "Alertmanager ──POST /webhook"): "a diagram",
    ("docs/enforcer.md", "kvq-enforcer --config kvq.properties [--config"): (
        f"{HERE}::test_every_usage_synopsis_parses"
    ),
    ("docs/enforcer.md", "receivers:"): (
        f"{HERE}::test_the_alertmanager_receivers_are_valid; "
        f"{LIVE}::test_the_enforcer_readme_receiver_delivers_alerts"
    ),
    ("docs/enforcer.md", "1 user=U,client-id=C"): "a table of KIP-55 precedence levels",
    ("docs/backfill.md", "archive (*.jsonl"): "a diagram",
    ("docs/backfill.md", "# 1. the history as TSDB blocks"): (
        f"{LIVE}::test_the_backfill_how_to; {HERE}::test_the_backfill_help_examples_are_the_docs"
    ),
    ("docs/backfill.md", "--scenario ratio5"): f"{LIVE}::test_the_backfill_what_if_examples",
    ("docs/backfill.md", "spark-submit --master spark://"): (
        f"{HERE}::test_the_backfill_help_examples_are_the_docs (--help's line); "
        "tests/spark/test_spark_submit.py::"
        "test_a_standalone_cluster_builds_the_same_blocks_as_the_replay"
    ),
    ("docs/backfill.md", "start-connect-server.sh --master"): (
        "tests/spark/test_spark_connect.py (a server started as start-connect-server.sh starts "
        "it: devkit/spark_connect.py; the client's command with --remote and $SPARK_REMOTE)"
    ),
    ("docs/backfill.md", "spark-submit --master k8s://"): (
        f"{HERE}::test_the_backfill_kubernetes_spark_submit_runs_the_documented_command "
        "(no Kubernetes here: its flags and kvq-backfill's)"
    ),
    ("rules/README.md", "promtool check rules"): f"{HERE}::test_the_rules_readme_commands",
    ("docs/operating.md", "# prometheus.yml"): f"{HERE}::test_the_prometheus_configuration_example",
    ("docs/operating.md", "docker run"): f"{HERE}::test_the_grafana_container_mounts",
    ("devcluster/README.md", "kvq-devcluster --brokers N"): (
        f"{HERE}::test_every_usage_synopsis_parses"
    ),
    ("devcluster/README.md", "bootstrap=127.0.0.1:19092"): (
        f"{LIVE}::test_the_devcluster_readme_commands_answer_as_shown"
    ),
    ("devcluster/README.md", "from devcluster.cluster import DevCluster"): (
        f"{HERE}::test_the_devcluster_python_example_runs"
    ),
    ("devcluster/README.md", '"cluster_id": "OYk'): (
        f"{LIVE}::test_the_devcluster_readme_commands_answer_as_shown"
    ),
    ("devcluster/README.md", "brokers/0/log-dirs/0"): (
        f"{LIVE}::test_the_devcluster_readme_commands_answer_as_shown"
    ),
    ("devcluster/README.md", "brokers/1/faults"): (
        f"{LIVE}::test_the_devcluster_readme_commands_answer_as_shown"
    ),
    ("devcluster/README.md", "brokers/0/config"): (
        f"{LIVE}::test_the_devcluster_readme_commands_answer_as_shown"
    ),
    ("devcluster/README.md", "# every alter fails with NOT_CONTROLLER"): (
        f"{LIVE}::test_the_devcluster_readme_commands_answer_as_shown"
    ),
    ("devcluster/README.md", '"client-id": null}, "values"'): (
        f"{LIVE}::test_the_devcluster_readme_commands_answer_as_shown"
    ),
    ("devcluster/README.md", '{"by_broker"'): (
        f"{LIVE}::test_the_devcluster_readme_commands_answer_as_shown"
    ),
    ("devkit/README.md", "with KafkaCluster(work_dir"): (
        f"{HERE}::test_the_devkit_kafka_cluster_sketch_names_what_exists"
    ),
    ("docs/benchmarks.md", "python -m bench poll_fanout metrics_render"): (
        "tests/docs/test_benchmarks_page.py::"
        "test_the_benchmarks_page_commands_name_benchmarks_that_exist"
    ),
    ("docs/strimzi.md", "kind: Kafka\n"): f"{HERE}::test_the_strimzi_kafka_resource",
    ("docs/strimzi.md", "listenerConfig:"): (
        f"{OAUTH}::test_the_documented_strimzi_listener_is_the_one_kafka_runs_here"
    ),
    ("docs/strimzi.md", "oauth.client.id="): (
        f"{OAUTH}::test_the_documented_settings_run_against_kafka"
    ),
    ("docs/strimzi.md", "kind: KafkaUser"): (STRIMZI_OVERLAY),
    ("docs/strimzi.md", "# my-values.yaml"): (
        "tests/deploy/test_chart_values.py::test_the_strimzi_page_s_chart_values_are_the_overlay_s"
    ),
    ("docs/strimzi.md", "{key: user.crt, path: user.crt}"): (
        f"{HERE}::test_the_strimzi_certificate_mounts"
    ),
    ("docs/strimzi.md", "{key: user.p12, path: user.p12}"): f"{CREDENTIALS}::{DOCUMENTED_PKCS12}",
    ("docs/strimzi.md", "ssl.keystore.type=PKCS12"): f"{CREDENTIALS}::{DOCUMENTED_PKCS12}",
    ("docs/strimzi.md", "key: sasl.jaas.config"): f"{CREDENTIALS}::{DOCUMENTED_SCRAM}",
    ("docs/strimzi.md", "sasl.mechanism=SCRAM-SHA-512"): f"{CREDENTIALS}::{DOCUMENTED_SCRAM}",
    ("docs/strimzi.md", "ssl.ca.location"): (
        f"{STRIMZI_OVERLAY}; "
        f"{LIVE}::test_shipped_configuration_runs_against_a_cluster (the overlay's file)"
    ),
    ("docs/strimzi.md", "excluded.principal.name.list=User:CN=my-cluster-kafka"): (
        f"{STRIMZI_OVERLAY}; "
        f"{LIVE}::test_shipped_configuration_runs_against_a_cluster (the overlay's file)"
    ),
    ("docs/strimzi.md", "- alert: KafkaControllerVolumeFillingUp"): (
        f"{HERE}::test_the_strimzi_controller_volume_alert"
    ),
}


def all_blocks() -> list[Block]:
    return [b for doc in DOCS for b in blocks(doc)]


def test_every_example_block_has_a_test() -> None:
    """A new block in a page fails here until it is added to INVENTORY with its test."""
    claimed: dict[str, list[str]] = {b.where: [] for b in all_blocks()}
    for (doc, text), claim in INVENTORY.items():
        claimed[block(doc, text).where].append(claim)
    assert {where: c for where, c in claimed.items() if len(c) != 1} == {}


def test_every_test_the_inventory_names_exists() -> None:
    for claim in INVENTORY.values():
        for path, name in re.findall(r"(tests/[\w/]+\.py)::(test_\w+)", claim):
            assert f"def {name}(" in (ROOT / path).read_text(), f"{path}::{name}"


def run(
    argv: list[str] | str, cwd: Path, timeout: float = 120, **kwargs
) -> subprocess.CompletedProcess:
    """A command as a user's shell runs it (the project's console scripts on PATH)."""
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    env["PYTHONPATH"] = str(ROOT)
    return subprocess.run(
        argv,
        cwd=cwd,
        shell=isinstance(argv, str),
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**env, **kwargs.pop("env", {})},
        **kwargs,
    )


@pytest.mark.parametrize("doc", ["README.md", "docs/getting-started.md"])
def test_the_two_commands_are_make_targets(doc) -> None:
    """`make demo` runs `python -m demo` (tests/system runs that scenario); `make test` runs
    ruff and pytest. `make -n` shows the commands without running them."""
    (example,) = [b for b in blocks(doc) if b.text.startswith("make demo")]
    assert [line.split()[:2] for line in commands(example, "make")] == [
        ["make", "demo"],
        ["make", "test"],
    ]
    for line in commands(example, "make"):
        result = run(["make", "-n", *shlex.split(line)[1:]], ROOT)
        assert result.returncode == 0, result.stderr
        target = shlex.split(line)[1]
        expected = {"demo": "-m demo", "test": "-m pytest"}[target]
        assert expected in result.stdout


# --- usage synopses ---------------------------------------------------------------------------

# What a reader puts for each placeholder of a synopsis.
PLACEHOLDERS = {"N": "3", "M": "2", "B": "100000000", "DIR": "/tmp/kvq", "ID": "abc"}
PARSERS = {
    "kvq-exporter": exporter_cli.build_parser,
    "kvq-enforcer": enforcer_cli.build_parser,
    "kvq-devcluster": devcluster_cli.parser,
}
# Flags that every command has, documented once in docs/configuration.md, "Flags every command has".
COMMON_FLAGS = {"-h", "--help", "--version", "--log.level", "--log.format"}
SYNOPSES = [
    ("docs/exporter.md", "kvq-exporter --config kvq.properties [--web.listen-address"),
    ("docs/enforcer.md", "kvq-enforcer --config kvq.properties [--config"),
    ("devcluster/README.md", "kvq-devcluster --brokers N"),
]


@pytest.mark.parametrize(("doc", "text"), SYNOPSES, ids=[s[0] for s in SYNOPSES])
def test_every_usage_synopsis_parses(doc, text) -> None:
    """The synopsis with every optional part filled in parses, and it lists every flag of the
    program (but the ones every command has)."""
    synopsis = block(doc, text).text
    program, *words = shlex.split(re.sub(r"\\\n", " ", synopsis))
    argv = []
    for word in words:
        word = word.strip("[]")
        if word in ("...", "", "--version"):  # --version would print and exit
            continue
        argv.append(PLACEHOLDERS.get(word, word.split("|")[0]))
    parser = PARSERS[program]()
    parser.parse_args(argv)  # exits 2 (fails the test) on an unknown flag or a bad value
    flags = {s for a in parser._actions for s in a.option_strings} - COMMON_FLAGS
    listed = {w for w in argv if w.startswith("-")}
    # a flag with a short and a long spelling (-v, --verbose) is listed once
    spellings = [set(a.option_strings) for a in parser._actions]
    missing = {f for f in flags if not any(f in s and s & listed for s in spellings)}
    assert missing == set(), f"{doc}: the synopsis of {program} does not list {sorted(missing)}"


# --- the configuration and its checks ---------------------------------------------------------


def test_the_documented_configuration_passes_both_check_config_commands(tmp_path) -> None:
    """`kvq-exporter/kvq-enforcer --config kvq.properties --check-config` with docs/configuration's
    properties pasted as kvq.properties (its files placed under tmp_path): exit 0, secrets
    masked, the environment's password never printed."""
    properties = block("docs/configuration.md", "--- the Strimzi proposal's properties")
    (tmp_path / "kvq.properties").write_text(localize(properties.text, tmp_path / "root"))
    check = block("docs/configuration.md", "--check-config   # effective")
    checks = commands(check, "kvq-exporter") + commands(check, "kvq-enforcer")
    assert len(checks) == 2
    for command in checks:
        result = run(command, tmp_path, env={"KVQ_KAFKA_PASSWORD": "s3cret-from-env"})
        assert result.returncode == 0, f"{command}:\n{result.stdout}{result.stderr}"
        assert "kvq.cluster.name=prod-eu-1" in result.stdout
        assert "s3cret-from-env" not in result.stdout + result.stderr


HELP_CHECK = re.compile(r"^Check it first:\s+(.*)$", re.M)


def test_the_exporter_help_example_passes_its_check_command(tmp_path) -> None:
    """`kvq-exporter --help` shows a properties file and the command that checks it."""
    lines = re.findall(r"^  ((?:kvq|client\.quota)\.\S+=.*)$", exporter_cli.EPILOG, re.M)
    (tmp_path / "kvq.properties").write_text("\n".join(lines) + "\n")
    (command,) = HELP_CHECK.findall(exporter_cli.EPILOG)
    result = run(command, tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_archive_record_example_reads() -> None:
    """docs/exporter's archive line is a record the backfill reads (one JSON line)."""
    example = block("docs/exporter.md", '{"schema": 1,').text
    line = json.dumps(json.loads(example))
    cluster, observation = from_line(line)
    assert cluster == "prod-eu-1" and observation.succeeded
    (log_dir,) = observation.log_dirs
    assert (log_dir.total_bytes, log_dir.usable_bytes) == (107374182400, 5368709120)


# --- Kubernetes -------------------------------------------------------------------------------


def a_clone(tmp_path: Path) -> Path:
    """A directory laid out as the clone the docs' commands run in: this checkout's files,
    and `.venv` the environment running the tests (a worktree has none of its own)."""
    clone = tmp_path / "kafka-volume-quotas"
    clone.mkdir()
    for entry in ROOT.iterdir():
        if entry.name not in (".git", ".venv"):
            (clone / entry.name).symlink_to(entry)
    (clone / ".venv").symlink_to(Path(sys.executable).parent.parent)
    return clone


def secrets_used(docs: list[dict]) -> dict[str, set[str]]:
    """Secret name -> the keys the pods (env, volumes) and the AlertmanagerConfig read."""
    used: dict[str, set[str]] = {}
    for doc in docs:
        if doc["kind"] in ("Deployment", "StatefulSet"):
            pod = doc["spec"]["template"]["spec"]
            for container in pod["containers"]:
                for env in container.get("env", []):
                    ref = env["valueFrom"]["secretKeyRef"]
                    used.setdefault(ref["name"], set()).add(ref["key"])
            for volume in pod.get("volumes", []):
                if "secret" in volume:
                    name = volume["secret"]["secretName"]
                    keys = {i["key"] for i in volume["secret"].get("items", [])}
                    used.setdefault(name, set()).update(keys)
        if doc["kind"] == "AlertmanagerConfig":
            for receiver in doc["spec"]["receivers"]:
                for hook in receiver.get("webhookConfigs", []):
                    credentials = hook["httpConfig"]["authorization"]["credentials"]
                    used.setdefault(credentials["name"], set()).add(credentials["key"])
    return used


def test_the_install_steps_install_what_they_check(tmp_path) -> None:
    """The install page's steps, in a clone with its `my-values.yaml`: the chart
    renders and validates (helm | kubeconform, as shown); the values render with `| less` as
    shown; `helm install` gets what was checked; the image built is the one every pod runs; the
    namespace and the Secrets the steps create (`--dry-run=client`, no cluster needed) are the
    release's namespace and exactly the Secrets the rendered objects read (the chart creates
    none); the Deployment `rollout status` waits for is rendered. `make tools` is shown with
    `make -n`: here the tools are already in the environment the tests run in."""
    clone = a_clone(tmp_path)
    (clone / "my-values.yaml").write_text(block(INSTALL, "# my-values.yaml").text)
    steps = command_lines(block(INSTALL, INSTALL_STEPS))
    created: set[tuple[str, str, str]] = set()  # (kind, namespace, name)
    secret_keys: dict[str, set[str]] = {}
    rendered: list[dict] = []
    checked = installed = image = rollout = None
    for step in steps:
        words = shlex.split(step)
        if words[0] == "make":
            result = run(["make", "-n", *words[1:]], clone)
        elif words[0] == "buildah":
            (image,) = {w for w in words if w.startswith("registry.example.com/")}
            continue
        elif words[0] == "kubectl" and "create" in words:
            result = run([*words, "--dry-run=client", "-o", "json"], clone)
            made = json.loads(result.stdout or "{}")
            metadata = made.get("metadata", {})
            created.add((made.get("kind"), metadata.get("namespace", ""), metadata.get("name")))
            if made.get("kind") == "Secret":
                secret_keys[metadata["name"]] = set(made["data"])
        elif words[0] == "kubectl" and "rollout" in words:
            rollout = re.search(r"-n (\S+) rollout status deploy/(\S+)", step).groups()
            continue
        elif "install" in words:
            installed = words[words.index("install") + 1 :]
            continue
        else:  # a helm template pipeline, run by bash as a user's shell runs it
            result = run(["bash", "-o", "pipefail", "-c", step], clone, timeout=300)
            if "my-values.yaml" in words:
                checked = words[words.index("template") + 1 : words.index("|")]
                rendered = [d for d in yaml.safe_load_all(result.stdout) if d]
            else:
                assert result.stdout.splitlines()[-1:] == ["valid"], result.stdout
        assert result.returncode == 0, f"{step}:\n{result.stdout}{result.stderr}"
    assert rendered and installed == checked, (installed, checked)
    namespace = checked[checked.index("-n") + 1]
    assert ("Namespace", "", namespace) in created
    assert not [d for d in rendered if d["kind"] == "Secret"], "the chart creates no Secret"
    assert secrets_used(rendered) == secret_keys, "the Secrets created are not those read"
    assert {(k, ns) for k, ns, _ in created if k == "Secret"} == {("Secret", namespace)}
    for doc in rendered:
        if doc["kind"] in ("Deployment", "StatefulSet"):
            for container in doc["spec"]["template"]["spec"]["containers"]:
                assert container["image"] == image, (doc["metadata"]["name"], image)
    deployments = {d["metadata"]["name"] for d in rendered if d["kind"] == "Deployment"}
    assert rollout is not None and rollout[0] == namespace and rollout[1] in deployments


def test_the_chart_readme_renders_what_the_install_steps_check(tmp_path) -> None:
    """The chart README's command (helm on PATH), in a clone with the install page's values,
    renders what the install steps render and check."""
    clone = a_clone(tmp_path)
    (clone / "my-values.yaml").write_text(block(INSTALL, "# my-values.yaml").text)
    (line,) = command_lines(block("deploy/helm/kafka-volume-quotas/README.md", "helm template"))
    (checked,) = [s for s in command_lines(block(INSTALL, INSTALL_STEPS))
                  if "template" in s and "my-values.yaml" in s]  # fmt: skip
    result = run(shlex.split(line), clone)
    assert result.returncode == 0, result.stderr
    assert result.stdout == run(checked.split("|")[0], clone).stdout


def strimzi_yaml(text: str) -> list[dict]:
    return [d for d in yaml.safe_load_all(block("docs/strimzi.md", text).text) if d]


def test_the_strimzi_kafka_resource() -> None:
    """The Kafka resource keeps the quota plugin off, makes the User Operator ignore the
    enforcer's copy of the originals and exports the brokers' quota sensors through the JMX
    exporter (no Strimzi CRD schema here: the facts that matter)."""
    (kafka,) = strimzi_yaml("kind: Kafka\n")
    spec = kafka["spec"]
    assert spec["kafka"]["quotas"]["type"] == "kafka"
    config = spec["kafka"].get("config") or {}
    assert "client.quota.callback.class" not in config
    # the quota window the graceful-slowdown runs measured (--quota-window-samples 3), in the
    # brokers' config, where Strimzi passes it on (no forbidden prefix)
    assert config["quota.window.num"] == 3
    # the metrics sample the runs with --metrics-sample-window PT10S measured
    assert config["metrics.sample.window.ms"] == 10000
    env = spec["entityOperator"]["template"]["userOperatorContainer"]["env"]
    (pattern,) = [e["value"] for e in env if e["name"] == "STRIMZI_IGNORED_USERS_PATTERN"]
    assert re.search(pattern, ORIGINALS_USER)
    (listener,) = spec["kafka"]["listeners"]
    assert listener["tls"] and listener["authentication"]["type"] == "tls"
    bootstrap = block("docs/strimzi.md", "ssl.ca.location").text
    assert f"my-cluster-kafka-bootstrap:{listener['port']}" in bootstrap
    metrics = spec["kafka"]["metricsConfig"]  # the quota sensors graceful slowdown scales
    assert metrics["type"] == "jmxPrometheusExporter"
    assert set(metrics["valueFrom"]["configMapKeyRef"]) == {"name", "key"}


def test_the_strimzi_certificate_mounts() -> None:
    """The pod snippet's mounts and volumes are the Strimzi overlay's (the exporter's pod)."""
    (snippet,) = strimzi_yaml("{key: user.crt, path: user.crt}")
    rendered = subprocess.run(
        ["kubectl", "kustomize", str(ROOT / "deploy/kubernetes/overlays/strimzi")],
        capture_output=True, text=True, timeout=60, check=True,
    ).stdout  # fmt: skip
    (exporter,) = [
        d
        for d in yaml.safe_load_all(rendered)
        if d and d["kind"] == "Deployment" and d["metadata"]["name"] == "kvq-exporter-kafka"
    ]
    pod = exporter["spec"]["template"]["spec"]
    (documented,) = snippet["containers"]
    (container,) = pod["containers"]
    for mount in documented["volumeMounts"]:
        assert mount in container["volumeMounts"], mount
    for volume in snippet["volumes"]:
        assert volume in pod["volumes"], volume


def test_the_strimzi_controller_volume_alert(tmp_path) -> None:
    """The controller-volume alert is a valid rule (promtool), and fires below 10 % free."""
    rule_text = block("docs/strimzi.md", "- alert: KafkaControllerVolumeFillingUp").text
    (rule,) = yaml.safe_load(rule_text)
    rules = tmp_path / "controller.rules.yml"
    rules.write_text(yaml.safe_dump({"groups": [{"name": "kafka-controllers", "rules": [rule]}]}))
    check = run([PROMTOOL, "check", "rules", str(rules)], tmp_path)
    assert check.returncode == 0, check.stdout + check.stderr
    pvc = 'namespace="kafka", persistentvolumeclaim="data-0-my-cluster-controller-3"'
    series = {
        f"kubelet_volume_stats_available_bytes{{{pvc}}}": "50+0x20",
        f"kubelet_volume_stats_capacity_bytes{{{pvc}}}": "1000+0x20",
    }
    test = {
        "rule_files": [rules.name],
        "evaluation_interval": "1m",
        "tests": [{
            "interval": "1m",
            "input_series": [{"series": s, "values": v} for s, v in series.items()],
            "alert_rule_test": [
                {"eval_time": "4m", "alertname": rule["alert"], "exp_alerts": []},
                {"eval_time": "6m", "alertname": rule["alert"], "exp_alerts": [{
                    "exp_labels": {"severity": "critical", "namespace": "kafka",
                                   "persistentvolumeclaim": "data-0-my-cluster-controller-3"},
                    "exp_annotations": {"summary": "KRaft controller volume "
                        "data-0-my-cluster-controller-3 has under 10% free: kvq cannot see or "
                        "protect it"},
                }]},
            ],
        }],
    }  # fmt: skip
    (tmp_path / "controller.test.yml").write_text(yaml.safe_dump(test))
    result = run([PROMTOOL, "test", "rules", "controller.test.yml"], tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr


# --- rules, Alertmanager, Prometheus, Grafana -------------------------------------------------


def test_the_rules_readme_commands() -> None:
    """Run as shown, from the repository's root (the paths are relative to it)."""
    example = block("rules/README.md", "promtool check rules")
    lines = [line for line in example.text.splitlines() if line.strip()]
    assert len(lines) == 4
    for line in lines:
        result = run(line, ROOT)  # through a shell: `rules/tests/*.yml` is a glob
        assert result.returncode == 0, f"{line}:\n{result.stdout}{result.stderr}"
    assert run(lines[-1], ROOT).stdout.strip().split(",") == ["kvq-enforcer", "team-kafka"]


def test_the_prometheus_configuration_example(tmp_path) -> None:
    """docs/operating.md's prometheus.yml (rule file path moved under tmp_path) passes
    `promtool check config`, loads every rule, and evaluates the throttle alert at the
    recommended 1 s (docs/reaction-time.md), not at Prometheus' default of 1 m."""
    example = block("docs/operating.md", "# prometheus.yml").text
    rule_file = "/etc/prometheus/rules/kafka-volume-quotas.rules.yml"
    assert rule_file in example
    local = tmp_path / "root" / rule_file.lstrip("/")
    local.parent.mkdir(parents=True)
    local.write_text((ROOT / "rules" / "kafka-volume-quotas.rules.yml").read_text())
    (tmp_path / "prometheus.yml").write_text(example.replace(rule_file, str(local)))
    result = run([PROMTOOL, "check", "config", "prometheus.yml"], tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    config = yaml.safe_load(example)
    rules = yaml.safe_load(local.read_text())
    count = sum(len(group["rules"]) for group in rules["groups"])
    assert f"SUCCESS: {count} rules found" in result.stdout, result.stdout
    (throttle,) = [g for g in rules["groups"] if g["name"] == "kafka-volume-quotas.throttle"]
    evaluation = throttle.get("interval") or config.get("global", {}).get("evaluation_interval")
    assert evaluation == "1s", f"the throttle alert is evaluated every {evaluation or '1m'}"
    (exporter,) = [j for j in config["scrape_configs"] if j["job_name"] == "kvq-exporter"]
    assert exporter["scrape_interval"] == "1s"


def test_the_alertmanager_receivers_are_valid(tmp_path) -> None:
    """docs/enforcer.md's receiver and the one `kvq-enforcer --help` prints, each under a
    route to it, pass `amtool check-config` (credentials file placed under tmp_path)."""
    documented = block("docs/enforcer.md", "receivers:").text
    printed = enforcer_cli.EPILOG.split("Alertmanager receiver", 1)[1].split("\n\n", 1)[1]
    printed = printed.split("\n\n", 1)[0]
    for n, receivers in enumerate((documented, textwrap.dedent(printed))):
        text = localize(receivers, tmp_path / "root")
        path = tmp_path / f"alertmanager-{n}.yml"
        path.write_text("route: {receiver: kvq-enforcer}\n" + text)
        result = run(["amtool", "check-config", str(path)], tmp_path)
        assert result.returncode == 0, f"{receivers}\n{result.stdout}{result.stderr}"
        (hook,) = yaml.safe_load(text)["receivers"][0]["webhook_configs"]
        assert hook["url"].endswith(":9899/webhook")
        assert hook.get("send_resolved", True) is True  # Alertmanager's default is true


def test_the_grafana_container_mounts() -> None:
    """The `docker run` mounts (run from the repository's root: `$PWD/grafana/...`) exist and
    put the dashboards where the dashboard provider looks for them."""
    example = block("docs/operating.md", "docker run").text
    mounts = re.findall(r'-v "\$PWD/([^:]+):([^:]+):ro"', example)
    assert len(mounts) == 3
    for host, _ in mounts:
        assert (ROOT / host).is_dir(), host
    provider = yaml.safe_load((ROOT / "grafana/provisioning/dashboards/kafka-volume-quotas.yml")
                              .read_text())  # fmt: skip
    (dashboards,) = [c for h, c in mounts if h == "grafana/dashboards"]
    assert provider["providers"][0]["options"]["path"] == dashboards
    for host, container in mounts:
        if host.startswith("grafana/provisioning/"):
            assert container == "/etc/grafana/provisioning/" + host.rsplit("/", 1)[1]


def test_the_devcluster_python_example_runs(tmp_path) -> None:
    """The README's Python lines, run with `tmp_path` as the data dir."""
    example = block("devcluster/README.md", "from devcluster.cluster import DevCluster").text
    namespace: dict = {"tmp_path": tmp_path}
    exec(compile(example, "devcluster/README.md", "exec"), namespace)  # noqa: S102
    dc = namespace["dc"]
    assert len(dc.bootstrap.split(",")) == 3
    assert dc.log_dir_path(0, 1) == tmp_path / "broker-0" / "logdir-1"


def test_the_backfill_help_examples_are_the_docs(tmp_path) -> None:
    """`kvq-backfill --help`'s first example is docs/backfill.md's how-to (run by the live
    tests), its spark-submit line is the page's (run by tests/spark/test_spark_submit.py), and
    every example's flags exist."""
    epilog = backfill_cli.build_parser().epilog or ""
    joined = re.sub(r"\\\n\s*", "", epilog)
    lines = [line.strip() for line in joined.splitlines()]
    lines = [line for line in lines if line.startswith("kvq-backfill")]
    how_to = commands(block("docs/backfill.md", "# 1. the history as TSDB blocks"), "kvq-backfill")
    assert lines[0] == how_to[0]
    (submit,) = commands(
        block("docs/backfill.md", "spark-submit --master spark://"), "spark-submit"
    )
    assert submit in [line.strip() for line in joined.splitlines()]
    parser = backfill_cli.build_parser()
    for line in lines:
        argv = [w for w in shlex.split(line)[1:] if w != "..."]
        known = {s for a in parser._actions for s in a.option_strings}
        assert {w for w in argv if w.startswith("--")} <= known, line


def test_the_backfill_kubernetes_spark_submit_runs_the_documented_command() -> None:
    """docs/backfill.md's spark-submit on Kubernetes' own scheduler: a k8s:// master, the
    executors' image and the shared volume set, then the installed module with `kvq-backfill`
    flags that parse, --blocks among them, on the volume's path."""
    (submit,) = commands(block("docs/backfill.md", "spark-submit --master k8s://"), "spark-submit")
    words = shlex.split(submit, posix=True)
    assert words[words.index("--master") + 1].startswith("k8s://https://")
    confs = dict(words[i + 1].split("=", 1) for i, word in enumerate(words) if word == "--conf")
    assert confs["spark.kubernetes.executor.container.image"] == "$SPARK_IMAGE"
    mount = confs["spark.kubernetes.executor.volumes.persistentVolumeClaim.kvq.mount.path"]
    module = next(i for i, word in enumerate(words) if "spark.cli" in word)
    args = backfill_cli.build_parser().parse_args(words[module + 1 :])
    assert args.blocks
    assert all(path.startswith(mount + "/") for path in (args.archive, args.output))


def test_the_devkit_kafka_cluster_sketch_names_what_exists() -> None:
    """devkit's README sketches KafkaCluster (starting one takes real Kafka: its own tests do):
    every attribute the sketch uses is one KafkaCluster has, and the import works."""
    sketch = block("devkit/README.md", "with KafkaCluster(work_dir").text
    from devkit.kafka_cluster import KafkaCluster

    used = set(re.findall(r"\bkafka\.(\w+)", sketch))
    assert used and {name for name in used if not hasattr(KafkaCluster, name)} == set()
    exec(sketch.split("\n\n")[0], {})  # noqa: S102 (the import line, as shown)

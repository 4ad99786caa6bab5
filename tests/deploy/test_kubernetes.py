"""deploy/: what the chart (helm template, one and three Kafka clusters) and the kustomize paths
(the base rendered from the chart, the Strimzi overlay) render is valid Kubernetes and valid
Prometheus Operator resources (unknown fields rejected), carries the project's own rules and
dashboard, and runs the apps with commands, flags, ports they have."""

from __future__ import annotations

import importlib
import json
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

from devkit import kubeconform, kubernetes_manifests
from devkit.processes import http_ok, managed, server_port, wait_until
from devkit.prometheus import PROMTOOL
from enforcer.settings import EnforcerSettings
from exporter.settings import ExporterSettings
from kvq.settings.properties import parse_properties
from tests.deploy.rendering import (
    CLIS,
    ROOT,
    SOURCES,
    arguments,
    command_of,
    config_files,
    containers,
    documents,
    is_mounted,
    kustomize_text,
    mounted_files,
    namespace_of,
    one,
    render,
    render_text,
    workloads,
)

PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
BOOTSTRAP = "client.quota.callback.static.kafka.admin.bootstrap.servers"
STRIMZI_KINDS = ("KafkaUser",)
"""No schema of Strimzi's CRDs here: their required fields are checked below."""


@pytest.fixture(scope="module", params=SOURCES)
def source(request) -> str:
    return request.param


@pytest.fixture(scope="module")
def rendered_text(source) -> str:
    return render_text(source)


@pytest.fixture(scope="module")
def rendered(rendered_text) -> list[dict]:
    return [doc for doc in yaml.safe_load_all(rendered_text) if doc]


def test_generated_files_are_current() -> None:
    for path, text in kubernetes_manifests.generated().items():
        assert path.read_text() == text, f"run `make manifests`: {path} is stale"


def test_every_object_validates_strictly(rendered_text, rendered) -> None:
    """kubeconform -strict: Kubernetes' schemas and the Prometheus Operator's CRD schemas, every
    object closed (an unknown field is an error), no kind without a schema."""
    assert kubeconform.kubeconform(rendered_text, skip=STRIMZI_KINDS) == []
    kinds = {d["kind"] for d in rendered}
    assert kinds >= {"Deployment", "Service", "ConfigMap", "PodDisruptionBudget"}
    assert kinds >= {"ServiceMonitor", "PrometheusRule", "AlertmanagerConfig"}


def test_validation_rejects_unknown_fields() -> None:
    """The check above would catch a misspelt field, in a built-in kind and in a CRD."""
    docs = render(SOURCES[0])
    deployment = next(d for d in docs if d["kind"] == "Deployment")
    deployment["spec"]["template"]["spec"]["containers"][0]["livenessprobe"] = {}
    monitor = next(d for d in docs if d["kind"] == "ServiceMonitor")
    monitor["spec"]["endpoints"][0]["intervall"] = "5s"
    problems = kubeconform.kubeconform(yaml.safe_dump_all([deployment, monitor]))
    assert len(problems) == 2, problems
    assert "livenessprobe" in problems[0] + problems[1]
    assert "intervall" in problems[0] + problems[1]


def test_strimzi_kafka_users_have_their_required_fields() -> None:
    for doc in render("kustomize-strimzi"):
        if doc["kind"] not in STRIMZI_KINDS:
            continue
        spec = doc["spec"]
        assert doc["metadata"]["labels"]["strimzi.io/cluster"]
        assert spec["authentication"]["type"] in ("tls", "tls-external", "scram-sha-512")
        for acl in spec["authorization"]["acls"]:
            assert acl["resource"]["type"] in ("topic", "group", "cluster", "transactionalId")
            assert set(acl["operations"]) <= {
                "Read", "Write", "Create", "Delete", "Alter", "Describe", "ClusterAction",
                "AlterConfigs", "DescribeConfigs", "IdempotentWrite", "All",
            }  # fmt: skip


def test_prometheus_rule_holds_the_rules_file_with_the_namespace_label(
    rendered, source, tmp_path
) -> None:
    """Every group's rules are the file's; added are only the recommended group intervals and, on
    every alert, `namespace` = the namespace of the AlertmanagerConfig (the Prometheus Operator's
    default OnNamespace strategy routes only those alerts to it). Extracted, they pass
    `promtool check rules`."""
    rule = one(rendered, "PrometheusRule")
    namespace = namespace_of(source, one(rendered, "AlertmanagerConfig"))
    source_groups = yaml.safe_load((ROOT / "rules" / "kafka-volume-quotas.rules.yml").read_text())
    groups = rule["spec"]["groups"]
    alerts = [r for g in groups for r in g["rules"] if "alert" in r]
    assert alerts and {r["labels"].pop("namespace") for r in alerts} == {namespace}
    intervals = {g["name"]: g.pop("interval") for g in groups if "interval" in g}
    assert intervals == {"kafka-volume-quotas.throttle": "1s"}
    in_file = {g["name"]: g.pop("interval") for g in source_groups["groups"] if "interval" in g}
    assert in_file == intervals
    assert groups == source_groups["groups"]
    extracted = tmp_path / "extracted.rules.yml"
    extracted.write_text(yaml.safe_dump({"groups": rule["spec"]["groups"]}))
    check = subprocess.run(
        [PROMTOOL, "check", "rules", str(extracted)], capture_output=True, text=True, timeout=60
    )
    assert check.returncode == 0, check.stdout + check.stderr


def test_dashboard_config_map_is_the_dashboard_file(rendered) -> None:
    (config_map,) = [
        d
        for d in rendered
        if d["kind"] == "ConfigMap" and "grafana_dashboard" in d["metadata"]["labels"]
    ]
    assert config_map["metadata"]["labels"]["grafana_dashboard"] == "1"
    files = sorted((ROOT / "grafana" / "dashboards").glob("*.json"))
    assert config_map["data"] == {path.name: path.read_text() for path in files}
    for text in config_map["data"].values():
        json.loads(text)


def test_every_container_runs_non_root_on_a_read_only_root(rendered) -> None:
    assert {command_of(w) for w in workloads(rendered)} == set(CLIS)
    for workload, container in containers(rendered):
        pod = workload["spec"]["template"]["spec"]
        security = {**pod.get("securityContext", {}), **container["securityContext"]}
        assert security["runAsNonRoot"] is True
        assert security["runAsUser"] != 0
        assert security["readOnlyRootFilesystem"] is True
        assert security["allowPrivilegeEscalation"] is False
        assert security["capabilities"]["drop"] == ["ALL"]
        assert container["resources"]["requests"] and container["resources"]["limits"]["memory"]


def test_containers_run_the_apps_with_flags_and_ports_they_have(rendered) -> None:
    version = PYPROJECT["project"]["version"]
    for _, container in containers(rendered):
        (command,) = container["command"]
        assert command in PYPROJECT["project"]["scripts"]
        assert container["image"].endswith(f"kafka-volume-quotas:{version}")
        cli = importlib.import_module(CLIS[command])
        args = cli.build_parser().parse_args(container["args"])  # exits on an unknown flag
        # the exporters' spelling (exporter-toolkit), not the project's older alias
        assert "--web.listen-address" in container["args"] and "--listen" not in container["args"]
        _, port = args.listen.rsplit(":", 1)
        (declared,) = container["ports"]
        assert declared["containerPort"] == int(port)
        for probe in ("livenessProbe", "readinessProbe", "startupProbe"):
            if probe in container:
                assert container[probe]["httpGet"]["port"] == declared["name"]


def _selects(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return selector.items() <= labels.items()


def test_the_enforcer_runs_as_replicas_with_no_volume_of_its_own(rendered) -> None:
    """Issue 40: every render runs the enforcer as a Deployment of two replicas (one acts, the
    other takes over within seconds, both ready on /ready and spread across nodes when they can)
    with no PersistentVolumeClaim: its journal, a working copy, on an emptyDir, and every file it
    reads says kvq.enforcer.state.store=kafka, as does its --state-store flag (two replicas with
    local journals would race). Its
    PodDisruptionBudget lets a drain take one replica at a time, and a rolling update stops an
    old replica only once a new one is ready (tests/system/test_enforcer_replicas.py runs that
    hand-over)."""
    (enforcer,) = [w for w in workloads(rendered) if command_of(w) == "kvq-enforcer"]
    assert (enforcer["kind"], enforcer["spec"]["replicas"]) == ("Deployment", 2)
    rolling = enforcer["spec"]["strategy"]["rollingUpdate"]
    assert (rolling["maxSurge"], rolling["maxUnavailable"]) == (1, 0)
    assert not [d for d in rendered if d["kind"] == "PersistentVolumeClaim"]
    pod = enforcer["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    (journal,) = arguments(container, "--journal")
    (mount,) = [m for m in container["volumeMounts"] if journal.startswith(m["mountPath"] + "/")]
    (volume,) = [v for v in pod["volumes"] if v["name"] == mount["name"]]
    assert set(volume) == {"name", "emptyDir"}
    files = config_files(rendered, enforcer)
    assert files and {p["kvq.enforcer.state.store"] for _, p in files} == {"kafka"}
    assert arguments(container, "--state-store") == ["kafka"], "an overlay's file cannot undo it"
    assert container["readinessProbe"]["httpGet"]["path"] == "/ready"
    (spread,) = pod["topologySpreadConstraints"]
    assert (spread["topologyKey"], spread["whenUnsatisfiable"]) == (
        "kubernetes.io/hostname",
        "ScheduleAnyway",
    )
    labels = enforcer["spec"]["template"]["metadata"]["labels"]
    (budget,) = [
        b
        for b in rendered
        if b["kind"] == "PodDisruptionBudget"
        and _selects(b["spec"]["selector"]["matchLabels"], labels)
    ]
    assert {k: v for k, v in budget["spec"].items() if k != "selector"} == {"maxUnavailable": 1}


def test_services_and_monitors_reach_the_pods(rendered) -> None:
    """Each workload has its own Service (no other workload's pods behind it), and a
    ServiceMonitor scrapes /metrics on a port that Service has."""
    for workload in workloads(rendered):
        pod_labels = workload["spec"]["template"]["metadata"]["labels"]
        assert _selects(workload["spec"]["selector"]["matchLabels"], pod_labels)
        service = one(rendered, "Service", workload["metadata"]["name"])
        assert _selects(service["spec"]["selector"], pod_labels)
        others = [w for w in workloads(rendered) if w is not workload]
        assert not any(
            _selects(service["spec"]["selector"], w["spec"]["template"]["metadata"]["labels"])
            for w in others
        )
        (container,) = workload["spec"]["template"]["spec"]["containers"]
        port_names = {p["name"] for p in container["ports"]}
        assert {p["targetPort"] for p in service["spec"]["ports"]} <= port_names
        (monitor,) = [
            m
            for m in rendered
            if m["kind"] == "ServiceMonitor"
            and _selects(m["spec"]["selector"]["matchLabels"], service["metadata"]["labels"])
        ]
        service_ports = {p["name"] for p in service["spec"]["ports"]}
        assert {e["port"] for e in monitor["spec"]["endpoints"]} <= service_ports
        assert all(e["path"] == "/metrics" for e in monitor["spec"]["endpoints"])


SETTINGS = {"kvq-exporter": ExporterSettings, "kvq-enforcer": EnforcerSettings}


@pytest.fixture(scope="module")
def pem_files(tmp_path_factory) -> dict[str, Path]:
    """A self-signed certificate and its key, as Strimzi's CA and user Secrets hold them."""
    where = tmp_path_factory.mktemp("pem")
    cert, key = where / "cert.pem", where / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1"]
        + ["-subj", "/CN=kvq", "-keyout", str(key), "-out", str(cert)],
        check=True,
        capture_output=True,
        timeout=60,
    )
    return {"cert": cert, "key": key}


@pytest.mark.parametrize("command", sorted(CLIS))
def test_properties_load_with_the_secrets_the_pod_gets(rendered, command, pem_files) -> None:
    """Every properties file the container's --config names is a valid configuration for the app
    once the `${env:...}` it names are filled from the container's Secret-backed environment;
    every file it names is mounted into the container (PEM files of the same kind stand in)."""
    for workload in [w for w in workloads(rendered) if command_of(w) == command]:
        container = workload["spec"]["template"]["spec"]["containers"][0]
        env = {e["name"] for e in container.get("env", []) if "secretKeyRef" in e["valueFrom"]}
        own = "kvq.enforcer." if command == "kvq-enforcer" else "kvq.exporter."
        for _, properties in config_files(rendered, workload):
            referenced = {n for v in properties.values() for n in re.findall(r"\$\{env:(\w+)\}", v)}
            assert referenced <= env, "a ${env:...} that the pod does not set from a Secret"
            for key, value in properties.items():
                if key.endswith(".location") or (key.startswith(own) and key.endswith(".file")):
                    assert is_mounted(workload, value), f"{key}={value} is not mounted"
            stand_ins = {
                key: str(pem_files["key" if key.endswith("key.location") else "cert"])
                for key in properties
                if key.endswith(".location")
            }
            settings = SETTINGS[command].build(
                {**properties, **stand_ins}, "ConfigMap", dict.fromkeys(referenced, "from-a-secret")
            )
            assert settings.config.cluster_name


def test_alertmanager_routes_the_throttle_alert_to_the_enforcer_with_its_token(
    rendered, source
) -> None:
    config = one(rendered, "AlertmanagerConfig")
    route = config["spec"]["route"]
    (matcher,) = route["matchers"]
    settings = EnforcerSettings.build(
        {BOOTSTRAP: "k:9092"}
        | {"client.quota.callback.static.storage.per.volume.limit.min.available.ratio": "0.1"}
    )
    alert, heartbeat = settings.alert_name, settings.heartbeat_alert_name
    rules = one(rendered, "PrometheusRule")["spec"]["groups"]
    assert {alert, heartbeat} <= {r.get("alert") for g in rules for r in g["rules"]}
    assert (matcher["name"], matcher.get("matchType", "="), matcher["value"]) == (
        "alertname",
        "=~",
        f"{alert}|{heartbeat}",
    )
    assert route["groupBy"] == ["cluster"] and route["groupWait"] == "0s"
    (beat,) = route["routes"]
    assert beat["matchers"] == [{"name": "alertname", "value": heartbeat}]
    # re-sent well within the enforcer's default kvq.enforcer.failsafe.after (PT30S)
    assert beat["repeatInterval"] == "10s" and beat["receiver"] == route["receiver"]
    (receiver,) = [r for r in config["spec"]["receivers"] if r["name"] == route["receiver"]]
    (webhook,) = receiver["webhookConfigs"]
    assert webhook["sendResolved"] is True
    (enforcer,) = [w for w in workloads(rendered) if command_of(w) == "kvq-enforcer"]
    service = one(rendered, "Service", enforcer["metadata"]["name"])
    (port,) = service["spec"]["ports"]
    namespace = namespace_of(source, service)
    # the scheme the enforcer serves, as its probes use it (HTTPS behind a web config with TLS)
    probe = enforcer["spec"]["template"]["spec"]["containers"][0]["readinessProbe"]["httpGet"]
    scheme = probe.get("scheme", "HTTP").lower()
    assert (
        webhook["url"]
        == f"{scheme}://{service['metadata']['name']}.{namespace}.svc:{port['port']}/webhook"
    )
    assert namespace_of(source, config) == namespace
    credentials = webhook["httpConfig"]["authorization"]["credentials"]
    for _, properties in config_files(rendered, enforcer):
        token_file = properties["kvq.enforcer.auth.bearer.token.file"]
        assert mounted_files(enforcer)[token_file] == (
            f"Secret/{credentials['name']}/{credentials['key']}"
        )


@pytest.mark.integration
def test_each_container_command_serves_its_probes_and_metrics(devcluster, tmp_path) -> None:
    """The chart's containers (three Kafka clusters), run as they are written (only the listen
    address, the files' places and the enforcer's state store moved to this test's), answer
    every probe path and /metrics with 200; the enforcer with one --config per cluster."""
    docs = render("helm-three-clusters")
    cluster = devcluster(brokers=2)
    token = tmp_path / "token"
    token.write_text("t0ken\n")
    for workload, container in containers(docs):
        args = list(container["args"])
        for index, name in enumerate(arguments(container, "--config")):
            config = tmp_path / Path(name).name
            cluster_name = config_files(docs, workload)[index][1]["kvq.cluster.name"]
            config.write_text(
                f"{BOOTSTRAP}={cluster.bootstrap}\n"
                "client.quota.callback.static.storage.per.volume.limit.min.available.ratio=0.01\n"
                f"kvq.cluster.name={cluster_name}\n"
                f"kvq.enforcer.auth.bearer.token.file={token}\n"
            )
            args[args.index(name)] = str(config)
        if "--journal" in args:
            args[args.index("--journal") + 1] = str(tmp_path / "journal.sqlite3")
        if "--state-store" in args:  # devcluster has no transactions: the enforcer's own store
            args[args.index("--state-store") + 1] = "local"
        port = server_port()
        args[args.index("--web.listen-address") + 1] = f"127.0.0.1:{port}"
        argv = [sys.executable, "-m", CLIS[container["command"][0]], *args]
        paths = {
            container[p]["httpGet"]["path"]
            for p in ("livenessProbe", "readinessProbe", "startupProbe")
            if p in container
        }
        paths |= {"/metrics"}
        name = workload["metadata"]["name"]
        with managed(argv, tmp_path / f"{name}.log", cwd=ROOT) as process:
            for path in sorted(paths):
                url = f"http://127.0.0.1:{port}{path}"
                wait_until(lambda url=url: http_ok(url), 30, what=f"{name} {path}")
            assert process.running


def test_strimzi_overlay_is_the_setup_docs_strimzi_describes() -> None:
    """The overlay's KafkaUsers, mounted PEM files and client properties are docs/strimzi.md's."""
    docs = (ROOT / "docs" / "strimzi.md").read_text()
    blocks = re.findall(r"```(yaml|properties)\n(.*?)```", docs, re.S)
    documented_users = [
        d
        for kind, text in blocks
        if kind == "yaml" and "kind: KafkaUser" in text
        for d in yaml.safe_load_all(text)
    ]
    rendered = render("kustomize-strimzi")
    users = [d for d in rendered if d["kind"] == "KafkaUser"]
    assert documented_users, "docs/strimzi.md shows no KafkaUser"
    assert sorted((u["metadata"]["name"], u["apiVersion"], u["spec"]) for u in users) == sorted(
        (u["metadata"]["name"], u["apiVersion"], u["spec"]) for u in documented_users
    )
    assert all(u["metadata"]["labels"] == {"strimzi.io/cluster": "my-cluster"} for u in users)
    documented_properties: dict[str, str] = {}
    for kind, text in blocks:
        # the overlay mounts PEM files: the page's PKCS12, SCRAM and OAUTHBEARER setups are
        # alternatives
        alternative = any(
            mark in text
            for mark in ("ssl.keystore.type=PKCS12", "sasl.mechanism=SCRAM", "OAUTHBEARER")
        )
        if kind == "properties" and not alternative:
            documented_properties |= parse_properties(text)
    for workload in workloads(rendered):
        ((_, properties),) = config_files(rendered, workload)
        for key, value in documented_properties.items():
            assert properties.get(key) == value, key
        mounted = mounted_files(workload)
        user = command_of(workload)  # the KafkaUser of each component is named after it
        assert mounted["/etc/kvq/kafka/kafka-user/user.crt"] == f"Secret/{user}/user.crt"
        assert mounted["/etc/kvq/kafka/kafka-user/user.key"] == f"Secret/{user}/user.key"
        ca = mounted["/etc/kvq/kafka/cluster-ca/ca.crt"]
        assert ca == "Secret/my-cluster-cluster-ca-cert/ca.crt"


def test_alertmanager_config_routes_as_the_example_configuration_does() -> None:
    """The AlertmanagerConfig and rules/alertmanager.example.yml recommend the same route."""
    example = yaml.safe_load((ROOT / "rules" / "alertmanager.example.yml").read_text())
    heartbeat, route = [r for r in example["route"]["routes"] if r["receiver"] == "kvq-enforcer"]
    config = one(render("helm-one-cluster"), "AlertmanagerConfig")["spec"]["route"]
    assert (
        config["groupBy"],
        config["groupWait"],
        config["groupInterval"],
        config["repeatInterval"],
    ) == (route["group_by"], route["group_wait"], route["group_interval"], route["repeat_interval"])
    (beat,) = config["routes"]
    assert (beat["groupInterval"], beat["repeatInterval"]) == (
        heartbeat["group_interval"],
        heartbeat["repeat_interval"],
    )
    (receiver,) = [r for r in example["receivers"] if r["name"] == "kvq-enforcer"]
    assert receiver["webhook_configs"][0]["send_resolved"] is True


def test_grafana_datasource_time_interval_is_the_exporters_poll_interval() -> None:
    """$__rate_interval is derived from the datasource's timeInterval: it must be the resolution
    of the exporter's data, its poll interval (scraped every 1 s, its values change only at each
    poll), else rate windows hold a single poll or are coarser than the data."""
    datasource = ROOT / "grafana" / "provisioning" / "datasources" / "kafka-volume-quotas.yml"
    (source,) = yaml.safe_load(datasource.read_text())["datasources"]
    values = yaml.safe_load((kubernetes_manifests.CHART / "values.yaml").read_text())
    poll = values["properties"]["client.quota.callback.static.storage.check.interval"]
    assert poll == "PT5S" and source["jsonData"]["timeInterval"] == "5s"


def _config_references(docs: list[dict]) -> dict[str, set[str]]:
    """The ConfigMaps of the clusters' properties, and the names each workload's pods read."""
    config_maps = {
        d["metadata"]["name"]
        for d in docs
        if d["kind"] == "ConfigMap" and "kafka-volume-quotas/cluster" in d["metadata"]["labels"]
    }
    return {"ConfigMap": config_maps} | {
        workload["metadata"]["name"]: {
            mounted.split("/")[1]
            for mounted in mounted_files(workload).values()
            if mounted.startswith("ConfigMap/")
        }
        for workload in workloads(docs)
    }


def test_a_changed_configuration_rolls_the_pods_under_kustomize(tmp_path) -> None:
    """The base's properties ConfigMap is generated with a hash of its content in its name, and
    the workloads' volumes name it: a property changed in the base's file, or in the file an
    overlay replaces it with, gives the ConfigMap a new name and the pod templates follow it
    (so Kubernetes rolls them); an unchanged render keeps every name."""
    copy = tmp_path / "kubernetes"
    shutil.copytree(ROOT / "deploy" / "kubernetes", copy)
    base, overlay = copy, copy / "overlays" / "strimzi"

    def names(path: Path) -> dict[str, set[str]]:
        references = _config_references(documents(kustomize_text(path)))
        (config_map,) = references.pop("ConfigMap")
        assert config_map.startswith("kvq-config-kafka-")  # kvq-config-kafka-<hash>
        assert all(used == {config_map} for used in references.values()), references
        return {"ConfigMap": {config_map}} | references

    before = {path: names(path) for path in (base, overlay)}
    assert {path: names(path) for path in (base, overlay)} == before  # the same render, the same
    generated = copy / "base" / "generated" / "kafka" / "exporter.properties"
    generated.write_text(generated.read_text() + "kvq.exporter.request.timeout=PT3S\n")
    after_base = names(base)
    assert after_base["ConfigMap"] != before[base]["ConfigMap"]
    assert names(overlay) == before[overlay]  # the overlay replaced that file: unchanged
    properties = overlay / "kvq.properties"
    properties.write_text(properties.read_text() + "kvq.exporter.request.timeout=PT3S\n")
    assert names(overlay)["ConfigMap"] != before[overlay]["ConfigMap"]
    assert len(workloads(documents(kustomize_text(overlay)))) == 2


BACKFILL_JOB = ROOT / "deploy" / "kubernetes" / "examples" / "backfill-job" / "job.yaml"
"""docs/backfill.md's Kubernetes Job: kvq-backfill --blocks on the exporter's archive."""


def test_the_backfill_job_example_validates_and_runs_the_documented_command() -> None:
    """The example Job is valid Kubernetes (strict), runs `kvq-backfill --blocks` with flags it
    has, on mounted paths (the output writable), with the exporter's properties file as the
    chart renders it, from the backfill image of this version."""
    from spark.cli import build_parser

    text = BACKFILL_JOB.read_text()
    assert kubeconform.kubeconform(text) == []
    (job,) = [doc for doc in yaml.safe_load_all(text) if doc]
    assert job["kind"] == "Job"
    pod = job["spec"]["template"]["spec"]
    assert pod["restartPolicy"] == "Never"
    (container,) = pod["containers"]
    assert container["image"] == f"kafka-volume-quotas-backfill:{PYPROJECT['project']['version']}"
    args = build_parser().parse_args(container["args"])
    assert args.blocks
    mounts = {mount["mountPath"]: mount for mount in container["volumeMounts"]}
    config_dir, config_name = str(Path(args.config).parent), Path(args.config).name
    assert {args.archive, args.output, config_dir} <= mounts.keys()
    assert not mounts[args.output].get("readOnly")
    volumes = {volume["name"]: volume for volume in pod["volumes"]}
    config_map = volumes[mounts[config_dir]["name"]]["configMap"]
    assert [item["path"] for item in config_map["items"]] == [config_name]
    chart = render("helm-one-cluster")  # the chart's name; kustomize's carries a content hash
    rendered_maps = {d["metadata"]["name"]: d for d in chart if d["kind"] == "ConfigMap"}
    rendered_map = rendered_maps[config_map["name"]]
    assert config_map["items"][0]["key"] in rendered_map["data"]
    assert job["metadata"]["namespace"] == namespace_of("helm-one-cluster", rendered_map)

"""deploy/helm/kafka-volume-quotas: `helm lint`, what one and three Kafka clusters render (the
checks every render gets are in test_kubernetes.py), alerts routed by namespace as the Prometheus
Operator's default (OnNamespace) routes them, and clear refusals of bad values."""

from __future__ import annotations

import json
import re
import shlex
import subprocess

import pytest
import yaml

from devkit import kubeconform, kubernetes_manifests
from kvq.settings.config import build_config
from tests.deploy.rendering import (
    CHART,
    HELM_RELEASES,
    KUSTOMIZATIONS,
    ROOT,
    STRIMZI,
    THREE_CLUSTERS,
    arguments,
    command_of,
    config_files,
    documents,
    kustomize_text,
    mounted_file,
    namespace_of,
    one,
    render,
    workloads,
)
from tests.docs.blocks import block, command_lines

AMTOOL = "/usr/bin/amtool"
BOOTSTRAP = "client.quota.callback.static.kafka.admin.bootstrap.servers"
CLUSTERS = ["east", "west", "central"]


def helm(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [kubernetes_manifests.helm_binary(), *args], capture_output=True, text=True, timeout=120
    )


@pytest.mark.parametrize(
    "values",
    [(), ("-f", str(THREE_CLUSTERS)), ("-f", str(STRIMZI))],
    ids=["one", "three", "strimzi"],
)
def test_helm_lint_is_clean(values) -> None:
    result = helm("lint", str(CHART), "--strict", *values)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 chart(s) failed" in result.stdout


@pytest.fixture(scope="module")
def three() -> list[dict]:
    return render("helm-three-clusters")


def exporters(docs: list[dict]) -> list[dict]:
    return [w for w in workloads(docs) if command_of(w) == "kvq-exporter"]


def test_three_clusters_are_three_exporters_and_one_enforcer_for_all(three) -> None:
    """Each cluster: an exporter reading only its own properties (its kvq.cluster.name, its
    password variable); the enforcer: one --config per cluster, every cluster's variables and
    volumes, --listen and --journal as flags, the same token file in every file."""
    names = {}
    for exporter in exporters(three):
        ((_, properties),) = config_files(three, exporter)
        names[properties["kvq.cluster.name"]] = exporter
    assert sorted(names) == sorted(CLUSTERS)
    for cluster, exporter in names.items():
        assert exporter["metadata"]["name"] == f"kvq-exporter-{cluster}"
        container = exporter["spec"]["template"]["spec"]["containers"][0]
        env = [e["name"] for e in container.get("env", [])]
        assert env == ([f"KVQ_{cluster.upper()}_PASSWORD"] if cluster != "central" else [])
    (enforcer,) = [w for w in workloads(three) if command_of(w) == "kvq-enforcer"]
    assert enforcer["kind"] == "Deployment" and enforcer["spec"]["replicas"] == 2
    container = enforcer["spec"]["template"]["spec"]["containers"][0]
    files = config_files(three, enforcer)
    assert [properties["kvq.cluster.name"] for _, properties in files] == CLUSTERS
    assert len(arguments(container, "--config")) == 3
    assert arguments(container, "--web.listen-address") == ["0.0.0.0:9899"]
    assert arguments(container, "--journal") == ["/var/lib/kvq/enforcer-journal.sqlite3"]
    assert {p["kvq.enforcer.auth.bearer.token.file"] for _, p in files} == {
        "/etc/kvq/webhook/token"
    }
    assert [e["name"] for e in container["env"]] == ["KVQ_EAST_PASSWORD", "KVQ_WEST_PASSWORD"]
    assert mounted_file(enforcer, "/etc/kvq/central/user.key") == (
        "Secret/kvq-kafka-central-tls/user.key"
    )
    west = next(p for _, p in files if p["kvq.cluster.name"] == "west")
    ratio = "client.quota.callback.static.storage.per.volume.limit.min.available.ratio"
    assert west[ratio] == "0.1"  # its own, over the common 0.05
    assert files[0][1][ratio] == "0.05"


def test_three_clusters_have_disruption_budgets_priority_and_network_policy(three) -> None:
    for workload in workloads(three):
        pod = workload["spec"]["template"]
        (budget,) = [
            b
            for b in three
            if b["kind"] == "PodDisruptionBudget"
            and b["spec"]["selector"]["matchLabels"].items() <= pod["metadata"]["labels"].items()
        ]
        if command_of(workload) == "kvq-exporter":
            assert budget["spec"]["minAvailable"] == 1  # of two
        else:
            assert budget["spec"]["maxUnavailable"] == 1  # a drain moves one at a time
        assert pod["spec"]["priorityClassName"] == one(three, "PriorityClass")["metadata"]["name"]
    assert all(e["spec"]["replicas"] == 2 for e in exporters(three))
    policy = one(three, "NetworkPolicy")
    for workload in workloads(three):
        labels = workload["spec"]["template"]["metadata"]["labels"]
        assert policy["spec"]["podSelector"]["matchLabels"].items() <= labels.items()
    (rule,) = policy["spec"]["ingress"]
    assert rule["ports"] == [{"port": "http", "protocol": "TCP"}]
    monitors = [d for d in three if d["kind"] in ("ServiceMonitor", "PrometheusRule")]
    assert all(m["metadata"]["labels"]["release"] == "kube-prometheus-stack" for m in monitors)


def operator_alertmanager_config(config: dict, namespace: str) -> dict:
    """The alertmanager.yml the Prometheus Operator generates from this AlertmanagerConfig
    under its default alertmanagerConfigMatcherStrategy OnNamespace (pkg/alertmanager/amcfg.go,
    namespaceEnforcer): the route gets the matcher namespace="<its namespace>" and continue,
    each inhibition rule gets it on both sides; names are prefixed namespace/name/."""
    prefix = f"{namespace}/{config['metadata']['name']}/"
    own = f'namespace="{namespace}"'

    def matchers(items: list[dict]) -> list[str]:
        return [f'{m["name"]}{m.get("matchType", "=")}"{m["value"]}"' for m in items] + [own]

    route = config["spec"]["route"]
    receivers = [{"name": "null"}]
    for receiver in config["spec"]["receivers"]:
        (webhook,) = receiver["webhookConfigs"]
        receivers.append(
            {"name": prefix + receiver["name"], "webhook_configs": [{"url": webhook["url"]}]}
        )
    return {
        "route": {
            "receiver": "null",
            "routes": [
                {
                    "receiver": prefix + route["receiver"],
                    "matchers": matchers(route["matchers"]),
                    "group_by": route["groupBy"],
                    "group_wait": route["groupWait"],
                    "group_interval": route["groupInterval"],
                    "repeat_interval": route["repeatInterval"],
                    "continue": True,
                }
            ],
        },
        "receivers": receivers,
        "inhibit_rules": [
            {
                "source_matchers": matchers(rule["sourceMatch"]),
                "target_matchers": matchers(rule["targetMatch"]),
                "equal": rule["equal"],
            }
            for rule in config["spec"]["inhibitRules"]
        ],
    }


def routed_to(config_file, labels: dict[str, str]) -> list[str]:
    """The receivers Alertmanager (amtool) routes an alert with these labels to."""
    pairs = [f"{name}={value}" for name, value in labels.items()]
    result = subprocess.run(
        [AMTOOL, "config", "routes", "test", f"--config.file={config_file}", *pairs],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout.split()


@pytest.mark.parametrize("source", [*sorted(HELM_RELEASES), *sorted(KUSTOMIZATIONS)])
def test_throttle_alert_reaches_the_enforcer_under_on_namespace(source, tmp_path) -> None:
    """The alert as the PrometheusRule makes it (its expression keeps only `cluster`, the rule
    adds its static labels) reaches the enforcer's receiver in the Alertmanager configuration
    the operator generates by default, and the early warnings it inhibits carry the same
    `namespace`. Without the label the alert would go to the default receiver only."""
    docs = render(source)
    config = one(docs, "AlertmanagerConfig")
    namespace = namespace_of(source, config)
    generated = tmp_path / "alertmanager.yml"
    generated.write_text(yaml.safe_dump(operator_alertmanager_config(config, namespace)))
    check = subprocess.run(
        [AMTOOL, "check-config", str(generated)], capture_output=True, text=True, timeout=60
    )
    assert check.returncode == 0, check.stdout + check.stderr
    alerts = {
        r["alert"]: r["labels"]
        for g in one(docs, "PrometheusRule")["spec"]["groups"]
        for r in g["rules"]
        if "alert" in r
    }
    # A templated label (factor_step) as Prometheus expands it for factor 0.5.
    static = {k: "0.5" if "{{" in v else v for k, v in alerts["KafkaVolumeQuotaThrottle"].items()}
    throttle = {"alertname": "KafkaVolumeQuotaThrottle", **static}
    enforcer = f"{namespace}/kvq-enforcer/kvq-enforcer"
    assert routed_to(generated, throttle | {"cluster": "east"}) == [enforcer]
    without = {k: v for k, v in throttle.items() if k != "namespace"}
    assert routed_to(generated, without | {"cluster": "east"}) == ["null"]
    for early_warning in ("KafkaLogDirLowHeadroom", "KafkaLogDirFillingUp"):
        assert alerts[early_warning]["namespace"] == namespace


def renamed_label_uses(text: str) -> list[str]:
    """Where a dashboard string still names the label `cluster`: besides the variable `$cluster`
    and record names (`cluster:...`, the aggregation level)."""
    return re.findall(r".{0,30}\bcluster\b.{0,30}", re.sub(r"\$cluster\b|\bcluster:", "", text))


def dashboard_label_uses(node, key: str = "") -> list[str]:
    """The dashboard's queries, legends, annotation texts and table fields still naming
    `cluster` (descriptions, titles and the variable's own name are prose or names)."""
    if isinstance(node, dict):
        found = [k for k in node if k == "cluster"]
        for child_key, child in node.items():
            found += dashboard_label_uses(child, child_key)
        return found
    if isinstance(node, list):
        return [use for child in node for use in dashboard_label_uses(child, key)]
    if isinstance(node, str) and key not in ("description", "title", "name", "label"):
        return renamed_label_uses(node)
    return []


def test_another_cluster_label_is_used_by_every_component(tmp_path) -> None:
    """clusterLabel=kafka_cluster: every properties file (exporters, enforcer) names it, the
    Alertmanager route groups and inhibits by it and routes the throttle alert to the enforcer,
    the dashboard's queries, legends, annotations, table fields and variable use it; everything
    still validates. The rules: tests/rules/test_promtool.py runs their tests renamed."""
    text = kubernetes_manifests.helm_template(
        "-f", str(THREE_CLUSTERS), "--set", "clusterLabel=kafka_cluster", namespace="kafka-platform"
    )
    assert kubeconform.kubeconform(text) == []
    docs = [d for d in yaml.safe_load_all(text) if d]
    files = [f for w in workloads(docs) for f in config_files(docs, w)]
    assert len(files) == 2 * len(CLUSTERS)  # each exporter's, and the enforcer's
    for file_text, properties in files:
        assert properties["kvq.cluster.label"] == "kafka_cluster"
        environ = {name: "x" for name in re.findall(r"\$\{env:(\w+)\}", file_text)}
        assert build_config(properties, environ=environ).cluster_label == "kafka_cluster"

    config = one(docs, "AlertmanagerConfig")
    assert config["spec"]["route"]["groupBy"] == ["kafka_cluster"]
    assert [rule["equal"] for rule in config["spec"]["inhibitRules"]] == [["kafka_cluster"]]
    generated = tmp_path / "alertmanager.yml"
    generated.write_text(yaml.safe_dump(operator_alertmanager_config(config, "kafka-platform")))
    throttle = {"alertname": "KafkaVolumeQuotaThrottle", "namespace": "kafka-platform"}
    enforcer = "kafka-platform/kvq-enforcer/kvq-enforcer"
    assert routed_to(generated, throttle | {"kafka_cluster": "east"}) == [enforcer]

    dashboards = one(docs, "ConfigMap", "kvq-dashboards")["data"]
    for name, dashboard_text in dashboards.items():
        dashboard = json.loads(dashboard_text)
        assert dashboard_label_uses(dashboard) == [], name
        (variable,) = [v for v in dashboard["templating"]["list"] if v["name"] == "cluster"]
        assert (
            variable["query"] == "label_values(kafka_volume_quota_throttle_factor, kafka_cluster)"
        )
        assert "by (kafka_cluster)" in dashboard_text and "{{kafka_cluster}}" in dashboard_text
    default = json.loads((ROOT / "grafana" / "dashboards" / "kafka-volume-quotas.json").read_text())
    assert len(dashboard_label_uses(default)) > 100  # what the check above finds when not renamed


def test_a_cluster_label_the_series_already_carry_is_refused(tmp_path) -> None:
    for taken in ("instance", "__name__", "kafka-cluster"):
        result = helm("template", "kvq", str(CHART), "--set", f"clusterLabel={taken}")
        assert result.returncode != 0 and "clusterLabel" in result.stderr, result.stderr


def values_file(tmp_path, values: dict):
    path = tmp_path / "values.yaml"
    path.write_text(yaml.safe_dump(values))
    return str(path)


def cluster(name: str, **more) -> dict:
    return {"name": name, "properties": {"k.bootstrap.servers": "k:9092"}, **more}


def password(variable: str, secret: str) -> list[dict]:
    return [{"name": variable, "valueFrom": {"secretKeyRef": {"name": secret, "key": "password"}}}]


@pytest.mark.parametrize(
    ("values", "message"),
    [
        (
            {"clusters": [cluster("east"), cluster("east")]},
            'the name "east" is given twice',
        ),
        (
            {"clusters": [cluster("East_1")]},
            "'/clusters/0/name': 'East_1' does not match pattern",
        ),
        (
            {"clusters": [{"name": "east", "properties": {"client.quota.produce": 10485760}}]},
            "got number, want string",
        ),
        (
            {
                "clusters": [
                    cluster("east", env=password("KVQ_PASSWORD", "east")),
                    cluster("west", env=password("KVQ_PASSWORD", "west")),
                ]
            },
            'env name "KVQ_PASSWORD" differs between clusters',
        ),
        (
            {"clusters": [{"name": "east", "properties": {"k.jaas.config": "a\nb"}}]},
            "clusters: east: the property k.jaas.config holds a line break",
        ),
        (
            {"prometheusRule": {"groupIntervals": {"kafka-volume-quotas.throtle": "5s"}}},
            'no rule group "kafka-volume-quotas.throtle"',
        ),
    ],
    ids=[
        "duplicate-name",
        "bad-name",
        "number-property",
        "env-clash",
        "multi-line-property",
        "unknown-group",
    ],
)
def test_bad_values_are_refused_naming_the_value(values, message, tmp_path) -> None:
    result = helm("template", "kvq", str(CHART), "-f", values_file(tmp_path, values))
    assert result.returncode != 0
    assert message in result.stderr, result.stderr


def test_the_same_secret_for_two_clusters_is_one_variable(tmp_path) -> None:
    """Two clusters may share a variable when it comes from the same place: the enforcer gets it
    once."""
    shared = password("KVQ_PASSWORD", "kvq")
    values = {"clusters": [cluster("east", env=shared), cluster("west", env=shared)]}
    docs = [
        d
        for d in yaml.safe_load_all(
            kubernetes_manifests.helm_template("-f", values_file(tmp_path, values))
        )
        if d
    ]
    (enforcer,) = [w for w in workloads(docs) if command_of(w) == "kvq-enforcer"]
    assert enforcer["spec"]["template"]["spec"]["containers"][0]["env"] == shared


def test_the_install_page_values_render_and_validate(tmp_path) -> None:
    values = tmp_path / "my-values.yaml"
    values.write_text(block("docs/install-kubernetes.md", "# my-values.yaml").text)
    text = kubernetes_manifests.helm_template("-f", str(values))
    assert kubeconform.kubeconform(text) == []
    docs = [d for d in yaml.safe_load_all(text) if d]
    assert sorted(d["metadata"]["name"] for d in docs if d["kind"] == "Deployment") == [
        "kvq-enforcer",
        "kvq-exporter-kafka",
    ]
    assert one(docs, "PrometheusRule")["metadata"]["labels"]["release"] == "kube-prometheus-stack"


def test_the_install_page_kustomize_overlay_renders_and_validates(tmp_path) -> None:
    """The install page's overlay, next to a checkout, with its own kvq.properties: both components
    run the named image and read that file, every object carries the monitoring label."""
    (tmp_path / "kafka-volume-quotas").symlink_to(ROOT)
    overlay = tmp_path / "my-kvq"
    overlay.mkdir()
    overlay.joinpath("kustomization.yaml").write_text(
        block("docs/install-kubernetes.md", "# my-kvq/kustomization.yaml").text
    )
    properties = (
        f"{BOOTSTRAP}=kafka-0.example:9093\nkvq.cluster.name=mine\n"
        "kvq.enforcer.state.store=kafka\n"  # the page says the base's two replicas need it
    )
    overlay.joinpath("kvq.properties").write_text(properties)
    text = kustomize_text(overlay)
    assert kubeconform.kubeconform(text) == []
    docs = [d for d in yaml.safe_load_all(text) if d]
    assert sorted(command_of(w) for w in workloads(docs)) == ["kvq-enforcer", "kvq-exporter"]
    for workload in workloads(docs):
        assert workload["spec"]["template"]["spec"]["containers"][0]["image"] == (
            "registry.example.com/kafka-volume-quotas:0.1.0"
        )
        ((text_read, _),) = config_files(docs, workload)
        assert text_read == properties
    assert all(d["metadata"]["labels"]["release"] == "kube-prometheus-stack" for d in docs)


STRIMZI_PRINCIPALS = [
    "User:CN=my-cluster-kafka,O=io.strimzi",
    "User:CN=my-cluster-cruise-control,O=io.strimzi",
    "User:CN=my-cluster-entity-topic-operator,O=io.strimzi",
    "User:CN=my-cluster-entity-user-operator,O=io.strimzi",
    "User:CN=my-cluster-kafka-exporter,O=io.strimzi",
    "User:CN=cluster-operator,O=io.strimzi",
]
"""docs/strimzi.md's internal principals of a Strimzi cluster named my-cluster."""


def test_a_strimzi_cluster_s_internal_principals_are_excluded(tmp_path) -> None:
    """`strimzi: {cluster: my-cluster}` adds Strimzi's own principals to the cluster's exclusions,
    after the ones given (every app's file, as kvq reads them); a cluster without it keeps its
    own list; the page that explains them names each."""

    def with_bootstrap(entry: dict, **properties: str) -> dict:
        entry["properties"] = {BOOTSTRAP: "kafka-bootstrap:9093", **properties}
        return entry

    excluded_key = "client.quota.callback.static.excluded.principal.name.list"
    mine = with_bootstrap(
        cluster("kafka", strimzi={"cluster": "my-cluster"}), **{excluded_key: "User:ops"}
    )
    values = {"clusters": [mine, with_bootstrap(cluster("plain"))]}
    text = kubernetes_manifests.helm_template("-f", values_file(tmp_path, values))
    assert kubeconform.kubeconform(text) == []
    docs = [d for d in yaml.safe_load_all(text) if d]
    excluded: dict[str, set[tuple[str, ...]]] = {}
    for workload in workloads(docs):
        for _, properties in config_files(docs, workload):
            config = build_config(properties, environ={})
            principals = tuple(config.excluded_principals)
            excluded.setdefault(properties["kvq.cluster.name"], set()).add(principals)
    assert excluded["kafka"] == {("User:ops", *STRIMZI_PRINCIPALS)}
    assert excluded["plain"] == {("User:admin",)}
    strimzi_page = (ROOT / "docs" / "strimzi.md").read_text()
    for principal in STRIMZI_PRINCIPALS:
        assert principal.removeprefix("User:") in strimzi_page


def test_the_install_page_upgrade_steps_name_what_the_chart_renders(tmp_path) -> None:
    """The install page's upgrade to two replicas, with its values: the StatefulSet scaled down,
    the pod waited for and the claim deleted are the old enforcer's (enforcer.state.store
    local); its `helm upgrade` renders the import Job on that claim whose log the steps read,
    and the Deployment they wait for."""
    steps = command_lines(block("docs/install-kubernetes.md", "enforcer.state.importFrom="))
    values = tmp_path / "my-values.yaml"
    values.write_text(block("docs/install-kubernetes.md", "# my-values.yaml").text)
    (upgrade,) = [shlex.split(s) for s in steps if s.startswith(".venv/bin/helm upgrade")]
    release, chart, *args = upgrade[2:]
    assert args[args.index("-f") + 1] == "my-values.yaml"
    namespace = args[args.index("-n") + 1]
    (import_from,) = [args[i + 1] for i, arg in enumerate(args) if arg == "--set"]

    def render_with(setting: str) -> list[dict]:
        text = kubernetes_manifests.helm_template(
            "-f", str(values), "--set", setting, release=release, namespace=namespace,
            chart=ROOT / chart,
        )  # fmt: skip
        assert kubeconform.kubeconform(text) == []
        return documents(text)

    old, new = render_with("enforcer.state.store=local"), render_with(import_from)
    statefulset = one(old, "StatefulSet")
    name = statefulset["metadata"]["name"]
    (claim,) = statefulset["spec"]["volumeClaimTemplates"]
    old_claim = f"{claim['metadata']['name']}-{name}-0"  # how a StatefulSet names its claim
    job = one(new, "Job")
    volumes = job["spec"]["template"]["spec"]["volumes"]
    assert {"claimName": old_claim} in [v.get("persistentVolumeClaim") for v in volumes]
    deployment = one(new, "Deployment", name)["metadata"]["name"]
    assert [s for s in steps if s.startswith("kubectl")] == [
        f"kubectl -n {namespace} scale statefulset {name} --replicas=0",
        f"kubectl -n {namespace} wait --for=delete pod/{name}-0 --timeout=120s",
        f"kubectl -n {namespace} logs job/{job['metadata']['name']}",
        f"kubectl -n {namespace} rollout status deploy/{deployment}",
        f"kubectl -n {namespace} delete pvc {old_claim}",
    ]

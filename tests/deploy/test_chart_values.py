"""deploy/helm/kafka-volume-quotas: the values a platform team expects of a chart and what a user
sees of each in the manifests: a schema that refuses unknown keys at every level, each app with its
own Kafka credentials, the `strimzi` block that mounts Strimzi's Secrets as they come, pod
annotations and labels, extra arguments, the ServiceAccount, topology spread, the ServiceMonitors'
relabelings and TLS, and `--web.config.file` (served and probed for real)."""

from __future__ import annotations

import base64
import json
import re
import subprocess
import sys
from pathlib import Path

import bcrypt
import pytest
import yaml

from devkit import kubeconform, kubernetes_manifests
from devkit.processes import managed, server_port, wait_until
from tests.deploy.rendering import (
    CHART,
    CLIS,
    KUSTOMIZATIONS,
    ROOT,
    THREE_CLUSTERS,
    arguments,
    command_of,
    config_files,
    documents,
    kustomize_text,
    mounted_file,
    mounted_files,
    one,
    render,
    workloads,
)
from tests.docs.blocks import block

ADMIN = "client.quota.callback.static.kafka.admin."
EXCLUDED = "client.quota.callback.static.excluded.principal.name.list"
SCHEMA = json.loads((CHART / "values.schema.json").read_text())


def helm(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [kubernetes_manifests.helm_binary(), *args], capture_output=True, text=True, timeout=120
    )


def rendered(tmp_path, values: dict, namespace: str = "kvq") -> list[dict]:
    """The chart with these values, checked by kubeconform (unknown fields rejected)."""
    path = tmp_path / "values.yaml"
    path.write_text(yaml.safe_dump(values))
    text = kubernetes_manifests.helm_template("-f", str(path), namespace=namespace)
    assert kubeconform.kubeconform(text) == []
    return documents(text)


def app(docs: list[dict], command: str, name: str | None = None) -> dict:
    (found,) = [
        w for w in workloads(docs) if command_of(w) == command and name in (None, w_name(w))
    ]
    return found


def w_name(workload: dict) -> str:
    return workload["metadata"]["name"]


def container(workload: dict) -> dict:
    return workload["spec"]["template"]["spec"]["containers"][0]


def properties_of(docs: list[dict], workload: dict, cluster: str) -> dict[str, str]:
    (found,) = [p for _, p in config_files(docs, workload) if p["kvq.cluster.name"] == cluster]
    return found


def env_source(workload: dict, variable: str) -> str:
    """'Secret/name/key' the container's variable comes from."""
    (ref,) = [
        e["valueFrom"]["secretKeyRef"] for e in container(workload)["env"] if e["name"] == variable
    ]
    return f"Secret/{ref['name']}/{ref['key']}"


def secrets_of(workload: dict) -> set[str]:
    """Every Secret the pod reads (volumes and environment)."""
    pod = workload["spec"]["template"]["spec"]
    env = container(workload).get("env", [])
    names = {e["valueFrom"]["secretKeyRef"]["name"] for e in env if "valueFrom" in e}
    for volume in pod["volumes"]:
        sources = volume["projected"]["sources"] if "projected" in volume else [volume]
        for source in sources:
            if "secret" in source:
                names.add(source["secret"].get("secretName") or source["secret"]["name"])
    return names


# --- the schema -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "where", "key"),
    [
        (("--set", "exporter.replica=1"), "/exporter", "replica"),
        (("--set", "serviceMonitor.exporter.intervall=5s"), "/serviceMonitor/exporter",
         "intervall"),
        (("--set", "serviceAcount.create=false"), "", "serviceAcount"),
        (("--set", "clusters[0].strimzi.cluster=c", "--set", "clusters[0].strimzi.user=u"),
         "/clusters/0/strimzi", "user"),
        (("--set", "clusters[0].enforcer.propertie.x=y"), "/clusters/0/enforcer", "propertie"),
        (("--set", "enforcer.webConfig.secret=s"), "/enforcer/webConfig", "secret"),
    ],
    ids=["top-level", "nested", "root", "strimzi", "cluster-app", "web-config"],
)  # fmt: skip
@pytest.mark.parametrize("command", ["template", "lint"])
def test_a_misspelt_key_is_refused_naming_it_and_where(command, args, where, key) -> None:
    """`exporter.replica=1` would otherwise render two replicas without a word."""
    result = helm(command, *(["kvq"] if command == "template" else []), str(CHART), *args)
    assert result.returncode != 0
    output = result.stdout + result.stderr
    assert f"at '{where}': additional properties '{key}' not allowed" in output, output


def open_objects(schema: dict, path: str = "") -> list[str]:
    """Where the schema takes an object of any keys (no `properties`, no closed map of values);
    fails on an object that lists its keys and still takes others."""
    found = []
    if schema.get("type") == "object":
        if "properties" in schema:
            assert schema.get("additionalProperties") is False, f"{path or '/'} is not closed"
        elif "additionalProperties" not in schema:
            found.append(path)
    for key, child in schema.get("properties", {}).items():
        found += open_objects(child, f"{path}/{key}")
    if isinstance(schema.get("items"), dict):
        found += open_objects(schema["items"], f"{path}[]")
    return found


KUBERNETES_OBJECTS = {
    "global", "podSecurityContext", "securityContext", "affinity", "resources", "tlsConfig",
    "basicAuth", "imagePullSecrets[]", "env[]", "volumes[]", "volumeMounts[]", "tolerations[]",
    "topologySpreadConstraints[]", "probeHttpHeaders[]", "relabelings[]", "metricRelabelings[]",
    "from[]",
}  # fmt: skip
"""The values passed verbatim into Kubernetes' or the Prometheus Operator's objects (kubeconform
checks them in the render), and Helm's `global`."""


def test_every_object_with_fixed_keys_refuses_others() -> None:
    """Every object of the values that lists its keys refuses any other; only Kubernetes' and
    the Prometheus Operator's own objects stay open."""
    assert {path.rsplit("/", 1)[-1] for path in open_objects(SCHEMA)} == KUBERNETES_OBJECTS


def documented_keys(text: str) -> set[str]:
    """Every key values.yaml names, set or in its comments (`  key:` at any depth)."""
    return set(re.findall(r"^[#\s]*([A-Za-z][\w.-]*):", text, re.M))


def test_every_value_of_the_schema_is_documented_in_values_yaml() -> None:
    def keys(schema: dict) -> set[str]:
        found = set(schema.get("properties", {}))
        for child in schema.get("properties", {}).values():
            found |= keys(child)
        if isinstance(schema.get("items"), dict):
            found |= keys(schema["items"])
        return found

    documented = documented_keys((CHART / "values.yaml").read_text())
    assert keys(SCHEMA) - {"global"} - documented == set()


# --- each app its own credentials --------------------------------------------------------------


PASSWORD = {"name": "kvq-enforcer", "key": "password"}
RATIO = "client.quota.callback.static.storage.per.volume.limit.min.available.ratio"


def test_each_app_gets_its_own_block_over_the_shared_keys(tmp_path) -> None:
    """A cluster's shared properties, env, volumes and mounts go to both apps; its `exporter:` and
    `enforcer:` blocks only to that app, an entry of the same name (a mount of the same path)
    replacing the shared one; the exporter's pods hold no Secret of the enforcer's."""
    shared = {
        "properties": {ADMIN + "bootstrap.servers": "k:9093", ADMIN + "security.protocol": "SSL"},
        "env": [{"name": "KVQ_REGION", "value": "eu"}, {"name": "KVQ_USER", "value": "shared"}],
        "volumes": [{"name": "ca", "secret": {"secretName": "kafka-ca"}}],
        "volumeMounts": [{"name": "ca", "mountPath": "/etc/kvq/ca", "readOnly": True}],
    }
    exporter = {
        "properties": {ADMIN + "client.id": "kvq-exporter"},
        "env": [{"name": "KVQ_USER", "value": "kvq-exporter"}],
    }
    enforcer = {
        "properties": {ADMIN + "security.protocol": "SASL_SSL"},
        "env": [{"name": "KVQ_PASSWORD", "valueFrom": {"secretKeyRef": PASSWORD}}],
        "volumes": [{"name": "ca", "secret": {"secretName": "enforcer-ca"}}],
        "volumeMounts": [{"name": "ca", "mountPath": "/etc/kvq/ca", "readOnly": False}],
    }  # fmt: skip
    values = {"clusters": [{"name": "east", **shared, "exporter": exporter, "enforcer": enforcer}]}
    docs = rendered(tmp_path, values)
    exporter_pod, enforcer_pod = app(docs, "kvq-exporter"), app(docs, "kvq-enforcer")
    exported = properties_of(docs, exporter_pod, "east")
    enforced = properties_of(docs, enforcer_pod, "east")
    assert exported[ADMIN + "security.protocol"] == "SSL"
    assert exported[ADMIN + "client.id"] == "kvq-exporter"
    assert enforced[ADMIN + "security.protocol"] == "SASL_SSL"
    assert ADMIN + "client.id" not in enforced
    assert exported[ADMIN + "bootstrap.servers"] == enforced[ADMIN + "bootstrap.servers"]
    assert container(exporter_pod)["env"] == [
        {"name": "KVQ_REGION", "value": "eu"},
        {"name": "KVQ_USER", "value": "kvq-exporter"},
    ]
    assert [e["name"] for e in container(enforcer_pod)["env"]] == [
        "KVQ_REGION",
        "KVQ_USER",
        "KVQ_PASSWORD",
    ]
    assert mounted_file(exporter_pod, "/etc/kvq/ca/ca.crt") == "Secret/kafka-ca/ca.crt"
    assert mounted_file(enforcer_pod, "/etc/kvq/ca/ca.crt") == "Secret/enforcer-ca/ca.crt"
    (mount,) = [m for m in container(enforcer_pod)["volumeMounts"] if m["name"] == "ca"]
    assert mount["readOnly"] is False
    assert "kvq-enforcer" in secrets_of(enforcer_pod)
    assert "kvq-enforcer" not in secrets_of(exporter_pod)


# --- the strimzi block -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def strimzi() -> list[dict]:
    return render("helm-strimzi")


@pytest.mark.parametrize("command", sorted(CLIS))
def test_the_strimzi_block_mounts_each_app_its_own_kafka_user(strimzi, command) -> None:
    """ci/strimzi-values.yaml: cluster `main` with mTLS, `logs` with SCRAM-SHA-512 in another
    namespace. Each app reads the Secret of its own KafkaUser, as the User Operator writes it
    (user.crt, user.key; password), and the cluster CA's ca.crt; the exporter's pods hold nothing
    of the enforcer's user."""
    role = command.removeprefix("kvq-")
    for workload in [w for w in workloads(strimzi) if command_of(w) == command]:
        files = {p["kvq.cluster.name"]: p for _, p in config_files(strimzi, workload)}
        if "main" in files:
            main = files["main"]
            assert main[ADMIN + "bootstrap.servers"] == "my-cluster-kafka-bootstrap:9093"
            assert main[ADMIN + "security.protocol"] == "SSL"
            for key, secret_key in [
                ("ssl.ca.location", "my-cluster-cluster-ca-cert/ca.crt"),
                ("ssl.certificate.location", f"kvq-{role}/user.crt"),
                ("ssl.key.location", f"kvq-{role}/user.key"),
            ]:
                assert mounted_file(workload, main[ADMIN + key]) == f"Secret/{secret_key}"
            assert "User:CN=my-cluster-cruise-control,O=io.strimzi" in main[EXCLUDED]
        if "logs" in files:
            logs = files["logs"]
            assert logs[ADMIN + "bootstrap.servers"] == "logs-kafka-bootstrap.kafka-logs.svc:9094"
            assert logs[ADMIN + "security.protocol"] == "SASL_SSL"
            assert logs[ADMIN + "sasl.mechanism"] == "SCRAM-SHA-512"
            jaas = logs[ADMIN + "sasl.jaas.config"]
            user, variable = re.search(
                r'username="([^"]+)" password="\$\{env:(\w+)\}"', jaas
            ).groups()
            assert user == f"kvq-logs-{role}"
            assert env_source(workload, variable) == f"Secret/kvq-logs-{role}/password"
            ca = mounted_file(workload, logs[ADMIN + "ssl.ca.location"])
            assert ca == "Secret/logs-cluster-ca-cert/ca.crt"
            assert logs[RATIO] == "0.1"  # the cluster's own properties win
        other = "enforcer" if role == "exporter" else "exporter"
        assert not {s for s in secrets_of(workload) if s.endswith(f"-{other}")}


def test_the_strimzi_block_writes_what_the_default_values_write_out(tmp_path) -> None:
    """values.yaml's cluster is Strimzi's way written out by hand: the block with the same names
    renders the same pods and files (plus Strimzi's principals excluded)."""
    strimzi_block = {
        "cluster": "my-cluster",
        "namespace": "kafka",
        "authentication": "scram-sha-512",
    }
    short = rendered(tmp_path, {"clusters": [{"name": "kafka", "strimzi": strimzi_block}]})
    default = documents(kubernetes_manifests.helm_template(namespace="kvq"))
    for command in CLIS:
        ours, theirs = app(short, command), app(default, command)
        ours_spec, theirs_spec = (
            ours["spec"]["template"]["spec"],
            theirs["spec"]["template"]["spec"],
        )
        assert container(ours)["env"] == container(theirs)["env"]
        assert container(ours)["volumeMounts"] == container(theirs)["volumeMounts"]
        assert ours_spec["volumes"] == theirs_spec["volumes"]
        ((_, mine),) = config_files(short, ours)
        ((_, written),) = config_files(default, theirs)
        assert mine.pop(EXCLUDED).startswith(written.pop(EXCLUDED) + ";User:CN=my-cluster-kafka")
        assert mine == written


def test_the_strimzi_page_s_chart_values_are_the_overlay_s(tmp_path) -> None:
    """docs/strimzi.md's `strimzi` block gives each app the Kafka connection the Strimzi overlay
    gives it: the same kafka.admin.* properties, each file named from the same Secret key."""
    values = yaml.safe_load(block("docs/strimzi.md", "# my-values.yaml").text)
    chart = rendered(tmp_path, values, namespace="kafka")
    overlay = documents(kustomize_text(KUSTOMIZATIONS["kustomize-strimzi"]))
    for command in CLIS:
        ((_, ours),) = config_files(chart, app(chart, command))
        ((_, theirs),) = config_files(overlay, app(overlay, command))
        admin = {k: v for k, v in ours.items() if k.startswith(ADMIN)}
        assert admin == {k: v for k, v in theirs.items() if k.startswith(ADMIN)}
        for key, path in admin.items():
            if key.endswith(".location"):
                in_chart = mounted_file(app(chart, command), path)
                assert in_chart == mounted_file(app(overlay, command), path), key
    users = [d for d in overlay if d["kind"] == "KafkaUser"]
    assert sorted(u["metadata"]["name"] for u in users) == ["kvq-enforcer", "kvq-exporter"]


def test_a_strimzi_block_names_its_cluster(tmp_path) -> None:
    path = tmp_path / "values.yaml"
    path.write_text(
        yaml.safe_dump({"clusters": [{"name": "k", "strimzi": {"authentication": "tls"}}]})
    )
    result = helm("template", "kvq", str(CHART), "-f", str(path))
    assert result.returncode != 0
    assert "at '/clusters/0/strimzi': missing property 'cluster'" in result.stderr, result.stderr


# --- pods, ServiceAccount, scraping ------------------------------------------------------------


def test_pod_annotations_labels_and_extra_args_reach_the_pods(strimzi) -> None:
    """Global and per-component annotations and labels merged (the chart's selector labels and
    checksum kept), extra arguments after the chart's (test_kubernetes.py parses them with the
    app's own parser)."""
    for workload in workloads(strimzi):
        template = workload["spec"]["template"]
        annotations = template["metadata"]["annotations"]
        assert re.fullmatch(r"[0-9a-f]{64}", template["metadata"]["annotations"]["checksum/config"])
        labels = template["metadata"]["labels"]
        assert workload["spec"]["selector"]["matchLabels"].items() <= labels.items()
        assert labels["example.com/system"] == "kafka"
        args = container(workload)["args"]
        if command_of(workload) == "kvq-exporter":
            assert labels["example.com/tier"] == "monitoring"
            assert annotations["example.com/team"] == "platform"
            assert args[-2:] == ["--log.format", "json"]
        else:
            assert "example.com/tier" not in labels
            assert annotations["example.com/team"] == "quotas"
            assert args[-2:] == ["--log.level", "debug"]


def test_both_apps_run_as_the_release_s_service_account_without_a_token(tmp_path, strimzi) -> None:
    account = one(strimzi, "ServiceAccount")
    assert account["metadata"]["name"] == "kvq"
    assert account["automountServiceAccountToken"] is False
    assert account["metadata"]["annotations"] == {"example.com/owner": "platform-team"}
    for workload in workloads(strimzi):
        pod = workload["spec"]["template"]["spec"]
        assert (pod["serviceAccountName"], pod["automountServiceAccountToken"]) == ("kvq", False)
    existing = rendered(
        tmp_path,
        {"serviceAccount": {"create": False, "name": "ops", "automountServiceAccountToken": True}},
    )
    assert not [d for d in existing if d["kind"] == "ServiceAccount"]
    for workload in workloads(existing):
        pod = workload["spec"]["template"]["spec"]
        assert (pod["serviceAccountName"], pod["automountServiceAccountToken"]) == ("ops", True)


def test_kvq_never_calls_the_kubernetes_api() -> None:
    """What makes an unmounted token safe: no shipped package talks to the API server."""
    shipped = ["kvq", "exporter", "enforcer", "spark", "devcluster"]
    pattern = r"import kubernetes|from kubernetes|KUBERNETES_SERVICE|serviceaccount/token"
    found = subprocess.run(
        ["grep", "-rlE", pattern, *shipped], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert found.stdout == ""


def test_exporter_replicas_spread_across_nodes(tmp_path) -> None:
    """By default every workload's pods spread by node, selected by their own labels (so one
    cluster's exporters spread apart); a component's own list replaces the global one."""
    default = documents(kubernetes_manifests.helm_template())
    for workload in workloads(default):
        (constraint,) = workload["spec"]["template"]["spec"]["topologySpreadConstraints"]
        assert constraint["topologyKey"] == "kubernetes.io/hostname"
        assert constraint["whenUnsatisfiable"] == "ScheduleAnyway"
        selector = workload["spec"]["selector"]["matchLabels"]
        assert constraint["labelSelector"] == {"matchLabels": selector}
    zone = {"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone"}
    zone["whenUnsatisfiable"] = "DoNotSchedule"
    docs = rendered(tmp_path, {"exporter": {"topologySpreadConstraints": [zone]}})
    (constraint,) = app(docs, "kvq-exporter")["spec"]["template"]["spec"][
        "topologySpreadConstraints"
    ]
    assert constraint["topologyKey"] == "topology.kubernetes.io/zone"
    (kept,) = app(docs, "kvq-enforcer")["spec"]["template"]["spec"]["topologySpreadConstraints"]
    assert kept["topologyKey"] == "kubernetes.io/hostname"


def test_service_monitors_scrape_over_tls_with_basic_auth_and_relabel(strimzi) -> None:
    monitors = {
        m["metadata"]["name"]: m["spec"]["endpoints"]
        for m in strimzi
        if m["kind"] == "ServiceMonitor"
    }
    (exporter,) = monitors["kvq-exporter"]
    (enforcer,) = monitors["kvq-enforcer"]
    for endpoint, server in ((exporter, "kvq-exporter"), (enforcer, "kvq-enforcer")):
        assert endpoint["scheme"] == "https"
        assert endpoint["tlsConfig"] == {
            "ca": {"secret": {"name": "kvq-web-tls", "key": "ca.crt"}},
            "serverName": server,
        }
        assert endpoint["basicAuth"]["password"] == {"name": "kvq-scrape", "key": "password"}
    assert (exporter["scrapeTimeout"], enforcer["scrapeTimeout"]) == ("1s", "10s")
    assert exporter["metricRelabelings"][0]["action"] == "drop"
    assert exporter["relabelings"] == [{"targetLabel": "team", "replacement": "platform"}]
    assert "relabelings" not in enforcer
    (receiver,) = one(strimzi, "AlertmanagerConfig")["spec"]["receivers"]
    (webhook,) = receiver["webhookConfigs"]
    assert webhook["url"] == "https://kvq-enforcer.kafka.svc:9899/webhook"
    assert webhook["httpConfig"]["tlsConfig"]["ca"]["secret"]["name"] == "kvq-web-tls"
    plain = render("helm-one-cluster")
    schemes = {m["spec"]["endpoints"][0]["scheme"] for m in plain if m["kind"] == "ServiceMonitor"}
    assert schemes == {"http"}


# --- --web.config.file, served for real --------------------------------------------------------


def pem_pair(where: Path) -> tuple[bytes, bytes]:
    """A self-signed certificate for localhost and its key, as cert-manager's Secret holds them."""
    cert, key = where / "cert.pem", where / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1"]
        + ["-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"]
        + ["-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    return cert.read_bytes(), key.read_bytes()


def lay_out(workload: dict, secrets: dict[str, dict[str, bytes]], root: Path) -> dict[str, Path]:
    """The files the pod's web-config volume holds, written under `root` as Kubernetes mounts
    them: mount path -> file."""
    placed = {}
    for path, ref in mounted_files(workload).items():
        _, name, key = ref.split("/")
        if name not in secrets:
            continue
        keys = secrets[name] if key == "*" else {key: secrets[name][key]}
        for file_name, content in keys.items():
            target = root / (path.removesuffix("*") + file_name if key == "*" else path).lstrip("/")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(content)
            placed[str(target.relative_to(root))] = target
    return placed


def https_get(url: str, headers: list[dict], ca: Path) -> int:
    import ssl
    import urllib.error
    import urllib.request

    request = urllib.request.Request(url, headers={h["name"]: h["value"] for h in headers})
    context = ssl.create_default_context(cafile=str(ca))
    try:
        with urllib.request.urlopen(request, timeout=5, context=context) as response:
            return response.status
    except urllib.error.HTTPError as error:
        return error.code
    except (urllib.error.URLError, OSError):
        return 0


@pytest.mark.integration
def test_the_web_config_secret_serves_tls_and_basic_auth_and_the_probes_pass(
    strimzi, devcluster, tmp_path
) -> None:
    """The exporter as ci/strimzi-values.yaml runs it: its web config Secret and cert-manager's
    TLS Secret mounted side by side, the file naming tls.crt and tls.key by relative path. The
    kubelet's probes (HTTPS, their Authorization header) get 200, a scrape without credentials
    401, the ServiceMonitor's user 200."""
    cluster = devcluster(brokers=1)
    cert, key = pem_pair(tmp_path)
    users = {"probe": b"probe", "prometheus": b"s3cret"}
    hashed = {user: bcrypt.hashpw(word, bcrypt.gensalt(4)).decode() for user, word in users.items()}
    web_config = {
        "tls_server_config": {"cert_file": "tls.crt", "key_file": "tls.key"},
        "basic_auth_users": hashed,
    }
    secrets = {
        "kvq-web-config": {"web-config.yml": yaml.safe_dump(web_config).encode()},
        "kvq-web-tls": {"tls.crt": cert, "tls.key": key, "ca.crt": cert},
    }
    (exporter,) = [w for w in workloads(strimzi) if w_name(w) == "kvq-exporter-main"]
    root = tmp_path / "pod"
    lay_out(exporter, secrets, root)
    main = tmp_path / "exporter.properties"
    main.write_text(
        f"{ADMIN}bootstrap.servers={cluster.bootstrap}\nkvq.cluster.name=main\n"
        "client.quota.callback.static.storage.per.volume.limit.min.available.ratio=0.01\n"
    )
    spec = container(exporter)
    args = list(spec["args"])
    (web_file,) = arguments(spec, "--web.config.file")
    args[args.index(web_file)] = str(root / web_file.lstrip("/"))
    args[args.index("--config") + 1] = str(main)
    port = server_port()
    args[args.index("--web.listen-address") + 1] = f"127.0.0.1:{port}"
    argv = [sys.executable, "-m", CLIS["kvq-exporter"], *args]
    with managed(argv, tmp_path / "exporter.log", cwd=ROOT) as process:
        for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
            get = spec[probe]["httpGet"]
            assert get["scheme"] == "HTTPS"
            url = f"https://localhost:{port}{get['path']}"
            wait_until(
                lambda url=url, get=get: (
                    https_get(url, get["httpHeaders"], tmp_path / "cert.pem") == 200
                ),
                30,
                what=f"{probe} {get['path']}",
            )
        metrics = f"https://localhost:{port}/metrics"
        assert https_get(metrics, [], tmp_path / "cert.pem") == 401
        basic = base64.b64encode(b"prometheus:s3cret").decode()
        authorization = [{"name": "Authorization", "value": f"Basic {basic}"}]
        assert https_get(metrics, authorization, tmp_path / "cert.pem") == 200
        assert process.running


def test_the_web_config_file_is_mounted_where_the_flag_names_it(strimzi) -> None:
    for workload in workloads(strimzi):
        (path,) = arguments(container(workload), "--web.config.file")
        assert mounted_file(workload, path) == "Secret/kvq-web-config/web-config.yml"
        directory = path.rsplit("/", 1)[0]
        assert mounted_file(workload, f"{directory}/tls.crt") == "Secret/kvq-web-tls/tls.crt"
    for workload in workloads(render("helm-one-cluster")):
        assert "--web.config.file" not in container(workload)["args"]
        assert "scheme" not in container(workload)["readinessProbe"]["httpGet"]


def test_a_changed_property_rolls_the_pods_under_helm(tmp_path) -> None:
    """Each pod template carries a checksum of the files its app reads: a property of one app's
    block changes that app's pods only, a shared one both."""

    def checksums(values: dict) -> dict[str, str]:
        docs = rendered(tmp_path, values)
        return {
            command_of(w): w["spec"]["template"]["metadata"]["annotations"]["checksum/config"]
            for w in workloads(docs)
        }

    default = yaml.safe_load((CHART / "values.yaml").read_text())["clusters"]
    before = checksums({})
    assert checksums({"clusters": default}) == before
    default[0]["enforcer"]["properties"][ADMIN + "client.id"] = "kvq-enforcer"
    own = checksums({"clusters": default})
    assert own["kvq-exporter"] == before["kvq-exporter"]
    assert own["kvq-enforcer"] != before["kvq-enforcer"]
    default[0]["properties"][ADMIN + "client.id"] = "kvq"
    shared = checksums({"clusters": default})
    assert shared["kvq-exporter"] != before["kvq-exporter"]


# --- the enforcer's state ----------------------------------------------------------------------


def enforcer_budget(docs: list[dict], workload: dict) -> dict:
    labels = workload["spec"]["template"]["metadata"]["labels"]
    (budget,) = [
        d
        for d in docs
        if d["kind"] == "PodDisruptionBudget"
        and d["spec"]["selector"]["matchLabels"].items() <= labels.items()
    ]
    return budget["spec"]


def test_the_local_store_is_one_replica_with_its_journal_on_a_volume(tmp_path) -> None:
    """enforcer.state.store local keeps the enforcer of before: one replica of a StatefulSet,
    its journal on a PersistentVolumeClaim, a budget that makes a drain wait for a person; the
    state values reach every enforcer file (and only those)."""
    docs = rendered(
        tmp_path, {"enforcer": {"state": {"store": "local", "topic": "t", "group": "g"}}}
    )
    enforcer = app(docs, "kvq-enforcer")
    assert (enforcer["kind"], enforcer["spec"]["replicas"]) == ("StatefulSet", 1)
    (claim,) = enforcer["spec"]["volumeClaimTemplates"]
    assert claim["spec"]["accessModes"] == ["ReadWriteOnce"]
    assert claim["spec"]["resources"]["requests"]["storage"] == "1Gi"
    (journal,) = arguments(container(enforcer), "--journal")
    assert arguments(container(enforcer), "--state-store") == ["local"]
    (mount,) = [m for m in container(enforcer)["volumeMounts"] if m["name"] == "journal"]
    assert journal.startswith(mount["mountPath"] + "/")
    assert not [
        v for v in enforcer["spec"]["template"]["spec"]["volumes"] if v["name"] == "journal"
    ]
    assert {k: v for k, v in enforcer_budget(docs, enforcer).items() if k != "selector"} == {
        "minAvailable": 1
    }
    ((_, properties),) = config_files(docs, enforcer)
    state = {k: v for k, v in properties.items() if k.startswith("kvq.enforcer.state.")}
    assert state == {
        "kvq.enforcer.state.store": "local",
        "kvq.enforcer.state.topic": "t",
        "kvq.enforcer.state.group": "g",
    }
    ((_, exported),) = config_files(docs, app(docs, "kvq-exporter"))
    assert not [k for k in exported if k.startswith("kvq.enforcer.state.")]
    assert not [d for d in docs if d["kind"] == "Job"]


def hook(doc: dict) -> tuple[str, int]:
    annotations = doc["metadata"]["annotations"]
    return annotations["helm.sh/hook"], int(annotations["helm.sh/hook-weight"])


def test_the_upgrade_job_imports_the_old_journal_before_the_replicas_start(tmp_path) -> None:
    """enforcer.state.importFrom: a pre-upgrade Job (Helm runs it, and waits for it, before it
    changes anything else) runs `kvq-enforcer --import-journal` on the old journal's claim with
    the files, credentials and token the new replicas get, from a ConfigMap of its own made just
    before it (the release's is updated after the hook); the replicas never mount the claim.
    tests/system/test_enforcer_acls.py runs the Job's command on real Kafka."""
    from enforcer.cli import build_parser

    values = yaml.safe_load(THREE_CLUSTERS.read_text())
    values.setdefault("enforcer", {})["state"] = {"importFrom": "journal-kvq-enforcer-0"}
    docs = rendered(tmp_path, values)
    (job,) = [d for d in docs if d["kind"] == "Job"]
    (config_map,) = [
        d
        for d in docs
        if d["kind"] == "ConfigMap" and "helm.sh/hook" in d["metadata"].get("annotations", {})
    ]
    assert hook(config_map) == ("pre-upgrade", -1) and hook(job) == ("pre-upgrade", 0)
    pod = job["spec"]["template"]["spec"]
    assert pod["restartPolicy"] == "Never"
    args = build_parser().parse_args(container(job)["args"])  # exits on an unknown flag
    volumes = {v["name"]: v for v in pod["volumes"]}
    (mount,) = [
        m
        for m in container(job)["volumeMounts"]
        if args.import_journal.startswith(m["mountPath"] + "/")
    ]
    assert volumes[mount["name"]]["persistentVolumeClaim"] == {
        "claimName": "journal-kvq-enforcer-0"
    }
    enforcer = app(docs, "kvq-enforcer")
    assert args.import_journal == arguments(container(enforcer), "--journal")[0]
    assert config_files(docs, job) == config_files(docs, enforcer)
    assert container(job)["env"] == container(enforcer)["env"]
    for _, properties in config_files(docs, job):
        token = properties["kvq.enforcer.auth.bearer.token.file"]
        assert mounted_file(job, token) == mounted_file(enforcer, token)
    assert "persistentVolumeClaim" not in str(enforcer)
    refused = helm("template", "kvq", str(CHART), "--set", "enforcer.state.store=local",
                   "--set", "enforcer.state.importFrom=journal-kvq-enforcer-0")  # fmt: skip
    assert refused.returncode != 0
    assert (
        'enforcer.state.importFrom "journal-kvq-enforcer-0" copies a journal into Kafka: it '
        "needs enforcer.state.store kafka (it is local)" in refused.stderr
    ), refused.stderr

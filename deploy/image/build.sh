#!/usr/bin/env bash
# `make image` / `make image-backfill`: build a target of the Containerfile with buildah on a
# Python base made from Debian packages (no image registry is needed), labelled with the version,
# the git revision (`-dirty` when the work tree has changes; `unknown` outside git) and the build
# time, then check the built image:
#   both      its org.opencontainers.image.* labels; its SBOM lists exactly the lock file's packages
#             (and kafka-volume-quotas); build_info's revision is the label's
#   kvq       kvq-exporter --version, and one kvq-exporter --once against a devcluster
#   backfill  kvq-backfill --version, and one backfill (Spark in the image's Java) of a generated
#             archive, ending in a complete OpenMetrics file
# Commands run as the image's user (uid 10001). podman cannot run containers on every machine, so
# the check runs the image's files with `buildah mount` + chroot, sharing the host's network (the
# devcluster listens on 127.0.0.1).
# Usage: deploy/image/build.sh [kvq|backfill]  (as root; installs buildah and debootstrap if missing)
set -euo pipefail
cd "$(dirname "$0")/../.."
target=${1:-kvq}
version=$(sed -n 's/^version = "\(.*\)"/\1/p' pyproject.toml)
case "$target" in
  kvq) tag=localhost/kafka-volume-quotas:$version; lock=requirements.lock ;;
  backfill) tag=localhost/kafka-volume-quotas-backfill:$version; lock=requirements-spark.lock ;;
  *) echo "usage: $0 [kvq|backfill]" >&2; exit 2 ;;
esac
revision=$(git rev-parse HEAD 2>/dev/null || echo unknown)
if [ "$revision" != unknown ] && [ -n "$(git status --porcelain 2>/dev/null)" ]; then
  revision=$revision-dirty
fi
created=$(date -u +%Y-%m-%dT%H:%M:%SZ)
base=localhost/kvq-debian-python:bookworm
venv_python=${VENV_PYTHON:-.venv/bin/python}
started=$(date +%s)

if ! command -v buildah >/dev/null || ! command -v debootstrap >/dev/null; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq buildah debootstrap >/dev/null
fi
deploy/image/debian-base.sh "$base"
# RUN steps use the host's network, and its CA bundle and pip.conf when present (a TLS-inspecting
# proxy's CA lives there); chroot isolation needs no OCI runtime.
host_files=()
for f in /etc/ssl/certs/ca-certificates.crt /etc/pip.conf; do
  [ -f "$f" ] && host_files+=(--volume "$f:$f:ro")
done
echo "== building $tag (target $target) from Containerfile on $base"
buildah build --quiet --layers --isolation chroot --network host "${host_files[@]}" \
  --build-arg PYTHON_IMAGE="$base" --build-arg VERSION="$version" --build-arg REVISION="$revision" \
  --label org.opencontainers.image.created="$created" \
  --target "$target" -t "$tag" -f Containerfile . >/dev/null
# buildah 1.28 (Debian 12's) reuses a cached LABEL or ENV layer although the build argument in it
# changed: a second build at a new commit kept the first one's revision. This build's labels and
# KVQ_REVISION are set on the built image itself (a new config, no layer rebuilt).
ctr=$(buildah from --pull-never "$tag")
buildah config --label org.opencontainers.image.version="$version" \
  --label org.opencontainers.image.revision="$revision" \
  --label org.opencontainers.image.created="$created" --env KVQ_REVISION="$revision" "$ctr"
buildah commit --quiet "$ctr" "$tag" >/dev/null
buildah rm "$ctr" >/dev/null
echo "   built in $(( $(date +%s) - started )) s"

work=$(mktemp -d)
ctr=$(buildah from --pull-never "$tag")
root=$(buildah mount "$ctr")
devcluster_pid=""
cleanup() {
  [ -n "$devcluster_pid" ] && kill "$devcluster_pid" 2>/dev/null && wait "$devcluster_pid" 2>/dev/null
  umount "$root/proc" "$root/dev" "$root/etc/hosts" 2>/dev/null || true
  buildah umount "$ctr" >/dev/null 2>&1 || true
  buildah rm "$ctr" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
mount -t proc proc "$root/proc"
mount --bind /dev "$root/dev"
touch "$root/etc/hosts"  # a container runtime provides /etc/hosts (localhost); so does this check
mount --bind /etc/hosts "$root/etc/hosts"
# The image's ENV (PATH, KVQ_LISTEN_HOST, KVQ_CACHE_DIR, ...): none of its values has a space.
image_env=$(buildah inspect --type image --format '{{range .OCIv1.Config.Env}}{{.}} {{end}}' "$tag")
in_image() {  # run a command of the image as its user (uid 10001), with the image's environment
  # shellcheck disable=SC2086  # one word per variable
  chroot --userspec=10001:10001 "$root" /usr/bin/env -i HOME=/tmp SPARK_LOCAL_IP=127.0.0.1 \
    $image_env "$@"
}
mkdir -p "$root/tmp/kvq"
chown 10001:10001 "$root/tmp/kvq"
echo "== image user: $(in_image /usr/bin/id -u):$(in_image /usr/bin/id -g)"

check_exporter() {
  echo "== kvq-exporter --version"
  in_image kvq-exporter --version
  "$venv_python" -m devcluster.cli --brokers 3 --data-dir "$work/kafka" --base-port 0 \
    --control-port 0 >"$work/devcluster.out" 2>"$work/devcluster.err" &
  devcluster_pid=$!
  for _ in $(seq 100); do grep -q '^ready' "$work/devcluster.out" && break; sleep 0.1; done
  bootstrap=$(sed -n 's/^bootstrap=//p' "$work/devcluster.out")
  [ -n "$bootstrap" ] || { echo "devcluster did not start"; cat "$work/devcluster.err"; exit 1; }
  cat >"$root/tmp/kvq/kvq.properties" <<PROPERTIES
client.quota.callback.static.kafka.admin.bootstrap.servers=$bootstrap
client.quota.callback.static.storage.per.volume.limit.min.available.ratio=0.01
kvq.cluster.name=image-check
PROPERTIES
  echo "== kvq-exporter --once against devcluster $bootstrap"
  in_image kvq-exporter --config /tmp/kvq/kvq.properties --check-config \
    | grep -E 'kvq.exporter.listen|storage.check.interval'
  in_image kvq-exporter --config /tmp/kvq/kvq.properties --once >"$work/once.json"
  python3 - "$work/once.json" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
obs = doc["observation"]
print(f"   outcome {obs['outcome']}, brokers {obs['active_brokers']}, "
      f"{len(obs['log_dirs'])} log dirs, throttle factor {doc['status']['throttle_factor']}")
assert obs["outcome"] == "success", obs
PY
}

check_backfill() {
  echo "== kvq-backfill --version; java"
  in_image kvq-backfill --version
  in_image java -version 2>&1 | head -1
  "$venv_python" -m devkit.archive_generator --out "$root/tmp/kvq/archive" --hours 1 \
    --config "$root/tmp/kvq/kvq.properties" >/dev/null
  chown -R 10001:10001 "$root/tmp/kvq"
  echo "== kvq-backfill of a generated 1-hour archive (3 brokers x 2 log dirs, 30 s polls)"
  in_image kvq-backfill --archive /tmp/kvq/archive --config /tmp/kvq/kvq.properties \
    --output /tmp/kvq/out 2>"$work/backfill.err" | tail -1 \
    || { tail -20 "$work/backfill.err"; exit 1; }
  tail -1 "$root/tmp/kvq/out/kafka.om" | grep -qx '# EOF' \
    || { echo "no complete OpenMetrics file"; exit 1; }
  echo "   $(grep -c '^kafka_volume_quota_throttle_factor' "$root/tmp/kvq/out/kafka.om")" \
    "throttle factor samples in out/kafka.om, ends with # EOF"
  # The image's class archive (written at build time) is mapped, never written again per run.
  if grep -q "saving Spark's classes\|no class archive\|damaged class archive" "$work/backfill.err"
  then echo "the image's Spark class archive was not used:"; cat "$work/backfill.err"; exit 1; fi
  echo "   Spark started from the image's class archive ($(in_image sh -c 'cd "$KVQ_CACHE_DIR" && ls -- *.jsa'))"
  echo "== kvq-backfill --blocks of the same archive: each task writes its blocks with kvq-tsdb-blocks"
  in_image kvq-backfill --archive /tmp/kvq/archive --config /tmp/kvq/kvq.properties \
    --output /tmp/kvq/blocks-out --blocks 2>"$work/blocks.err" | tail -1 \
    || { tail -20 "$work/blocks.err"; exit 1; }
  grep -q "kvq-tsdb-blocks in each task" "$work/blocks.err" \
    || { echo "the tasks did not run the image's kvq-tsdb-blocks:"; cat "$work/blocks.err"; exit 1; }
  blocks=$(find "$root/tmp/kvq/blocks-out/blocks" -name meta.json | wc -l)
  [ "$blocks" -gt 0 ] || { echo "no block in out/blocks"; exit 1; }
  echo "   $blocks block(s) in blocks-out/blocks"
}

check_provenance() {
  echo "== labels, SBOM, build_info revision"
  buildah inspect --type image "$tag" >"$work/image.json"
  python3 - "$work/image.json" "$version" "$revision" "$created" <<'PY'
import json, sys
labels = json.load(open(sys.argv[1]))["OCIv1"]["config"]["Labels"]
oci = {k.removeprefix("org.opencontainers.image."): v for k, v in labels.items()
       if k.startswith("org.opencontainers.image.")}
expected = dict(zip(("version", "revision", "created"), sys.argv[2:]), licenses="Apache-2.0")
assert expected.items() <= oci.items() and oci["source"].startswith("https://"), oci
print("   " + ", ".join(f"{k}={v}" for k, v in sorted(oci.items()) if k != "description"))
PY
  python3 - "$root/opt/kvq/share/kafka-volume-quotas/sbom.cdx.json" "$lock" <<'PY'
import json, re, sys
bom = json.load(open(sys.argv[1]))
found = {re.sub(r"[-_.]+", "-", c["name"]).lower(): c["version"] for c in bom["components"]}
locked = dict(re.findall(r"^([a-z0-9][a-z0-9._-]*)==(\S+)", open(sys.argv[2]).read(), re.M))
missing = {name: v for name, v in locked.items() if found.get(name) != v}
extra = set(found) - set(locked) - {"pip", "setuptools"}  # these two come with the venv
assert not missing and not extra and bom["metadata"]["component"]["name"] == "kafka-volume-quotas", (missing, extra)
print(f"   SBOM (CycloneDX {bom['specVersion']}): {len(found)} components, every package of "
      f"{sys.argv[2]} at its locked version")
PY
  in_image python -c 'import kvq; print(kvq.revision())' | grep -qx "$revision" \
    || { echo "KVQ_REVISION in the image is not $revision"; exit 1; }
}

check_provenance
if [ "$target" = kvq ]; then check_exporter; else check_backfill; fi
echo "== image $tag OK ($(( $(date +%s) - started )) s)"

#!/usr/bin/env bash
# Build a "slim Python" base image from Debian packages alone (no image registry needed):
# debootstrap Debian 12 (python3 3.11, venv) into a buildah scratch container and commit it.
# Usage: deploy/image/debian-base.sh [IMAGE]   (default localhost/kvq-debian-python:bookworm)
# Runs as root; needs buildah and debootstrap (apt-get install -y buildah debootstrap).
set -euo pipefail
image=${1:-localhost/kvq-debian-python:bookworm}
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
if buildah inspect --type image "$image" >/dev/null 2>&1; then
  echo "base image $image exists (buildah rmi $image to rebuild it)"
  exit 0
fi
ctr=$(buildah from scratch)
trap 'buildah rm "$ctr" >/dev/null 2>&1 || true' EXIT
root=$(buildah mount "$ctr")
debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates \
  bookworm "$root" "$mirror" >/dev/null
chroot "$root" apt-get clean
rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin
buildah umount "$ctr" >/dev/null
buildah config --env PYTHONDONTWRITEBYTECODE=1 --env LANG=C.UTF-8 --cmd /bin/bash "$ctr"
buildah commit --quiet "$ctr" "$image" >/dev/null
echo "base image $image built"

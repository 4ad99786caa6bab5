#!/bin/sh
# Write the CycloneDX SBOM (JSON, CycloneDX 1.6) of a Python environment: every distribution the
# interpreter PYTHON sees, with its version, licence and package URL, under the root component
# kafka-volume-quotas (from pyproject.toml). Reproducible: no timestamp, no random serial number,
# so two builds of one commit write the same file.
# Usage: deploy/image/sbom.sh PYTHON OUTPUT   (CYCLONEDX_PY: the tool, default the build's venv)
# The Containerfile runs it at build time for /opt/kvq; tests/deploy/test_image.py runs it too.
set -eu
[ $# -eq 2 ] || { echo "usage: $0 PYTHON OUTPUT" >&2; exit 2; }
cyclonedx_py=${CYCLONEDX_PY:-/opt/sbom-tool/bin/cyclonedx-py}
pyproject="$(dirname "$0")/../../pyproject.toml"
mkdir -p "$(dirname "$2")"
"$cyclonedx_py" environment --pyproject "$pyproject" --mc-type application --spec-version 1.6 \
  --output-reproducible --output-format JSON --output-file "$2.tmp" "$1"
mv "$2.tmp" "$2"

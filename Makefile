# Two commands a newcomer types: `make demo` and `make test`. Everything else is set up from here.
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
PYTEST_ARGS ?=
# Two pytest workers, each taking one test file at a time; PYTEST_WORKERS= runs in one process.
PYTEST_WORKERS ?= -n 2 --dist loadfile

.PHONY: test demo bench docs config-reference lint system-deps kafka-deps venv venv-py313 tools clean image image-backfill manifests lock

venv: $(STAMP)

# uv installs the venvs (in parallel, no byte-compiling: a fresh clone's sooner than with pip).
UV_VERSION := 0.13.8
UV := $(VENV)/bin/uv

UV_STAMP := $(VENV)/.uv-$(UV_VERSION)

$(UV_STAMP):
	@test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q uv==$(UV_VERSION)
	@touch $@

# pyspark is published as a source distribution only (~460 MB: Spark's jars). uv built it anew on
# every install from a fresh clone and kept each build (~2 GB of cache a venv: the index's answers
# are not cacheable, so every download is a new revision). Its wheel is built once per version into
# KVQ_WHEELS instead, and installs take it from there (~2 s instead of ~30 s).
KVQ_WHEELS ?= $(HOME)/.cache/kvq/wheels
define install_into
	@mkdir -p $(KVQ_WHEELS)
	$(UV) pip install -q --python $(1) --find-links $(KVQ_WHEELS) -e '.[test]'
	@v=$$($(1) -c 'from importlib.metadata import version; print(version("pyspark"))') && \
	if ! ls $(KVQ_WHEELS)/pyspark-$$v-*.whl >/dev/null 2>&1; then \
	  echo "building pyspark $$v's wheel once into $(KVQ_WHEELS)"; \
	  build=$$(mktemp -d $(KVQ_WHEELS)/.build-XXXXXX) && \
	  $(1) -m pip wheel -q --no-deps --no-cache-dir -w $$build "pyspark==$$v" && \
	  mv $$build/pyspark-$$v-*.whl $(KVQ_WHEELS)/; built=$$?; rm -rf $$build; \
	  [ $$built = 0 ] && $(UV) cache clean -q pyspark; \
	fi
endef

$(STAMP): pyproject.toml | $(UV_STAMP)
	$(call install_into,$(PY))
	@touch $@

# The newest Python kvq supports runs a unit pass in `make test`, from a venv of its own built from
# the same pyproject.toml: the first python3.13 that runs, on PATH (a pyenv shim runs only when
# pyenv selects 3.13), else pyenv's newest 3.13 (Debian bookworm has no python3.13 package).
PYTHON313 ?= $(shell for candidate in $$(command -v python3.13) \
  $$(ls -d $${PYENV_ROOT:-$$HOME/.pyenv}/versions/3.13*/bin/python3.13 2>/dev/null | sort -rV); do \
  "$$candidate" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 13))' 2>/dev/null \
  && { echo "$$candidate"; break; }; done)
VENV313 ?= .venv-py313
STAMP313 := $(VENV313)/.installed-stamp

venv-py313: $(STAMP313)

$(STAMP313): pyproject.toml | $(UV_STAMP)
	@if [ -z "$(PYTHON313)" ] || ! "$(PYTHON313)" -c 'import sys; assert sys.version_info[:2] == (3, 13)' \
	  2>/dev/null; then \
	  echo "make test: no Python 3.13 found (python3.13 on PATH, or pyenv: 'pyenv install 3.13');" \
	    "name one with PYTHON313=/path/to/python3.13" >&2; exit 1; fi
	@test -x $(VENV313)/bin/python || $(PYTHON313) -m venv $(VENV313)
	$(call install_into,$(VENV313)/bin/python)
	@touch $@

# Debian's Prometheus/promtool/Alertmanager, a Java runtime (PySpark, Kafka) and Maven (Kafka's jars),
# installed only when missing.
system-deps:
	@missing=""; \
	command -v prometheus >/dev/null || missing="$$missing prometheus"; \
	command -v promtool >/dev/null || missing="$$missing prometheus"; \
	command -v prometheus-alertmanager >/dev/null || missing="$$missing prometheus-alertmanager"; \
	command -v java >/dev/null || missing="$$missing default-jre-headless"; \
	command -v mvn >/dev/null || missing="$$missing maven"; \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages:$$missing"; \
	  $(SUDO) apt-get update -qq && \
	  $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $$missing; \
	fi

# Apache Kafka (the oldest and the newest version kvq supports, 4.1.2 and 4.4.0) and the Strimzi
# quota plugin (devkit/kafka/pom.xml) from Maven Central into ~/.cache/kvq/kafka (or
# $KVQ_KAFKA_CACHE): ~10 s each the first time, nothing once cached. KVQ_KAFKA_VERSION picks the
# one tests, demo and bench start (default 4.1.2).
kafka-deps: system-deps venv
	@$(PY) -m devkit.kafka_dist --all >/dev/null

# helm and kubeconform are Go modules: built from the Go module proxy into the venv's bin (only when
# that version is missing there), and the Prometheus Operator's CRDs taken from its Go module, for
# the chart's tests (tests/deploy). Needs Go (`go version`); the first build takes minutes.
GO ?= $(shell command -v go || echo /usr/local/go/bin/go)
HELM_VERSION := v3.22.0
KUBECONFORM_VERSION := v0.8.0
PROMETHEUS_OPERATOR_VERSION := v0.85.0
TOOLS_BIN := $(abspath $(VENV))/bin
CRDS := $(VENV)/share/prometheus-operator-crds

tools: $(VENV)/.helm-$(HELM_VERSION) $(VENV)/.kubeconform-$(KUBECONFORM_VERSION) $(CRDS)/.$(PROMETHEUS_OPERATOR_VERSION) \
  $(TOOLS_BIN)/kvq-tsdb-blocks

# `kvq-backfill --blocks`'s block writer (tools/tsdb-blocks: the Prometheus TSDB's block writer, its
# version pinned in go.mod/go.sum), built into the venv's bin where the backfill finds it.
$(TOOLS_BIN)/kvq-tsdb-blocks: tools/tsdb-blocks/main.go tools/tsdb-blocks/go.mod tools/tsdb-blocks/go.sum | $(STAMP)
	cd tools/tsdb-blocks && $(GO) build -trimpath -o $@ .

# Each tool is built once per version into TOOLS_CACHE (in kvq's cache directory, as Kafka's jars)
# and copied into the venv: a fresh venv (a fresh clone's `make test`) takes the copy instead of
# linking helm again (seconds of CPU).
TOOLS_CACHE ?= $(or $(KVQ_CACHE_DIR),$(if $(XDG_CACHE_HOME),$(XDG_CACHE_HOME)/kvq),$(HOME)/.cache/kvq)/tools
# $(call go_tool,<binary>,<Go package>,<version>)
define go_tool
@built=$(TOOLS_CACHE)/$(1)-$(3); \
if [ ! -x $$built/$(1) ]; then \
  echo "GOBIN=$$built $(GO) install $(2)@$(3)" && \
  rm -rf $$built.tmp-$$$$ && GOBIN=$$built.tmp-$$$$ $(GO) install $(2)@$(3) && \
  { mv -T $$built.tmp-$$$$ $$built 2>/dev/null || rm -rf $$built.tmp-$$$$; }; \
fi && cp $$built/$(1) $(TOOLS_BIN)/$(1)
@touch $@
endef

$(VENV)/.helm-$(HELM_VERSION): | $(STAMP)
	$(call go_tool,helm,helm.sh/helm/v3/cmd/helm,$(HELM_VERSION))

$(VENV)/.kubeconform-$(KUBECONFORM_VERSION): | $(STAMP)
	$(call go_tool,kubeconform,github.com/yannh/kubeconform/cmd/kubeconform,$(KUBECONFORM_VERSION))

$(CRDS)/.$(PROMETHEUS_OPERATOR_VERSION): | $(STAMP)
	@dir=$$($(GO) mod download -json github.com/prometheus-operator/prometheus-operator@$(PROMETHEUS_OPERATOR_VERSION) \
	  | $(PY) -c 'import json, sys; print(json.load(sys.stdin)["Dir"])') && \
	rm -rf $(CRDS) && mkdir -p $(CRDS) && \
	cp "$$dir"/example/prometheus-operator-crd/*.yaml $(CRDS)/ && chmod u+w $(CRDS)/*.yaml && \
	echo "prometheus-operator $(PROMETHEUS_OPERATOR_VERSION) CRDs in $(CRDS)"
	@touch $@

# The folders mypy keeps clean.
MYPY_PATHS := kvq exporter spark enforcer bench devkit demo devcluster

lint: venv
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy $(MYPY_PATHS)

# Three lanes at once. The two workers take the suite's modules (Kafka 4.1.2, Python 3.11), longest
# first. Beside them, two more take the `paced` modules (waiting at a set pace, little CPU: a
# core left idle while they run on a worker; one process alone took 21 minutes, past the suite's
# 19), then one the differential tests (devcluster against real Kafka) and the brokers' quota log
# line on the newest Kafka. And niced (10, not 19: beside
# four busy processes the enforcer's 1.3 s start took 31 s at 10, over 99 s at 19), the
# unit tests (no Kafka, no Spark, nothing paced: the OAUTHBEARER module starts a Kafka cluster)
# on Python 3.13, but the slowdown study's replays of recorded Kafka runs (minutes of the model's
# arithmetic, run on 3.11). The lanes' output is shown when the suite has ended; with PYTEST_ARGS
# (a narrowed run) the paced modules stay in the suite and the newest Kafka follows. The run ends
# with each lane's exit code and every lane's FAILED and ERROR lines, so that the last lines of a
# red run name what failed.
NEWEST_KAFKA := $(shell sed -n 's:.*<kafka.newest.version>\(.*\)</kafka.newest.version>.*:\1:p' devkit/kafka/pom.xml)
NEWEST_KAFKA_TESTS ?= tests/differential \
  tests/devkit/test_kafka_cluster.py::test_every_broker_logs_the_produce_quota_it_applies
UNIT_TESTS ?= tests/kvq tests/enforcer tests/exporter tests/devcluster -m "not integration and not e2e and not paced" \
  --ignore=tests/exporter/test_integration.py --ignore=tests/kvq/model/test_slowdown_study.py

test: system-deps venv kafka-deps tools venv-py313
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy $(MYPY_PATHS)
	@logs=$$(mktemp -d); trap 'rm -rf "$$logs"' EXIT; \
	nice -n 10 $(VENV313)/bin/python -m pytest -p no:cacheprovider $(UNIT_TESTS) >"$$logs/unit" 2>&1 & \
	unit=$$!; \
	newest() { KVQ_KAFKA_VERSION=$(NEWEST_KAFKA) $(PY) -m pytest -p no:cacheprovider "$$@" $(NEWEST_KAFKA_TESTS); }; \
	if [ -z "$(strip $(PYTEST_ARGS))" ]; then \
	  { $(PY) -m pytest -p no:cacheprovider $(PYTEST_WORKERS) -m paced && newest -p no:xdist; } \
	    >"$$logs/paced" 2>&1 & \
	  paced=$$!; \
	  { $(PY) -m pytest $(PYTEST_WORKERS) -m 'not paced'; echo $$? >"$$logs/suite.rc"; } \
	    | tee "$$logs/suite"; \
	  suite=$$(cat "$$logs/suite.rc"); wait $$paced; lane=$$?; \
	  echo "== paced modules, then the newest Kafka (run alongside):"; cat "$$logs/paced"; \
	else \
	  { $(PY) -m pytest $(PYTEST_WORKERS) $(PYTEST_ARGS) && newest $(PYTEST_WORKERS); \
	    echo $$? >"$$logs/suite.rc"; } | tee "$$logs/suite"; \
	  suite=$$(cat "$$logs/suite.rc"); lane=0; touch "$$logs/paced"; \
	fi; \
	wait $$unit; unit_rc=$$?; \
	echo "== Python 3.13 unit tests (run alongside):"; cat "$$logs/unit"; \
	echo "== exit codes: suite $$suite, paced and newest Kafka $$lane, Python 3.13 $$unit_rc"; \
	grep -h -E '^(FAILED|ERROR) ' "$$logs/suite" "$$logs/paced" "$$logs/unit" || true; \
	exit $$(( suite != 0 ? suite : lane != 0 ? lane : unit_rc ))

demo: system-deps venv kafka-deps
	$(PY) -m demo $(if $(KEEP),--keep,) $(if $(SCENARIO),--scenario $(SCENARIO),) $(if $(KAFKA),--kafka $(KAFKA),)

# The documentation site (docs/, Sphinx + MyST) into build/docs: every warning an error, so a broken
# link or anchor fails (tests/docs/test_site.py runs the same build in `make test`).
docs: venv
	$(PY) -m sphinx -W --keep-going -n -E -q -b html docs build/docs
	@echo "the site: build/docs/index.html"

# The configuration reference (docs/configuration-reference.md), written from the settings' own
# declarations: run it after changing a setting (tests/docs/test_config_reference.py checks it is current).
config-reference: venv
	$(PY) -m devkit.config_reference

bench: system-deps venv $(TOOLS_BIN)/kvq-tsdb-blocks
	$(PY) -m bench

# The container image (Containerfile) built with buildah on a base made from Debian packages, then
# checked: its kvq-exporter --version and one --once against a devcluster. Root; takes minutes.
image: venv
	$(SUDO) deploy/image/build.sh kvq

# The backfill target (Java 17 + PySpark, ~1 GB), checked with one kvq-backfill of a generated archive.
image-backfill: venv
	$(SUDO) deploy/image/build.sh backfill

# The lock files the image installs from (pip install --require-hashes, so two builds of one commit
# hold the same packages): uv resolves pyproject.toml's dependencies (with the spark extra for the
# backfill target) for Python 3.11+ on every platform, with the hashes of every file. A pin already
# in a lock file is kept while it satisfies pyproject.toml; `make lock UV_ARGS=--upgrade` takes the
# newest versions. tests/deploy/test_image.py checks the files against pyproject.toml.
UV_COMPILE = $(UV) pip compile --quiet --universal --python-version 3.11 --generate-hashes \
  --custom-compile-command 'make lock' $(UV_ARGS)
lock: venv
	$(UV_COMPILE) pyproject.toml -o requirements.lock
	$(UV_COMPILE) pyproject.toml --extra spark --constraint requirements.lock -o requirements-spark.lock
	$(UV_COMPILE) deploy/image/sbom-tool.in -o deploy/image/sbom-tool.lock

# The chart's copies of rules/ and grafana/dashboards/, and deploy/kubernetes/base/generated/ rendered
# from the chart with `helm template` (a test checks they are current).
manifests: venv tools
	$(PY) -m devkit.kubernetes_manifests

clean:
	rm -rf $(VENV) $(VENV313) .pytest_cache build *.egg-info

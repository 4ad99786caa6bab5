"""Apache Kafka's jars (and the Strimzi quota plugin) from Maven Central, cached outside the repo.

`devkit/kafka/pom.xml` pins the versions; Maven resolves them (through `~/.m2`, Maven's own cache)
and copies every runtime jar into `<cache>/kafka-<version>-<pom hash>/lib`. The copy is made in a
temporary directory beside it and renamed into place when complete, so an interrupted fetch leaves
nothing that looks finished; a changed pom gets a new directory. Once cached, a fetch is a stat.

The suite runs the oldest and the newest Kafka kvq supports (KAFKA_VERSIONS, both in the pom):
`KVQ_KAFKA_VERSION` picks the one brokers start from (default: the pom's `kafka.version`, the
oldest); Maven is asked for it with `-Dkafka.version`.

    python -m devkit.kafka_dist             # the selected version: prints its directory
    python -m devkit.kafka_dist --all       # what `make kafka-deps` runs: every version
    python -m devkit.kafka_dist 4.3.0       # any version Maven Central serves
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass
from pathlib import Path

from devkit.kafka_class_archive import KafkaClassArchive
from spark.class_archive import cache_dir, java_binary

POM = Path(__file__).parent / "kafka" / "pom.xml"
LOG4J2_CONFIG = Path(__file__).parent / "kafka" / "log4j2.properties"
PRODUCER_LOG4J2_CONFIG = Path(__file__).parent / "kafka" / "log4j2-producer.properties"
REQUEST_LOG4J2_CONFIG = Path(__file__).parent / "kafka" / "log4j2-requests.properties"
"""Added to LOG4J2_CONFIG by KafkaCluster(request_log=True): every request to requests.log."""
"""devkit/java_producer.py's: warnings, and each throttle time a broker returned to the client."""
VERSION_ENV = "KVQ_KAFKA_VERSION"
"""The Kafka version brokers start from (tests, demo, bench); default KAFKA_VERSION."""
CACHE_ENV = "KVQ_KAFKA_CACHE"
"""Where distributions are cached; default `<kvq cache>/kafka`. The test run keeps it pointed at
the user's cache while it moves the rest of kvq's cache to a temp dir (tests/conftest.py)."""
MAVEN_SECONDS = 900
_POM_NS = {"m": "http://maven.apache.org/POM/4.0.0"}
_TEMP_MARK = ".partial-"


class KafkaDistError(RuntimeError):
    """Kafka's jars could not be fetched; the message says why in one line."""


@dataclass(frozen=True)
class KafkaDist:
    """A complete, cached set of Kafka's runtime jars."""

    home: Path

    @property
    def lib(self) -> Path:
        return self.home / "lib"

    @property
    def version(self) -> str:
        """The Kafka version of these jars (the broker jar's name says it)."""
        jars = sorted(self.lib.glob("kafka_2.13-*.jar"))
        if not jars:
            raise KafkaDistError(f"{self.lib} has no kafka_2.13-<version>.jar")
        return jars[0].name.removeprefix("kafka_2.13-").removesuffix(".jar")

    @property
    def jmx_agent(self) -> Path:
        """The Prometheus JMX exporter's Java agent (kept out of `lib`: not on the classpath)."""
        return self.home / "agents" / f"jmx_prometheus_javaagent-{JMX_EXPORTER_VERSION}.jar"

    def class_archive(self, java: Path) -> KafkaClassArchive:
        """The archive of these jars' classes for `java` (devkit.kafka_class_archive)."""
        return KafkaClassArchive.of(self.home, java)

    @property
    def classpath(self) -> str:
        """Every jar in `lib` (the JVM expands `dir/*`)."""
        return f"{self.lib}/*"

    def java_argv(
        self,
        main_class: str,
        args: list[str],
        logs_dir: Path,
        jvm_options: list[str],
        log_config: Path | str = LOG4J2_CONFIG,
        class_archive: bool = True,
    ) -> list[str]:
        """A `java` command line as Kafka's scripts build it: our log4j2 config (several files
        comma-separated make one composite configuration), the logs dir; the class archive
        mapped once written (unless `class_archive` is False or `jvm_options` write it)."""
        java = java_binary()
        if java is None:
            raise KafkaDistError("no java found (JAVA_HOME or PATH): apt-get install default-jre")
        writes = any(o.startswith("-XX:ArchiveClassesAtExit=") for o in jvm_options)
        maps = class_archive and not writes
        return [
            str(java),
            *(self.class_archive(java).mapping() if maps else []),
            *jvm_options,
            "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={log_config}",
            f"-Dkafka.logs.dir={logs_dir}",
            "-cp",
            self.classpath,
            main_class,
            *args,
        ]


def pom_property(name: str, pom: Path = POM) -> str:
    """A `<properties>` value of the pom (the one place versions are written)."""
    value = ElementTree.parse(pom).getroot().findtext(f"m:properties/m:{name}", None, _POM_NS)
    if not value:
        raise KafkaDistError(f"{pom}: no <{name}> property")
    return value


KAFKA_VERSION = pom_property("kafka.version")
"""The oldest Kafka kvq supports and the default: what Strimzi's operators run today (4.1.x)."""
NEWEST_KAFKA_VERSION = pom_property("kafka.newest.version")
KAFKA_VERSIONS = (KAFKA_VERSION, NEWEST_KAFKA_VERSION)
"""What `make test` runs: everything on the oldest, a differential set on the newest."""
_VERSION_FORMAT = re.compile(r"[0-9]+\.[0-9]+\.[0-9]+")
QUOTAS_PLUGIN_VERSION = pom_property("quotas.plugin.version")
JMX_EXPORTER_VERSION = pom_property("jmx.exporter.version")


def version_tuple(version: str) -> tuple[int, ...]:
    """`4.4.0` -> (4, 4, 0), for comparing with the version where Kafka changed something."""
    return tuple(int(part) for part in checked_version(version).split("."))


def checked_version(version: str) -> str:
    """`version` when it is a Kafka release number (major.minor.patch); else KafkaDistError."""
    if not _VERSION_FORMAT.fullmatch(version):
        raise KafkaDistError(
            f"Kafka version {version!r} is not a release number such as {KAFKA_VERSION} "
            f"(tested: {', '.join(KAFKA_VERSIONS)})"
        )
    return version


def selected_version() -> str:
    """`$KVQ_KAFKA_VERSION`, else KAFKA_VERSION."""
    return checked_version(os.environ.get(VERSION_ENV) or KAFKA_VERSION)


def dist_cache_root() -> Path:
    """`$KVQ_KAFKA_CACHE`, else `kafka/` in kvq's cache directory."""
    configured = os.environ.get(CACHE_ENV)
    return Path(configured) if configured else cache_dir() / "kafka"


def dist_dir(root: Path | None = None, pom: Path = POM, version: str | None = None) -> Path:
    """The distribution's directory for this pom and version (default: the pom's): a changed pom
    never reuses an old copy."""
    digest = hashlib.sha256(pom.read_bytes()).hexdigest()[:12]
    version = version or pom_property("kafka.version", pom)
    return (root or dist_cache_root()) / f"kafka-{version}-{digest}"


def is_complete(home: Path, version: str = KAFKA_VERSION) -> bool:
    return (home / "lib" / f"kafka_2.13-{version}.jar").is_file() and KafkaDist(
        home
    ).jmx_agent.is_file()


def fetch(
    root: Path | None = None, mvn: str = "mvn", pom: Path = POM, version: str | None = None
) -> KafkaDist:
    """The cached distribution of `version` (default: `selected_version()` with the default pom,
    else that pom's), fetched with Maven first if it is not there yet."""
    if version is None:
        version = selected_version() if pom == POM else pom_property("kafka.version", pom)
    version = checked_version(version)
    home = dist_dir(root, pom, version)
    if is_complete(home, version):
        return KafkaDist(home)
    home.parent.mkdir(parents=True, exist_ok=True)
    _remove_abandoned(home)
    partial = home.with_name(f"{home.name}{_TEMP_MARK}{os.getpid()}")
    try:
        _copy_dependencies(mvn, pom, partial / "lib", version)
        _copy_dependencies(mvn, pom, partial / "agents", version, scope="provided")
        try:
            partial.rename(home)
        except OSError:
            if not is_complete(home, version):  # another fetch won the race: use its copy
                raise
    finally:
        shutil.rmtree(partial, ignore_errors=True)
    if not is_complete(home, version):
        raise KafkaDistError(f"Maven finished but {home}/lib has no kafka_2.13-{version}.jar")
    return KafkaDist(home)


def _copy_dependencies(
    mvn: str, pom: Path, target: Path, version: str, scope: str = "runtime"
) -> None:
    """The pom's dependencies of `scope` (Maven's includeScope: runtime is compile + runtime,
    provided only the provided ones) into `target`."""
    executable = shutil.which(mvn)
    if executable is None:
        raise KafkaDistError(f"Maven ({mvn}) is not installed: apt-get install maven")
    argv = [
        executable,
        "-B",
        "-q",
        "-f",
        str(pom),
        "dependency:copy-dependencies",
        f"-Dkafka.version={version}",
        f"-DincludeScope={scope}",
        f"-DoutputDirectory={target}",
    ]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=MAVEN_SECONDS)
    except subprocess.TimeoutExpired:
        raise KafkaDistError(
            f"Maven did not finish fetching Kafka {version} in {MAVEN_SECONDS} s"
        ) from None
    if done.returncode != 0:
        raise KafkaDistError(
            f"Maven could not fetch Kafka {version} (exit {done.returncode}): "
            f"{_maven_reason(done.stdout + done.stderr)}"
        )


def _maven_reason(output: str) -> str:
    """Maven's first error line, without its colour codes and log prefix."""
    plain = re.sub(r"\x1b\[[0-9;]*m", "", output)
    for line in plain.splitlines():
        if line.startswith("[ERROR]") and line[7:].strip():
            return line[7:].split(" -> [Help")[0].strip()
    tail = [line for line in plain.splitlines() if line.strip()]
    return tail[-1].strip() if tail else "no output"


def _remove_abandoned(home: Path) -> None:
    """Partial copies left by fetches that were killed (their process is gone)."""
    for partial in home.parent.glob(f"{home.name}{_TEMP_MARK}*"):
        pid = partial.name.rsplit("-", 1)[-1]
        if pid.isdigit() and not _alive(int(pid)):
            shutil.rmtree(partial, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m devkit.kafka_dist",
        description="Fetch Apache Kafka's jars (and the Strimzi quota plugin) from Maven Central "
        "into kvq's cache, and print each distribution's directory.",
    )
    parser.add_argument(
        "versions",
        nargs="*",
        metavar="VERSION",
        help=f"Kafka versions to fetch (default: ${VERSION_ENV}, else {KAFKA_VERSION})",
    )
    parser.add_argument(
        "--all",
        action="store_true",
        help=f"every version the test suite runs: {', '.join(KAFKA_VERSIONS)}",
    )
    args = parser.parse_args(argv)
    versions = list(KAFKA_VERSIONS) if args.all else args.versions
    try:
        for version in versions or [selected_version()]:
            print(fetch(version=version).home)
    except KafkaDistError as exc:
        print(f"kafka-deps: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

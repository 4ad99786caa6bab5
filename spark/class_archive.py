"""Spark's classes in a class-data-sharing archive: a local run's JVM starts much sooner.

A local PySpark session spends most of its start loading and verifying ~20,000 classes from
Spark's jars. The JVM can write the classes it loaded to an archive when it exits
(`-XX:ArchiveClassesAtExit`) and map that archive on the next start (`-XX:SharedArchiveFile`).
The first local `kvq-backfill` writes it under the user's cache directory; later ones start from
it. The archive is keyed on the pyspark version, the `java` binary and Spark's jars (their folder
and when it last changed): the JVM silently ignores an archive written for another class path, so
two installations (two virtualenvs) sharing the cache each need their own.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import logging
import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

QUIET = "-Xlog:cds*=off"
"""The JVM warns for each class it cannot archive (hundreds of lines): nothing a user can act on."""
STALE_SECONDS = 24 * 3600
"""A temp archive this old belongs to no running JVM."""
KEPT_ARCHIVES = 3
"""Archives kept in the cache, the most recently used: each installation (a virtualenv, a fresh
clone's) writes one of ~170 MB, which a removed installation would otherwise leave there."""
NO_CRASH_FILES = ("-XX:ErrorFile=/dev/null", "-XX:-CreateCoredumpOnCrash")
"""A JVM that crashes on a damaged archive leaves no hs_err_pid*.log or core in the cwd."""


def cache_dir() -> Path:
    """`$KVQ_CACHE_DIR`, else `$XDG_CACHE_HOME/kvq`, else `~/.cache/kvq` (XDG base directories)."""
    if os.environ.get("KVQ_CACHE_DIR"):
        return Path(os.environ["KVQ_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "kvq"


def java_binary() -> Path | None:
    """The `java` spark-submit runs: `$JAVA_HOME/bin/java`, else the one on PATH."""
    home = os.environ.get("JAVA_HOME")
    found = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    return Path(found).resolve() if found and Path(found).exists() else None


def spark_jars() -> str:
    """The folder of the jars a local Spark JVM runs from (`$SPARK_HOME/jars`, else pyspark's
    own) and when its listing last changed: the class path the archive is valid for."""
    from pyspark.find_spark_home import _find_spark_home

    jars = Path(_find_spark_home()).resolve() / "jars"
    try:
        return f"{jars}|{jars.stat().st_mtime_ns}"
    except OSError:  # no jars folder: Spark fails to start, and says why
        return str(jars)


@dataclass(frozen=True)
class ClassArchive:
    """Where this installation's archive lives, and the JVM options that read or write it."""

    path: Path

    @classmethod
    def for_this_install(cls, directory: Path | None = None) -> ClassArchive | None:
        """The archive for this pyspark, its jars and java, or None when there is no java to key
        it on."""
        import pyspark

        java = java_binary()
        if java is None:
            return None
        stat = java.stat()
        identity = f"{pyspark.__version__}|{java}|{stat.st_size}|{stat.st_mtime_ns}|{spark_jars()}"
        key = hashlib.sha256(identity.encode()).hexdigest()[:16]
        return cls((directory or cache_dir()) / f"spark-{pyspark.__version__}-{key}.jsa")

    @property
    def pending(self) -> Path:
        """Where this process's JVM writes the archive; renamed to `path` once complete."""
        return self.path.with_name(f"{self.path.name}.{os.getpid()}.tmp")

    def java_options(self) -> str:
        """Map the archive if it exists, else write it when the JVM exits."""
        if self.path.is_file():
            return f"-XX:SharedArchiveFile={self.path} {QUIET}"
        return f"-XX:ArchiveClassesAtExit={self.pending} {QUIET}"

    def writing(self) -> bool:
        return not self.path.is_file()

    @property
    def checked_stamp(self) -> Path:
        """The archive's size and modification time when a JVM last mapped it (`mappable`)."""
        return self.path.with_name(f"{self.path.name}.checked")

    def _stamp(self) -> str:
        stat = self.path.stat()
        return f"{stat.st_size} {stat.st_mtime_ns}\n"

    def mark_checked(self) -> None:
        """Record that the archive as it is now maps: the next starts skip the check (a JVM of
        its own, a noticeable part of a run's start), until the file changes."""
        with contextlib.suppress(OSError):  # a read-only cache: every start checks it again
            self.checked_stamp.write_text(self._stamp())

    def is_unchanged_since_checked(self) -> bool:
        try:
            return self.checked_stamp.read_text() == self._stamp()
        except OSError:
            return False

    def is_usable(self) -> bool:
        """Whether a JVM can map the archive: unchanged since a JVM mapped it, else checked."""
        if self.is_unchanged_since_checked():
            return True
        if not mappable(self.path):
            return False
        self.mark_checked()
        return True

    def keep(self, jvm: subprocess.Popen) -> None:
        """Let the JVM exit (it writes the archive as it does), then publish the archive.

        Called at interpreter exit: the JVM behind PySpark exits when its stdin closes."""
        if jvm.poll() is None:  # else stopped already (an interrupted run)
            self._wait_for(jvm)
        pending = self.pending
        if jvm.returncode == 0 and pending.is_file() and mappable(pending):
            pending.replace(self.path)
            self.mark_checked()
            log.info("saved Spark's classes to %s", self.path)
        else:
            pending.unlink(missing_ok=True)

    def _wait_for(self, jvm: subprocess.Popen) -> None:
        log.info("saving Spark's classes to %s for faster starts (once; takes a while)", self.path)
        if jvm.stdin is not None:
            jvm.stdin.close()
        try:
            jvm.wait(timeout=120)
        except subprocess.TimeoutExpired:
            log.warning("the Spark JVM did not exit in 120 s; its class archive is not kept")
        except KeyboardInterrupt:  # the user does not want to wait: the next run saves it
            jvm.kill()
            jvm.wait()


def mappable(path: Path) -> bool:
    """Whether a JVM starts with the archive at `path` (cheap: it maps it and checks its header)."""
    java = java_binary()
    if java is None:
        return False
    command = [str(java), f"-XX:SharedArchiveFile={path}", QUIET, *NO_CRASH_FILES, "-version"]
    try:
        done = subprocess.run(command, capture_output=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def remove_stale_pending(path: Path) -> None:
    """Remove the temp files (`path`.*.tmp) of JVMs that began writing the archive at `path` and
    never exited (older than `STALE_SECONDS`)."""
    for stale in path.parent.glob(f"{path.name}.*.tmp"):
        if time.time() - stale.stat().st_mtime > STALE_SECONDS:
            stale.unlink(missing_ok=True)


def prepare(archive: ClassArchive | None) -> str | None:
    """The JVM options for `archive` (None: none), creating its directory; None if unusable."""
    if archive is None:
        return None
    try:
        archive.path.parent.mkdir(parents=True, exist_ok=True)
        remove_stale_pending(archive.path)
        if archive.path.is_file() and not archive.is_usable():  # truncated: SIGBUS
            log.warning("removing the damaged class archive %s; this run writes it", archive.path)
            archive.path.unlink()
            archive.checked_stamp.unlink(missing_ok=True)
        if archive.path.is_file():
            with contextlib.suppress(OSError):  # a read-only cache: nothing is pruned either
                os.utime(archive.checked_stamp)  # its last use: `prune_unused` keeps it
        prune_unused(archive)
    except OSError as exc:
        log.info("no class archive (%s): Spark starts without one", exc)
        return None
    if archive.writing() and not os.access(archive.path.parent, os.W_OK):
        return None
    return archive.java_options()


def last_used(path: Path) -> float:
    """When the archive at `path` was last mapped (its `.checked` stamp's time), else written."""
    for candidate in (path.with_name(f"{path.name}.checked"), path):
        with contextlib.suppress(OSError):
            return candidate.stat().st_mtime
    return 0.0


def prune_unused(archive: ClassArchive, kept: int = KEPT_ARCHIVES) -> None:
    """Remove the cache's archives but the `kept` most recently used (this one always kept): a
    JVM that maps one keeps its mapping when it is removed."""
    others = [p for p in archive.path.parent.glob("spark-*.jsa") if p != archive.path]
    for old in sorted(others, key=last_used, reverse=True)[max(kept - 1, 0) :]:
        with contextlib.suppress(OSError):  # a cache this user may not write to
            old.unlink(missing_ok=True)
            old.with_name(f"{old.name}.checked").unlink(missing_ok=True)


def keep_at_exit(archive: ClassArchive, java_options: str, jvm: subprocess.Popen | None) -> None:
    """When `java_options` have the JVM write the archive, publish it as the interpreter exits."""
    if jvm is not None and "-XX:ArchiveClassesAtExit=" in java_options:
        atexit.register(archive.keep, jvm)

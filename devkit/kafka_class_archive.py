"""Kafka's classes in a class-data-sharing archive: a Kafka JVM starts on much less CPU.

A Kafka node spends most of its start loading and verifying classes from Kafka's jars, and
`make test` starts dozens of them (every cluster's nodes, their StorageTool formats, the Java
producers). The JVM can write the classes it loaded to an archive when it exits
(`-XX:ArchiveClassesAtExit`) and map that archive on the next start (`-XX:SharedArchiveFile`);
bench/kafka_start.py measures what that saves. The first node a `KafkaCluster` starts while the
archive is missing writes it, into a file of its own, published once the JVM has exited and the
file maps; every JVM started from the distribution after that maps it. The archive lives in the
distribution's directory, keyed on the `java` binary; the JVM ignores, silently, an archive
written for another class path or `java`: a stale one costs its start the archive, nothing else.
"""

from __future__ import annotations

import hashlib
import os
import uuid
from dataclasses import dataclass
from pathlib import Path

from spark.class_archive import QUIET, mappable, remove_stale_pending


@dataclass(frozen=True)
class KafkaClassArchive:
    """The archive of one Kafka distribution's classes for one `java`, and its JVM options."""

    path: Path

    @classmethod
    def of(cls, home: Path, java: Path) -> KafkaClassArchive:
        stat = java.stat()
        identity = f"{java}|{stat.st_size}|{stat.st_mtime_ns}"
        return cls(home / f"classes-{hashlib.sha256(identity.encode()).hexdigest()[:12]}.jsa")

    def mapping(self) -> list[str]:
        """The options that map the archive; none while it is not written yet."""
        return [f"-XX:SharedArchiveFile={self.path}", QUIET] if self.path.is_file() else []

    def pending(self) -> Path | None:
        """A file of its own for a JVM to write the archive into (`writing`), or None when the
        archive is there already. Pending files of JVMs that never exited are removed."""
        if self.path.is_file():
            return None
        remove_stale_pending(self.path)
        return self.path.with_name(f"{self.path.name}.{os.getpid()}-{uuid.uuid4().hex[:8]}.tmp")

    @staticmethod
    def writing(pending: Path) -> list[str]:
        """The options that have a JVM write the classes it loaded to `pending` as it exits."""
        return [f"-XX:ArchiveClassesAtExit={pending}", QUIET]

    def publish(self, pending: Path) -> None:
        """Once the JVM writing `pending` has exited: the archive, if the file is complete (a
        JVM maps it); else nothing, and a later cluster writes it again."""
        try:
            if pending.is_file() and mappable(pending):
                pending.replace(self.path)
        finally:
            pending.unlink(missing_ok=True)

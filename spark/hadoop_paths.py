"""Local paths as Spark's Hadoop file system takes them.

- absolute with the `file:` scheme: `file://out/x` names a host `out` ("Wrong FS"), and a path
  without a scheme is on the cluster's default file system under spark-submit (HDFS, often);
- not percent-encoded: Hadoop's `Path` encodes the path itself, so `Path.as_uri()`'s
  `file:///a%20b` names a folder called `a%20b`;
- for reads, glob characters escaped: Spark expands `{a,b}`, `[ab]`, `*` and `?` in the paths it
  reads (and refuses an unknown escape such as `\\y`), so a folder named `run{1}` is not found.
"""

from __future__ import annotations

import re
from pathlib import Path

GLOB_CHARACTERS = re.compile(r"([\\\[\]{}*?])")


def hadoop_path(path: Path) -> str:
    """`path` (relative to the cwd or absolute) for Spark to write to."""
    return "file://" + str(path.resolve())


def hadoop_read_path(path: Path) -> str:
    """`path` for Spark to read: that file or folder only, whatever characters its name holds."""
    return GLOB_CHARACTERS.sub(r"\\\1", hadoop_path(path))

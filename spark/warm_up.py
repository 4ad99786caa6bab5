"""`python -m spark.warm_up`: start a local session from the class archive (writing it when
missing) and run one trivial job: an image build's warm-up, the benchmark's session floor.

A module of its own: `spark.session` uses `spark.class_archive`, so the command that needs both
lives above them.
"""

from __future__ import annotations

from spark.class_archive import ClassArchive
from spark.session import spark_session


def main() -> int:
    spark_session("local[1]", classes=ClassArchive.for_this_install()).range(1).count()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

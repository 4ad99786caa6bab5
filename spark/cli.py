"""`kvq-backfill`: rebuild the exporter's metric history from its archive, for Prometheus."""

from __future__ import annotations

import argparse
import logging
import os
import re
import sys
import warnings
from datetime import UTC, datetime
from pathlib import Path

from kvq import interrupts
from kvq.model.limits import MIN_AVAILABLE_RATIO
from kvq.settings.cli_support import (
    EXIT_CONFIG_ERROR,
    add_cluster_label_flag,
    add_override_flag,
    load_or_exit,
    new_parser,
    overrides,
    start_logging,
)
from kvq.settings.config import CLUSTER_LABEL, CLUSTER_NAME, SHARED_SETTINGS
from kvq.settings.durations import format_duration
from kvq.settings.redaction import mask_url_credentials, remember_secrets
from kvq.settings.values import http_url
from spark.py4j_logging import without_expected_py4j_traces
from spark.settings import STEP, BackfillSettings, grid_step

EXIT_FAILED = 1
SCENARIO_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]*$")

EPILOG = f"""\
What it does:
  Reads every *.jsonl / *.jsonl.gz under --archive (the exporter's --archive-dir), replays the
  observations through the same rules as the exporter (limit, validity, fallback, volume cache)
  with Spark, and writes what the exporter would have published at every grid time (multiples of
  --step, whole seconds, inside the archive's span) as OpenMetrics: OUTPUT/<cluster>.om
  (OUTPUT/<cluster>.<scenario>.om with --scenario), for the cluster --cluster-name or
  kvq.cluster.name names, else for every cluster in the archive. With --blocks, TSDB blocks in
  OUTPUT/blocks instead, written by the Spark tasks themselves (kvq-tsdb-blocks, else promtool),
  18 hours of a part of the volumes each: no step holds a cluster's samples in one process.
  Bad archive lines are reported with file and line and skipped (--max-bad-lines makes them fatal).
  An unreadable or damaged archive file, an impossible poll time (milliseconds, in the future) or
  more than 1,000,000 grid times per cluster stop the run naming the file (narrow: --start/--end).

Examples:
  # the history as TSDB blocks for Prometheus
  kvq-backfill --archive /var/lib/kvq/archive --config kvq.properties --output out --blocks

  # what would a 5% limit have done last month? (series labelled scenario="ratio5")
  kvq-backfill --archive /var/lib/kvq/archive --config kvq.properties --output out \\
      --start 2026-10-01T00:00:00Z --end 2026-11-01T00:00:00Z --step PT5M \\
      --scenario ratio5 --set {MIN_AVAILABLE_RATIO}=0.05 --blocks

  # only the ranges Prometheus has no data for
  kvq-backfill ... --prometheus-url http://prometheus:9090 --blocks

  # on a cluster (archive and output on shared storage): spark-submit runs the installed module
  spark-submit --master spark://host:7077 \\
      "$(python -c 'import spark.cli; print(spark.cli.__file__)')" \\
      --archive ... --config ... --output ...

Loading the blocks: raise Prometheus's --storage.tsdb.retention.time first to reach back to your
oldest sample (Prometheus DELETES blocks older than it, default 15d, as it loads them), then copy
OUTPUT/blocks/* into its --storage.tsdb.path: a running Prometheus loads new blocks within a
minute, no restart needed, and merges the blocks that overlap (2.39 and later: no flag).

Faster starts: the first local run saves Spark's classes (~170 MB) in $KVQ_CACHE_DIR, else
$XDG_CACHE_HOME/kvq, else ~/.cache/kvq; later runs start from them. Delete it to reclaim the space.
"""


PYSPARK_MISSING = """\
kvq-backfill: PySpark is not installed ({error}).
The backfill runs on Spark; the exporter and the enforcer do not need it. Install it with:
  pip install 'kafka-volume-quotas[spark]'
and a Java 17 runtime (Debian: apt-get install default-jre-headless), or use the image's
backfill target (Containerfile, --target backfill)."""


CONNECT_MISSING = """\
kvq-backfill: --remote needs PySpark's Spark Connect client ({error}). Install it with:
  pip install 'kafka-volume-quotas[spark-connect]'"""


def require_pyspark(remote: bool = False) -> None:
    """Exit 2 with how to install PySpark (or its Connect client, for `remote`) when it cannot
    be imported (optional extras)."""
    try:
        import pyspark  # noqa: F401
    except ImportError as exc:
        print(PYSPARK_MISSING.format(error=exc), file=sys.stderr)
        raise SystemExit(EXIT_CONFIG_ERROR) from None
    if remote:
        try:
            with warnings.catch_warnings():  # pandas' versions PySpark has not tested yet
                warnings.simplefilter("ignore", FutureWarning)
                import pyspark.sql.connect.session  # noqa: F401
        except ImportError as exc:
            print(CONNECT_MISSING.format(error=exc), file=sys.stderr)
            raise SystemExit(EXIT_CONFIG_ERROR) from None


class UsageError(ValueError):
    """A bad flag value; the message names it and says what is allowed."""


def build_parser() -> argparse.ArgumentParser:
    parser = new_parser("kvq-backfill", __doc__, EPILOG)
    parser.add_argument("--archive", required=True, metavar="DIR", help="the exporter's archive")
    parser.add_argument("--config", required=True, metavar="FILE", help="exporter properties file")
    parser.add_argument("--output", required=True, metavar="DIR", help="where to write")
    parser.add_argument(
        "--start",
        metavar="ISO8601",
        help="first time, e.g. 2026-10-01T00:00:00Z (default: "
        "the archive's first observation; no zone means UTC)",
    )
    parser.add_argument("--end", metavar="ISO8601", help="last time (default: the archive's last)")
    step = parser.add_argument(
        "--step",
        metavar="DURATION",
        help=f"grid step: {grid_step.accepts}, e.g. PT5M (overrides {STEP}, default "
        f"{BackfillSettings.declaration(STEP).default})",
    )
    overrides(step, STEP)
    parser.add_argument(
        "--blocks",
        action="store_true",
        help="write TSDB blocks into OUTPUT/blocks instead of OpenMetrics files: each Spark task "
        "builds the blocks of its shards (18 hours of a part of the volumes) with "
        "kvq-tsdb-blocks where the driver found it (make tools; the backfill image has it), "
        "else with promtool, which must then be on every executor's PATH",
    )
    parser.add_argument(
        "--scenario", metavar="NAME", help="label every series scenario=NAME (a what-if replay)"
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a property for the scenario (repeatable; needs --scenario)",
    )
    add_override_flag(
        parser,
        "--cluster-name",
        SHARED_SETTINGS[CLUSTER_NAME],
        "NAME",
        f"the cluster to backfill, as kvq-exporter --cluster-name (overrides {CLUSTER_NAME})",
    )
    add_cluster_label_flag(parser)
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--master", metavar="URL", help="Spark master (default local[*])")
    where.add_argument(
        "--remote",
        metavar="URL",
        default=os.environ.get("SPARK_REMOTE") or None,
        help="run on the Spark Connect server at URL (sc://HOST:PORT; default $SPARK_REMOTE): "
        "its driver is already running, so a run starts at once; it and its executors must "
        "see --archive and --output at the same paths "
        "(pip install 'kafka-volume-quotas[spark-connect]')",
    )
    parser.add_argument(
        "--prometheus-url", metavar="URL", help="backfill only grid times this Prometheus lacks"
    )
    parser.add_argument(
        "--max-bad-lines",
        type=int,
        metavar="N",
        help="fail when more than N lines are bad (default: report them and go on)",
    )
    return parser


def parse_time(flag: str, text: str | None) -> float | None:
    """Seconds since the epoch from ISO 8601 (a date alone is midnight; no zone means UTC)."""
    if text is None:
        return None
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        raise UsageError(
            f"{flag} {text!r} is not an ISO 8601 time; e.g. 2026-10-01T00:00:00Z or 2026-10-01"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


def parse_step(text: str) -> int:
    """--step in whole seconds, as kvq.backfill.step takes it."""
    try:
        return int(grid_step(text).total_seconds())
    except ValueError as exc:
        raise UsageError(f"--step {text!r}: {exc}") from None


def parse_url(flag: str, text: str | None) -> str | None:
    if text is None:
        return None
    try:
        url = http_url(text)
    except ValueError as exc:
        raise UsageError(f"{flag} {mask_url_credentials(text)!r} {exc}") from None
    remember_secrets([url])  # its credentials are masked in every log line
    return url


CONNECT_TOKEN = re.compile(r";token=([^;]*)")


def parse_remote(text: str | None) -> str | None:
    """--remote: a Spark Connect URL, sc://HOST:PORT[/;param=value...]; its token (a secret) is
    masked in every log line."""
    if text is None:
        return None
    if not text.startswith("sc://") or len(text) == len("sc://"):
        shown = CONNECT_TOKEN.sub(";token=***", text)
        raise UsageError(f"--remote {shown!r} is not a Spark Connect URL; e.g. sc://spark:15002")
    remember_secrets(CONNECT_TOKEN.findall(text))
    return text


def writable_folder(flag: str, text: str) -> Path:
    """The folder at `text` (absolute), created if missing, checked writable before Spark starts."""
    folder = Path(text)
    if folder.exists() and not folder.is_dir():
        raise UsageError(f"{flag} {text} is a file; give a folder (created if missing)")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"{flag} {text} cannot be created: {exc.strerror}") from None
    if not os.access(folder, os.W_OK | os.X_OK):
        raise UsageError(f"{flag} {text} is not writable by this user")
    return folder.resolve()  # Spark's paths are absolute (spark.hadoop_paths)


def parse_overrides(pairs: list[str], scenario: str | None) -> dict[str, str]:
    if scenario is not None and not SCENARIO_RE.match(scenario):
        raise UsageError(
            f"--scenario {scenario!r} must start with a letter or digit and use only "
            "A-Z a-z 0-9 _ . : -"
        )
    if pairs and scenario is None:
        raise UsageError(
            "--set changes the history; name the what-if with --scenario NAME so its series "
            "(labelled scenario=NAME) never mix with the real ones"
        )
    overrides = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--set {pair!r} must be KEY=VALUE, e.g. {MIN_AVAILABLE_RATIO}=0.05")
        overrides[key.strip()] = value.strip()
    return overrides


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    start_logging(args)
    quiet_py4j()
    require_pyspark(remote=args.remote is not None)
    from spark.archive_files import ArchiveError, archive_files
    from spark.class_archive import ClassArchive
    from spark.job import BackfillError, BackfillRequest, run
    from spark.progress import Progress
    from spark.session import adopt_orphans, under_spark_submit

    try:
        overrides = parse_overrides(args.set, args.scenario)
        start = parse_time("--start", args.start)
        end = parse_time("--end", args.end)
        if start is not None and end is not None and start > end:
            raise UsageError(f"--start {args.start} is after --end {args.end}")
        if args.max_bad_lines is not None and args.max_bad_lines < 0:
            raise UsageError("--max-bad-lines must be 0 or more")
        prometheus_url = parse_url("--prometheus-url", args.prometheus_url)
        remote = parse_remote(args.remote)
        archive_files(args.archive)  # every folder listed, every file readable
    except (UsageError, ArchiveError) as exc:
        print(f"kvq-backfill: {exc}", file=sys.stderr)
        return EXIT_CONFIG_ERROR
    if args.cluster_name is not None:
        overrides[CLUSTER_NAME] = args.cluster_name
    if args.cluster_label is not None:
        overrides[CLUSTER_LABEL] = args.cluster_label
    settings = load_or_exit(BackfillSettings, args.config, overrides)
    try:
        step = parse_step(args.step or format_duration(settings.step))
        output = writable_folder("--output", args.output)  # last: it creates the folder
    except UsageError as exc:
        print(f"kvq-backfill: {exc}", file=sys.stderr)
        return EXIT_CONFIG_ERROR
    request = BackfillRequest(
        archive=Path(args.archive),
        config=settings.config,
        output=output,
        step=step,
        start=start,
        end=end,
        scenario=args.scenario,
        blocks=args.blocks,
        master=args.master,
        remote=remote,
        prometheus_url=prometheus_url,
        max_bad_lines=args.max_bad_lines,
        clusters=named_cluster(args.cluster_name, settings.config),
        classes=ClassArchive.for_this_install(),
    )
    if remote is None and not under_spark_submit():
        adopt_orphans()  # an interrupted run ends what its JVM's tasks left (`stop_local_jvm`)
    try:
        with interrupts.raised():
            result = run(request, Progress())
    except BackfillError as exc:
        print(f"kvq-backfill: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except interrupts.Interrupted as exc:
        print(
            f"kvq-backfill: stopped by {exc.name}; Spark is stopped and no partial output is "
            "left (files completed before it are kept)",
            file=sys.stderr,
        )
        return exc.exit_code
    for written in result.outputs:
        print(f"{written.openmetrics}: {written.samples} samples at {written.grid_times} times")
    return 0


def quiet_py4j() -> None:
    """py4j logs only what matters: its connection chatter only when debugging, and never a
    traceback of an interrupt or of the JVM the run stopped (`without_expected_py4j_traces`)."""
    if logging.getLogger().getEffectiveLevel() > logging.DEBUG:
        logging.getLogger("py4j").setLevel(logging.WARNING)
    for handler in logging.getLogger().handlers:  # a logger's own filters skip its children's
        handler.addFilter(without_expected_py4j_traces)


def named_cluster(flag: str | None, config) -> tuple[str, ...] | None:
    """The cluster the flag or kvq.cluster.name names; None (every cluster found) otherwise."""
    if flag is not None or CLUSTER_NAME in config.properties:
        return (config.cluster_name,)
    return None


if __name__ == "__main__":
    raise SystemExit(main())

"""The per-volume sample lines (family, OpenMetrics text) straight from the volume runs, and the
runs' events, in one pass.

Which run column feeds which per-volume family is declared in `spark.series_sources`.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Observation
from pyspark.sql import functions as F

from kvq.contract.metric_families import MetricFamily
from spark.evaluation_grid import EvaluationGrid
from spark.openmetrics_text import MAX_EXACT_INTEGER
from spark.series_sources import EVENTS, PER_VOLUME, families
from spark.shard_blocks import ShardPlan
from spark.volume_history import event_factor, events


def _escaped(value: Column) -> Column:
    """`spark.openmetrics_text.escape_label_value` on a Column (plain replacements, no regex)."""
    for raw, escaped in (("\\", "\\\\"), ("\n", "\\n"), ('"', '\\"')):
        value = F.replace(value, F.lit(raw), F.lit(escaped))
    return value


def _label_text(labels: dict[str, Column]) -> Column:
    """`{a="..",b=".."}` with names sorted, as `spark.openmetrics_text.label_text` writes it."""
    parts: list[Column] = []
    for number, name in enumerate(sorted(labels)):
        parts.append(F.lit(("," if number else "{") + f'{name}="'))
        parts.append(_escaped(labels[name]))
        parts.append(F.lit('"'))
    return F.concat(*parts, F.lit("}"))


def value_text(value: Column) -> Column:
    """A sample value as `spark.openmetrics_text.format_value` writes it."""
    value = value.cast("double")
    whole = (value == F.floor(value)) & (F.abs(value) < F.lit(float(MAX_EXACT_INTEGER)))
    return F.when(whole, value.cast("long").cast("string")).otherwise(value.cast("string"))


def _per_cluster(grids: list[EvaluationGrid], value) -> Column:
    """`value(grid)` of the row's cluster (`cluster_index` into `grids`)."""
    column = F.lit(value(grids[0]))
    for index, grid in enumerate(grids[1:], start=1):
        column = F.when(F.col("cluster_index") == index, F.lit(value(grid))).otherwise(column)
    return column


def _emitted(k: Column, grids: list[EvaluationGrid]) -> Column:
    """Whether grid index k is emitted, for the grids that emit only some ranges."""
    wanted = F.lit(True)
    for index, grid in enumerate(grids):
        if grid.ranges is None:
            continue
        inside = F.lit(False)
        for lo, hi in grid.ranges:
            inside = inside | k.between(lo, hi)
        wanted = F.when(F.col("cluster_index") == index, inside).otherwise(wanted)
    return wanted


def _item(family: int, text: Column, lo: Column, hi: Column) -> Column:
    return F.struct(
        F.lit(family).alias("family"), text.alias("text"), lo.alias("lo"), hi.alias("hi")
    )


def volume_lines(
    runs: DataFrame,
    grids: list[EvaluationGrid],
    catalog: list[MetricFamily],
    scenario: str | None,
    cluster_label: str,
    shards: ShardPlan | None = None,
) -> DataFrame:
    """cluster_index, family, text: the per-volume samples and the runs' events (family EVENTS).

    With `shards` (`spark.shard_blocks`), one column `text` instead: each sample line after its
    shard and a tab, in shard order in each task (and in time order in a shard: each series in
    time order, the volumes interleaved), each event line after its cluster_index and a space.

    In each partition every series comes out whole and in time order (a volume's runs are
    consecutive there, ordered by success), the families interleaved: the writer splits them,
    keeping the order. `grids[i]` is the grid of the cluster with cluster_index i. Built from
    generators and plain expressions only (no lambdas, which Spark interprets row by row). The
    cluster's name (column `cluster`) is the label `cluster_label`."""
    labels = {cluster_label: F.col("cluster"), "broker_id": F.col("broker_id").cast("string")}
    labels["log_dir"] = F.col("log_dir")
    if scenario:
        labels["scenario"] = F.lit(scenario)
    # The label text once per run (a column of its own: Spark keeps it instead of inlining its
    # escaping into every family's line), the factor its event lines end with too.
    runs = runs.filter(F.col("reason").isNull()).select(
        "*", _label_text(labels).alias("labels"), event_factor().alias("factor_text")
    )
    # Each family's column as it is (a policy's gauges too), but the flag, written as a number.
    values = {"violating": F.col("violating").cast("long")}
    first = _per_cluster(grids, lambda g: g.first_emitted())
    last = _per_cluster(grids, lambda g: g.last_emitted())
    step = _per_cluster(grids, lambda g: g.step)
    lo = F.greatest(F.col("k"), first)
    hi = F.least(F.coalesce(F.col("end_k"), last + 1) - 1, last)
    # Each run's value texts first, as columns of their own (small generated methods the JIT
    # compiles; one expression holding them all is too big for it and runs interpreted, 2x
    # slower), then one item per family with the run's value text and grid range (none when the
    # run is never on the grid) and one with the run's event lines if it has any (family EVENTS,
    # a range of one); the items are exploded, then each over its range, and each line is built
    # once, at the end: name, label text, value, time (building a per-family prefix before the
    # explodes copied every line's bytes twice more: 3% of a 10M run).
    samples = [
        (index, family.sample_name, value_text(values.get(column, F.col(column))))
        for index, family, short in families(catalog)
        if (column := PER_VOLUME.get(short)) is not None
    ]
    event_lines = events(F.col("factor_text"))
    if shards is not None:  # the driver reads the events of every cluster from one file
        owner = F.concat(F.col("cluster_index").cast("string"), F.lit(" "))
        event_lines = [F.concat(owner, line) for line in event_lines]
    texts = runs.select(
        "cluster_index",
        *(("broker_id", "log_dir") if shards is not None else ()),
        "labels",
        step.alias("step"),
        lo.alias("lo"),
        hi.alias("hi"),
        F.concat_ws("\n", *event_lines).alias("events"),
        *(value.alias(f"value{index}") for index, _, value in samples),
    )
    if shards is not None:
        texts = shards.split(texts, F.col("step"), "events")
    lo, hi, happened = F.col("lo"), F.col("hi"), F.col("events")
    items = [
        F.when(hi >= lo, _item(index, F.col(f"value{index}"), lo, hi)) for index, _, _ in samples
    ]
    items.append(F.when(happened != "", _item(EVENTS, happened, F.lit(0), F.lit(0))))
    item = F.col("item")
    kept = ("cluster_index", "labels", "step", *(("shard",) if shards is not None else ()))
    exploded = (
        texts.select(*kept, F.explode(F.array(*items)).alias("item"))
        .filter(item.isNotNull())
        .select(
            *kept,
            "item",
            "step",
            F.explode(F.sequence(item.lo, item.hi)).alias("k"),
        )
    )
    if any(grid.ranges is not None for grid in grids):
        exploded = exploded.filter((item.family == EVENTS) | _emitted(F.col("k"), grids))
    name = F.lit(None).cast("string")
    for index, sample_name, _ in samples:
        name = F.when(item.family == index, F.lit(sample_name)).otherwise(name)
    shard = (F.col("shard"), F.lit("\t")) if shards is not None else ()
    columns = ("cluster_index", item.family.alias("family")) if shards is None else ()
    return exploded.select(
        *columns,
        F.when(item.family == EVENTS, item.text)
        .otherwise(
            F.concat(
                *shard,
                name,
                F.col("labels"),
                F.lit(" "),
                item.text,
                F.lit(" "),
                (F.col("k") * F.col("step")).cast("string"),
            )
        )
        .alias("text"),
    )


def counting_samples(lines: DataFrame, clusters: int) -> tuple[DataFrame, Observation]:
    """`lines` (`volume_lines`), counting its sample lines per cluster as an action writes them:
    after it, `observation.get[str(i)]` is the count of cluster_index i (event lines are not
    samples). So the driver copies the part files without reading their lines."""
    observation = Observation("samples")
    sample = F.col("family") != EVENTS
    counts = [
        F.count_if(sample & (F.col("cluster_index") == index)).alias(str(index))
        for index in range(clusters)
    ]
    return lines.observe(observation, *counts), observation

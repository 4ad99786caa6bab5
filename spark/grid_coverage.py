"""Map rows that hold a state from `time` until the next row's time onto the grid indices they own.

A state that begins at `time` is what the grid sees at every index k with k * step >= time, up to
(not including) the index the next state begins at. Exploding that range is an equi-join-free
"as-of join": no window over the whole grid, no range join.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from spark.evaluation_grid import EvaluationGrid


def index_at_or_after(time: Column, step: int) -> Column:
    """Smallest k with k * step >= time, exactly (the float division corrected as in Python)."""
    k = F.ceil(time / F.lit(float(step))).cast("long")
    return F.when(k * step < time, k + 1).when((k - 1) * step >= time, k - 1).otherwise(k)


def explode_onto_grid(rows: DataFrame, order: list[str], grid: EvaluationGrid) -> DataFrame:
    """Each row of `rows` (ordered by `order` within `cluster`) once per grid index it owns.

    Adds `k` (grid index) and `t` (grid time, whole seconds); keeps only emitted indexes.
    """
    ordered = Window.partitionBy("cluster").orderBy(*order)
    start = index_at_or_after(F.col("time"), grid.step)
    with_range = (
        rows.withColumn("_from", start)
        .withColumn("_next", F.lead("_from").over(ordered))
        .withColumn("_lo", F.greatest(F.col("_from"), F.lit(grid.first)))
        .withColumn(
            "_hi", F.least(F.coalesce(F.col("_next") - 1, F.lit(grid.last)), F.lit(grid.last))
        )
        .filter(F.col("_hi") >= F.col("_lo"))
    )
    exploded = with_range.withColumn("k", F.explode(F.sequence("_lo", "_hi"))).drop(
        "_from", "_next", "_lo", "_hi"
    )
    if grid.ranges is not None:
        wanted = F.lit(False)
        for lo, hi in grid.ranges:
            wanted = wanted | F.col("k").between(lo, hi)
        exploded = exploded.filter(wanted)
    return exploded.withColumn("t", F.col("k") * grid.step)

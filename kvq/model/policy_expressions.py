"""Expressions: the operations a policy's declaration may use beyond operators, on either side.

The exporter evaluates a declaration on plain numbers (`PLAIN`), the backfill on Spark Columns
(`spark.volume_history.SPARK_EXPRESSIONS`): a declaration that uses only operators and these
gives the same bits on both (`kvq.model.throttle_factor_policy`).
"""

from __future__ import annotations

import math
from typing import Any, Protocol


class Expressions(Protocol):
    """What a policy may do beyond operators: plain Python (`PLAIN`) or Spark's functions
    (`spark.volume_history.SPARK_EXPRESSIONS`)."""

    def choose(self, condition: Any, if_true: Any, if_false: Any) -> Any: ...

    def least(self, *values: Any) -> Any: ...

    def greatest(self, *values: Any) -> Any: ...

    def sqrt(self, value: Any) -> Any:
        """The square root, correctly rounded (IEEE 754) on both sides: the same bits."""
        ...

    def known(self, value: Any) -> Any:
        """Whether an optional reading (`VolumeReading.grown_bytes`) was read: not None, or not
        null."""
        ...

    def or_zero(self, value: Any) -> Any:
        """An optional reading, 0 where it was not read: both branches of a `choose` on `known`
        stay defined."""
        ...


class PlainExpressions:
    """`Expressions` on plain numbers and booleans."""

    def choose(self, condition: Any, if_true: Any, if_false: Any) -> Any:
        return if_true if condition else if_false

    def least(self, *values: Any) -> Any:
        return min(values)

    def greatest(self, *values: Any) -> Any:
        return max(values)

    def sqrt(self, value: Any) -> Any:
        return math.sqrt(value)

    def known(self, value: Any) -> Any:
        return value is not None

    def or_zero(self, value: Any) -> Any:
        return 0 if value is None else value


PLAIN = PlainExpressions()

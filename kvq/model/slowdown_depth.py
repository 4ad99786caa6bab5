"""The graceful-slowdown policy's depth scale: a volume's depth to its factor, and back.

The factor at a depth is (1 + depth / PARTS) ** -PARTS, close to e ** -depth: a step of the depth
lowers the factor by the same share whatever the factor already is. Computed by products and
square roots alone, never `exp` or a power of a value a Column may hold, so that the exporter and
Spark (whose `exp` is Java's StrictMath) compute the same bits.
"""

from __future__ import annotations

from typing import Any

from kvq.model.policy_expressions import Expressions

COMPOUNDING = 4
"""The factor is (1 + depth / 2 ** this) ** -(2 ** this): this many squarings."""
PARTS = 2.0**COMPOUNDING


def factor_at_depth(depth: Any) -> Any:
    """(1 + depth / PARTS) ** -PARTS, by products alone: 1.0 at depth 0."""
    factor = 1.0 / (1.0 + depth / PARTS)
    for _ in range(COMPOUNDING):
        factor = factor * factor
    return factor


def depth_of_drop(share: float) -> float:
    """The depth step that lowers a factor of 1.0 by `share`; it lowers any smaller factor by
    less (at most by that share)."""
    return PARTS * ((1.0 / (1.0 - share)) ** (1.0 / PARTS) - 1.0)


def depth_sharing(reach: Any, lowest_factor: float, ops: Expressions) -> Any:
    """The depth at which `factor_at_depth` is about 1 / `reach`, the share at which a load
    `reach` times too fast fits (0 at a reach of 1 or less; never past the depth of
    `lowest_factor`): its inverse, the root by square roots alone (bit for bit the same in the
    exporter and Spark)."""
    root = ops.least(ops.greatest(reach, 1.0), 1.0 / lowest_factor)
    for _ in range(COMPOUNDING):
        root = ops.sqrt(root)
    return PARTS * (root - 1.0)

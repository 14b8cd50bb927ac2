"""Keep policy: which document of a duplicate group survives.

The policy is an ordered list of (column, "asc" | "desc"); the first row in that
order is the representative. ``doc_id`` ascending is always appended as the last
key, so the choice is total and does not depend on partitioning. Columns missing
from the table (e.g. ``warc_date`` when the input has no crawl date) are skipped;
nulls always sort last.
"""

from __future__ import annotations

from typing import Iterable, Mapping, Sequence, Union

from pulpie_spark.curate.config import KeepConfig

DEFAULT_ORDER: tuple[tuple[str, str], ...] = KeepConfig().order

# the ``[keep]`` section, or its ``order`` list of (column, "asc" | "desc")
KeepOrder = Union[KeepConfig, Sequence[Sequence[str]], None]


def effective_order(order: KeepOrder, columns: Iterable[str]) -> list[tuple[str, str]]:
    """The policy restricted to existing columns, with doc_id asc as final tie-breaker."""
    if isinstance(order, KeepConfig):
        order = order.order
    available = set(columns)
    out: list[tuple[str, str]] = []
    for col, direction in (order or DEFAULT_ORDER):
        if col in available and col != "doc_id":
            out.append((col, direction))
    out.append(("doc_id", "asc"))
    return out


def spark_order(order: KeepOrder, columns: Iterable[str]):
    """Spark sort expressions for a Window.orderBy / DataFrame.orderBy."""
    from pyspark.sql import functions as F

    exprs = []
    for col, direction in effective_order(order, columns):
        exprs.append(F.col(col).desc_nulls_last() if direction == "desc" else F.col(col).asc_nulls_last())
    return exprs


def pick_representative(rows: Sequence[Mapping], order: KeepOrder = None) -> Mapping:
    """Pure-Python reference of the same policy (used in tests and small tools)."""
    if not rows:
        raise ValueError("pick_representative needs at least one row")
    keys = effective_order(order, rows[0].keys())
    best = list(rows)
    # stable sorts from the last key to the first give the lexicographic order
    for col, direction in reversed(keys):
        present = [r for r in best if r.get(col) is not None]
        missing = [r for r in best if r.get(col) is None]
        present.sort(key=lambda r: r[col], reverse=(direction == "desc"))
        best = present + missing
    return best[0]

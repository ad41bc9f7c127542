"""Sources: where Kafka-shaped records come from (captured files, or Kafka itself)."""

from __future__ import annotations

from collections.abc import Mapping

from pyspark.sql import Column
from pyspark.sql import functions as F

from ingest.model import PartitionId


def at_or_after(start: Mapping[PartitionId, int]) -> Column:
    """Rows at or after each known partition's start offset; below it they are applied or buffered."""
    condition = F.lit(True)
    for pid, offset in start.items():
        same = (F.col("topic") == pid.topic) & (F.col("partition") == pid.partition)
        condition = condition & ~(same & (F.col("offset") < offset))
    return condition


POSITION = ("topic", "partition", "offset")

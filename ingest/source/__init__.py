"""Sources: where Kafka-shaped records come from (captured files, or Kafka itself)."""

from __future__ import annotations

from collections.abc import Mapping

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ingest.model import PartitionId


def at_or_after(start: Mapping[PartitionId, int]) -> Column:
    """Rows at or after each known partition's start offset; below it they are applied or buffered."""
    condition = F.lit(True)
    for pid, offset in start.items():
        same = (F.col("topic") == pid.topic) & (F.col("partition") == pid.partition)
        condition = condition & ~(same & (F.col("offset") < offset))
    return condition


POSITION = ("topic", "partition", "offset")
# A Kafka record as every source hands it on (and as the buffer keeps it).
MESSAGE_SCHEMA = T.StructType(
    [
        T.StructField("topic", T.StringType()),
        T.StructField("partition", T.IntegerType()),
        T.StructField("offset", T.LongType()),
        T.StructField("timestamp", T.TimestampType()),
        T.StructField("key", T.BinaryType()),
        T.StructField("value", T.BinaryType()),
    ]
)

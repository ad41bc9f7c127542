"""ticdc-delta-ingest: mirror TiDB tables into Delta Lake from TiCDC change streams."""

from ingest.config import IngestConfig, InputFormat, Protocol, SourceKind
from ingest.errors import (
    ConfigError,
    DecodeError,
    IngestError,
    OrderingError,
    SchemaChangeRejected,
    SparkSetupError,
    TooManyBadRecords,
)
from ingest.load_config import LoadConfig
from ingest.model import PartitionId, Position, TableId, tso_to_datetime

__all__ = [
    "ConfigError",
    "DecodeError",
    "IngestConfig",
    "IngestError",
    "InputFormat",
    "LoadConfig",
    "OrderingError",
    "PartitionId",
    "Position",
    "Protocol",
    "SchemaChangeRejected",
    "SourceKind",
    "SparkSetupError",
    "TableId",
    "TooManyBadRecords",
    "tso_to_datetime",
]

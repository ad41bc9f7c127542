"""Spark SQL text for the Delta I/O layer: a table's name in a statement, literals that parse back to exactly
their value, types, column definitions. No I/O but one evaluation of a constant (:func:`sql_value`)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import date, datetime
from decimal import Decimal

from pyspark.sql import Column, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ingest.lake.names import TableName, quote


def table_ref(path: str) -> str:
    """The SQL name of the Delta table at ``path``: ``delta.`path```, or a catalog table's own name."""
    if isinstance(path, TableName):
        return str(path)
    return f"delta.{quote(path)}"


def sql_string(text: str) -> str:
    """A Spark SQL string literal holding exactly ``text``.

    ``$`` is written as the escape ``\\u0024``: Spark substitutes ``${env:NAME}``, ``${system:NAME}`` and
    ``${<conf key>}`` anywhere in a statement's text before parsing it, so an upstream DEFAULT or comment
    holding one would reach the mirror as an environment variable's or a setting's value.
    """
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'").replace("$", "\\u0024") + "'"


def sql_literal(value: object) -> str:
    """A Spark SQL literal of a Python value, typed as ``F.lit`` types it (datetimes are refused: a naive one
    has no zone, and the session's would be guessed)."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return f"CAST({sql_string(repr(value))} AS DOUBLE)"
    if isinstance(value, Decimal):
        return f"{value:f}BD"
    if isinstance(value, str):
        return sql_string(value)
    if isinstance(value, datetime):
        raise TypeError(f"no SQL literal for a datetime ({value!r}): its zone would be guessed")
    if isinstance(value, date):
        return f"DATE {sql_string(value.isoformat())}"
    if isinstance(value, bytes | bytearray):
        return f"X{sql_string(bytes(value).hex())}"
    raise TypeError(f"no SQL literal for {type(value).__name__}")


def sql_type(data_type: T.DataType) -> str:
    """A Spark type as SQL DDL text; TIMESTAMP is spelled TIMESTAMP_LTZ so ``spark.sql.timestampType`` cannot
    turn it into TIMESTAMP_NTZ."""
    if isinstance(data_type, T.TimestampType):
        return "TIMESTAMP_LTZ"
    if isinstance(data_type, T.ArrayType):
        return f"ARRAY<{sql_type(data_type.elementType)}>"
    if isinstance(data_type, T.MapType):
        return f"MAP<{sql_type(data_type.keyType)}, {sql_type(data_type.valueType)}>"
    if isinstance(data_type, T.StructType):
        fields = ", ".join(f"{quote(f.name)}: {sql_type(f.dataType)}" for f in data_type.fields)
        return f"STRUCT<{fields}>"
    return data_type.simpleString()


def sql_value(spark: SparkSession, value: Column, data_type: T.DataType) -> str:
    """SQL text for exactly the value that a constant ``value`` of ``data_type`` evaluates to.

    Evaluated once by Spark, and written back in a form that parses to the same value whatever the Python
    client's zone: binary as hex, a TIMESTAMP as microseconds since the epoch, anything else as its text cast
    back to the type (Spark's text of a number or date round-trips exactly).
    """
    target = sql_type(data_type)
    if isinstance(data_type, T.BinaryType):
        text = F.hex(value)
    elif isinstance(data_type, T.TimestampType):
        text = F.unix_micros(value).cast("string")
    else:
        text = value.cast("string")
    row = spark.range(1).select(text.alias("v")).first()
    if row is None or row["v"] is None:
        return f"CAST(NULL AS {target})"
    if isinstance(data_type, T.BinaryType):
        return f"X{sql_string(row['v'])}"
    if isinstance(data_type, T.TimestampType):
        return f"timestamp_micros({int(row['v'])})"
    return f"CAST({sql_string(row['v'])} AS {target})"


def column_definition(field: T.StructField) -> str:
    """A column as CREATE TABLE / ADD COLUMNS write it: name, type, NOT NULL, and its comment if any."""
    text = f"{quote(field.name)} {sql_type(field.dataType)}"
    if not field.nullable:
        text += " NOT NULL"
    comment = field.metadata.get("comment")
    if comment is not None:
        text += f" COMMENT {sql_string(str(comment))}"
    return text


def properties_sql(properties: Mapping[str, str]) -> str:
    return ", ".join(f"{sql_string(name)} = {sql_string(value)}" for name, value in properties.items())

"""The SQL text ``ingest.lake.delta_io`` writes, and how it tells Delta's errors apart, without Spark."""

from __future__ import annotations

from datetime import date, datetime
from decimal import Decimal

import pytest
from pyspark.errors import AnalysisException, PySparkException
from pyspark.sql import types as T

from ingest.apply.schema import partition_predicate
from ingest.lake import delta_io, sql_text
from ingest.plan import partitions


def test_names_and_paths_are_backticked_with_backticks_doubled():
    assert delta_io.quote("a`b c") == "`a``b c`"
    assert sql_text.table_ref("/lake/app/t`1") == "delta.`/lake/app/t``1`"


def test_string_literals_escape_quotes_and_backslashes():
    assert sql_text.sql_string("it's a\\b") == "'it\\'s a\\\\b'"


def test_string_literals_hold_no_dollar_for_spark_to_substitute():
    assert sql_text.sql_string("${env:HOME} $x") == "'\\u0024{env:HOME} \\u0024x'"


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (None, "NULL"),
        (True, "TRUE"),
        (7, "7"),
        (-12345678901, "-12345678901"),
        (Decimal("-1.50"), "-1.50BD"),
        (Decimal("1E+3"), "1000BD"),
        ("o'k", "'o\\'k'"),
        (date(2024, 2, 29), "DATE '2024-02-29'"),
        (b"\x00\xff", "X'00ff'"),
        (1.5, "CAST('1.5' AS DOUBLE)"),
    ],
)
def test_python_values_become_literals_of_the_same_type(value, text):
    assert sql_text.sql_literal(value) == text


def test_a_datetime_has_no_literal_because_its_zone_would_be_guessed():
    with pytest.raises(TypeError):
        sql_text.sql_literal(datetime(2024, 1, 1))


def test_types_are_spelled_so_no_session_conf_changes_them():
    schema = T.StructType([T.StructField("a b", T.TimestampType()), T.StructField("n", T.DecimalType(20, 0))])
    assert sql_text.sql_type(T.ArrayType(schema)) == "ARRAY<STRUCT<`a b`: TIMESTAMP_LTZ, `n`: decimal(20,0)>>"
    assert sql_text.sql_type(T.TimestampNTZType()) == "timestamp_ntz"


def test_a_column_definition_carries_not_null_and_its_comment():
    field = T.StructField("c", T.LongType(), nullable=False, metadata={"comment": "tidb: bigint(20)"})
    assert sql_text.column_definition(field) == "`c` bigint NOT NULL COMMENT 'tidb: bigint(20)'"


class _SparkError(PySparkException):
    """A server error as a client reports it (classic: captured; Connect: from gRPC): class and condition."""

    def __init__(self, condition: str) -> None:
        super().__init__(message=condition)
        self._condition = condition

    def getCondition(self) -> str:
        return self._condition


class _AnalysisError(_SparkError, AnalysisException):
    pass


@pytest.mark.parametrize(
    "condition", ["DELTA_CONCURRENT_APPEND.WITHOUT_HINT", "DELTA_METADATA_CHANGED", "DELTA_PROTOCOL_CHANGED"]
)
def test_commit_conflicts_are_known_by_their_condition_on_either_client(condition):
    assert delta_io.is_commit_conflict(_SparkError(condition))


def test_commit_conflicts_are_known_by_delta_s_own_classes_on_classic_spark():
    from delta.exceptions.base import ConcurrentAppendException

    assert delta_io.is_commit_conflict(ConcurrentAppendException(message="conflict"))


def test_other_errors_are_no_conflict():
    assert not delta_io.is_commit_conflict(_SparkError("DELTA_TABLE_NOT_FOUND"))
    assert not delta_io.is_commit_conflict(ValueError("DELTA_CONCURRENT_APPEND"))


def test_a_missing_table_is_known_by_its_condition():
    assert delta_io.is_not_a_table(_AnalysisError("DELTA_MISSING_DELTA_TABLE"))
    assert delta_io.is_not_a_table(_AnalysisError("PATH_NOT_FOUND"))
    assert not delta_io.is_not_a_table(_AnalysisError("UNRESOLVED_COLUMN"))
    assert not delta_io.is_not_a_table(
        _SparkError("DELTA_TABLE_NOT_FOUND")
    )  # not at analysis: a real failure


def test_partition_rows_become_a_condition_that_is_never_null():
    rows = partitions.PartitionRows(
        column="k",
        kind=partitions.INTEGER,
        clauses=(
            partitions.InRange(low="10", high=None),
            partitions.InValues(values=("1", "-2")),
            partitions.InValues(values=()),
            partitions.IsNull(),
        ),
    )
    assert partition_predicate(rows) == (
        "(FALSE OR coalesce(TRUE AND `k` >= 10BD, FALSE) OR coalesce(`k` IN (1BD, -2BD), FALSE) OR FALSE"
        " OR (`k` IS NULL))"
    )

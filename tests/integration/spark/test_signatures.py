"""Column types seen in a batch's DML, per table: what creates a table or adds a column no DDL announced."""

from __future__ import annotations

from ingest.model import TableId
from ingest.pipeline.admission import type_signatures

SCHEMA = (
    "database string, table string, mysql_type map<string,string>, pk_names array<string>, commit_ts long"
)


def test_the_same_types_in_another_key_order_are_one_signature(spark):
    dml = spark.createDataFrame(
        [
            ("app", "t", {"id": "int", "v": "varchar"}, ["id"], 10),
            ("app", "t", {"v": "varchar", "id": "int"}, ["id"], 30),
            ("app", "t", {"id": "int", "v": "varchar", "c": "int"}, ["id"], 20),
            ("app", "u", {"id": "int"}, ["id"], 5),
        ],
        SCHEMA,
    )
    found = {
        (s.table, s.mysql_types): (s.min_commit_ts, s.max_commit_ts, s.rows) for s in type_signatures(dml)
    }
    assert found == {
        (TableId("app", "t"), (("id", "int"), ("v", "varchar"))): (10, 30, 2),
        (TableId("app", "t"), (("c", "int"), ("id", "int"), ("v", "varchar"))): (20, 20, 1),
        (TableId("app", "u"), (("id", "int"),)): (5, 5, 1),
    }
    assert all(s.pk_names == ("id",) for s in type_signatures(dml))

"""Text that reaches Delta through SQL statements (a DEFAULT back-filled, a comment, a property, a
predicate) lands as written, even when it holds what Spark's variable substitution would expand."""

import pytest
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ingest.lake import delta_io, sql_text

# Each form Spark substitutes before it parses a statement: an environment variable, a JVM system
# property, a session setting; and a lone dollar sign.
TEXT = "${env:HOME} ${system:java.version} ${spark.sql.session.timeZone} $x \\u0024 it's"


@pytest.mark.full(modes=("connect",))  # the classic run stays in CI
@pytest.mark.both_modes
def test_text_with_substitution_forms_lands_as_written(spark, tmp_path):
    path = str(tmp_path / "t")
    field = T.StructField("v", T.StringType(), metadata={"comment": TEXT})
    delta_io.create_table(spark, path, T.StructType([T.StructField("id", T.IntegerType()), field]))
    delta_io.write(spark.createDataFrame([(1, "a")], "id INT, v STRING"), path)

    delta_io.update(spark, path, {"v": sql_text.sql_value(spark, F.lit(TEXT), T.StringType())})
    delta_io.set_properties(spark, path, {"ticdc.test": TEXT})
    delta_io.comment_column(spark, path, "id", TEXT)

    table = delta_io.read(spark, path)
    assert [tuple(r) for r in table.collect()] == [(1, TEXT)]
    assert [f.metadata.get("comment") for f in table.schema] == [TEXT, TEXT]
    assert delta_io.properties(spark, path)["ticdc.test"] == TEXT
    assert table.where(f"v = {sql_text.sql_string(TEXT)}").count() == 1

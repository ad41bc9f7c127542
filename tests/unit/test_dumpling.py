from datetime import date, datetime, timezone
from decimal import Decimal
from zoneinfo import ZoneInfo

import pytest
from dumpling_export import Dialect, csv_field, sql_literal

from ingest.mysql import dumpling as dd
from ingest.mysql import dumpling_lines
from ingest.mysql.ddl import CreateTable, parse_ddl
from testkit.sample import wire_text

AWKWARD = """CREATE TABLE `app`.`awkward` (
  `id` bigint(20) unsigned NOT NULL,
  `s` varchar(200) DEFAULT NULL,
  `t` text DEFAULT NULL,
  `b` varbinary(300) DEFAULT NULL,
  `fixed` binary(4) DEFAULT NULL,
  `d` decimal(20,6) DEFAULT NULL,
  `f` float DEFAULT NULL,
  `x` double DEFAULT NULL,
  `dt` datetime(6) DEFAULT NULL,
  `ts` timestamp(3) NULL DEFAULT NULL,
  `day` date DEFAULT NULL,
  `bits` bit(12) DEFAULT NULL,
  `kind` enum('small','Large','with space') DEFAULT NULL,
  `tags` set('a','b','c') DEFAULT NULL,
  PRIMARY KEY (`id`)
)"""

TZ = ZoneInfo("Asia/Shanghai")
STRINGS = [
    "it's", 'say "hi"', "back\\slash", "ends with \\", "line1\nline2\r\nline3", "\\N", "NULL", "",
    "tab\there", "comma, semi; paren) (",
    "nul \x00 byte", "ctrl-z \x1a", "ü日本語😀", "a|+|b", "'", '"', "\\", ",", "\\0",
]  # fmt: skip


def _columns():
    statement = parse_ddl(AWKWARD, "app")
    assert isinstance(statement, CreateTable)
    return statement.schema.columns


def _rows():
    binary = bytes(range(256))
    for i, text in enumerate(STRINGS):
        yield {
            "id": 18446744073709551615 - i, "s": text, "t": text[::-1], "b": binary[i * 13 :] + text.encode(),
            "fixed": bytes([0, 10, 13, 92][i % 4:]) + b"\x00" * (i % 4), "d": Decimal(f"-{i}.000123"),
            "f": 3.14, "x": 1e16 if i % 2 else -0.5,
            "dt": datetime(2026, 11, 20, 9, i, 30, 250000 + i),
            "ts": datetime(2026, 3, 29, 1, 59, 59, 123000, tzinfo=timezone.utc),
            "day": date(1970 + i, 1, 1), "bits": (1 << i % 12) | 1,
            "kind": ["", "small", "Large", "with space"][i % 4],
            "tags": ",".join(e for b, e in enumerate("abc") if i >> b & 1),
        }  # fmt: skip
    yield {c.name: None for c in _columns()} | {"id": 1}
    yield {"id": 2, "b": binary, "s": "", "t": "", "bits": 0, "kind": "", "tags": ""}


def _expected(row):
    """What Canal-JSON would carry for the same row: the stream's wire text, from the model."""
    return [wire_text(row.get(c.name), c.type, TZ) for c in _columns()]


DEFAULT_CSV = dd.CsvDialect()


def _decode(line: bytes, data_format: dd.DataFormat, dialect=DEFAULT_CSV, starts_file=False):
    columns = _columns()
    return dumpling_lines.decode_data_line(
        line,
        starts_file=starts_file,
        data_format=data_format,
        dialect=dialect,
        names=[c.name for c in columns],
        types=[c.type for c in columns],
    )


def test_sql_tuples_as_dumpling_writes_them_decode_to_the_streams_wire_text():
    for row in _rows():
        values = b",".join(sql_literal(row.get(c.name), c.type, TZ) for c in _columns())
        assert b"\n" not in values and b"\r" not in values
        for ending in (b",", b";"):
            assert _decode(b"(" + values + b")" + ending, dd.DataFormat.SQL) == [(_expected(row), None)]


@pytest.mark.parametrize(
    "dialect",
    [
        Dialect(),
        Dialect(separator="|+|", delimiter="'", null_value="NULL", header=False, line_terminator="\n"),
        Dialect(separator="\t", delimiter="", null_value="\\N"),
    ],
    ids=["default", "separator-quote-null", "no-delimiter"],
)
def test_csv_records_as_dumpling_writes_them_decode_to_the_streams_wire_text(dialect):
    ours = dd.CsvDialect(
        separator=dialect.separator.encode(),
        delimiter=dialect.delimiter.encode(),
        null_value=dialect.null_value.encode(),
        header=dialect.header,
    )
    for row in _rows():
        line = dialect.separator.encode().join(
            csv_field(row.get(c.name), c.type, TZ, dialect) for c in _columns()
        )
        assert b"\n" not in line and b"\r" not in line
        assert _decode(line, dd.DataFormat.CSV, ours) == [(_expected(row), None)]


def test_csv_header_is_skipped_only_on_a_files_first_line_and_must_name_the_columns():
    names = b",".join(b'"' + c.name.encode() + b'"' for c in _columns())
    assert _decode(names, dd.DataFormat.CSV, starts_file=True) == []
    (error,) = _decode(names.replace(b'"s"', b'"other"'), dd.DataFormat.CSV, starts_file=True)
    assert error[0] is None and "CSV header" in error[1] and "'other'" in error[1]
    # Not the file's first line: a data row, which here has text where numbers belong; still one row.
    assert len(_decode(names, dd.DataFormat.CSV)) == 1


def test_insert_header_lines_and_set_statements_hold_no_rows_and_column_lists_are_checked():
    names = ",".join(f"`{c.name}`" for c in _columns()).encode()
    assert _decode(b"INSERT INTO `awkward` VALUES", dd.DataFormat.SQL) == []
    assert _decode(b"INSERT INTO `awkward` (" + names + b") VALUES", dd.DataFormat.SQL) == []
    assert _decode(b"/*!40101 SET NAMES binary*/;", dd.DataFormat.SQL) == []
    assert _decode(b"", dd.DataFormat.SQL) == []
    (error,) = _decode(b"INSERT INTO `awkward` (`id`,`s`) VALUES", dd.DataFormat.SQL)
    assert "INSERT names columns ['id', 's']" in error[1]


def test_mysqldump_style_statement_with_several_tuples_and_other_literal_spellings():
    line = (
        b"INSERT INTO `app`.`awkward` VALUES (1,'it''s',_binary 'a\\\\b',0x00FF,NULL,1.5,NULL,NULL,NULL,NULL,"
        b"NULL,b'101',2,'a,c'),(2,\"dq\",NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,'');"
    )
    rows = _decode(line, dd.DataFormat.SQL)
    assert [r[1] for r in rows] == [None, None]
    first, second = rows[0][0], rows[1][0]
    assert first[:6] == ["1", "it's", "a\\b", "\x00\xff", None, "1.5"]
    assert first[11:] == ["5", "2", "5"]  # BIT b'101' = 5, ENUM index 2 as sent, SET {a, c} = 0b101
    assert second[:2] == ["2", "dq"] and second[13] == "0"


@pytest.mark.parametrize(
    ("line", "message"),
    [
        (b"(1,'open", "string is not closed"),
        (b"(1,2", "value tuple is not closed"),
        (b"(1,2),", "row has 2 values, the table has 14 columns"),
        (b"garbage", "expected '('"),
    ],
)
def test_unreadable_sql_lines_are_reported_not_guessed(line, message):
    (result,) = _decode(line, dd.DataFormat.SQL)
    assert result[0] is None and message in result[1]


def test_values_that_do_not_fit_their_column_are_reported():
    bad_utf8 = ["7", "'\xff\xfe'"] + ["NULL"] * 12
    line = ("(" + ",".join(bad_utf8) + ")").encode("latin-1")
    assert "not UTF-8" in _decode(line, dd.DataFormat.SQL)[0][1]
    bad_enum = ["7"] + ["NULL"] * 11 + ["'medium'", "NULL"]
    assert (
        "'medium' is not one of the ENUM values"
        in _decode(("(" + ",".join(bad_enum) + ")").encode(), dd.DataFormat.SQL)[0][1]
    )
    (result,) = _decode(b'"7",\\N', dd.DataFormat.CSV)
    assert "row has 2 values" in result[1]
    (result,) = _decode(b'7,"open', dd.DataFormat.CSV)
    assert "quoted field is not closed" in result[1]


METADATA = """Started dump at: 2020-11-10 10:40:19
SHOW MASTER STATUS:
\tLog: tidb-binlog
\tPos: 420747102018863124
\tGTID:

SHOW MASTER STATUS: /* AFTER CONNECTION POOL ESTABLISHED */
\tLog: tidb-binlog
\tPos: 420747102018869999
\tGTID:

Finished dump at: 2020-11-10 10:40:20
"""


def test_metadata_gives_the_snapshot_tso_of_the_first_status_block():
    assert dd.parse_metadata(METADATA) == 420747102018863124
    assert dd.parse_metadata(METADATA.replace("SHOW MASTER STATUS:", "SHOW BINARY LOG STATUS:")) == (
        420747102018863124
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("Started dump at: 2020-11-10 10:40:19\nFinished dump at: 2020-11-10 10:40:20\n", "no 'SHOW MASTER"),
        (METADATA.replace("420747102018863124", "4075"), "is not a TiDB TSO"),
    ],
)
def test_metadata_without_a_tso_is_refused(text, message):
    with pytest.raises(dd.DumplingFormatError, match=message):
        dd.parse_metadata(text)


def test_file_names_by_dumplings_layout():
    assert dd.data_file("shop.orders.000000001.sql") == dd.DataFile("shop.orders", dd.DataFormat.SQL)
    assert dd.data_file("shop.orders.0.csv.gz") == dd.DataFile("shop.orders", dd.DataFormat.CSV)
    assert dd.data_file("my.db.t.3.csv") == dd.DataFile("my.db.t", dd.DataFormat.CSV)
    for other in ("shop.orders-schema.sql", "shop-schema-create.sql", "shop.v-schema-view.sql", "metadata"):
        assert dd.data_file(other) is None
    assert dd.table_schema_prefix("shop.orders-schema.sql") == "shop.orders"
    assert dd.table_schema_prefix("shop.orders-schema.sql.gz") == "shop.orders"
    for other in ("shop-schema-create.sql", "shop.v-schema-view.sql", "shop.orders.0.sql"):
        assert dd.table_schema_prefix(other) is None


def test_create_table_statement_drops_dumplings_session_lines():
    text = (
        "/*!40101 SET NAMES binary*/;\nCREATE TABLE `t` (\n  `id` int NOT NULL,\n  PRIMARY KEY (`id`)\n);\n"
    )
    assert (
        dd.create_table_statement(text) == "CREATE TABLE `t` (\n  `id` int NOT NULL,\n  PRIMARY KEY (`id`)\n)"
    )

"""Storage-sink CSV records -> the Canal-JSON messages they become: records and fields as TiCDC's CSV
encoder writes them, the options, the layouts schema files give, and TiCDC's own storage sink writing the
same history as CSV and as Canal-JSON."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import orjson
import pytest

from ingest.config import IngestConfig
from ingest.decode import storage_csv as sc
from ingest.decode.compression import Compression
from ingest.decode.storage_csv import CsvColumn, CsvOptions, Layout
from ingest.errors import ConfigError
from ingest.source.storage_layout import layouts, mysql_type

CORPORA = Path(__file__).resolve().parents[1] / "fixtures" / "corpora"
KIT_STORAGE = sorted(p.parent.name for p in CORPORA.glob("*/storage-csv"))  # written by TiCDC's storage sink
FLOATS = ("float", "double")


def layout(*columns: CsvColumn, options: CsvOptions | None = None) -> Layout:
    return Layout(columns, ("id",), options or CsvOptions())


INT = CsvColumn("id", "int")


# -- records and fields, as the reference's example and TiCDC's encoder rules write them -------------------


def test_a_quoted_value_may_hold_raw_line_breaks_and_doubled_quotes():
    content = b'"I","t","d",1,7,"say ""hi""\nbye"\r\n"I","t","d",2,8,"two\r\nlines"\r\n'
    found = sc.records(content, '"')
    assert found == [b'"I","t","d",1,7,"say ""hi""\nbye"', b'"I","t","d",2,8,"two\r\nlines"']
    assert sc.fields(found[0].decode(), CsvOptions()) == ["I", "t", "d", "1", "7", 'say "hi"\nbye']


def test_null_the_quoted_null_text_and_the_empty_string_differ_only_by_quoting():
    assert sc.fields('"I","t","d",1,\\N,"\\N",""', CsvOptions()) == ["I", "t", "d", "1", None, "\\N", ""]


def test_a_multi_character_delimiter_and_a_custom_null():
    options = CsvOptions(delimiter="|#", null="NULL")
    assert sc.fields('"I"|#"t"|#"d"|#5|#NULL|#"a|b"', options) == ["I", "t", "d", "5", None, "a|b"]


def test_without_a_quote_backslash_escapes_are_undone_and_an_escaped_null_is_text():
    options = CsvOptions(quote="")
    record = r"I,t,d,1,a\,b,line\nnext\\,\N,\\N,"
    assert sc.fields(record, options) == ["I", "t", "d", "1", "a,b", "line\nnext\\", None, "\\N", ""]
    assert sc.records(b"I,t,d,1,x\\ny\nI,t,d,2,z\n", "") == [b"I,t,d,1,x\\ny", b"I,t,d,2,z"]


def test_text_after_a_closing_quote_and_an_unclosed_quote_are_errors():
    with pytest.raises(sc.CsvError, match="after a closing quote"):
        sc.fields('"I","t"x,"d"', CsvOptions())
    with pytest.raises(sc.CsvError, match="not closed"):
        sc.fields('"I","t","d",1,"open', CsvOptions())


# -- a record as Canal-JSON ----------------------------------------------------------------------------------


def test_binary_values_in_base64_or_hex_become_latin1_text():
    blob = CsvColumn("b", "varbinary")
    for encoding, text in (("base64", "AAH/"), ("hex", "0001ff")):
        options = CsvOptions(binary_encoding=encoding)
        message = sc.message(layout(INT, blob, options=options), f'"I","t","d",9,1,"{text}"')
        assert message["data"] == [{"id": "1", "b": "\x00\x01\xff"}]
    with pytest.raises(sc.CsvError, match="not hex"):
        sc.message(layout(INT, blob, options=CsvOptions(binary_encoding="hex")), '"I","t","d",9,1,"zz"')


def test_enum_and_set_labels_become_the_index_and_bitmask_canal_json_sends_even_when_spelled_as_numbers():
    flag = CsvColumn("flag", "enum", ("1", "0"))
    tags = CsvColumn("tags", "set", ("2", "1", "x"))
    data = sc.message(layout(INT, flag, tags), '"I","t","d",9,1,"0","1,x"')["data"][0]
    assert data == {"id": "1", "flag": "2", "tags": str(0b110)}
    empty = sc.message(layout(INT, flag, tags), '"I","t","d",9,1,"1",""')["data"][0]
    assert empty == {"id": "1", "flag": "1", "tags": "0"}
    # Members no DDL said: the labels stay, and the mirror reads text that is no number as a label.
    unknown = sc.message(layout(INT, CsvColumn("e", "enum")), '"I","t","d",9,1,"paid"')["data"][0]
    assert unknown["e"] == "paid"


def test_operations_meta_fields_and_the_update_without_its_old_image():
    old_value = CsvOptions(output_old_value=True, output_handle_key=True)
    message = sc.message(layout(INT, options=old_value), '"U","orders","shop",452413071860891649,true,"7",7')
    assert (message["database"], message["table"], message["type"]) == ("shop", "orders", "UPDATE")
    assert message["_tidb"] == {"commitTs": 452413071860891649}
    assert message["data"] == [{"id": "7"}] and message["old"] is None
    with pytest.raises(sc.CsvError, match="4 fields where the table version's 1 columns and 6 leading"):
        sc.message(layout(INT, options=old_value), '"D","orders","shop",1')
    with pytest.raises(sc.CsvError, match="none of I, U and D"):
        sc.message(layout(INT), '"X","orders","shop",1,7')
    with pytest.raises(sc.CsvError, match="not a number"):
        sc.message(layout(INT), '"I","orders","shop",soon,7')


def test_split_passes_control_messages_and_names_what_is_wrong_with_a_record():
    key = layout(INT).to_key()
    watermark = b'{"type":"TIDB_WATERMARK","_tidb":{"watermarkTs":5}}'
    assert sc.split(None, watermark, Compression.NONE) == [(watermark, None)]
    [(payload, error)] = sc.split(key, b'"I","t","d",3,1', Compression.NONE)
    assert error is None and orjson.loads(payload or b"")["data"] == [{"id": "1"}]
    [(payload, error)] = sc.split(key, b'"I","t","d",3', Compression.NONE)
    assert payload is None and error and error.startswith("csv: 4 fields")
    [(payload, error)] = sc.split(b"", b'"I","t","d",3,1', Compression.NONE)
    assert payload is None and "no schema file" in (error or "")
    [(payload, error)] = sc.split(key, b'"I","t","d",3,"\xff"', Compression.NONE)
    assert payload is None and "not UTF-8" in (error or "")


@pytest.mark.parametrize(
    ("params", "problem"),
    [
        ({"sink-csv-delimiter": "abcd"}, "1 to 3 bytes"),
        ({"sink-csv-quote": "''"}, "one character"),
        ({"sink-csv-delimiter": '"|'}, "share a character"),
        ({"sink-csv-binary-encoding-method": "base32"}, "base64"),
        ({"sink-csv-include-commit-ts": "false"}, "include-commit-ts = true"),
    ],
)
def test_settings_the_sink_refuses_or_the_mirror_cannot_follow_fail_at_start(tmp_path, params, problem):
    with pytest.raises(ConfigError, match=problem):
        IngestConfig.from_params(
            {"input": str(tmp_path), "target-path": str(tmp_path), "protocol": "csv", **params}
        )


def test_csv_settings_belong_to_the_csv_protocol_and_the_storage_source(tmp_path):
    base = {"input": str(tmp_path), "target-path": str(tmp_path)}
    with pytest.raises(ConfigError, match="apply to --protocol csv only"):
        IngestConfig.from_params({**base, "sink-csv-delimiter": "|"})
    with pytest.raises(ConfigError, match="storage sink"):
        IngestConfig.from_params({**base, "protocol": "csv", "input-format": "records"})
    config = IngestConfig.from_params({**base, "protocol": "csv", "sink-csv-delimiter": "|"})
    assert config.csv == CsvOptions(delimiter="|") and config.codec.name == "csv"


# -- layouts from schema files ------------------------------------------------------------------------------


def test_schema_file_types_become_canal_json_words():
    assert [mysql_type(t) for t in ("BIT UNSIGNED", "YEAR UNSIGNED", "DECIMAL UNSIGNED", "VARBINARY")] == [
        "bit", "year", "decimal unsigned", "varbinary"
    ]  # fmt: skip


def schema_file(version: int, query: str, *columns: str, table: str = "t") -> dict:
    return {
        "Table": table, "Schema": "d", "TableVersion": version, "Query": query,
        "TableColumns": [{"ColumnName": c, "ColumnType": "INT"} for c in columns],
    }  # fmt: skip


CREATE = "CREATE TABLE d.t (id INT PRIMARY KEY, a INT, v INT AS (a + 1) VIRTUAL, e ENUM('0','1'))"


def test_virtual_columns_hidden_columns_and_members_follow_the_ddls_through_renames():
    files = [
        schema_file(1, CREATE, "id", "a", "v", "e"),
        schema_file(2, "ALTER TABLE d.t ADD COLUMN s INT AS (a * 2) STORED", "id", "a", "v", "e", "s"),
        schema_file(3, "CREATE INDEX i ON d.t ((a + 2))", "id", "a", "v", "e", "s", "_V$_i_0"),
        schema_file(4, "RENAME TABLE d.t TO d.u", "id", "a", "v", "e", "s", "_V$_i_0", table="u"),
        schema_file(5, "ALTER TABLE d.u MODIFY COLUMN v INT", "id", "a", "v", "e", "s", "_V$_i_0", table="u"),
    ]
    found = layouts(files, CsvOptions())
    names = {key: [c.name for c in found[key].columns] for key in found}
    assert names == {
        ("d", "t", 1): ["id", "a", "e"],
        ("d", "t", 2): ["id", "a", "e", "s"],
        ("d", "t", 3): ["id", "a", "e", "s"],
        ("d", "u", 4): ["id", "a", "e", "s"],
        ("d", "u", 5): ["id", "a", "v", "e", "s"],
    }
    assert found[("d", "u", 4)].columns[2].members == ("0", "1")


# -- TiCDC's own storage sink, the same history as CSV and as Canal-JSON ---------------------------------


def _layouts_of(root: Path, options: CsvOptions) -> dict:
    return layouts([json.loads(p.read_text()) for p in root.glob("**/meta/schema_*.json")], options)


def csv_rows(root: Path, options: CsvOptions) -> list[tuple]:
    known = _layouts_of(root, options)
    rows = []
    for path in sorted(root.glob("**/CDC*.csv")):
        database, table, version = path.relative_to(root).parts[:3]
        for record in sc.records(path.read_bytes(), options.quote):
            rows.append(sc.message(known[(database, table, int(version))], record.decode()))
    return rows


def canal_rows(root: Path) -> list[dict]:
    lines = (line for path in sorted(root.glob("**/CDC*.json")) for line in path.read_bytes().splitlines())
    return [json.loads(line) for line in lines if line.strip()]


def comparable(message: dict, types: dict[str, str] | None = None) -> tuple:
    """A row event as (table, type, commitTs, values); FLOAT and DOUBLE as numbers, which CSV writes with
    Go's %v and Canal-JSON without an exponent."""
    types = types or message["mysqlType"]
    data = {
        name: float(v) if v is not None and types[name].split(" ")[0] in FLOATS else v
        for name, v in message["data"][0].items()
    }
    return (
        message["database"],
        message["table"],
        message["type"],
        message["_tidb"]["commitTs"],
        repr(sorted(data.items())),
    )


@pytest.mark.parametrize("corpus", KIT_STORAGE)
def test_every_csv_record_is_the_canal_json_line_the_same_sink_wrote(corpus):
    csv = Counter(comparable(m) for m in csv_rows(CORPORA / corpus / "storage-csv", CsvOptions()))
    canal = Counter(comparable(m) for m in canal_rows(CORPORA / corpus / "storage-canal-json"))
    assert csv == canal and sum(csv.values()) >= 10


@pytest.mark.parametrize("corpus", KIT_STORAGE)
def test_with_old_values_an_update_is_its_old_row_deleted_and_its_new_row_inserted(corpus):
    plain = csv_rows(CORPORA / corpus / "storage-csv", CsvOptions())
    old_value = csv_rows(CORPORA / corpus / "storage-csv-old-value", CsvOptions(output_old_value=True))

    def without_op(m: dict) -> tuple:
        database, table, _, ts, values = comparable(m)
        return database, table, ts, values

    inserted = Counter(without_op(m) for m in old_value if m["type"] == "INSERT")
    assert inserted == Counter(without_op(m) for m in plain if m["type"] in ("INSERT", "UPDATE"))
    updates = sum(m["type"] == "UPDATE" for m in plain)
    assert updates > 0 and len(old_value) == len(plain) + updates


def test_records_follow_the_column_order_the_ddls_give_not_the_schema_files_listing():
    # TiDB lists a column added FIRST or AFTER, or rewritten by MODIFY COLUMN, at the end of the schema file,
    # while the records hold columns in table order (as the columns and typechanges corpora show).
    files = [
        schema_file(1, "CREATE TABLE d.t (id INT PRIMARY KEY, c BINARY(4), n INT)", "id", "c", "n"),
        schema_file(2, "ALTER TABLE d.t MODIFY COLUMN c BINARY(8)", "id", "n", "c"),
        schema_file(3, "ALTER TABLE d.t ADD COLUMN i INT FIRST", "id", "n", "c", "i"),
        schema_file(4, "ALTER TABLE d.t CHANGE COLUMN n m INT AFTER i", "id", "c", "i", "m"),
        schema_file(5, "ALTER TABLE d.t ADD COLUMN z INT", "id", "c", "i", "m", "z", table="t"),
    ]
    found = layouts(files, CsvOptions())
    assert {key[2]: [c.name for c in found[key].columns] for key in found} == {
        1: ["id", "c", "n"],
        2: ["id", "c", "n"],
        3: ["i", "id", "c", "n"],
        4: ["i", "m", "id", "c"],
        5: ["i", "m", "id", "c", "z"],
    }
    # A table whose DDLs the sink does not hold keeps the file's order.
    assert [c.name for c in layouts([schema_file(7, "", "b", "a")], CsvOptions())[("d", "t", 7)].columns] == [
        "b", "a"
    ]  # fmt: skip

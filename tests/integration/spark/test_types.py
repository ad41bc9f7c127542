"""Every TiDB type, with edge values, through every protocol and compression, lands exactly in Delta.

The upstream values are written by hand below; the expected Delta values come from them and from the
documented type mapping (README), never from our own output.
"""

from __future__ import annotations

from datetime import date, datetime, timezone
from decimal import Decimal, localcontext
from zoneinfo import ZoneInfo

import pytest
from delta.tables import DeltaTable
from mirror import delta_rows, expected_rows, located

from ingest.decode.compression import Compression
from ingest.model import TableId
from testkit.sample import Stream

TYPES = TableId("app", "types")
CREATE = """CREATE TABLE `app`.`types` (
  `id` int(11) NOT NULL,
  `ti` tinyint(4) DEFAULT NULL, `tiu` tinyint(3) unsigned DEFAULT NULL,
  `si` smallint(6) DEFAULT NULL, `siu` smallint(5) unsigned DEFAULT NULL,
  `mi` mediumint(9) DEFAULT NULL, `miu` mediumint(8) unsigned DEFAULT NULL,
  `i` int(11) DEFAULT NULL, `iu` int(10) unsigned DEFAULT NULL,
  `bi` bigint(20) DEFAULT NULL, `biu` bigint(20) unsigned DEFAULT NULL,
  `d65` decimal(65,30) DEFAULT NULL, `d` decimal(10,4) DEFAULT NULL,
  `f` float DEFAULT NULL, `db` double DEFAULT NULL,
  `c` char(4) DEFAULT NULL, `vc` varchar(64) DEFAULT NULL, `tx` text DEFAULT NULL,
  `b` binary(4) DEFAULT NULL, `vb` varbinary(300) DEFAULT NULL, `bl` blob DEFAULT NULL,
  `dt` date DEFAULT NULL, `dtm` datetime(6) DEFAULT NULL, `ts` timestamp(3) NULL DEFAULT NULL,
  `tm` time DEFAULT NULL, `yr` year(4) DEFAULT NULL,
  `bt` bit(64) DEFAULT NULL, `e` enum('a','b','c') DEFAULT NULL, `st` set('x','y','z') DEFAULT NULL,
  `js` json DEFAULT NULL,
  PRIMARY KEY (`id`)
)"""

ZONE = "America/New_York"
NY = ZoneInfo(ZONE)
MAX_D65 = Decimal("9" * 35 + "." + "9" * 30)
# From text: negating MAX_D65 would round it to Python's 28-digit default context (-1E+35, out of range).
MIN_D65 = Decimal("-" + "9" * 35 + "." + "9" * 30)

ROWS = [
    {  # minimum values
        "id": 1, "ti": -128, "tiu": 0, "si": -32768, "siu": 0, "mi": -8388608, "miu": 0,
        "i": -2147483648, "iu": 0, "bi": -9223372036854775808, "biu": 0,
        "d65": MIN_D65, "d": Decimal("-999999.9999"), "f": -3.4028234663852886e38,
        "db": -1.7976931348623157e308,
        "c": "", "vc": "", "tx": "", "b": bytes(4), "vb": b"", "bl": b"",
        "dt": date(1000, 1, 1), "dtm": datetime(1000, 1, 1, 0, 0, 0),
        "ts": datetime(1970, 1, 1, 0, 0, 1, tzinfo=timezone.utc), "tm": "-838:59:59", "yr": 1901,
        "bt": 0, "e": "a", "st": "", "js": "null",
    },
    {  # maximum values
        "id": 2, "ti": 127, "tiu": 255, "si": 32767, "siu": 65535, "mi": 8388607, "miu": 16777215,
        "i": 2147483647, "iu": 4294967295, "bi": 9223372036854775807, "biu": 18446744073709551615,
        "d65": MAX_D65, "d": Decimal("999999.9999"), "f": 3.4028234663852886e38, "db": 1.7976931348623157e308,
        "c": "ÿÿÿÿ", "vc": "测试 ✓ «»", "tx": "x" * 1000, "b": b"\xff\xff\xff\xff",
        "vb": bytes(range(256)), "bl": bytes(range(255, -1, -1)),
        "dt": date(9999, 12, 31), "dtm": datetime(9999, 12, 31, 23, 59, 59, 999999),
        "ts": datetime(2038, 1, 19, 3, 14, 7, 999000, tzinfo=timezone.utc), "tm": "838:59:59", "yr": 2155,
        "bt": 18446744073709551615, "e": "c", "st": "x,y,z", "js": '{"name": "Zoë", "tags": ["北京", "€"]}',
    },
    {  # zero dates, the empty ENUM (index 0), TIMESTAMPs either side of a DST change
        "id": 3, "dt": "0000-00-00", "dtm": "0000-00-00 00:00:00", "ts": "0000-00-00 00:00:00.000",
        "e": "", "st": "x,z", "bt": 1 << 63, "d": Decimal("0.0001"),
        "f": 3.14, "db": 0.1, "tm": "12:34:56",
    },
    {"id": 4, "ts": datetime(2026, 3, 8, 1, 30, tzinfo=NY)},  # EST, before the spring-forward gap
    {"id": 5, "ts": datetime(2026, 3, 8, 3, 30, tzinfo=NY)},  # EDT, after it: one hour later
    {"id": 6},  # every column NULL but the key
]  # fmt: skip

ZERO_DATES = {"dt", "dtm", "ts"}


def build(protocol: str, encoding: str, compression: Compression) -> Stream:
    s = Stream(topic="cdc", partitions=1, tz_name=ZONE, protocol=protocol, encoding=encoding)
    s.compression = compression
    s.create_table(CREATE, s.tso(1))
    for n, row in enumerate(ROWS):
        s.insert(TYPES, row, s.tso(10 + n))
    s.update(TYPES, (6,), {"e": "b", "vb": b"\x00\x80\xff"}, s.tso(20))
    s.delete(TYPES, (1,), s.tso(21))
    s.insert(TYPES, ROWS[0], s.tso(22))
    s.watermark(s.tso(30))
    return s


def expected(s: Stream) -> dict:
    rows = expected_rows(s, TYPES, s.tso(30))
    upstream = s.state_at(s.tso(30))[TYPES]
    for key, row in rows.items():
        for name in ZERO_DATES:
            if isinstance(row[name], str) and row[name].startswith("0000"):
                row[name] = None  # zero dates land as NULL (documented)
        d65 = upstream[key].get("d65")
        if d65 is not None:
            with localcontext() as exact:
                exact.prec = 100
                row["d65"] = f"{d65:.30f}"  # DECIMAL(65,30) is kept as exact text
    return rows


@pytest.mark.parametrize(
    ("protocol", "encoding", "compression"),
    [
        # CI reads each encoding once; compressed records are read in CI by the claim-check tests
        ("canal-json", "json", Compression.NONE),
        pytest.param("canal-json", "json", Compression.LZ4, marks=pytest.mark.full),
        pytest.param("simple", "json", Compression.SNAPPY, marks=pytest.mark.full),
        ("simple", "avro", Compression.NONE),
    ],
)
def test_every_type_lands_exactly(spark, run, lake, protocol, encoding, compression):
    s = build(protocol, encoding, compression)
    params = {"protocol": protocol, "compression": compression.value}
    if protocol == "simple":
        params["simple-encoding"] = encoding
    result = run(s, **params)
    assert result.quarantined == 0
    assert delta_rows(spark, str(lake), TYPES) == expected(s)
    fields = {
        f.name: f.dataType.simpleString()
        for f in DeltaTable.forPath(spark, located(lake, TableId("app", "types"))).toDF().schema
    }
    assert fields["biu"] == "decimal(20,0)" and fields["bt"] == "decimal(20,0)"
    assert fields["d65"] == "string" and fields["dtm"] == "timestamp_ntz" and fields["ts"] == "timestamp"


def test_timestamps_across_a_dst_change_keep_their_instant(spark, run, lake):
    s = build("canal-json", "json", Compression.NONE)
    run(s)
    rows = delta_rows(spark, str(lake), TYPES)
    # 01:30 EST and 03:30 EDT on the spring-forward day are one hour apart, not two.
    assert (rows[(5,)]["ts"] - rows[(4,)]["ts"]).total_seconds() == 3600


@pytest.mark.parametrize("module", ["ingest.apply.retype", "ingest.apply.generated"])
def test_python_udfs_run_row_at_a_time_whichever_session_is_active_when_they_are_made(spark, module):
    """Imported while a session with Arrow-optimized Python UDFs is active (a notebook imports after its
    session exists), pyspark would make our UDFs Arrow-batched, a form that hangs a task forever in
    pyspark 4.2.0 (SPARK-58241; a TEXT -> JSON rewrite did). The module is executed afresh here, under such
    a session, without replacing the one every other test uses."""
    import importlib.util

    from pyspark.util import PythonEvalType

    spark.conf.set("spark.sql.execution.pythonUDF.arrow.enabled", "true")
    spec = importlib.util.find_spec(module)
    assert spec is not None and spec.loader is not None
    fresh = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fresh)
    udfs = {name: value.evalType for name, value in vars(fresh).items() if hasattr(value, "evalType")}
    assert udfs and set(udfs.values()) == {PythonEvalType.SQL_BATCHED_UDF}, udfs

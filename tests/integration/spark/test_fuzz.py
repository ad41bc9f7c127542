"""Mutated messages at every decoder: nothing crashes, and every bad record is quarantined with its position.

Valid streams (Canal-JSON, Simple JSON, Simple Avro, with and without compression) come from the sample
model; Hypothesis mutates their bytes (flips, truncations, insertions) and JSON fields (wrong types, missing
fields). One batch per example keeps Spark busy but the suite short.
"""

from __future__ import annotations

import base64
import os

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mutations import BYTE_MUTATION, mutate_bytes

from ingest.config import IngestConfig
from ingest.decode.compression import Compression
from ingest.errors import IngestError
from ingest.pipeline import run_files
from ingest.state.progress import load_progress
from testkit.sample import build_sample

# Sized for CI's time budget; HYPOTHESIS_PROFILE=explore draws many more.
EXAMPLES = 3 if os.environ.get("HYPOTHESIS_PROFILE", "ci") == "ci" else 40

PROTOCOLS = [
    ("canal-json", "json", Compression.NONE),
    ("simple", "json", Compression.NONE),
    ("simple", "avro", Compression.NONE),
    ("canal-json", "json", Compression.LZ4),
]

JSON_VALUES = st.one_of(
    st.none(), st.booleans(), st.integers(), st.text(max_size=5), st.just([]), st.just({})
)
FIELD_MUTATION = st.tuples(st.just("field"), st.integers(0, 50), JSON_VALUES)
DROP_FIELD = st.tuples(st.just("drop"), st.integers(0, 50))


def _mutate_json(value: bytes, op: tuple) -> bytes:
    try:
        message = orjson.loads(value)
    except orjson.JSONDecodeError:
        return value
    if not isinstance(message, dict) or not message:
        return value
    name = sorted(message)[op[1] % len(message)]
    if op[0] == "drop":
        del message[name]
    else:
        message[name] = op[2]
    return orjson.dumps(message)


@settings(max_examples=EXAMPLES, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(
    protocol=st.sampled_from(PROTOCOLS),
    mutations=st.lists(
        st.tuples(st.integers(0, 200), st.one_of(BYTE_MUTATION, FIELD_MUTATION, DROP_FIELD)),
        min_size=5,
        max_size=25,
    ),
)
def test_mutated_messages_are_quarantined_never_crash(spark, tmp_path_factory, protocol, mutations):
    name, encoding, compression = protocol
    stream = build_sample(protocol=name, encoding=encoding, compression=compression)
    records = stream.records
    mutated: dict[tuple[int, int], bytes] = {}
    for index, op in mutations:
        record = records[index % len(records)]
        raw = base64.b64decode(record["value"])
        if op[0] in ("field", "drop"):
            if encoding != "json":
                continue
            plain = raw if compression is Compression.NONE else None
            if plain is None:
                continue
            new = _mutate_json(plain, op)
        else:
            new = mutate_bytes(raw, op)
        record["value"] = base64.b64encode(new).decode()
        mutated[(record["partition"], record["offset"])] = new
    work = tmp_path_factory.mktemp("fuzz")
    stream.write(work / "input")
    params = {
        "input": str(work / "input"), "target-path": str(work / "lake"), "protocol": name,
        "compression": compression.value, "max-bad-ratio": "1", "unknown-ddl": "skip",
    }  # fmt: skip
    if name == "simple":
        params["simple-encoding"] = encoding
    config = IngestConfig.from_params(params)
    try:
        result = run_files(spark, config)
    except IngestError:
        # A clear stop (a mutated message became a fatal one, or a DDL the mirror refuses): progress stays.
        assert load_progress(spark, config.state_path, config.stream_id).run_id == 0
        return
    assert result.run_id == 1
    quarantined = {}
    path = f"{work}/lake/_ingest/quarantine"
    from delta.tables import DeltaTable

    if DeltaTable.isDeltaTable(spark, path):
        quarantined = {
            (r["partition"], r["offset"]): bytes(r["value"])
            for r in spark.read.format("delta").load(path).collect()
        }
    # Everything quarantined is a record we mutated, with its position and exactly its wire bytes.
    for position, value in quarantined.items():
        assert position in mutated, position
        assert value == mutated[position]
    # Every record the decoder calls bad is among them: nothing is dropped silently.
    from ingest.source.decoding import KIND_BAD, decode_json, prepare_payload
    from ingest.source.files import read_messages

    codec = config.codec
    prepared = prepare_payload(read_messages(spark, config.input_path, {}), compression, codec)
    bad = {
        (r["partition"], r["offset"])
        for r in decode_json(prepared, codec).where(f"kind = '{KIND_BAD}'").collect()
    }
    assert bad <= set(quarantined)
    assert result.quarantined >= len(bad)

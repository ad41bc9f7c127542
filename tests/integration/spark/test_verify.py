"""Verify: the mirror read as of a snapshot TSO against a Dumpling export at that TSO (SQL and CSV), and two
mirrors against each other. Differences are made on one side from the upstream model, and the keys the
report names are the model's."""

from __future__ import annotations

import copy
import shutil
from decimal import Decimal

import orjson
import pytest
from asof_history import CUSTOMERS_T, NOTES_T, ORDERS_T
from dumpling_export import write_export

from ingest.cli import main
from ingest.commands.verify import verify_mirrors, verify_snapshot
from ingest.commands.verify_rules import DiffKind
from ingest.load_config import LoadConfig
from ingest.model import TableState
from ingest.state.table_state import committing, state_to_metadata


class _Upstream:
    """The upstream model with a few rows changed, as a Dumpling export of a diverged upstream would hold."""

    def __init__(self, stream, edit):
        self.tz_name = stream.tz_name
        self._stream, self._edit = stream, edit

    def state_at(self, ts):
        state = copy.deepcopy(self._stream.state_at(ts))
        self._edit(state)
        return state


def _changed(state):
    state[CUSTOMERS_T][(5,)]["name"] = "changed by hand"


def _deleted(state):
    del state[ORDERS_T][(101,)]


def _added(state):
    state[NOTES_T][(99,)] = {"id": 99, "v": "only upstream"}


def _off_by_one(state):
    state[CUSTOMERS_T][(4,)]["balance"] += Decimal("0.01")


CASES = {
    # case: (edit, table, key, kind)
    "changed": (_changed, CUSTOMERS_T, {"id": 5}, DiffKind.DIFFERENT),
    "deleted": (_deleted, ORDERS_T, {"order_id": 101}, DiffKind.ONLY_LEFT),
    "added": (_added, NOTES_T, {"id": 99}, DiffKind.ONLY_RIGHT),
    "off_by_one": (_off_by_one, CUSTOMERS_T, {"id": 4}, DiffKind.DIFFERENT),
}


def _export(h, tmp_path, data_format, edit=None):
    upstream = h.stream if edit is None else _Upstream(h.stream, edit)
    return write_export(upstream, h.gs[1], tmp_path / "export", h.creates_at_g2, data_format=data_format)


def _config(h, export):
    return LoadConfig.from_params({"input": str(export), "target-path": str(h.lake)})


@pytest.mark.parametrize("data_format", ["sql", "csv"])
def test_a_correct_mirror_matches_the_export_on_every_table(
    spark, mirrored_history, tmp_path, data_format, capsys
):
    h = mirrored_history
    export = _export(h, tmp_path, data_format)
    report = verify_snapshot(spark, _config(h, export))
    expected = {str(t): len(h.stream.state_at(h.gs[1])[t]) for t in h.creates_at_g2}
    assert {t.table: (t.matches, t.left.rows, t.right.rows) for t in report.tables} == {
        t: (True, n, n) for t, n in expected.items()
    }
    assert report.matches and report.tso == h.gs[1]
    if data_format == "csv":  # the command line: its exit code and summary
        assert main(["verify", "--target-path", str(h.lake), "--snapshot", str(export)]) == 0
        assert "MATCH: 3 of 3 tables match" in capsys.readouterr().out


# Each kind of difference on one export format (both formats are read in full by the test above).
@pytest.mark.parametrize(
    ("case", "data_format"), [("changed", "sql"), ("deleted", "csv"), ("added", "sql"), ("off_by_one", "csv")]
)
def test_a_difference_is_pinpointed_by_key_with_both_rows(
    spark, mirrored_history, tmp_path, data_format, case
):
    h = mirrored_history
    edit, table, key, kind = CASES[case]
    export = _export(h, tmp_path, data_format, edit)
    report = verify_snapshot(spark, _config(h, export), [table])

    (verdict,) = report.tables
    assert not report.matches and not verdict.matches
    assert (verdict.differing_chunks, verdict.differing_rows) == (1, 1)
    (diff,) = verdict.diffs
    assert (orjson.loads(diff.key), diff.kind) == (key, kind)
    mirror_row = h.stream.state_at(h.gs[1])[table].get(tuple(key.values()))
    upstream_row = _Upstream(h.stream, edit).state_at(h.gs[1])[table].get(tuple(key.values()))
    if case in ("changed", "off_by_one"):
        column = "name" if case == "changed" else "balance"
        assert orjson.loads(diff.left)[column] == _json(mirror_row[column])
        assert orjson.loads(diff.right)[column] == _json(upstream_row[column])
        assert {k for k, v in orjson.loads(diff.left).items() if orjson.loads(diff.right)[k] != v} == {column}
    elif case == "deleted":
        assert diff.right is None and orjson.loads(diff.left)["amount"] == _json(mirror_row["amount"])
    else:
        assert diff.left is None and orjson.loads(diff.right) == upstream_row
    assert f"key {diff.key}: {kind.value.format(left='mirror', right='snapshot')}" in report.render()


def _json(value):
    return float(value) if isinstance(value, Decimal) else value


def test_two_mirrors_compare_as_of_the_same_tso_and_a_hand_edit_shows(
    spark, mirrored_history, tmp_path, capsys
):
    h = mirrored_history
    other = tmp_path / "other"
    shutil.copytree(h.lake, other)
    assert verify_mirrors(spark, str(h.lake), str(other)).matches

    # A row changed by hand in the other mirror's newest version (its commit claims to be consistent at G3).
    metadata = state_to_metadata(TableState(applied_ts=h.gs[2]), run_id=3, step="edited by hand")
    with committing(spark, metadata):
        spark.sql(f"UPDATE delta.`{other}/shop/customers` SET name = 'edited by hand' WHERE id = 6")
    assert main(["verify", "--target-path", str(h.lake), "--other-target-path", str(other)]) == 1
    out = capsys.readouterr().out
    assert f"as of TSO {h.gs[2]}" in out and "MISMATCH: 2 of 3 tables match" in out
    assert 'key {"id":6}: values differ' in out
    mirror_row, other_row = (
        line.strip() for line in out.splitlines() if line.strip().startswith(("mirror:", "other:"))
    )
    before = h.stream.state_at(h.gs[2])[CUSTOMERS_T][(6,)]["name"]
    assert orjson.loads(mirror_row.partition(": ")[2])["name"] == before
    assert orjson.loads(other_row.partition(": ")[2])["name"] == "edited by hand"
    # As of G2, before the edit, the two agree.
    assert verify_mirrors(spark, str(h.lake), str(other), tso=h.gs[1], tables=[CUSTOMERS_T]).matches

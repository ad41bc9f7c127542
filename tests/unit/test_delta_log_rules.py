"""The direct Delta log reader's own rules, on hand-written logs: what it takes for local, and what it
leaves to Spark. Its reading of logs Delta wrote is tested against Spark in tests/integration."""

from __future__ import annotations

from pathlib import Path

import pytest

from ingest.lake import delta_log


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("/lake/shop/orders", Path("/lake/shop/orders")),
        ("lakehouse/shop/orders", Path("lakehouse/shop/orders")),
        ("file:///lake/a%20b", Path("/lake/a b")),
        ("file:/lake/x", Path("/lake/x")),
        ("/Volumes/main/tidb/lake", Path("/Volumes/main/tidb/lake")),
        ("s3://bucket/lake", None),
        ("abfss://c@account.dfs.core.windows.net/lake", None),
        ("dbfs:/lake", None),
    ],
)
def test_only_paths_of_this_file_system_are_read_directly(path, expected):
    assert delta_log.local_dir(path) == expected


def _log(tmp_path: Path, *commits: bytes) -> Path:
    (tmp_path / "_delta_log").mkdir()
    for version, text in enumerate(commits):
        (tmp_path / "_delta_log" / f"{version:020d}.json").write_bytes(text)
    return tmp_path


def test_a_commit_that_does_not_parse_is_left_to_spark(tmp_path):
    table = _log(tmp_path, b'{"commitInfo":{}}\n{"add": {"path": "a.parquet"\n')
    with pytest.raises(delta_log.Unreadable, match="commit 0 does not parse"):
        list(delta_log.commits(table))


def test_coordinated_commits_are_left_to_spark(tmp_path):
    protocol = (
        b'{"protocol":{"minReaderVersion":3,"minWriterVersion":7,"readerFeatures":["catalogManaged"]}}\n'
    )
    with pytest.raises(delta_log.Unreadable, match="coordinated"):
        delta_log.read_commit(_log(tmp_path, protocol), 0)


def test_no_log_is_left_to_spark(tmp_path):
    with pytest.raises(delta_log.Unreadable, match="no Delta log"):
        delta_log.commit_versions(tmp_path)


def test_a_data_file_that_does_not_read_is_left_to_spark(tmp_path):
    table = _log(
        tmp_path,
        b'{"metaData":{"id":"x","partitionColumns":[],"configuration":{}}}\n'
        b'{"add":{"path":"part-0.parquet","size":3,"dataChange":true}}\n',
    )
    (table / "part-0.parquet").write_bytes(b"not parquet")
    with pytest.raises(delta_log.Unreadable, match=r"part-0\.parquet"):
        delta_log.read_rows(table, ["id"])


def test_removed_files_skip_those_added_after_the_version(tmp_path):
    table = _log(
        tmp_path,
        b'{"add":{"path":"a.parquet","size":1,"dataChange":true}}\n',
        b'{"add":{"path":"b.parquet","size":1,"dataChange":true}}\n{"remove":{"path":"a.parquet"}}\n',
        b'{"remove":{"path":"b.parquet"}}\n{"add":{"path":"c%20d.parquet","size":1,"dataChange":true}}\n',
    )
    assert delta_log.files_removed_since(table, 0) == [table / "a.parquet"]  # b came after version 0
    assert delta_log.files_removed_since(table, 1) == [table / "b.parquet"]
    assert delta_log.files_removed_since(table, 2) == []

"""A Delta table's log read straight from a local file system, without Spark: its commits, the files a
version needs that later commits removed, and the rows of a small table. I/O, standard library (and
pyarrow for checkpoints and data files, where it is installed).

What this reader does not follow (a path that is not local, a table whose commits a catalog coordinates, a
V2 checkpoint, column mapping, partitions or deletion vectors in rows it is asked to read) raises
``Unreadable``, and the caller asks Spark instead: it is a shortcut, never a second opinion.
"""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import orjson

from ingest.lake.names import SchemaName

LOG_DIR = "_delta_log"
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]+:")
_COMMIT = re.compile(r"^(\d{20})\.json$")
_CHECKPOINT = re.compile(r"^(\d{20})\.checkpoint(?:\.(\d{10})\.(\d{10}))?\.parquet$")
_V2_CHECKPOINT = re.compile(r"^\d{20}\.checkpoint\.[0-9a-fA-F-]{36}\.(?:json|parquet)$")
# Reader or writer features whose commits may not (yet) be files of the log directory.
_COORDINATED = {"catalogManaged", "catalogOwned-preview", "coordinatedCommits-preview"}
_Z85 = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"


_Files = dict[tuple[str, str | None], dict[str, Any]]  # the live add actions, by (path, deletion vector)


class Unreadable(Exception):
    """This reader cannot answer for the table; Spark can."""


def local_dir(path: str) -> Path | None:
    """The directory of a table given as a local path or a ``file:`` URI; None for any other scheme
    (``s3://``, ``abfss://``, ``dbfs:/``, ...)."""
    if not _SCHEME.match(path):
        return Path(path)
    parsed = urlparse(path)
    return Path(unquote(parsed.path)) if parsed.scheme == "file" else None


def local_mirror(target_path: str, state_path: str) -> tuple[Path, Path]:
    """The mirror's root and state directories, when both are on this machine's file system.

    Raises:
        Unreadable: either is elsewhere, or the root is not a directory here; or the mirror is catalog
            tables by name (its state a schema), which only Spark reads.
    """
    if isinstance(state_path, SchemaName):
        raise Unreadable(f"{state_path.plain()}: the mirror is catalog tables, read through Spark")
    root, state = local_dir(target_path), local_dir(state_path)
    if root is None or state is None or not root.is_dir():
        raise Unreadable(f"{target_path}: not a directory of this machine")
    return root, state


@dataclass(frozen=True)
class Commit:
    version: int
    info: dict[str, Any]  # the commitInfo action ({} when the commit has none)
    actions: tuple[dict[str, Any], ...]  # every other action, in order


def _log(table: Path) -> Path:
    log = table / LOG_DIR
    if not log.is_dir():
        raise Unreadable(f"{table}: no Delta log here")
    return log


def commit_versions(table: Path) -> list[int]:
    """The versions whose commit file is in the log, oldest first (those DESCRIBE HISTORY lists)."""
    return sorted(int(m.group(1)) for name in os.listdir(_log(table)) if (m := _COMMIT.match(name)))


def read_commit(table: Path, version: int) -> Commit:
    """One commit file, parsed; its protocol, where it has one, must be one this reader follows."""
    info: dict[str, Any] = {}
    actions = []
    with open(_log(table) / f"{version:020d}.json", "rb") as f:
        for line in f:
            if not line.strip():
                continue
            try:
                action = orjson.loads(line)
            except orjson.JSONDecodeError as exc:
                raise Unreadable(f"{table}: commit {version} does not parse: {exc}") from exc
            if "commitInfo" in action:
                info = action["commitInfo"] or {}
            else:
                actions.append(action)
                if "protocol" in action:
                    _check_protocol(table, action["protocol"])
    return Commit(version, info, tuple(actions))


def _check_protocol(table: Path, protocol: dict[str, Any]) -> None:
    features = set(protocol.get("readerFeatures") or []) | set(protocol.get("writerFeatures") or [])
    if features & _COORDINATED:
        raise Unreadable(f"{table}: its commits are coordinated ({sorted(features & _COORDINATED)})")


def commits(table: Path, after: int = -1) -> Iterator[Commit]:
    """Every commit in the log above version ``after``, oldest first."""
    for version in commit_versions(table):
        if version > after:
            yield read_commit(table, version)


def _file_key(action: dict[str, Any]) -> tuple[str, str | None]:
    dv = action.get("deletionVector") or {}
    return action["path"], (dv.get("storageType", "") + dv.get("pathOrInlineDv", "") if dv else None)


def files_removed_since(table: Path, version: int) -> list[Path]:
    """The files ``version`` reads (data files and deletion vector files) that a later commit removed:
    the only ones VACUUM may have deleted since. A file a later commit added and removed again was never
    part of ``version``, so it is left out."""
    added_later: set[tuple[str, str | None]] = set()
    removed: _Files = {}
    for commit in commits(table, after=version):
        for action in commit.actions:
            if "add" in action:
                added_later.add(_file_key(action["add"]))
            elif "remove" in action:
                key = _file_key(action["remove"])
                if key not in added_later:
                    removed[key] = action["remove"]
    out = []
    for action in removed.values():
        out.append(_data_file(table, action["path"]))
        dv = _dv_file(table, action.get("deletionVector"))
        if dv is not None:
            out.append(dv)
    return out


def feed_files(table: Path, first: int, last: int) -> list[Path]:
    """The files the change data feed of versions ``first`` to ``last`` reads: a commit's change files
    (``cdc``) where it wrote some, else the data files it added and removed (inserts and deletes), with
    their deletion vectors. VACUUM deletes them once they are older than its retention."""
    out: list[Path] = []
    for version in range(first, last + 1):
        actions = read_commit(table, version).actions
        changed = [a["cdc"] for a in actions if "cdc" in a]
        if not changed:
            changed = [a.get("add") or a.get("remove") for a in actions if "add" in a or "remove" in a]
            changed = [a for a in changed if a and a.get("dataChange", True)]
        for action in changed:
            out.append(_data_file(table, action["path"]))
            dv = _dv_file(table, action.get("deletionVector"))
            if dv is not None:
                out.append(dv)
    return out


def _data_file(table: Path, path: str) -> Path:
    if "://" in path or path.startswith("file:"):
        local = local_dir(path)
        if local is None:
            raise Unreadable(f"{table}: data file {path} is not on a local file system")
        return local
    return table / unquote(path)


def _dv_file(table: Path, dv: dict[str, Any] | None) -> Path | None:
    """Where a deletion vector lives: ``u`` a file named by a UUID under the table (after a random
    prefix), ``p`` an absolute path, ``i`` inline in the log (no file)."""
    if not dv or dv.get("storageType") == "i":
        return None
    text = dv.get("pathOrInlineDv", "")
    if dv.get("storageType") == "p":
        return _data_file(table, text)
    prefix, encoded = text[:-20], text[-20:]
    name = f"deletion_vector_{_z85_uuid(encoded)}.bin"
    return table / prefix / name if prefix else table / name


def _z85_uuid(encoded: str) -> uuid.UUID:
    data = bytearray()
    for i in range(0, len(encoded), 5):
        value = 0
        for char in encoded[i : i + 5]:
            value = value * 85 + _Z85.index(char)
        data += value.to_bytes(4, "big")
    return uuid.UUID(bytes=bytes(data))


def read_rows(table: Path, columns: Sequence[str]) -> list[dict[str, Any]]:
    """The rows of the table's newest version, as Python values, for a small table of our own.

    Raises:
        Unreadable: pyarrow is not installed, or the table uses what this reader does not follow.
    """
    pq = _parquet()
    files, metadata = _snapshot(table, pq)
    # A checkpoint gives a map as (key, value) pairs.
    configuration = dict((metadata or {}).get("configuration") or {})
    if configuration.get("delta.columnMapping.mode", "none") != "none":
        raise Unreadable(f"{table}: column mapping")
    if (metadata or {}).get("partitionColumns"):
        raise Unreadable(f"{table}: partitioned")
    if any(add.get("deletionVector") for add in files.values()):
        raise Unreadable(f"{table}: rows deleted through deletion vectors")
    rows: list[dict[str, Any]] = []
    for add in files.values():
        try:
            rows += pq.read_table(_data_file(table, add["path"]), columns=list(columns)).to_pylist()
        except (OSError, ValueError) as exc:  # pyarrow's errors derive from these
            raise Unreadable(f"{table}: {add['path']}: {exc}") from exc
    return rows


def rows_if_any(table: Path, columns: Sequence[str]) -> list[dict[str, Any]]:
    """``read_rows`` of a table of our own that exists only once something was written to it."""
    return read_rows(table, columns) if (table / LOG_DIR).is_dir() else []


def row_count(table: Path) -> int:
    """How many rows the table's newest version holds, from its files' statistics (as Delta answers a
    plain count): each file's ``numRecords`` less the rows its deletion vector marks.

    Raises:
        Unreadable: a file without statistics, or what ``read_rows`` does not follow.
    """
    files, _ = _snapshot(table, _parquet())
    count = 0
    for add in files.values():
        stats = add.get("stats")
        try:
            records = orjson.loads(stats)["numRecords"] if stats else None
        except (orjson.JSONDecodeError, KeyError, TypeError):
            records = None
        if not isinstance(records, int):
            raise Unreadable(f"{table}: {add['path']} has no row count in its statistics")
        count += records - int((add.get("deletionVector") or {}).get("cardinality") or 0)
    return count


def _parquet() -> Any:
    try:
        import pyarrow.parquet as pq
    except ImportError as exc:
        raise Unreadable("pyarrow is not installed") from exc
    return pq


def _snapshot(table: Path, pq: Any) -> tuple[_Files, dict[str, Any] | None]:
    """The newest version's files (add actions) and table metadata: the newest checkpoint and the commits
    after it."""
    versions = commit_versions(table)
    newest = max(versions, default=-1)
    checkpoint, files, metadata = _checkpoint(table, pq, newest)
    if newest < 0 or not set(range(checkpoint + 1, newest + 1)) <= set(versions):
        raise Unreadable(f"{table}: commits between checkpoint {checkpoint} and version {newest} are missing")
    for commit in commits(table, after=checkpoint):
        for action in commit.actions:
            if "add" in action:
                files[_file_key(action["add"])] = action["add"]
            elif "remove" in action:
                files.pop(_file_key(action["remove"]), None)
            elif "metaData" in action:
                metadata = action["metaData"]
    return files, metadata


def _checkpoint(table: Path, pq: Any, newest: int) -> tuple[int, _Files, dict[str, Any] | None]:
    """The newest complete classic checkpoint at or below ``newest``: its version (-1: none), its files
    and its table metadata."""
    names = os.listdir(_log(table))
    parts: dict[int, dict[int, tuple[int, str]]] = {}
    newest_v2 = max((int(n[:20]) for n in names if _V2_CHECKPOINT.match(n)), default=-1)
    for name in names:
        m = _CHECKPOINT.match(name)
        if m:
            version = int(m.group(1))
            part, count = (int(m.group(2)), int(m.group(3))) if m.group(2) else (1, 1)
            parts.setdefault(version, {})[part] = (count, name)
    # Complete: as many parts as each part's name says there are.
    complete = [v for v, p in parts.items() if v <= newest and len(p) == next(iter(p.values()))[0]]
    version = max(complete, default=-1)
    if newest_v2 > version:
        raise Unreadable(f"{table}: a V2 checkpoint")
    if version < 0:
        return -1, {}, None
    files: _Files = {}
    metadata = None
    for _, name in sorted(parts[version].values(), key=lambda cn: cn[1]):
        try:
            data = pq.read_table(_log(table) / name, columns=["add", "metaData", "protocol"]).to_pylist()
        except (OSError, ValueError) as exc:
            raise Unreadable(f"{table}: checkpoint {name}: {exc}") from exc
        for row in data:
            if row.get("add"):
                files[_file_key(row["add"])] = row["add"]
            if row.get("metaData"):
                metadata = row["metaData"]
            if row.get("protocol"):
                _check_protocol(table, row["protocol"])
    return version, files, metadata

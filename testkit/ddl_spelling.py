"""The same DDL spelt the many ways TiDB users and TiDB itself write it. Pure; seeded by the caller.

A statement is parsed, then written again with randomly drawn but meaning-preserving variations: keyword
case, quoted or plain names, column- or table-level PRIMARY KEY with plain or commented CLUSTERED /
NONCLUSTERED, AUTO_RANDOM on a BIGINT key, CHARSET/COLLATE, COMMENTs with quotes and non-ASCII text, TiDB
and MySQL table options in executable comments, ``ADD COLUMN`` in its several forms and next to index
actions. The result is checked to parse to the same statement, so a spelling the parser misreads fails
where it is made.
"""

from __future__ import annotations

import random
import re

from ingest.model import Column, ColumnKind, TableId
from ingest.mysql.ddl import AddColumn, AlterTable, CreateTable, Statement, parse_ddl

_PLAIN = re.compile(r"^[a-z_][a-z0-9_]*$")
# Names that read as keywords somewhere in MySQL or TiDB are always quoted.
_KEYWORDS = {
    "key", "order", "status", "date", "value", "comment", "ttl", "clustered", "nonclustered", "placement",
    "auto_random", "index", "table", "column", "default", "time", "timestamp", "year", "text", "set", "enum",
    "bit", "json", "real", "serial", "primary", "unique", "check", "references", "interval", "to", "first",
}  # fmt: skip
_COMMENTS = (
    "'plain'",
    "'it''s'",
    "'it\\'s'",
    '"say \\"hi\\""',
    "'表 😀, (x)'",
    "'/*T![clustered_index] CLUSTERED */ is text here'",
)
_STRING_OPTIONS = (
    "CHARACTER SET utf8mb4 COLLATE utf8mb4_bin",
    "CHARSET utf8mb4",
    "COLLATE utf8mb4_general_ci",
    "/*!40101 CHARACTER SET utf8mb4 */",
)
_KEY_SUFFIXES = (
    "",
    " CLUSTERED",
    " NONCLUSTERED",
    " /*T![clustered_index] CLUSTERED */",
    " /*T![clustered_index] NONCLUSTERED */",
    " USING BTREE",
)
_TABLE_OPTIONS = (
    "ENGINE=InnoDB",
    "DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin",
    "/*!40101 DEFAULT CHARSET=utf8mb4 */",
    "CHARACTER SET = utf8mb4",
    "COMMENT='it''s a table 😀'",
    "AUTO_INCREMENT=100",
    "/*T! SHARD_ROW_ID_BITS=4 */",
    "PRE_SPLIT_REGIONS=2",
    "/*T![auto_id_cache] AUTO_ID_CACHE=1 */",
    "/*T![placement] PLACEMENT POLICY=`default_policy` */",
    "PLACEMENT POLICY=p1",
    "/*T![ttl] TTL_ENABLE='OFF' */",
)
_STRING_KINDS = (ColumnKind.CHAR, ColumnKind.VARCHAR, ColumnKind.TEXT, ColumnKind.ENUM, ColumnKind.SET)


class _Writer:
    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.case = rng.choice((str.upper, str.lower, str.title, lambda w: w))

    def kw(self, words: str) -> str:
        # Comments and quoted text are written as they are; only keywords change case.
        return " ".join(self.case(w) for w in words.split())

    def name(self, name: str) -> str:
        if _PLAIN.match(name) and name not in _KEYWORDS and self.rng.random() < 0.5:
            return name
        return "`" + name.replace("`", "``") + "`"

    def table(self, table: TableId, qualified: bool) -> str:
        if not qualified:
            return self.name(table.table)
        return f"{self.name(table.schema)}.{self.name(table.table)}"

    def column(self, column: Column, inline_key: bool = False, auto_random: bool = False) -> str:
        rng = self.rng
        base, rest = re.match(r"([a-z]+)(.*)$", str(column.type), re.DOTALL).groups()  # type: ignore[union-attr]
        # ENUM/SET members keep their case; the type name and UNSIGNED take the statement's.
        parts = [
            self.name(column.name),
            self.case(base) + rest.replace(" unsigned", " " + self.kw("unsigned")),
        ]
        if column.type.kind in _STRING_KINDS and rng.random() < 0.4:
            parts.append(rng.choice(_STRING_OPTIONS))
        if not column.nullable:
            parts.append(self.kw("NOT NULL"))
        elif not column.has_default and rng.random() < 0.3:
            parts.append(self.kw("NULL"))
        if auto_random:
            parts.append(rng.choice(("AUTO_RANDOM", "AUTO_RANDOM(5)", "AUTO_RANDOM(5, 54)",
                                     "/*T![auto_rand] AUTO_RANDOM(5) */")))  # fmt: skip
        if column.has_default:
            parts.append(
                self.kw("DEFAULT") + " " + (column.default if column.default is not None else "NULL")
            )
        if inline_key:
            parts.append(self.kw("PRIMARY KEY") + rng.choice(_KEY_SUFFIXES[:5]))
        if rng.random() < 0.4:
            parts.append(self.kw("COMMENT") + " " + rng.choice(_COMMENTS))
        return " ".join(parts)


def spell_create_table(statement: CreateTable, rng: random.Random) -> str:
    """CREATE TABLE for ``statement`` (its PARTITION BY is not written), in a randomly drawn spelling."""
    w = _Writer(rng)
    key = statement.schema.key
    columns = statement.schema.columns
    single = len(key) == 1
    inline = single and rng.random() < 0.4
    # TiDB allows AUTO_RANDOM on a BIGINT primary key only; values still come from the rows.
    random_key = single and next(c for c in columns if c.name == key[0]).type.kind is ColumnKind.BIGINT
    definitions = [
        w.column(c, inline and c.name == key[0], random_key and c.name == key[0] and rng.random() < 0.5)
        for c in columns
    ]
    if key and not inline:
        listed = ", ".join(w.name(k) for k in key)
        definitions.append(f"{w.kw('PRIMARY KEY')} ({listed}){rng.choice(_KEY_SUFFIXES)}")
    if rng.random() < 0.3:
        other = rng.choice(columns)
        if other.type.kind not in (ColumnKind.TEXT, ColumnKind.BLOB, ColumnKind.JSON):
            invisible = rng.choice(("", " INVISIBLE", " COMMENT 'idx'"))
            definitions.append(
                f"{w.kw('KEY')} {w.name('idx_' + other.name)} ({w.name(other.name)}){invisible}"
            )
    separator = rng.choice((",\n  ", ", ", ","))
    options = rng.sample(_TABLE_OPTIONS, rng.randint(0, 4))
    head = w.kw("CREATE TABLE") + (" " + w.kw("IF NOT EXISTS") if statement.if_not_exists else "")
    body = separator.join(definitions)
    tail = rng.choice((" ", ", ", "\n")).join(options)
    return f"{head} {w.table(statement.table, qualified=True)} (\n  {body}\n) {tail}".rstrip()


def spell_add_column(alter: AlterTable, rng: random.Random) -> str:
    """ALTER TABLE ... ADD COLUMN of ``alter`` (one AddColumn), randomly spelt, sometimes with an index."""
    (action,) = alter.actions
    assert isinstance(action, AddColumn)
    w = _Writer(rng)
    definition = w.column(action.column)
    position = ""
    if action.first:
        position = " " + w.kw("FIRST")
    elif action.after is not None:
        position = f" {w.kw('AFTER')} {w.name(action.after)}"
    form = rng.randrange(4)
    if form == 0:
        add = f"{w.kw('ADD COLUMN')} {definition}{position}"
    elif form == 1:
        add = f"{w.kw('ADD')} {definition}{position}"
    elif form == 2:
        add = f"{w.kw('ADD COLUMN IF NOT EXISTS')} {definition}{position}"
    else:
        add = (
            f"{w.kw('ADD COLUMN')} ({definition})"
            if not position
            else f"{w.kw('ADD')} {definition}{position}"
        )
    extra = ""
    if rng.random() < 0.3 and action.column.type.kind not in (
        ColumnKind.TEXT,
        ColumnKind.BLOB,
        ColumnKind.JSON,
    ):
        extra = f", {w.kw('ADD INDEX')} {w.name('idx_' + action.column.name)} ({w.name(action.column.name)})"
    elif rng.random() < 0.2:
        extra = ", " + w.kw("ALGORITHM=INSTANT")
    return f"{w.kw('ALTER TABLE')} {w.table(alter.table, qualified=rng.random() < 0.5)} {add}{extra}"


def respell(sql: str, default_schema: str, rng: random.Random) -> str:
    """``sql`` spelt another way when it is a CREATE TABLE (without PARTITION BY) or a single ADD COLUMN.

    Raises:
        AssertionError: the new spelling does not parse to the same statement.
    """
    statement = parse_ddl(sql, default_schema)
    spelt: str | None = None
    if isinstance(statement, CreateTable) and statement.partition_by is None:
        spelt = spell_create_table(statement, rng)
    elif (
        isinstance(statement, AlterTable)
        and len(statement.actions) == 1
        and isinstance(statement.actions[0], AddColumn)
    ):
        spelt = spell_add_column(statement, rng)
    if spelt is None:
        return sql
    again: Statement = parse_ddl(spelt, default_schema)
    assert again == statement, f"{spelt!r} parses to {again!r}, not {statement!r}"
    return spelt

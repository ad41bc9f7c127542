"""Where a Delta table is: a storage path, or a name in a catalog. No I/O.

Both are strings, so every function that takes a table's location takes either; a catalog name is a
:class:`TableName`, whose text is the name as Spark SQL reads it (each part backticked). Only ``delta_io``
tells them apart. The mirror's own state tables live under a root: a directory (a path) or a schema
(:class:`SchemaName`), and :func:`child` names a state table under either.
"""

from __future__ import annotations

from typing import Self

from ingest.errors import ConfigError


def quote(name: str) -> str:
    """Backtick a column, table or path name (or one part of a dotted name) for Spark SQL."""
    return "`" + name.replace("`", "``") + "`"


# What Unity Catalog refuses in a catalog, schema or table name: a period, a space, a forward slash, ASCII
# control characters and DELETE; and more than 255 characters.
_REFUSED = frozenset(". /\x7f") | frozenset(chr(c) for c in range(0x20))
MAX_NAME = 255


def refused_characters(part: str) -> str:
    """The characters of ``part`` a catalog name may not hold (empty: it may be used as it is)."""
    return "".join(sorted({c for c in part if c in _REFUSED}))


class _Name(str):
    """A dotted catalog name of ``ARITY`` parts, its text the SQL form with each part backticked."""

    ARITY: tuple[int, ...] = ()
    parts: tuple[str, ...]

    def __new__(cls, *parts: str) -> Self:
        if len(parts) not in cls.ARITY or not all(parts):
            raise ValueError(
                f"a {cls.__name__} has {' or '.join(map(str, cls.ARITY))} non-empty parts: {parts!r}"
            )
        made = super().__new__(cls, ".".join(quote(p) for p in parts))
        made.parts = tuple(parts)
        return made

    def __reduce__(self) -> tuple[type, tuple[str, ...]]:
        return (type(self), self.parts)

    def plain(self) -> str:
        """The name without quotes, as a user types it where no part needs them."""
        return ".".join(self.parts)


class TableName(_Name):
    """A table in a catalog: ``catalog.schema.table``, or ``schema.table`` in the session's current catalog.

    The string is the name as SQL takes it, each part backticked, so it can go into SQL text as it is.
    """

    ARITY = (2, 3)

    @property
    def table(self) -> str:
        return self.parts[-1]

    @property
    def schema(self) -> SchemaName:
        return SchemaName(*self.parts[:-1])


class SchemaName(_Name):
    """A schema in a catalog: ``catalog.schema``, or ``schema`` in the current catalog; backticked."""

    ARITY = (1, 2)

    def table(self, name: str) -> TableName:
        return TableName(*self.parts, name)


def child(root: str, name: str) -> str:
    """The state table ``name`` under ``root``: ``<root>/<name>`` for a directory, a table of a schema."""
    if isinstance(root, SchemaName):
        return root.table(name)
    return f"{root.rstrip('/')}/{name}"


def parse_schema(text: str, setting: str) -> SchemaName:
    """``schema`` or ``catalog.schema`` (a part with a period in it is backticked: ```a.b```).

    Raises:
        ConfigError: not one or two parts.
    """
    parts = split_name(text, setting)
    if len(parts) not in (1, 2):
        raise ConfigError(f"{setting}: {text!r} is not a schema name; write schema or catalog.schema")
    return SchemaName(*parts)


def split_name(text: str, setting: str) -> list[str]:
    """The parts of a dotted name, where a backticked part may hold periods (and ```` for a backtick)."""
    parts: list[str] = []
    current, quoted, i = "", False, 0
    while i < len(text):
        c = text[i]
        if quoted:
            if c == "`" and text[i + 1 : i + 2] == "`":
                current += "`"
                i += 1
            elif c == "`":
                quoted = False
            else:
                current += c
        elif c == "`":
            quoted = True
        elif c == ".":
            parts.append(current)
            current = ""
        else:
            current += c
        i += 1
    if quoted:
        raise ConfigError(f"{setting}: {text!r} has an unclosed backtick")
    parts.append(current)
    if not all(p.strip() for p in parts):
        raise ConfigError(f"{setting}: {text!r} has an empty part")
    return [p.strip() for p in parts]


def check_part(part: str, what: str) -> str | None:
    """Why a catalog cannot hold ``part`` as a name (None: it can)."""
    bad = refused_characters(part)
    if bad:
        shown = ", ".join(repr(c) for c in bad)
        return f"{what} name {part!r} holds {shown}, which a catalog name may not hold"
    if len(part) > MAX_NAME:
        return f"{what} name {part[:40]!r}… has {len(part)} characters; a catalog name has at most {MAX_NAME}"
    return None

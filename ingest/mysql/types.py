"""TiDB column type text -> ColumnType. Pure.

Two sources: Canal-JSON ``mysqlType`` text (``bigint unsigned``, or with ``content-compatible=true`` the full
``decimal(10,4)``), and the data types sqlglot parses out of CREATE/ALTER TABLE statements.
"""

from __future__ import annotations

import re

from sqlglot import exp

from ingest.model import ColumnKind, ColumnType

_TEXT_KINDS = {
    "tinytext": ColumnKind.TEXT,
    "text": ColumnKind.TEXT,
    "mediumtext": ColumnKind.TEXT,
    "longtext": ColumnKind.TEXT,
    "tinyblob": ColumnKind.BLOB,
    "blob": ColumnKind.BLOB,
    "mediumblob": ColumnKind.BLOB,
    "longblob": ColumnKind.BLOB,
    "bool": ColumnKind.TINYINT,
    "boolean": ColumnKind.TINYINT,
    "integer": ColumnKind.INT,
    "numeric": ColumnKind.DECIMAL,
    "real": ColumnKind.DOUBLE,
}
_MYSQL_TYPE = re.compile(r"^\s*([a-z]+)\s*(?:\((.*)\))?\s*(.*)$", re.IGNORECASE | re.DOTALL)


class UnknownTypeError(ValueError):
    """A type name we do not know how to mirror."""


def parse_mysql_type(text: str) -> ColumnType:
    """Parse Canal-JSON ``mysqlType`` text, e.g. ``int unsigned``, ``decimal(10,4)``, ``enum('a','b')``.

    Raises:
        UnknownTypeError: the base name is not a TiDB type we know.
    """
    match = _MYSQL_TYPE.match(text)
    if not match:
        raise UnknownTypeError(f"unrecognised mysqlType {text!r}")
    name, args, rest = match.group(1).lower(), match.group(2), match.group(3).lower()
    kind = _TEXT_KINDS.get(name)
    if kind is None:
        try:
            kind = ColumnKind(name)
        except ValueError as exc:
            raise UnknownTypeError(f"unknown mysqlType {text!r}") from exc
    unsigned = "unsigned" in rest.split()
    if kind in (ColumnKind.ENUM, ColumnKind.SET):
        return ColumnType(kind, elements=_split_elements(args) if args else ())
    numbers = [int(a) for a in re.findall(r"\d+", args or "")]
    if kind is ColumnKind.DECIMAL:
        precision = numbers[0] if numbers else None
        scale = numbers[1] if len(numbers) > 1 else (0 if numbers else None)
        return ColumnType(kind, unsigned=unsigned, precision=precision, scale=scale)
    length = numbers[0] if numbers else None
    return ColumnType(kind, unsigned=unsigned, length=length)


def _split_elements(args: str) -> tuple[str, ...]:
    return tuple(m.replace("''", "'") for m in re.findall(r"'((?:[^']|'')*)'", args))


# sqlglot's MySQL dialect has no unsigned FLOAT (TiDB has: FLOAT UNSIGNED holds no negative value); the DDL
# dialect (``mysql.ddl``) reads it as this type, one MySQL and TiDB never have, and it means FLOAT UNSIGNED.
UNSIGNED_FLOAT = exp.DataType.Type.SMALLMONEY

_SQLGLOT_KINDS: dict[object, tuple[ColumnKind, bool]] = {
    exp.DataType.Type.TINYINT: (ColumnKind.TINYINT, False),
    exp.DataType.Type.UTINYINT: (ColumnKind.TINYINT, True),
    exp.DataType.Type.BOOLEAN: (ColumnKind.TINYINT, False),
    exp.DataType.Type.SMALLINT: (ColumnKind.SMALLINT, False),
    exp.DataType.Type.USMALLINT: (ColumnKind.SMALLINT, True),
    exp.DataType.Type.MEDIUMINT: (ColumnKind.MEDIUMINT, False),
    exp.DataType.Type.UMEDIUMINT: (ColumnKind.MEDIUMINT, True),
    exp.DataType.Type.INT: (ColumnKind.INT, False),
    exp.DataType.Type.UINT: (ColumnKind.INT, True),
    exp.DataType.Type.BIGINT: (ColumnKind.BIGINT, False),
    exp.DataType.Type.UBIGINT: (ColumnKind.BIGINT, True),
    exp.DataType.Type.DECIMAL: (ColumnKind.DECIMAL, False),
    exp.DataType.Type.UDECIMAL: (ColumnKind.DECIMAL, True),
    exp.DataType.Type.FLOAT: (ColumnKind.FLOAT, False),
    exp.DataType.Type.DOUBLE: (ColumnKind.DOUBLE, False),
    exp.DataType.Type.CHAR: (ColumnKind.CHAR, False),
    exp.DataType.Type.NCHAR: (ColumnKind.CHAR, False),
    exp.DataType.Type.VARCHAR: (ColumnKind.VARCHAR, False),
    exp.DataType.Type.NVARCHAR: (ColumnKind.VARCHAR, False),
    exp.DataType.Type.TEXT: (ColumnKind.TEXT, False),
    exp.DataType.Type.TINYTEXT: (ColumnKind.TEXT, False),
    exp.DataType.Type.MEDIUMTEXT: (ColumnKind.TEXT, False),
    exp.DataType.Type.LONGTEXT: (ColumnKind.TEXT, False),
    exp.DataType.Type.BINARY: (ColumnKind.BINARY, False),
    exp.DataType.Type.VARBINARY: (ColumnKind.VARBINARY, False),
    exp.DataType.Type.BLOB: (ColumnKind.BLOB, False),
    exp.DataType.Type.TINYBLOB: (ColumnKind.BLOB, False),
    exp.DataType.Type.MEDIUMBLOB: (ColumnKind.BLOB, False),
    exp.DataType.Type.LONGBLOB: (ColumnKind.BLOB, False),
    exp.DataType.Type.DATE: (ColumnKind.DATE, False),
    exp.DataType.Type.DATETIME: (ColumnKind.DATETIME, False),
    exp.DataType.Type.DATETIME64: (ColumnKind.DATETIME, False),
    # sqlglot's MySQL dialect reads TIMESTAMP as TIMESTAMPTZ: MySQL TIMESTAMP is an instant.
    exp.DataType.Type.TIMESTAMPTZ: (ColumnKind.TIMESTAMP, False),
    exp.DataType.Type.TIMESTAMP: (ColumnKind.TIMESTAMP, False),
    exp.DataType.Type.TIME: (ColumnKind.TIME, False),
    exp.DataType.Type.YEAR: (ColumnKind.YEAR, False),
    exp.DataType.Type.ENUM: (ColumnKind.ENUM, False),
    exp.DataType.Type.SET: (ColumnKind.SET, False),
    exp.DataType.Type.BIT: (ColumnKind.BIT, False),
    exp.DataType.Type.JSON: (ColumnKind.JSON, False),
    exp.DataType.Type.VECTOR: (ColumnKind.VECTOR, False),
    exp.DataType.Type.SERIAL: (ColumnKind.BIGINT, True),
    UNSIGNED_FLOAT: (ColumnKind.FLOAT, True),
    getattr(exp.DataType.Type, "UDOUBLE", UNSIGNED_FLOAT): (ColumnKind.DOUBLE, True),
}


# CHAR, BINARY and BIT without a length are CHAR(1), BINARY(1) and BIT(1).
_ONE_BY_DEFAULT = (ColumnKind.CHAR, ColumnKind.BINARY, ColumnKind.BIT)


def from_sqlglot(data_type: exp.DataType, zerofill: bool = False) -> ColumnType:
    """Convert a sqlglot MySQL DataType (from a parsed DDL) to a ColumnType; ZEROFILL implies UNSIGNED.

    Raises:
        UnknownTypeError: the type is not one we mirror.
    """
    entry = _SQLGLOT_KINDS.get(data_type.this)
    if entry is None:
        raise UnknownTypeError(f"unsupported column type {data_type.sql(dialect='mysql')}")
    kind, unsigned = entry
    unsigned = unsigned or zerofill
    args = data_type.expressions
    if kind in (ColumnKind.ENUM, ColumnKind.SET):
        return ColumnType(kind, elements=tuple(a.name for a in args))
    numbers = [int(a.name) for a in args if a.name.isdigit()]
    if data_type.this == exp.DataType.Type.BOOLEAN:
        return ColumnType(ColumnKind.TINYINT, length=1)  # BOOL and BOOLEAN are TINYINT(1)
    if data_type.this == exp.DataType.Type.SERIAL:
        return ColumnType(ColumnKind.BIGINT, unsigned=True)
    if kind is ColumnKind.FLOAT and len(numbers) == 1:
        # FLOAT(p): p is the precision in bits; above 24 the column is a DOUBLE.
        return ColumnType(ColumnKind.DOUBLE if numbers[0] > 24 else ColumnKind.FLOAT, unsigned=unsigned)
    if not numbers and kind in _ONE_BY_DEFAULT:
        numbers = [1]
    if kind is ColumnKind.DECIMAL:
        # MySQL: DECIMAL means DECIMAL(10,0), DECIMAL(p) means DECIMAL(p,0).
        precision = numbers[0] if numbers else 10
        return ColumnType(
            kind, unsigned=unsigned, precision=precision, scale=numbers[1] if len(numbers) > 1 else 0
        )
    return ColumnType(kind, unsigned=unsigned, length=numbers[0] if numbers else None)

"""A generated column's MySQL expression -> a typed expression tree the mirror can compute exactly. Pure.

TiDB computes a VIRTUAL column when a row is read, so no protocol carries its values; the mirror computes
them itself, which is exact only where the expression means the same in Spark as in MySQL. This module
reads the expression (as TiCDC's owner writes it: backquoted names, ``_UTF8MB4'x'`` literals) and types
every node by MySQL's rules; ``apply.generated`` renders the tree as a Spark column. What is not in the set
below comes back as a reason, and the column is left out of the mirror (as it always was).

Supported (MySQL semantics, checked against TiDB's own values in tests/fixtures/corpora/generated):
arithmetic ``+ - * / DIV % MOD`` and unary minus on integers, DECIMALs and DOUBLEs (integers in BIGINT,
``/`` a DECIMAL with the dividend's scale + 4, division by zero NULL); comparisons ``= <> < <= > >= <=>``,
``BETWEEN``, ``IN`` on numbers, dates and datetimes; ``IS [NOT] NULL``, ``NOT``, ``AND``, ``OR``, ``XOR``;
``IF``, ``IFNULL``, ``COALESCE``, ``CASE`` (both forms); ``CONCAT``, ``CONCAT_WS``, ``UPPER``/``UCASE``,
``LOWER``/``LCASE``, ``SUBSTRING``/``SUBSTR``/``MID``, ``LEFT``, ``RIGHT``, ``CHAR_LENGTH``, ``LENGTH``,
``TRIM``/``LTRIM``/``RTRIM`` (of spaces), ``REPLACE``; ``JSON_EXTRACT`` (``->``) and ``JSON_UNQUOTE``
(``->>``) with one path of keys and array indexes; ``YEAR``, ``MONTH``, ``DAY``/``DAYOFMONTH``, ``HOUR``,
``MINUTE``, ``SECOND``, ``MICROSECOND``, ``DAYOFWEEK``, ``WEEKDAY``, ``DAYOFYEAR``, ``QUARTER``, ``DATE``
and ``EXTRACT`` of those units, on DATE and DATETIME columns; TiDB's REGEXP functions (``expr_regexp``).
Strings are compared nowhere: how two strings compare depends on their collation, which the stream does not
always say.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from functools import lru_cache

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError

from ingest.model import ColumnKind, ColumnType
from ingest.mysql.expr_types import (
    DATE,
    DOUBLE,
    INT,
    INT_DECIMAL,
    JSON,
    MAX_DIGITS,
    STRING,
    Expr,
    Typ,
    Unsupported,
)
from ingest.mysql.expr_typing import Typer

__all__ = ["Expr", "Typ", "Unsupported", "check", "column_typ", "parse_expression", "typed"]


_SMALL_INTEGERS = (
    ColumnKind.TINYINT,
    ColumnKind.SMALLINT,
    ColumnKind.MEDIUMINT,
    ColumnKind.INT,
    ColumnKind.YEAR,
)


def column_typ(column_type: ColumnType) -> Typ:
    """The expression type a column of ``column_type`` reads as."""
    kind = column_type.kind
    if kind in (
        ColumnKind.TINYINT,
        ColumnKind.SMALLINT,
        ColumnKind.MEDIUMINT,
        ColumnKind.INT,
        ColumnKind.YEAR,
    ):
        return INT
    if kind is ColumnKind.BIGINT:
        return INT_DECIMAL if column_type.unsigned else INT
    if kind is ColumnKind.DECIMAL and column_type.precision is not None:
        if column_type.precision > MAX_DIGITS:
            raise Unsupported("a DECIMAL of more than 38 digits")
        return Typ("decimal", column_type.precision, column_type.scale or 0)
    if kind in (ColumnKind.FLOAT, ColumnKind.DOUBLE):
        return DOUBLE
    if kind in (ColumnKind.CHAR, ColumnKind.VARCHAR, ColumnKind.TEXT):
        return STRING
    if kind is ColumnKind.DATE:
        return DATE
    if kind is ColumnKind.DATETIME:
        return Typ("datetime", scale=column_type.length or 0)
    if kind is ColumnKind.JSON:
        return JSON
    raise Unsupported(f"a {kind.value} column in an expression")


@lru_cache(maxsize=1024)
def parse_expression(text: str) -> exp.Expression:
    """A generated column's expression text as sqlglot's MySQL tree."""
    try:
        # As a SELECT's one item: alone, REPLACE(...) or LEFT(...) would read as the start of a statement.
        parsed = sqlglot.parse_one(f"SELECT {text}", read="mysql")
    except ParseError as exc:
        raise Unsupported(f"the expression does not parse: {exc}") from exc
    items = parsed.expressions if isinstance(parsed, exp.Select) else []
    if len(items) != 1 or not isinstance(items[0], exp.Expression):
        raise Unsupported(f"{text!r} is not one expression")
    return items[0]


def typed(text: str, columns: Mapping[str, ColumnType], case_insensitive: Iterable[str] = ()) -> Expr:
    """The typed tree of expression ``text`` over a table's ``columns`` (``case_insensitive``: those whose
    collation folds case); raises Unsupported."""
    by_name = {name.lower(): (name, column_type) for name, column_type in columns.items()}
    folding = frozenset(name.lower() for name in case_insensitive)
    return Typer(by_name, column_typ, folding).node(parse_expression(text))


def check(
    text: str, columns: Mapping[str, ColumnType], result: ColumnType, case_insensitive: Iterable[str] = ()
) -> str:
    """Why the mirror cannot compute expression ``text`` into a column of type ``result`` ("" if it can)."""
    try:
        column_typ(result)
        typed(text, columns, case_insensitive)
    except Unsupported as exc:
        return str(exc)
    return ""

"""One column definition as TiDB writes it (type, nullability, DEFAULT literal, VIRTUAL expression) read
from sqlglot's MySQL tree. Pure."""

from __future__ import annotations

from collections.abc import Sequence

from sqlglot import exp

from ingest.model import Column
from ingest.mysql.types import from_sqlglot


def column_definition(definition: exp.ColumnDef) -> Column:
    data_type = definition.args["kind"]
    zerofill = any(isinstance(c.args["kind"], exp.ZeroFillColumnConstraint) for c in definition.constraints)
    # SERIAL is BIGINT UNSIGNED NOT NULL AUTO_INCREMENT UNIQUE.
    nullable = not is_serial(definition)
    default, has_default = None, False
    for constraint in definition.constraints:
        kind = constraint.args["kind"]
        if isinstance(kind, exp.NotNullColumnConstraint):
            nullable = bool(kind.args.get("allow_null"))
        elif isinstance(kind, exp.PrimaryKeyColumnConstraint):
            nullable = False
        elif isinstance(kind, exp.DefaultColumnConstraint):
            has_default = True
            default = default_literal(kind.this)
    computed = next(
        (
            c.args["kind"]
            for c in definition.constraints
            if isinstance(c.args["kind"], exp.ComputedColumnConstraint)
            and not c.args["kind"].args.get("persisted")
        ),
        None,
    )
    expression = None if computed is None else computed.this.sql(dialect="mysql")
    column_type = from_sqlglot(data_type, zerofill)
    return Column(
        definition.name, column_type, nullable, default, has_default, computed is not None, expression,
        stated_collation(definition.constraints),
    )  # fmt: skip


# TiDB's default collation of each charset it supports (``SHOW CHARACTER SET``).
_CHARSET_COLLATIONS = {
    "utf8mb4": "utf8mb4_bin", "utf8": "utf8_bin", "utf8mb3": "utf8_bin", "latin1": "latin1_bin",
    "ascii": "ascii_bin", "binary": "binary", "gbk": "gbk_chinese_ci", "gb18030": "gb18030_chinese_ci",
}  # fmt: skip


def stated_collation(clauses: Sequence[exp.Expression]) -> str | None:
    """The collation a column definition's (or a table's options') COLLATE or CHARACTER SET clause gives,
    lower case (None: neither is there)."""
    collation = charset = None
    for clause in clauses:
        kind = clause.args.get("kind") if isinstance(clause, exp.ColumnConstraint) else clause
        if isinstance(kind, exp.CollateColumnConstraint | exp.CollateProperty):
            collation = kind.this.name if isinstance(kind.this, exp.Expression) else str(kind.this)
        elif isinstance(kind, exp.CharacterSetColumnConstraint | exp.CharacterSetProperty):
            charset = kind.this.name if isinstance(kind.this, exp.Expression) else str(kind.this)
    if collation:
        return collation.lower()
    return _CHARSET_COLLATIONS.get(charset.lower(), charset.lower() + "_bin") if charset else None


def folds_case(collation: str | None) -> bool:
    """Whether TiDB compares and matches text in ``collation`` case-insensitively (its ``_ci`` ones)."""
    return bool(collation) and str(collation).endswith("_ci")


# Python codecs of the charsets a literal's introducer may name; a literal's text is the same string in
# any of them, only a hex or bit literal's bytes are read through them.
_INTRODUCER_CODECS = {
    "utf8mb4": "utf-8", "utf8": "utf-8", "utf8mb3": "utf-8", "latin1": "latin-1", "ascii": "ascii",
    "gbk": "gbk", "gb18030": "gb18030", "binary": None,
}  # fmt: skip


def default_literal(value: exp.Expression) -> str | None:
    """A DEFAULT's value as canonical SQL literal text, None for NULL.

    Canonical: a string as ``'…'`` with ``'`` doubled and nothing else escaped; a number as written; bytes
    as ``X'…'`` and bits as ``b'…'`` (their meaning depends on the column type); TRUE/FALSE as 1/0. A
    charset introducer (``_UTF8MB4'x'``, as TiCDC's owner writes every string DEFAULT, ``_BINARY'x'``,
    ``_LATIN1 X'E9'``) is applied: it names the charset the literal's bytes are read in. Anything else
    (``CURRENT_TIMESTAMP(3)``, ``(UUID())``) is its SQL text, which is not a literal.
    """
    if isinstance(value, exp.Null):
        return None
    if isinstance(value, exp.Boolean):
        return "1" if value.this else "0"
    if isinstance(value, exp.Literal):
        return _string_literal(value.this) if value.is_string else str(value.this)
    if isinstance(value, exp.Neg) and isinstance(value.this, exp.Literal) and not value.this.is_string:
        return f"-{value.this.this}"
    if isinstance(value, exp.HexString):
        return f"X'{value.this.upper()}'"
    if isinstance(value, exp.BitString):
        return f"b'{value.this}'"
    if isinstance(value, exp.Introducer):
        charset = str(value.this).lstrip("_").lower()
        inner = value.expression
        if charset in _INTRODUCER_CODECS and isinstance(inner, exp.Literal) and inner.is_string:
            if charset == "binary":
                return f"X'{inner.this.encode('utf-8').hex().upper()}'"
            return _string_literal(inner.this)
        codec = _INTRODUCER_CODECS.get(charset)
        if isinstance(inner, exp.HexString | exp.BitString):
            data = _literal_bytes(inner)
            if codec is None:
                return f"X'{data.hex().upper()}'" if charset == "binary" else value.sql(dialect="mysql")
            try:
                return _string_literal(data.decode(codec))
            except UnicodeDecodeError:
                return value.sql(dialect="mysql")
    return value.sql(dialect="mysql")


def _string_literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _literal_bytes(node: exp.HexString | exp.BitString) -> bytes:
    if isinstance(node, exp.HexString):
        digits = node.this
        return bytes.fromhex(digits if len(digits) % 2 == 0 else "0" + digits)
    bits = node.this or "0"
    return int(bits, 2).to_bytes((len(bits) + 7) // 8, "big")


def is_serial(definition: exp.ColumnDef) -> bool:
    data_type = definition.args.get("kind")
    return isinstance(data_type, exp.DataType) and data_type.this == exp.DataType.Type.SERIAL

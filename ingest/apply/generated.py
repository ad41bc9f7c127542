"""A VIRTUAL generated column's typed expression (``decode.mysql_expr``) -> its value as a Spark column.

The mirror computes such a column itself wherever it writes rows (the MERGE's source, a rewrite, a load),
from the same row's other columns, so it holds what TiDB returns when it reads the row. The value is
converted to the column's type as TiDB converts an assignment (``apply.retype``). Where Spark's own
operator differs from MySQL's, the difference is handled here: integers in BIGINT, a DECIMAL quotient
rounded half up at the dividend's scale + 4 (exactly, in Python), division by zero NULL, SUBSTRING's
position 0 and positions before the start, JSON as TiDB prints it, and Unicode case mappings of one
character (TiDB maps ``ß`` to itself, where Java's full mapping writes ``SS``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from decimal import ROUND_HALF_UP, Context, Decimal, InvalidOperation

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ingest.apply import convert, retype
from ingest.apply.retype import ROW_UDF
from ingest.model import ColumnKind, ColumnType
from ingest.mysql import json_text as tidb_json
from ingest.mysql.expr import Expr, Typ, typed
from ingest.mysql.regexp import JavaRegex

Resolver = Callable[[str], Column]


def value_of(
    expression: str,
    columns: Mapping[str, ColumnType],
    result: ColumnType,
    ref: Resolver,
    case_insensitive: Iterable[str] = (),
) -> Column:
    """The value of generated column expression ``expression`` (over a table's ``columns``, each read with
    ``ref``; ``case_insensitive``: those whose collation folds case) converted to the column's type
    ``result``."""
    tree = typed(expression, columns, case_insensitive)
    if tree.type.kind == "null":
        return F.lit(None).cast(convert.spark_type(result))
    return retype.converted(_spark(tree, ref), _column_type(tree.type), result)


def _column_type(typ: Typ) -> ColumnType:
    """The TiDB type of a value of expression type ``typ``, for the final conversion."""
    kinds = {
        "int": ColumnType(ColumnKind.BIGINT),
        "bool": ColumnType(ColumnKind.BIGINT),
        "double": ColumnType(ColumnKind.DOUBLE),
        "string": ColumnType(ColumnKind.TEXT),
        "json": ColumnType(ColumnKind.JSON),
        "date": ColumnType(ColumnKind.DATE),
    }
    if typ.kind == "decimal":
        return ColumnType(ColumnKind.DECIMAL, precision=typ.precision, scale=typ.scale)
    if typ.kind == "datetime":
        return ColumnType(ColumnKind.DATETIME, length=typ.scale)
    return kinds[typ.kind]


def _spark_type(typ: Typ) -> T.DataType:
    return T.BooleanType() if typ.kind == "bool" else convert.spark_type(_column_type(typ))


def _spark(node: Expr, ref: Resolver) -> Column:
    args = [_spark(a, ref) for a in node.args]
    op = node.op
    if op == "ref":
        return ref(str(node.value)).cast(_spark_type(node.type))
    if op == "lit":
        return _literal(node)
    for table in (_ARITHMETIC, _LOGIC, _STRINGS):
        if op in table:
            return table[op](node, args)
    if op == "json_extract":
        return _json_extract(args[0], F.lit(_path_text(node.value)))
    if op == "json_unquote":
        return _json_unquote(args[0])
    if op == "date_part":
        return _date_part(str(node.value), args[0])
    if op == "to_date":
        return args[0].cast(T.DateType())
    raise ValueError(f"no Spark form for {op}")  # pragma: no cover - mysql_expr types only these


def _literal(node: Expr) -> Column:
    if node.value is None:
        return F.lit(None).cast(_spark_type(node.type)) if node.type.kind != "null" else F.lit(None)
    if node.type.kind in ("date", "datetime"):
        return F.lit(str(node.value)).cast(_spark_type(node.type))
    return F.lit(node.value).cast(_spark_type(node.type))


def _operands(node: Expr, args: list[Column]) -> tuple[Column, Column]:
    """Both operands in the node's own type (BIGINT, DECIMAL or DOUBLE), as MySQL computes them."""
    target = _spark_type(node.type) if node.type.kind != "decimal" else None
    if target is None:
        return args[0], args[1]
    return args[0].cast(target), args[1].cast(target)


def _unless_zero(divisor: Column, value: Column) -> Column:
    return F.when(divisor != 0, value)


def _decimal_divide(node: Expr, args: list[Column]) -> Column:
    quotient = _exact_quotient(args[0].cast("string"), args[1].cast("string"), F.lit(node.type.scale))
    return quotient.cast(_spark_type(node.type))


def _int_divide(node: Expr, args: list[Column]) -> Column:
    a, b = (x.cast(T.LongType()) for x in args)
    exact = (a - a % b).cast(T.DecimalType(20, 0)) / b.cast(T.DecimalType(20, 0))  # a multiple of b
    return _unless_zero(b, exact.cast(T.LongType()))


_ARITHMETIC: dict[str, Callable[[Expr, list[Column]], Column]] = {
    "add": lambda n, a: _binary(n, a, lambda x, y: x + y),
    "sub": lambda n, a: _binary(n, a, lambda x, y: x - y),
    "mul": lambda n, a: _binary(n, a, lambda x, y: x * y),
    "neg": lambda n, a: -a[0].cast(_spark_type(n.type)) if n.type.kind != "decimal" else -a[0],
    "div": lambda n, a: (
        _unless_zero(a[1], a[0].cast("double") / a[1].cast("double"))
        if n.type.kind == "double"
        else _unless_zero(a[1], _decimal_divide(n, a))
    ),
    "intdiv": _int_divide,
    "mod": lambda n, a: _unless_zero(a[1], _binary(n, a, lambda x, y: x % y)),
}


def _binary(node: Expr, args: list[Column], op: Callable[[Column, Column], Column]) -> Column:
    x, y = _operands(node, args)
    return op(x, y).cast(_spark_type(node.type))


_LOGIC: dict[str, Callable[[Expr, list[Column]], Column]] = {
    "eq": lambda n, a: a[0] == a[1],
    "neq": lambda n, a: a[0] != a[1],
    "lt": lambda n, a: a[0] < a[1],
    "lte": lambda n, a: a[0] <= a[1],
    "gt": lambda n, a: a[0] > a[1],
    "gte": lambda n, a: a[0] >= a[1],
    "nulleq": lambda n, a: a[0].eqNullSafe(a[1]),
    "between": lambda n, a: (a[0] >= a[1]) & (a[0] <= a[2]),
    "in": lambda n, a: a[0].isin(*a[1:]),
    "isnull": lambda n, a: a[0].isNull(),
    "not": lambda n, a: ~a[0],
    "and": lambda n, a: a[0] & a[1],
    "or": lambda n, a: a[0] | a[1],
    "xor": lambda n, a: a[0] != a[1],
    "truth": lambda n, a: a[0] != 0,
    "if": lambda n, a: F.when(a[0], _as(n, a[1])).otherwise(_as(n, a[2])),
    "coalesce": lambda n, a: F.coalesce(*(_as(n, x) for x in a)),
    "case": lambda n, a: _case(n, a),
}


def _as(node: Expr, value: Column) -> Column:
    """A branch in the type of its IF/COALESCE/CASE."""
    return value.cast(_spark_type(node.type)) if node.type.kind != "null" else value


def _case(node: Expr, args: list[Column]) -> Column:
    *whens, default = args
    result: Column | None = None
    for condition, value in zip(whens[::2], whens[1::2], strict=True):
        result = (
            F.when(condition, _as(node, value))
            if result is None
            else result.when(condition, _as(node, value))
        )
    assert result is not None
    return result.otherwise(_as(node, default))


def _text(node: Expr, value: Column) -> Column:
    """A value as MySQL spells it where text is wanted (CONCAT's arguments)."""
    kind = node.type.kind
    if kind == "bool":
        return value.cast(T.LongType()).cast(T.StringType())
    if kind == "datetime":
        fraction = "." + "S" * node.type.scale if node.type.scale else ""
        return F.date_format(value, f"yyyy-MM-dd HH:mm:ss{fraction}")
    return value.cast(T.StringType())


_STRINGS: dict[str, Callable[[Expr, list[Column]], Column]] = {
    "text": lambda n, a: _text(n.args[0], a[0]),
    "concat": lambda n, a: F.concat(*a),
    "concat_ws": lambda n, a: F.call_function("concat_ws", *a),
    "upper": lambda n, a: _upper(a[0]),
    "lower": lambda n, a: _lower(a[0]),
    "substring": lambda n, a: _substring(*a),
    "left": lambda n, a: F.call_function("left", a[0], a[1]),
    "right": lambda n, a: F.call_function("right", a[0], a[1]),
    "char_length": lambda n, a: F.char_length(a[0]).cast(T.LongType()),
    "octet_length": lambda n, a: F.octet_length(a[0]).cast(T.LongType()),
    "trim": lambda n, a: F.trim(a[0]),
    "ltrim": lambda n, a: F.ltrim(a[0]),
    "rtrim": lambda n, a: F.rtrim(a[0]),
    "replace": lambda n, a: F.replace(a[0], a[1], a[2]),
    "regexp_like": lambda n, a: F.regexp_like(a[0], F.lit(_regex(n).pattern)),
    "regexp_substr": lambda n, a: _regexp_substr(_regex(n), a[0]),
    "regexp_instr": lambda n, a: _regexp_instr(_regex(n), a[0]),
    "regexp_replace": lambda n, a: F.regexp_replace(a[0], F.lit(_regex(n).pattern), F.lit(str(n.extra[0]))),
}


def _regex(node: Expr) -> JavaRegex:
    assert isinstance(node.value, JavaRegex)
    return node.value


def _regexp_substr(regex: JavaRegex, value: Column) -> Column:
    # Spark's regexp_substr answers NULL for an empty match, where TiDB answers ''.
    return F.when(F.regexp_like(value, F.lit(regex.pattern)), F.regexp_extract(value, regex.pattern, 0))


def _regexp_instr(regex: JavaRegex, value: Column) -> Column:
    """The 1-based character position of the first match, 0 for none. Spark's regexp_instr counts UTF-16
    units, TiDB characters: the position is the length of the shortest text before a match, plus one."""
    before = regex.flags + "\\A(?s:(.*?))(?:" + regex.body + ")"
    found = F.char_length(F.regexp_extract(value, before, 1)).cast(T.LongType()) + 1
    return (
        F.when(value.isNull(), F.lit(None).cast(T.LongType()))
        .when(F.regexp_like(value, F.lit(regex.pattern)), found)
        .otherwise(F.lit(0).cast(T.LongType()))
    )


def _substring(text: Column, start: Column, length: Column | None = None) -> Column:
    """MySQL's SUBSTRING: position 0, or one before the text's start, gives '' (NULL text stays NULL)."""
    count = length if length is not None else F.char_length(text) + 1
    outside = text.isNotNull() & ((start == 0) | (start < -F.char_length(text)))
    return F.when(outside, F.lit("")).otherwise(F.call_function("substring", text, start, count))


# Characters whose uppercase Java writes as several characters (Unicode's special casing), where TiDB (Go)
# takes the one-character mapping: itself, or for Greek with ypogegrammeni the titlecase letter.
_UPPER_ONE = {
    **{chr(c): chr(c) for c in (0xDF, 0x149, 0x1F0, 0x390, 0x3B0, 0x587, *range(0x1E96, 0x1E9B))},
    **{chr(c): chr(c) for c in (0x1F50, 0x1F52, 0x1F54, 0x1F56, 0x1FB2, 0x1FB4, 0x1FB6, 0x1FB7, 0x1FC2)},
    **{chr(c): chr(c) for c in (0x1FC4, 0x1FC6, 0x1FC7, 0x1FD2, 0x1FD3, 0x1FD6, 0x1FD7, 0x1FE2, 0x1FE3)},
    **{chr(c): chr(c) for c in (0x1FE4, 0x1FE6, 0x1FE7, 0x1FF2, 0x1FF4, 0x1FF6, 0x1FF7)},
    **{chr(c): chr(c) for c in (*range(0xFB00, 0xFB07), *range(0xFB13, 0xFB18))},
    **{chr(c): chr(c) for c in (*range(0x1F88, 0x1F90), *range(0x1F98, 0x1FA0), *range(0x1FA8, 0x1FB0))},
    **{chr(c): chr(c + 8) for c in (*range(0x1F80, 0x1F88), *range(0x1F90, 0x1F98), *range(0x1FA0, 0x1FA8))},
    "\u1fb3": "\u1fbc", "\u1fc3": "\u1fcc", "\u1ff3": "\u1ffc",
    "\u1fbc": "\u1fbc", "\u1fcc": "\u1fcc", "\u1ffc": "\u1ffc",
}  # fmt: skip
# Java lowercases U+0130 to two characters and a final capital sigma to U+03C2; Go maps U+0130 to i
# and every capital sigma to U+03C3.
_LOWER_ONE = {"\u0130": "i", "\u03a3": "\u03c3"}


def _one_by_one(text: Column, specials: Mapping[str, str], whole: Callable[[Column], Column]) -> Column:
    """``whole(text)``, except that each character of ``specials`` maps to its given character: only text
    that holds one goes character by character."""
    pattern = "[" + "".join(specials) + "]"

    def each(char: Column) -> Column:
        mapped: Column = whole(char)
        for special, target in specials.items():
            mapped = F.when(char == special, F.lit(target)).otherwise(mapped)
        return mapped

    characters = F.regexp_extract_all(text, F.lit("(?s)."), F.lit(0))
    slow = F.array_join(F.transform(characters, each), "")
    return F.when(text.rlike(pattern), slow).otherwise(whole(text))


def _upper(text: Column) -> Column:
    return _one_by_one(text, _UPPER_ONE, F.upper)


def _lower(text: Column) -> Column:
    return _one_by_one(text, _LOWER_ONE, F.lower)


def _date_part(unit: str, moment: Column) -> Column:
    parts: dict[str, Callable[[Column], Column]] = {
        "YEAR": F.year,
        "MONTH": F.month,
        "DAY": F.dayofmonth,
        "HOUR": F.hour,
        "MINUTE": F.minute,
        "SECOND": F.second,
        "DAYOFWEEK": F.dayofweek,
        "WEEKDAY": F.weekday,
        "DAYOFYEAR": F.dayofyear,
        "QUARTER": F.quarter,
    }
    if unit == "MICROSECOND":
        return F.date_format(moment.cast(T.TimestampNTZType()), "SSSSSS").cast(T.LongType())
    return parts[unit](moment).cast(T.LongType())


def _path_text(path: object) -> str:
    assert isinstance(path, tuple)
    return tidb_json.path_json(path)


def _divide(dividend: str | None, divisor: str | None, scale: int) -> str | None:
    """``dividend / divisor`` rounded half up at ``scale``, exactly (None for NULL or a zero divisor)."""
    if dividend is None or divisor is None:
        return None
    try:
        a, b = Decimal(dividend), Decimal(divisor)
    except InvalidOperation:
        return None
    if not b:
        return None
    quotient = Context(prec=120).divide(a, b)
    return str(quotient.quantize(Decimal(1).scaleb(-scale), rounding=ROUND_HALF_UP))


def _extract(document: str | None, path: str) -> str | None:
    return tidb_json.json_extract(document, tidb_json.path_from_json(path))


# Plain Python functions run where the rows are; wrapped without type hints, which pyspark would otherwise
# read as a request for a pandas UDF; row at a time (retype.ROW_UDF says why).
_exact_quotient = F.udf(lambda a, b, scale: _divide(a, b, scale), T.StringType(), **ROW_UDF)
_json_extract = F.udf(lambda document, path: _extract(document, path), T.StringType(), **ROW_UDF)
_json_unquote = F.udf(lambda text: tidb_json.json_unquote(text), T.StringType(), **ROW_UDF)

"""MySQL's typing rules, node by node, for the expressions the mirror computes (see ``ingest.mysql.expr``).
Pure."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from decimal import Decimal, InvalidOperation

from sqlglot import exp

from ingest.model import ColumnType
from ingest.mysql.expr_regexp import RegexpTyping
from ingest.mysql.expr_types import (
    BOOL,
    DATE,
    DIV_SCALE_INCREMENT,
    DOUBLE,
    INT,
    INT_DECIMAL,
    JSON,
    MAX_DIGITS,
    NULL,
    STRING,
    Expr,
    Typ,
    Unsupported,
)


class Typer(RegexpTyping):
    """Types each node of a sqlglot MySQL tree by MySQL's rules, or raises Unsupported.

    ``case_insensitive``: the (lower-case) names of the columns whose collation folds case."""

    def __init__(
        self,
        columns: Mapping[str, tuple[str, ColumnType]],
        column_typ: Callable[[ColumnType], Typ],
        case_insensitive: frozenset[str] = frozenset(),
    ) -> None:
        self.columns, self.column_typ, self.case_insensitive = columns, column_typ, case_insensitive

    def node(self, node: exp.Expression) -> Expr:
        handler = getattr(self, f"_{type(node).__name__.lower()}", None)
        if handler is None:
            raise Unsupported(f"{_spelled(node)} is not computed by the mirror")
        result: Expr = handler(node)
        return result

    def _paren(self, node: exp.Paren) -> Expr:
        return self.node(node.this)

    def _column(self, node: exp.Column) -> Expr:
        found = self.columns.get(node.name.lower())
        if found is None:
            raise Unsupported(f"column {node.name} is not in the table")
        name, column_type = found
        return Expr("ref", (), self.column_typ(column_type), name)

    def _literal(self, node: exp.Literal) -> Expr:
        text = node.this
        if node.is_string:
            return Expr("lit", (), STRING, text)
        if re.fullmatch(r"\d+", text):
            number = int(text)
            return Expr("lit", (), INT if number < 2**63 else Typ("decimal", len(text), 0), number)
        if re.fullmatch(r"\d*\.\d+|\d+\.\d*", text):
            value = Decimal(text)
            digits, scale = len(value.as_tuple().digits), -int(value.as_tuple().exponent)
            return Expr("lit", (), Typ("decimal", max(digits, scale + 1), scale), value)
        try:
            return Expr("lit", (), DOUBLE, float(text))
        except ValueError as exc:
            raise Unsupported(f"the literal {text}") from exc

    def _introducer(self, node: exp.Introducer) -> Expr:
        if str(node.this).lower() not in ("_utf8mb4", "_utf8", "_utf8mb3", "_ascii", "_latin1"):
            raise Unsupported(f"a {node.this} literal")
        literal = node.args["expression"]
        if not isinstance(literal, exp.Literal) or not literal.is_string:
            raise Unsupported(f"{_spelled(node)} is not a text literal")
        return Expr("lit", (), STRING, literal.this)

    def _null(self, node: exp.Null) -> Expr:
        return Expr("lit", (), NULL, None)

    def _boolean(self, node: exp.Boolean) -> Expr:
        return Expr("lit", (), INT, 1 if node.this else 0)

    # Arithmetic -------------------------------------------------------------------------------------

    def _neg(self, node: exp.Neg) -> Expr:
        inner = self._number(node.this)
        if inner.op == "lit" and isinstance(inner.value, int):
            value = -inner.value
            return Expr("lit", (), INT if value >= -(2**63) else inner.type, value)
        if inner.op == "lit" and isinstance(inner.value, Decimal | float):
            return Expr("lit", (), inner.type, -inner.value)
        return Expr("neg", (inner,), inner.type if inner.type.kind != "bool" else INT)

    def _add(self, node: exp.Add) -> Expr:
        return self._arithmetic("add", node)

    def _sub(self, node: exp.Sub) -> Expr:
        return self._arithmetic("sub", node)

    def _mul(self, node: exp.Mul) -> Expr:
        return self._arithmetic("mul", node)

    def _arithmetic(self, op: str, node: exp.Binary) -> Expr:
        left, right = self._number(node.this), self._number(node.expression)
        kinds = {left.type.kind, right.type.kind}
        if "double" in kinds:
            return Expr(op, (left, right), DOUBLE)
        if "decimal" not in kinds:
            return Expr(op, (left, right), INT)
        a, b = _as_decimal(left.type), _as_decimal(right.type)
        if op == "mul":
            scale, whole = a.scale + b.scale, (a.precision - a.scale) + (b.precision - b.scale)
        else:
            scale = max(a.scale, b.scale)
            whole = max(a.precision - a.scale, b.precision - b.scale) + 1
        if whole + scale > MAX_DIGITS:
            raise Unsupported(f"{_spelled(node)} needs more than 38 decimal digits")
        return Expr(op, (left, right), Typ("decimal", whole + scale, scale))

    def _div(self, node: exp.Div) -> Expr:
        left, right = self._number(node.this), self._number(node.expression)
        if "double" in (left.type.kind, right.type.kind):
            return Expr("div", (left, right), DOUBLE)
        a, b = _as_decimal(left.type), _as_decimal(right.type)
        # The quotient, rounded half up at the dividend's scale + 4 (TiDB computes it digit by digit).
        scale = min(a.scale + DIV_SCALE_INCREMENT, 30)
        whole = (a.precision - a.scale) + b.scale
        if whole + scale > MAX_DIGITS:
            raise Unsupported(f"{_spelled(node)} needs more than 38 decimal digits")
        return Expr("div", (left, right), Typ("decimal", whole + scale, scale))

    def _intdiv(self, node: exp.IntDiv) -> Expr:
        left, right = self._number(node.this), self._number(node.expression)
        if {left.type.kind, right.type.kind} - {"int", "bool", "null"}:
            raise Unsupported("DIV of other than integers")
        return Expr("intdiv", (left, right), INT)

    def _mod(self, node: exp.Mod) -> Expr:
        left, right = self._number(node.this), self._number(node.expression)
        kinds = {left.type.kind, right.type.kind}
        if "double" in kinds:
            return Expr("mod", (left, right), DOUBLE)
        if "decimal" in kinds:
            a, b = _as_decimal(left.type), _as_decimal(right.type)
            scale = max(a.scale, b.scale)
            return Expr("mod", (left, right), Typ("decimal", max(a.precision, b.precision) + scale, scale))
        return Expr("mod", (left, right), INT)

    def _anonymous(self, node: exp.Anonymous) -> Expr:
        name = str(node.this).upper()
        args = node.expressions
        if name == "MOD" and len(args) == 2:
            return self._mod(exp.Mod(this=args[0], expression=args[1]))
        if name == "MID" and len(args) in (2, 3):
            return self._substring_of(args[0], args[1], args[2] if len(args) == 3 else None)
        if name == "JSON_UNQUOTE" and len(args) == 1:
            inner = self.node(args[0])
            if inner.type.kind not in ("json", "string", "null"):
                raise Unsupported("JSON_UNQUOTE of other than JSON")
            return Expr("json_unquote", (inner,), STRING)
        if name in _DATE_PARTS and len(args) == 1:
            return self._date_part(_DATE_PARTS[name], args[0])
        raise Unsupported(f"{name}() is not computed by the mirror")

    def _number(self, node: exp.Expression) -> Expr:
        typed_node = self.node(node)
        if not typed_node.type.numeric:
            raise Unsupported(f"{_spelled(node)} is no number (MySQL would convert it)")
        return typed_node

    # Comparisons and logic --------------------------------------------------------------------------

    def _comparable(self, left_node: exp.Expression, right_node: exp.Expression) -> tuple[Expr, Expr]:
        left, right = self.node(left_node), self.node(right_node)
        if left.type.numeric and right.type.numeric:
            return left, right
        for one, other in ((left, right), (right, left)):
            if one.type.kind in ("date", "datetime") and other.op == "lit" and other.type.kind == "string":
                moment = _temporal_literal(str(other.value), one.type)
                return (one, moment) if one is left else (moment, one)
        if left.type.temporal and right.type.temporal:
            return left, right
        raise Unsupported(f"comparing {left.type.kind} with {right.type.kind} (strings compare by collation)")

    def _compare(self, op: str, node: exp.Binary) -> Expr:
        left, right = self._comparable(node.this, node.expression)
        return Expr(op, (left, right), BOOL)

    def _eq(self, node: exp.EQ) -> Expr:
        return self._compare("eq", node)

    def _neq(self, node: exp.NEQ) -> Expr:
        return self._compare("neq", node)

    def _lt(self, node: exp.LT) -> Expr:
        return self._compare("lt", node)

    def _lte(self, node: exp.LTE) -> Expr:
        return self._compare("lte", node)

    def _gt(self, node: exp.GT) -> Expr:
        return self._compare("gt", node)

    def _gte(self, node: exp.GTE) -> Expr:
        return self._compare("gte", node)

    def _nullsafeeq(self, node: exp.NullSafeEQ) -> Expr:
        return self._compare("nulleq", node)

    def _between(self, node: exp.Between) -> Expr:
        value, low = self._comparable(node.this, node.args["low"])
        value, high = self._comparable(node.this, node.args["high"])
        return Expr("between", (value, low, high), BOOL)

    def _in(self, node: exp.In) -> Expr:
        if node.args.get("query") is not None or not node.expressions:
            raise Unsupported("IN over a subquery")
        pairs = [self._comparable(node.this, item) for item in node.expressions]
        return Expr("in", (pairs[0][0], *(right for _, right in pairs)), BOOL)

    def _is(self, node: exp.Is) -> Expr:
        if not isinstance(node.expression, exp.Null):
            raise Unsupported("IS TRUE / IS FALSE")
        return Expr("isnull", (self.node(node.this),), BOOL)

    def _not(self, node: exp.Not) -> Expr:
        return Expr("not", (self._truth(node.this),), BOOL)

    def _and(self, node: exp.And) -> Expr:
        return Expr("and", (self._truth(node.this), self._truth(node.expression)), BOOL)

    def _or(self, node: exp.Or) -> Expr:
        return Expr("or", (self._truth(node.this), self._truth(node.expression)), BOOL)

    def _xor(self, node: exp.Xor) -> Expr:
        return Expr("xor", (self._truth(node.this), self._truth(node.expression)), BOOL)

    def _truth(self, node: exp.Expression) -> Expr:
        """A condition: a comparison's truth, or a number's (not 0)."""
        typed_node = self.node(node)
        if typed_node.type.kind == "bool" or typed_node.type.kind == "null":
            return typed_node
        if typed_node.type.kind in ("int", "decimal", "double"):
            return Expr("truth", (typed_node,), BOOL)
        raise Unsupported(f"{_spelled(node)} as a condition (MySQL would convert it to a number)")

    # Conditionals ------------------------------------------------------------------------------------

    def _if(self, node: exp.If) -> Expr:
        condition = self._truth(node.this)
        then, otherwise = self.node(node.args["true"]), self.node(node.args.get("false") or exp.Null())
        return Expr("if", (condition, then, otherwise), _unify([then.type, otherwise.type], node))

    def _coalesce(self, node: exp.Coalesce) -> Expr:
        items = [self.node(node.this), *(self.node(e) for e in node.expressions)]
        return Expr("coalesce", tuple(items), _unify([i.type for i in items], node))

    def _case(self, node: exp.Case) -> Expr:
        whens: list[Expr] = []
        for branch in node.args["ifs"]:
            if node.this is not None:
                subject, value = self._comparable(node.this, branch.this)
                condition = Expr("eq", (subject, value), BOOL)
            else:
                condition = self._truth(branch.this)
            whens += [condition, self.node(branch.args["true"])]
        default = self.node(node.args.get("default") or exp.Null())
        result = _unify([*(w.type for w in whens[1::2]), default.type], node)
        return Expr("case", (*whens, default), result)

    # Strings ------------------------------------------------------------------------------------------

    def _text(self, node: exp.Expression) -> Expr:
        """An argument of a string function, converted to text as MySQL converts it."""
        typed_node = self.node(node)
        if typed_node.type.kind in ("double", "json"):
            raise Unsupported(f"{_spelled(node)} as text (MySQL's spelling of it is not reproduced)")
        return (
            typed_node if typed_node.type.kind in ("string", "null") else Expr("text", (typed_node,), STRING)
        )

    def _string(self, node: exp.Expression) -> Expr:
        typed_node = self.node(node)
        if typed_node.type.kind not in ("string", "null"):
            raise Unsupported(f"{_spelled(node)} is not text")
        return typed_node

    def _integer(self, node: exp.Expression) -> Expr:
        typed_node = self.node(node)
        if typed_node.type.kind not in ("int", "null"):
            raise Unsupported(f"{_spelled(node)} is not an integer")
        return typed_node

    def _concat(self, node: exp.Concat) -> Expr:
        return Expr("concat", tuple(self._text(e) for e in node.expressions), STRING)

    def _concatws(self, node: exp.ConcatWs) -> Expr:
        return Expr("concat_ws", tuple(self._text(e) for e in node.expressions), STRING)

    def _upper(self, node: exp.Upper) -> Expr:
        return Expr("upper", (self._string(node.this),), STRING)

    def _lower(self, node: exp.Lower) -> Expr:
        return Expr("lower", (self._string(node.this),), STRING)

    def _substring(self, node: exp.Substring) -> Expr:
        return self._substring_of(node.this, node.args["start"], node.args.get("length"))

    def _substring_of(
        self, text: exp.Expression, start: exp.Expression, length: exp.Expression | None
    ) -> Expr:
        args = [self._string(text), self._integer(start)]
        if length is not None:
            args.append(self._integer(length))
        return Expr("substring", tuple(args), STRING)

    def _left(self, node: exp.Left) -> Expr:
        return Expr("left", (self._string(node.this), self._integer(node.expression)), STRING)

    def _right(self, node: exp.Right) -> Expr:
        return Expr("right", (self._string(node.this), self._integer(node.expression)), STRING)

    def _length(self, node: exp.Length) -> Expr:
        op = "octet_length" if node.args.get("binary") else "char_length"
        return Expr(op, (self._string(node.this),), INT)

    def _trim(self, node: exp.Trim) -> Expr:
        if node.args.get("expression") is not None:
            raise Unsupported("TRIM of other than spaces")
        position = str(node.args.get("position") or "BOTH").upper()
        op = {"LEADING": "ltrim", "TRAILING": "rtrim", "BOTH": "trim"}[position]
        return Expr(op, (self._string(node.this),), STRING)

    def _replace(self, node: exp.Replace) -> Expr:
        args = (
            self._string(node.this),
            self._string(node.expression),
            self._string(node.args["replacement"]),
        )
        return Expr("replace", args, STRING)

    # JSON ---------------------------------------------------------------------------------------------

    def _jsonextract(self, node: exp.JSONExtract) -> Expr:
        document = self.node(node.this)
        if document.type.kind not in ("json", "null"):
            raise Unsupported("JSON_EXTRACT of other than a JSON column")
        if node.expressions:
            raise Unsupported("JSON_EXTRACT of several paths")
        path = _json_path(node.expression)
        return Expr("json_extract", (document,), JSON, path)

    # Dates ---------------------------------------------------------------------------------------------

    def _date_part(self, unit: str, argument: exp.Expression) -> Expr:
        moment = self.node(argument)
        if moment.type.kind not in ("date", "datetime", "null"):
            raise Unsupported(f"{unit} of {_spelled(argument)}, which is no DATE or DATETIME")
        return Expr("date_part", (moment,), INT, unit)

    def _tsordstodate(self, node: exp.TsOrDsToDate) -> Expr:
        moment = self.node(node.this)
        if moment.type.kind not in ("date", "datetime", "null"):
            raise Unsupported(f"DATE() of {_spelled(node.this)}, which is no DATE or DATETIME")
        return Expr("to_date", (moment,), DATE)

    def _extract(self, node: exp.Extract) -> Expr:
        unit = str(node.this.name).upper()
        if unit not in _DATE_PARTS.values():
            raise Unsupported(f"EXTRACT({unit} ...)")
        return self._date_part(unit, node.expression)

    def _year(self, node: exp.Year) -> Expr:
        return self._date_part("YEAR", _unwrap_date(node.this))

    def _month(self, node: exp.Month) -> Expr:
        return self._date_part("MONTH", _unwrap_date(node.this))

    def _day(self, node: exp.Day) -> Expr:
        return self._date_part("DAY", _unwrap_date(node.this))

    def _dayofmonth(self, node: exp.DayOfMonth) -> Expr:
        return self._date_part("DAY", _unwrap_date(node.this))

    def _dayofweek(self, node: exp.DayOfWeek) -> Expr:
        return self._date_part("DAYOFWEEK", _unwrap_date(node.this))

    def _dayofyear(self, node: exp.DayOfYear) -> Expr:
        return self._date_part("DAYOFYEAR", _unwrap_date(node.this))

    def _quarter(self, node: exp.Quarter) -> Expr:
        return self._date_part("QUARTER", _unwrap_date(node.this))

    def _hour(self, node: exp.Hour) -> Expr:
        return self._date_part("HOUR", node.this)

    def _minute(self, node: exp.Minute) -> Expr:
        return self._date_part("MINUTE", node.this)

    def _second(self, node: exp.Second) -> Expr:
        return self._date_part("SECOND", node.this)


_DATE_PARTS = {
    "YEAR": "YEAR", "MONTH": "MONTH", "DAY": "DAY", "DAYOFMONTH": "DAY", "HOUR": "HOUR", "MINUTE": "MINUTE",
    "SECOND": "SECOND", "MICROSECOND": "MICROSECOND", "DAYOFWEEK": "DAYOFWEEK", "WEEKDAY": "WEEKDAY",
    "DAYOFYEAR": "DAYOFYEAR", "QUARTER": "QUARTER",
}  # fmt: skip


def _unwrap_date(node: exp.Expression) -> exp.Expression:
    """sqlglot reads YEAR(t) as YEAR(DATE(t)): the part is the same either way."""
    return node.this if isinstance(node, exp.TsOrDsToDate) else node


def _as_decimal(typ: Typ) -> Typ:
    if typ.kind == "decimal":
        return typ
    return INT_DECIMAL if typ.kind in ("int", "bool", "null") else typ


def _unify(types: list[Typ], node: exp.Expression) -> Typ:
    """The type of IF/COALESCE/CASE over branches of ``types`` (MySQL's rules, for the kinds here)."""
    kinds = {t.kind for t in types} - {"null"}
    if not kinds:
        return NULL
    if kinds <= {"int", "bool"}:
        return INT
    if kinds <= {"int", "bool", "decimal"}:
        decimals = [_as_decimal(t) for t in types if t.kind != "null"]
        scale = max(d.scale for d in decimals)
        whole = max(d.precision - d.scale for d in decimals)
        return Typ("decimal", whole + scale, scale)
    if kinds <= {"int", "bool", "decimal", "double"}:
        return DOUBLE
    if len(kinds) == 1:
        (kind,) = kinds
        same = [t for t in types if t.kind == kind]
        return max(same, key=lambda t: t.scale)
    raise Unsupported(f"{_spelled(node)} mixes {', '.join(sorted(kinds))} branches")


def _temporal_literal(text: str, like: Typ) -> Expr:
    """A string literal compared with a DATE or DATETIME, read as MySQL reads it there."""
    match = re.fullmatch(r"(\d{4})-(\d{2})-(\d{2})(?:[ T](\d{2}):(\d{2}):(\d{2})(\.\d{1,6})?)?", text.strip())
    if match is None:
        raise Unsupported(f"{text!r} compared as a date")
    if match.group(4) is None and like.kind == "date":
        return Expr("lit", (), DATE, match.group(0))
    return Expr("lit", (), Typ("datetime", scale=6), match.group(0).replace("T", " "))


def _json_path(node: exp.Expression) -> tuple[str | int, ...]:
    """A JSON path of keys and array indexes (``$.a."b c"[2]``) as its steps."""
    if isinstance(node, exp.Introducer):
        node = node.args["expression"]
    if isinstance(node, exp.JSONPath):
        text = node.sql(dialect="mysql").strip("'")
    elif isinstance(node, exp.Literal) and node.is_string:
        text = node.this
    else:
        raise Unsupported("a JSON path that is not a literal")
    steps: list[str | int] = []
    rest = text.strip()
    if not rest.startswith("$"):
        raise Unsupported(f"the JSON path {text!r}")
    rest = rest[1:]
    pattern = re.compile(r'\.([A-Za-z_$][\w$]*)|\."((?:[^"\\]|\\.)*)"|\[(\d+)\]')
    while rest:
        step = pattern.match(rest)
        if step is None:
            raise Unsupported(f"the JSON path {text!r} (only keys and array indexes are followed)")
        key, quoted, index = step.groups()
        steps.append(int(index) if index is not None else key if key is not None else _unescape(quoted))
        rest = rest[step.end() :]
    return tuple(steps)


def _unescape(quoted: str) -> str:
    return re.sub(r"\\(.)", r"\1", quoted)


def _spelled(node: exp.Expression | exp.Binary) -> str:
    try:
        return node.sql(dialect="mysql")
    except (ValueError, InvalidOperation):  # pragma: no cover - sqlglot renders what it parsed
        return type(node).__name__

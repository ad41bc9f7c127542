"""The types and nodes of a typed MySQL expression (see ``ingest.mysql.expr``). Pure."""

from __future__ import annotations

from dataclasses import dataclass, field

MAX_DIGITS = 38  # Spark's widest DECIMAL: a wider intermediate value is not computed exactly
DIV_SCALE_INCREMENT = 4  # MySQL's div_precision_increment, TiDB's fixed value


@dataclass(frozen=True)
class Typ:
    """A MySQL expression type, as far as computing it needs: kind, and DECIMAL digits or fraction digits."""

    kind: str  # int, decimal, double, string, date, datetime, bool, json, null
    precision: int = 0
    scale: int = 0  # DECIMAL scale, or a DATETIME's fraction digits

    @property
    def numeric(self) -> bool:
        return self.kind in ("int", "decimal", "double", "bool", "null")

    @property
    def temporal(self) -> bool:
        return self.kind in ("date", "datetime", "null")


INT, DOUBLE, STRING, BOOL, JSON, NULL = (Typ(k) for k in ("int", "double", "string", "bool", "json", "null"))
DATE = Typ("date")
INT_DECIMAL = Typ("decimal", 20, 0)  # a BIGINT as a DECIMAL operand


@dataclass(frozen=True)
class Expr:
    """One node of a typed expression: what to compute (``op``), from what, and its MySQL type."""

    op: str
    args: tuple[Expr, ...]
    type: Typ
    value: object = None  # a literal's value, a column's name, a unit, a JSON path, ...
    extra: tuple[object, ...] = field(default=())


class Unsupported(ValueError):
    """The expression uses what the mirror does not compute exactly."""

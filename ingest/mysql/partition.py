"""MySQL/TiDB partition clauses and partition DDL -> small structured values. Pure.

sqlglot (30.x, MySQL dialect) does not cover these statements well enough to rely on. Of 19 forms
(PARTITION BY RANGE / RANGE COLUMNS / LIST / LIST COLUMNS / LIST … DEFAULT / HASH / KEY / RANGE INTERVAL,
ALTER TABLE … TRUNCATE / DROP / ADD (RANGE, LIST, PARTITIONS n) / EXCHANGE / REORGANIZE / COALESCE
PARTITION, REMOVE PARTITIONING, ALTER TABLE … PARTITION BY) it builds a tree for 3 (RANGE only with
``LESS THAN (MAXVALUE)`` in parentheses, LIST, ALTER TABLE … PARTITION BY), an opaque Command for 9 and
raises for 7 (among them the common ``VALUES LESS THAN MAXVALUE``, RANGE/LIST COLUMNS, DROP and ADD
PARTITION). So this is a small parser of its own over sqlglot's MySQL tokenizer (which gets quoting,
strings and comments right); the rest of a CREATE TABLE still goes to sqlglot.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import Token, TokenType
from sqlglot.dialects.mysql import MySQL
from sqlglot.errors import TokenError


@dataclass(frozen=True, slots=True)
class PartitionDef:
    """One partition as written: ``bound`` for RANGE (None: MAXVALUE), ``values`` for LIST (None: NULL).

    Values are the literal's text (a string literal without its quotes); ``is_default`` is TiDB's LIST
    ``PARTITION p DEFAULT``.
    """

    name: str
    bound: str | None = None
    values: tuple[str | None, ...] = ()
    is_default: bool = False


@dataclass(frozen=True, slots=True)
class PartitionBy:
    """A ``PARTITION BY`` clause. ``unsupported`` says why the mirror cannot compute a partition's rows."""

    method: str  # RANGE, LIST, HASH, KEY
    column: str = ""
    partitions: tuple[PartitionDef, ...] = ()
    unsupported: str = ""


@dataclass(frozen=True, slots=True)
class TruncatePartitions:
    names: tuple[str, ...]
    every: bool = False  # TRUNCATE PARTITION ALL


@dataclass(frozen=True, slots=True)
class DropPartitions:
    names: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class AddPartitions:
    """ADD PARTITION (defs); ``partitions`` is empty for HASH/KEY's ``ADD PARTITION PARTITIONS n``."""

    partitions: tuple[PartitionDef, ...]
    unreadable: str = ""


@dataclass(frozen=True, slots=True)
class Repartition:
    """ALTER TABLE … PARTITION BY … (None: REMOVE PARTITIONING). Rows stay; only the definition changes."""

    partition_by: PartitionBy | None


@dataclass(frozen=True, slots=True)
class NoRowChange:
    """Partition DDL that changes no row of the table (placement, attributes)."""

    what: str


@dataclass(frozen=True, slots=True)
class Recount:
    """COALESCE PARTITION n (``by`` = -n) or ADD PARTITION PARTITIONS n (``by`` = n) on HASH/KEY: rows move
    between the table's partitions, none changes; TiDB names the partitions p0 … p<count-1>."""

    by: int


@dataclass(frozen=True, slots=True)
class Reorganize:
    """REORGANIZE PARTITION a, b INTO (definitions): rows stay in the table, the definition changes."""

    names: tuple[str, ...]
    partitions: tuple[PartitionDef, ...]
    unreadable: str = ""


@dataclass(frozen=True, slots=True)
class ExchangePartition:
    """EXCHANGE PARTITION p WITH TABLE other: p's rows and the other table's rows trade places."""

    name: str
    other: tuple[str, ...]  # [database,] table, as written


@dataclass(frozen=True, slots=True)
class Unapplicable:
    """Any partition DDL the mirror cannot follow exactly."""

    reason: str


PartitionAction = (
    TruncatePartitions
    | DropPartitions
    | AddPartitions
    | Repartition
    | NoRowChange
    | Recount
    | Reorganize
    | ExchangePartition
    | Unapplicable
)


class _Unreadable(Exception):
    pass


def _tokens(sql: str) -> list[Token] | None:
    try:
        return list(MySQL().tokenize(sql))
    except (TokenError, ValueError):
        return None


def split_partition_clause(sql: str) -> tuple[str, PartitionBy | None]:
    """A CREATE TABLE without its trailing ``PARTITION BY`` clause (for sqlglot), and that clause."""
    tokens = _tokens(sql)
    if tokens is None:
        return sql, None
    depth = 0
    for index, token in enumerate(tokens):
        if token.token_type == TokenType.L_PAREN:
            depth += 1
        elif token.token_type == TokenType.R_PAREN:
            depth -= 1
        elif token.token_type == TokenType.PARTITION_BY and depth == 0:
            return sql[: token.start], parse_partition_by(tokens[index + 1 :])
    return sql, None


def parse_partition_by(tokens: list[Token]) -> PartitionBy:
    """The clause after ``PARTITION BY``; never raises: what it cannot read comes back ``unsupported``."""
    words = [t.text.upper() for t in tokens[:3]]
    method = next((w for w in words if w in ("RANGE", "LIST", "HASH", "KEY")), "?")
    try:
        return _Reader(tokens).partition_by()
    except _Unreadable as exc:
        return PartitionBy(method, unsupported=f"cannot read the partition clause ({exc})")


def parse_alter_partition(sql: str) -> PartitionAction | None:
    """A partition action of ``ALTER TABLE name …``, or None when the statement has no partition action."""
    tokens = _tokens(sql)
    if tokens is None or len(tokens) < 3 or tokens[0].text.upper() != "ALTER":
        return None
    index = 1
    if tokens[index].text.upper() == "IGNORE":
        index += 1
    if tokens[index].token_type != TokenType.TABLE:
        return None
    index += 2  # the table name, possibly qualified
    while index + 1 < len(tokens) and tokens[index].token_type == TokenType.DOT:
        index += 2
    rest = tokens[index:]
    # Keywords only: a column named `partition_id` or `partition` (quoted) is no partition DDL.
    if not any(
        t.token_type in (TokenType.PARTITION, TokenType.PARTITION_BY)
        or (t.token_type == TokenType.VAR and t.text.upper() in ("PARTITIONING", "PARTITIONS"))
        for t in rest
    ):
        return None
    try:
        return _Reader(rest).alter_action()
    except _Unreadable as exc:
        return Unapplicable(f"a partition DDL the mirror cannot read ({exc})")


# Table options an ALTER TABLE may set before its PARTITION BY (one value each).
_TABLE_OPTIONS = ("COMMENT", "ENGINE", "AUTO_INCREMENT", "CHARSET", "COLLATE", "ROW_FORMAT", "KEY_BLOCK_SIZE")


class _Reader:
    def __init__(self, tokens: list[Token]) -> None:
        self.tokens = [t for t in tokens if t.token_type != TokenType.SEMICOLON]
        self.index = 0

    def peek(self, offset: int = 0) -> str:
        position = self.index + offset
        return self.tokens[position].text.upper() if position < len(self.tokens) else ""

    def peek_type(self) -> TokenType | None:
        return self.tokens[self.index].token_type if self.index < len(self.tokens) else None

    def take(self, *words: str) -> str:
        word = self.peek()
        if words and word not in words:
            raise _Unreadable(f"expected {' or '.join(words)}, found {word or 'the end'}")
        if self.index >= len(self.tokens):
            raise _Unreadable("unexpected end")
        self.index += 1
        return self.tokens[self.index - 1].text

    def accept(self, *words: str) -> bool:
        if self.peek() in words:
            self.index += 1
            return True
        return False

    def at_end(self) -> bool:
        return self.index >= len(self.tokens)

    def name(self) -> str:
        token_type = self.peek_type()
        if token_type in (TokenType.STRING, TokenType.NUMBER, TokenType.L_PAREN, TokenType.R_PAREN, None):
            raise _Unreadable(f"expected a name, found {self.peek() or 'the end'}")
        return self.take()

    def names(self) -> tuple[str, ...]:
        names = [self.name()]
        while self.accept(","):
            names.append(self.name())
        return tuple(names)

    def skip_group(self) -> None:
        """Skip a balanced ( … ) group."""
        depth = 0
        while not self.at_end():
            word = self.take()
            depth += {"(": 1, ")": -1}.get(word, 0)
            if depth == 0:
                return
        raise _Unreadable("unbalanced parentheses")

    def literal(self) -> str | None:
        """One literal value (a signed number, a string or NULL); its text, None for NULL."""
        token_type = self.peek_type()
        if token_type == TokenType.NULL:
            self.index += 1
            return None
        if token_type == TokenType.STRING:
            return self.take()
        # A charset introducer, as TiCDC's owner writes before every string: _UTF8MB4'2025-01-01'.
        introduced = (
            self.index + 1 < len(self.tokens) and self.tokens[self.index + 1].token_type == TokenType.STRING
        )
        if self.peek().startswith("_") and introduced:
            self.index += 1
            return self.take()
        sign = self.take() if self.peek() in ("-", "+") else ""
        if self.peek_type() != TokenType.NUMBER:
            raise _Unreadable(f"expected a literal value, found {self.peek() or 'the end'}")
        return (sign if sign == "-" else "") + self.take()

    # -- PARTITION BY ---------------------------------------------------------------------------------
    def partition_by(self) -> PartitionBy:
        linear = self.accept("LINEAR")
        method = self.take("RANGE", "LIST", "HASH", "KEY")
        if method.upper() == "KEY" or linear:
            what = "LINEAR " * linear + method.upper()
            return PartitionBy(
                method.upper(), unsupported=f"PARTITION BY {what}: the mirror does not compute TiDB's hashing"
            )
        columns_form = self.accept("COLUMNS")
        self.take("(")
        expression = [self.take()]
        depth = 1 if expression[0] == "(" else 0
        while depth or self.peek() != ")":
            if self.at_end():
                raise _Unreadable("unbalanced parentheses")
            expression.append(self.take())
            depth += {"(": 1, ")": -1}.get(expression[-1], 0)
        self.take(")")
        spelled = "".join(expression)
        if len(expression) != 1 or self.tokens[self.index - 2].token_type not in (
            TokenType.VAR,
            TokenType.IDENTIFIER,
        ):
            what = "columns" if columns_form else "expression"
            return PartitionBy(
                method.upper(),
                unsupported=f"PARTITION BY {method.upper()} on the {what} {spelled}, not on one column",
            )
        if method.upper() == "HASH":
            return self.hash_partitions(expression[0])
        if self.peek() in ("INTERVAL", "PARTITIONS", "SUBPARTITION"):
            return PartitionBy(method.upper(), unsupported=f"PARTITION BY {method.upper()} … {self.peek()}")
        self.take("(")
        partitions = [self.partition_def(method.upper())]
        while self.accept(","):
            partitions.append(self.partition_def(method.upper()))
        self.take(")")
        return PartitionBy(method.upper(), expression[0], tuple(partitions))

    def hash_partitions(self, column: str) -> PartitionBy:
        """``PARTITIONS n`` (named p0 … pn-1) and/or ``(PARTITION name [options], …)``."""
        count = int(self.take()) if self.accept("PARTITIONS") and self.peek().isdigit() else None
        names: list[str] = []
        if self.accept("("):
            while True:
                self.take("PARTITION")
                names.append(self.name())
                while not self.at_end() and self.peek() not in (",", ")"):
                    self.skip_group() if self.peek() == "(" else self.take()
                if not self.accept(","):
                    break
            self.take(")")
        if self.peek() == "SUBPARTITION":
            return PartitionBy("HASH", unsupported="PARTITION BY HASH … SUBPARTITION")
        if not names and count is not None:
            names = [f"p{i}" for i in range(count)]
        if not names or (count is not None and count != len(names)):
            raise _Unreadable("the number of HASH partitions")
        return PartitionBy("HASH", column, tuple(PartitionDef(n) for n in names))

    def partition_def(self, method: str) -> PartitionDef:
        self.take("PARTITION")
        name = self.name()
        if self.accept("DEFAULT"):
            definition = PartitionDef(name, is_default=True)
        elif method == "RANGE":
            self.take("VALUES")
            self.take("LESS")
            self.take("THAN")
            if self.accept("MAXVALUE"):
                definition = PartitionDef(name)
            else:
                self.take("(")
                bound = None if self.accept("MAXVALUE") else self.literal()
                if bound is None and self.tokens[self.index - 1].token_type == TokenType.NULL:
                    raise _Unreadable("NULL is not a range bound")
                self.take(")")
                definition = PartitionDef(name, bound=bound)
        else:
            self.take("VALUES")
            self.take("IN")
            self.take("(")
            if self.peek() == "(":
                raise _Unreadable("LIST COLUMNS of several columns")
            values = [self.literal()]
            while self.accept(","):
                values.append(self.literal())
            self.take(")")
            definition = PartitionDef(name, values=tuple(values))
        # Partition options (COMMENT, ENGINE, placement …) do not change which rows are in it.
        while not self.at_end() and self.peek() not in (",", ")"):
            if self.peek() == "(":
                self.skip_group()
            else:
                self.take()
        return definition

    # -- ALTER TABLE … PARTITION ---------------------------------------------------------------------------
    def alter_action(self) -> PartitionAction:
        self.skip_table_options()
        word = self.take()
        upper = word.upper()
        if upper == "PARTITION BY":
            partition_by = self.partition_by_rest()
            if partition_by.unsupported:
                # Recorded as not followed, whatever its clause holds: partition options end the statement.
                self.index = len(self.tokens)
            return self.finish(Repartition(partition_by))
        if upper == "REMOVE":
            self.take("PARTITIONING")
            return self.finish(Repartition(None))
        if upper == "EXCHANGE":
            self.take("PARTITION")
            name = self.name()
            self.take("WITH")
            self.take("TABLE")
            other = [self.name()]
            if self.accept("."):
                other.append(self.name())
            if self.accept("WITH", "WITHOUT"):
                self.take("VALIDATION")
            return self.finish(ExchangePartition(name, tuple(other)))
        if upper == "REORGANIZE":
            self.take("PARTITION")
            names = self.names()
            self.take("INTO")
            return self.finish(Reorganize(names, *self.definitions()))
        if upper == "COALESCE":
            self.take("PARTITION")
            return self.finish(Recount(-int(self.take())))
        if upper == "LAST" and self.peek() == "PARTITION":
            return NoRowChange("LAST PARTITION (adds interval partitions)")
        if upper == "PARTITION" and self.peek(1) in ("PLACEMENT", "ATTRIBUTES"):
            return NoRowChange(f"PARTITION … {self.peek(1)}")
        if upper == "TRUNCATE":
            self.take("PARTITION")
            if self.accept("ALL"):
                return self.finish(TruncatePartitions((), every=True))
            return self.finish(TruncatePartitions(self.names()))
        if upper == "DROP":
            self.take("PARTITION")
            if self.accept("IF"):
                self.take("EXISTS")
            return self.finish(DropPartitions(self.names()))
        if upper == "ADD":
            self.take("PARTITION")
            if self.accept("IF"):
                self.take("NOT")
                self.take("EXISTS")
            if self.accept("PARTITIONS"):
                return self.finish(Recount(int(self.take())))
            return self.finish(AddPartitions(*self.definitions()))
        return Unapplicable(f"{upper} … PARTITION is a partition DDL the mirror does not follow")

    def skip_table_options(self) -> None:
        """Table options before a ``PARTITION BY`` (``COMMENT = 'x'``, ``ENGINE``, ``AUTO_INCREMENT``, the
        default charset and collation): they change no row, and the DDL is the partitioning that follows."""
        start = self.index
        while not self.at_end() and self.peek() != "PARTITION BY":
            self.accept("DEFAULT")
            if self.accept("CHARACTER"):
                self.take("SET")
            elif not self.accept(*_TABLE_OPTIONS):
                self.index = start
                return
            self.accept("=")
            self.take()
            self.accept(",")
        if self.at_end():
            self.index = start

    def definitions(self) -> tuple[tuple[PartitionDef, ...], str]:
        """``(PARTITION … , …)``: the definitions, or none and why they cannot be read (then skipped)."""
        self.take("(")
        start = self.index
        try:
            partitions = [self.partition_def("RANGE" if self.peek(3) == "LESS" else "LIST")]
            while self.accept(","):
                partitions.append(self.partition_def("RANGE" if self.peek(3) == "LESS" else "LIST"))
            self.take(")")
        except _Unreadable as exc:
            self.index = start - 1
            self.skip_group()
            return (), str(exc)
        return tuple(partitions), ""

    def partition_by_rest(self) -> PartitionBy:
        try:
            return self.partition_by()
        except _Unreadable as exc:
            return PartitionBy("?", unsupported=f"cannot read the partition clause ({exc})")

    def finish(self, action: PartitionAction) -> PartitionAction:
        if not self.at_end():
            return Unapplicable(
                f"a partition DDL combined with {self.peek()} …, which the mirror cannot apply"
            )
        return action

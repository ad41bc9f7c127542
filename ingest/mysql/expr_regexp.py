"""MySQL typing of TiDB's REGEXP functions, for the expressions the mirror computes (``ingest.mysql.expr``).
Pure.

``REGEXP_LIKE`` (and ``REGEXP``/``RLIKE``), ``REGEXP_SUBSTR``, ``REGEXP_INSTR`` and ``REGEXP_REPLACE`` over a
string, with a literal pattern and match type, and position, occurrence and return option at their
defaults (a later argument given as its default is fine). The pattern becomes a Java pattern that matches as
TiDB's RE2 does (``ingest.mysql.regexp``). TiDB matches case-insensitively when the function's collation
is, which is its subject column's: a column the DDL gave a case-insensitive collation is one
(``case_insensitive``); every other column has TiDB's default, ``utf8mb4_bin``.
"""

from __future__ import annotations

from sqlglot import exp

from ingest.mysql.expr_types import BOOL, INT, STRING, Expr, Unsupported
from ingest.mysql.regexp import JavaRegex, replacement, translate


class RegexpTyping:
    """The REGEXP handlers of ``expr_typing.Typer`` (which provides ``node`` and ``case_insensitive``)."""

    case_insensitive: frozenset[str]

    def node(self, node: exp.Expression) -> Expr:  # pragma: no cover - the Typer's own
        raise NotImplementedError

    def _regexplike(self, node: exp.RegexpLike) -> Expr:
        subject, regex = self._regexp(node, node.args.get("flag"))
        return Expr("regexp_like", (subject,), BOOL, regex)

    def _regexpsubstr(self, node: exp.RegexpSubstr) -> Expr:
        _at_default(node, position=1, occurrence=1)
        subject, regex = self._regexp(node, node.args.get("parameters"))
        return Expr("regexp_substr", (subject,), STRING, regex)

    def _regexpinstr(self, node: exp.RegexpInstr) -> Expr:
        _at_default(node, position=1, occurrence=1, option=0)
        subject, regex = self._regexp(node, node.args.get("parameters"))
        return Expr("regexp_instr", (subject,), INT, regex)

    def _regexpreplace(self, node: exp.RegexpReplace) -> Expr:
        _at_default(node, position=1, occurrence=0)
        subject, regex = self._regexp(node, node.args.get("modifiers"))
        if regex.matches_empty:
            raise Unsupported(
                f"REGEXP_REPLACE with {_text(node.expression)!r}, which matches the empty string "
                "(Go and Java replace empty matches differently)"
            )
        text = replacement(_text(node.args["replacement"]), regex.groups)
        return Expr("regexp_replace", (subject,), STRING, regex, (text,))

    def _regexp(self, node: exp.Expression, match_type: exp.Expression | None) -> tuple[Expr, JavaRegex]:
        subject = self.node(node.this)
        if subject.type.kind not in ("string", "null"):
            raise Unsupported(f"a regular expression over {subject.type.kind} (MySQL would convert it)")
        pattern = _text(node.args["expression"])
        flags = "" if match_type is None else _text(match_type)
        return subject, translate(pattern, flags, self._folds_case(node.this))

    def _folds_case(self, subject: exp.Expression) -> bool:
        """Whether TiDB matches ``subject`` case-insensitively: its collation is a case-folding column's."""
        folding = {c.name.lower() for c in subject.find_all(exp.Column)} & self.case_insensitive
        if folding and not isinstance(subject, exp.Column):
            raise Unsupported("a regular expression over an expression of a case-insensitive column")
        return bool(folding)


def _text(node: exp.Expression) -> str:
    """A literal text argument (a pattern, a replacement, a match type)."""
    if isinstance(node, exp.Introducer):
        node = node.args["expression"]
    if not isinstance(node, exp.Literal) or not node.is_string:
        raise Unsupported(f"{node.sql(dialect='mysql')} as a pattern (the mirror computes literal ones only)")
    return str(node.this)


def _at_default(node: exp.Expression, **defaults: int) -> None:
    for name, default in defaults.items():
        given = node.args.get(name)
        if given is None:
            continue
        if not (isinstance(given, exp.Literal) and not given.is_string and given.this == str(default)):
            raise Unsupported(f"{name} {given.sql(dialect='mysql')} (the mirror computes {default} only)")

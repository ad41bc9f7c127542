"""TiDB DDL text -> MySQL DDL text that sqlglot's MySQL dialect reads, with the same data meaning. Pure.

TiDB accepts MySQL DDL plus clauses of its own, and wraps some of them in comments TiDB executes
(``/*T![clustered_index] CLUSTERED */``), as MySQL does with ``/*!40101 … */``. Neither changes the
columns, types, keys or rows of a table beyond what the MySQL part says, but sqlglot stops on most of them.
So this pass:

* unwraps executable comments (``/*!…*/``, ``/*!NNNNN …*/``, ``/*T!…*/``, ``/*T![feature] …*/``): the
  server runs their text, so the statement means what it says with them unwrapped;
* drops the clauses that carry no data meaning: ``CLUSTERED``/``NONCLUSTERED`` and ``GLOBAL``/``LOCAL``
  after a key, ``AUTO_RANDOM[(n[, m])]``, the table options ``SHARD_ROW_ID_BITS``, ``PRE_SPLIT_REGIONS``,
  ``AUTO_ID_CACHE``, ``AUTO_RANDOM_BASE``, ``TTL``, ``TTL_ENABLE``, ``TTL_JOB_INTERVAL``,
  ``PLACEMENT POLICY``, ``STATS_*`` and ``SECONDARY_ENGINE*``, and the ALTER TABLE actions ``SET TIFLASH
  REPLICA n [LOCATION LABELS …]``, ``REMOVE TTL``, ``CACHE``/``NOCACHE``, ``ATTRIBUTES``, ``COMPACT``;
* spells ``ADD [COLUMN] (a INT, b INT)`` as ``ADD COLUMN a INT, ADD COLUMN b INT``.

Words are dropped only where they cannot be a name: an unquoted ``clustered`` column or index keeps its name.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import Token, TokenType
from sqlglot.dialects.mysql import MySQL
from sqlglot.errors import TokenError
from sqlglot.parser import Parser


@dataclass(frozen=True, slots=True)
class Normalized:
    """The statement sqlglot gets, and the TiDB clauses dropped on the way (as written)."""

    sql: str
    dropped: tuple[str, ...] = ()


def unwrap_executable_comments(sql: str) -> str:
    """``/*!…*/``, ``/*!NNNNN …*/``, ``/*T!…*/`` and ``/*T![feature] …*/`` replaced by their text.

    Quoted strings and identifiers are left alone; other comments stay as they are.
    """
    out: list[str] = []
    i, n = 0, len(sql)
    while i < n:
        ch = sql[i]
        if ch in "'\"`":
            end = _quoted_end(sql, i)
            out.append(sql[i:end])
            i = end
            continue
        if sql.startswith("/*", i):
            end = sql.find("*/", i + 2)
            close = n if end < 0 else end + 2
            body = sql[i + 2 : end if end >= 0 else n]
            inner = _executable_body(body)
            out.append(sql[i:close] if inner is None else f" {inner} ")
            i = close
            continue
        if ch == "#" or sql.startswith("-- ", i):
            end = sql.find("\n", i)
            end = n if end < 0 else end
            out.append(sql[i:end])
            i = end
            continue
        out.append(ch)
        i += 1
    return "".join(out)


def _quoted_end(sql: str, start: int) -> int:
    quote, i = sql[start], start + 1
    while i < len(sql):
        if sql[i] == "\\" and quote != "`":
            i += 2
            continue
        if sql[i] == quote:
            if i + 1 < len(sql) and sql[i + 1] == quote:
                i += 2
                continue
            return i + 1
        i += 1
    return len(sql)


def _executable_body(body: str) -> str | None:
    if body.startswith("!"):
        rest = body[1:]
        digits = len(rest) - len(rest.lstrip("0123456789"))
        return rest[digits:] if digits in (0, 5, 6) else rest
    if body.startswith("T!"):
        rest = body[2:]
        if rest.startswith("["):
            close = rest.find("]")
            return rest[close + 1 :] if close >= 0 else None
        return rest
    return None


# Table options that say how TiDB stores or schedules a table, never what is in it.
_VALUE_OPTIONS = {
    "SHARD_ROW_ID_BITS", "PRE_SPLIT_REGIONS", "AUTO_ID_CACHE", "AUTO_RANDOM_BASE", "TTL_ENABLE",
    "TTL_JOB_INTERVAL", "STATS_BUCKETS", "STATS_TOPN", "STATS_COL_CHOICE", "STATS_COL_LIST",
    "STATS_SAMPLE_RATE", "STATS_PERSISTENT", "STATS_AUTO_RECALC", "STATS_SAMPLE_PAGES", "SECONDARY_ENGINE",
    "SECONDARY_ENGINE_ATTRIBUTE", "ENGINE_ATTRIBUTE", "ATTRIBUTES", "AUTOEXTEND_SIZE",
}  # fmt: skip
_ALTER_ONLY_WORDS = {"CACHE", "NOCACHE", "COMPACT"}
# After these, a word is a name (of a column, index, table or constraint), not an option.
_NAME_BEFORE = {
    TokenType.L_PAREN, TokenType.COMMA, TokenType.DOT, TokenType.COLUMN, TokenType.TABLE, TokenType.ON,
    TokenType.REFERENCES, TokenType.EXISTS, TokenType.CONSTRAINT, TokenType.INDEX, TokenType.KEY,
    TokenType.UNIQUE, TokenType.FOREIGN_KEY,
}  # fmt: skip
_NAME_BEFORE_WORDS = {"TO", "AFTER", "CHANGE", "MODIFY", "ADD", "DROP", "RENAME", "AS", "ALTER"}
_TYPE_TOKENS = Parser.TYPE_TOKENS


def _tokens(sql: str) -> list[Token] | None:
    try:
        return list(MySQL().tokenize(sql))
    except (TokenError, ValueError):
        return None


def _word(token: Token) -> str:
    return token.text.upper() if token.token_type in (TokenType.VAR, TokenType.CACHE) else ""


def normalize(sql: str) -> Normalized:
    """The statement without TiDB's executable comments and data-free clauses (see the module doc)."""
    text = unwrap_executable_comments(sql)
    tokens = _tokens(text)
    if tokens is None or not tokens:
        return Normalized(text)
    first = tokens[0].token_type
    alter = first == TokenType.ALTER
    if first not in (TokenType.CREATE, TokenType.ALTER):
        return Normalized(text)
    edits: list[tuple[int, int, str]] = []  # (first token, last token, replacement text)
    dropped: list[str] = []
    depth, i = 0, 0
    while i < len(tokens):
        token = tokens[i]
        kind = token.token_type
        if kind == TokenType.L_PAREN:
            depth += 1
        elif kind == TokenType.R_PAREN:
            depth -= 1
        word = _word(token)
        end: int | None = None
        if word in ("CLUSTERED", "NONCLUSTERED") and not _is_name(tokens, i):
            end = i
        elif word in ("GLOBAL", "LOCAL") and i > 0 and tokens[i - 1].token_type == TokenType.R_PAREN:
            end = i  # a partitioned table's global or local index
        elif word == "AUTO_RANDOM" and not _is_name(tokens, i, paren_is_name=False):
            end = _skip_parens(tokens, i + 1) - 1
        elif alter and depth == 0 and word == "ADD":
            rewrite = _add_column_list(text, tokens, i)
            if rewrite is not None:
                last, replacement = rewrite
                edits.append((i, last, replacement))
                i = last + 1
                continue
        elif kind == TokenType.FLOAT and token.text.upper() == "REAL":
            # MySQL's REAL is DOUBLE (unless the REAL_AS_FLOAT SQL mode, which TiCDC never reports).
            edits.append((i, i, "DOUBLE"))
        elif (spelling := _type_synonym(tokens, i)) is not None:
            edits.append((i, spelling[0], spelling[1]))
            i = spelling[0] + 1
            continue
        elif (attribute := _column_attribute_end(tokens, i)) is not None:
            end = attribute
        elif kind == TokenType.ALIAS and depth == (0 if alter else 1) and _generated_without_kind(tokens, i):
            # sqlglot reads AS (expr) NOT NULL as (expr) IS NOT NULL; VIRTUAL is what an omitted kind means.
            close = _skip_parens(tokens, i + 1) - 1
            edits.append((close, close, ") VIRTUAL"))
        elif depth == 0 and not _is_name(tokens, i, paren_is_name=False, after_comma=alter):
            end = _table_option_end(tokens, i, word, alter)
        if end is not None:
            start = i
            if depth == 0 and _word(tokens[i]) not in ("CLUSTERED", "NONCLUSTERED", "GLOBAL", "LOCAL"):
                start, end = _with_one_comma(tokens, i, end, edits)
            dropped.append(" ".join(text[tokens[i].start : tokens[end].end + 1].split()))
            edits.append((start, end, ""))
            i = end + 1
            continue
        i += 1
    if not edits:
        return Normalized(text)
    out, position = [], 0
    for first_token, last_token, replacement in edits:
        out.append(text[position : tokens[first_token].start])
        out.append(replacement if replacement else " ")
        position = tokens[last_token].end + 1
    out.append(text[position:])
    return Normalized("".join(out), tuple(dropped))


# TiDB's synonyms of column types that sqlglot's MySQL dialect reads as another type, or not at all.
_SYNONYMS = {"INT8": "BIGINT", "INT3": "MEDIUMINT", "MIDDLEINT": "MEDIUMINT"}
_LONG = {TokenType.VARCHAR: "MEDIUMTEXT", TokenType.VARBINARY: "MEDIUMBLOB"}


def _type_synonym(tokens: list[Token], i: int) -> tuple[int, str] | None:
    """A type's synonym at ``i`` (after a column's name): the last token it spans and the type it means.
    ``LONG`` and ``LONG VARCHAR`` are MEDIUMTEXT, ``LONG VARBINARY`` MEDIUMBLOB, ``INT8`` BIGINT (sqlglot
    reads it as TINYINT), ``INT3``/``MIDDLEINT`` MEDIUMINT; ``NATIONAL`` before CHAR/VARCHAR means nothing
    more."""
    token = tokens[i]
    if i == 0 or tokens[i - 1].token_type not in (TokenType.VAR, TokenType.IDENTIFIER):
        return None
    upper = token.text.upper()
    following = tokens[i + 1] if i + 1 < len(tokens) else None
    if token.token_type != TokenType.IDENTIFIER and upper in _SYNONYMS:
        return i, _SYNONYMS[upper]
    if token.token_type == TokenType.BIGINT and upper == "LONG":
        if following is not None and following.token_type in _LONG:
            return i + 1, _LONG[following.token_type]
        return i, "MEDIUMTEXT"
    texts = (TokenType.CHAR, TokenType.VARCHAR, TokenType.NCHAR, TokenType.NVARCHAR)
    if upper == "NATIONAL" and following is not None and following.token_type in texts:
        return i, ""
    return None


_ATTRIBUTE_VALUES = {
    "STORAGE": {"DISK", "MEMORY", "DEFAULT"}, "COLUMN_FORMAT": {"FIXED", "DYNAMIC", "DEFAULT"},
}  # fmt: skip


def _column_attribute_end(tokens: list[Token], i: int) -> int | None:
    """The last token of a column attribute that says how MySQL stores a column, or whether a CHECK is
    enforced (``STORAGE MEMORY``, ``COLUMN_FORMAT FIXED``, ``[NOT] ENFORCED``): TiDB parses and ignores
    them, and sqlglot stops on them."""
    word = _word(tokens[i])
    following = tokens[i + 1].text.upper() if i + 1 < len(tokens) else ""
    column_name = i == 0 or tokens[i - 1].token_type in (TokenType.COMMA, TokenType.L_PAREN)
    if word in _ATTRIBUTE_VALUES and following in _ATTRIBUTE_VALUES[word] and not column_name:
        return i + 1
    if tokens[i].token_type == TokenType.NOT and following == "ENFORCED" and i > 0:
        return i + 1 if tokens[i - 1].token_type == TokenType.R_PAREN else None
    if word == "ENFORCED" and i > 0 and tokens[i - 1].token_type == TokenType.R_PAREN:
        return i
    return None


def _generated_without_kind(tokens: list[Token], i: int) -> bool:
    if i + 1 >= len(tokens) or tokens[i + 1].token_type != TokenType.L_PAREN:
        return False
    after = _skip_parens(tokens, i + 1)
    return after < len(tokens) and tokens[after].text.upper() in ("NOT", "NULL")


def _is_name(tokens: list[Token], i: int, paren_is_name: bool = True, after_comma: bool = True) -> bool:
    """Whether the word at ``i`` names something; a comma is followed by a table option, not a name,
    between CREATE TABLE's table options (``after_comma`` False)."""
    following = tokens[i + 1] if i + 1 < len(tokens) else None
    if following is not None and following.token_type in _TYPE_TOKENS:
        return True
    if (
        paren_is_name
        and following is not None
        and following.token_type in (TokenType.L_PAREN, TokenType.USING)
    ):
        return True
    if i == 0:
        return True
    before = tokens[i - 1]
    if before.token_type == TokenType.COMMA and not after_comma:
        return False
    if before.token_type in _NAME_BEFORE:
        return True
    if before.text.upper() in _NAME_BEFORE_WORDS:
        return True
    # CHANGE [COLUMN] old new …: the new name follows the old one.
    return i > 1 and tokens[i - 2].text.upper() in ("CHANGE", "COLUMN") and before.token_type in (
        TokenType.VAR, TokenType.IDENTIFIER,
    )  # fmt: skip


def _skip_parens(tokens: list[Token], i: int) -> int:
    """The index after a parenthesised group starting at ``i`` (``i`` itself when there is none)."""
    if i >= len(tokens) or tokens[i].token_type != TokenType.L_PAREN:
        return i
    depth = 0
    for j in range(i, len(tokens)):
        if tokens[j].token_type == TokenType.L_PAREN:
            depth += 1
        elif tokens[j].token_type == TokenType.R_PAREN:
            depth -= 1
            if depth == 0:
                return j + 1
    return len(tokens)


def _after_equals(tokens: list[Token], i: int) -> int:
    return i + 1 if i < len(tokens) and tokens[i].token_type == TokenType.EQ else i


def _table_option_end(tokens: list[Token], i: int, word: str, alter: bool) -> int | None:
    """The last token of a data-free table option (or ALTER TABLE action) starting at ``i``, if one does."""
    n = len(tokens)
    if word in _VALUE_OPTIONS:
        j = _after_equals(tokens, i + 1)
        return (
            _skip_parens(tokens, j) - 1
            if j < n and tokens[j].token_type == TokenType.L_PAREN
            else min(j, n - 1)
        )
    if word == "PLACEMENT" and i + 1 < n and tokens[i + 1].text.upper() == "POLICY":
        return min(_after_equals(tokens, i + 2), n - 1)
    if word == "TTL":
        j = _after_equals(tokens, i + 1)
        # TTL = column + INTERVAL n unit
        while j < n and tokens[j].token_type not in (TokenType.INTERVAL, TokenType.COMMA):
            j += 1
        if j < n and tokens[j].token_type == TokenType.INTERVAL:
            return min(j + 2, n - 1)
        return j - 1
    if not alter:
        return None
    if word == "REMOVE" and i + 1 < n and tokens[i + 1].text.upper() in ("TTL", "PARTITIONING"):
        return i + 1 if tokens[i + 1].text.upper() == "TTL" else None
    if word in _ALTER_ONLY_WORDS and tokens[i - 1].token_type in (
        TokenType.VAR,
        TokenType.IDENTIFIER,
        TokenType.COMMA,
    ):
        j = i + 1
        if word == "COMPACT":
            # COMPACT [PARTITION p, …] [TIFLASH REPLICA]
            while j < n and tokens[j].token_type != TokenType.SEMICOLON:
                j += 1
            return j - 1
        return i
    if tokens[i].token_type == TokenType.SET and i + 2 < n and tokens[i + 1].text.upper() == "TIFLASH":
        j = i + 4  # SET TIFLASH REPLICA n
        if j + 1 < n and tokens[j].text.upper() == "LOCATION" and tokens[j + 1].text.upper() == "LABELS":
            j += 2
            while j < n and tokens[j].token_type == TokenType.STRING:
                if (
                    j + 1 < n
                    and tokens[j + 1].token_type == TokenType.COMMA
                    and j + 2 < n
                    and (tokens[j + 2].token_type == TokenType.STRING)
                ):
                    j += 2
                else:
                    j += 1
                    break
        return min(j, n) - 1
    return None


def _with_one_comma(
    tokens: list[Token], start: int, end: int, edits: list[tuple[int, int, str]]
) -> tuple[int, int]:
    """Widen a dropped option by the comma that separated it from its neighbour, if any."""
    previous = start - 1
    if (
        previous >= 0
        and tokens[previous].token_type == TokenType.COMMA
        and not any(first <= previous <= last for first, last, _ in edits)
    ):
        return previous, end
    if end + 1 < len(tokens) and tokens[end + 1].token_type == TokenType.COMMA:
        return start, end + 1
    return start, end


def _add_column_list(text: str, tokens: list[Token], i: int) -> tuple[int, str] | None:
    """``ADD [COLUMN] [IF NOT EXISTS] (a INT, b INT)`` spelt as one ADD COLUMN per column."""
    j = i + 1
    if j < len(tokens) and tokens[j].token_type == TokenType.COLUMN:
        j += 1
    guard = ""
    if j + 2 < len(tokens) and tokens[j].text.upper() == "IF" and tokens[j + 1].token_type == TokenType.NOT:
        guard, j = "IF NOT EXISTS ", j + 3
    if j >= len(tokens) or tokens[j].token_type != TokenType.L_PAREN:
        return None
    close = _skip_parens(tokens, j) - 1
    if close >= len(tokens) or tokens[close].token_type != TokenType.R_PAREN:
        return None
    parts, depth, part_start = [], 0, j + 1
    for k in range(j + 1, close + 1):
        kind = tokens[k].token_type
        if kind == TokenType.L_PAREN:
            depth += 1
        elif kind == TokenType.R_PAREN and depth > 0:
            depth -= 1
        elif (kind == TokenType.COMMA and depth == 0) or k == close:
            if part_start < k:
                parts.append(text[tokens[part_start].start : tokens[k - 1].end + 1])
            part_start = k + 1
    if not parts:
        return None
    return close, ", ".join(f"ADD COLUMN {guard}{p}" for p in parts)

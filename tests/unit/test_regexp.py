"""TiDB's RE2 patterns as Java patterns that match the same (ingest.mysql.regexp), and the REGEXP functions'
typing. Pure; what the patterns match is checked against TiDB's own values in the recover corpus
(tests/integration/spark/test_ticdc_ddl_corpora.py)."""

from __future__ import annotations

import pytest

from ingest.model import ColumnKind, ColumnType
from ingest.mysql.expr import Unsupported, check, typed
from ingest.mysql.regexp import replacement, translate

TEXT = {"s": ColumnType(ColumnKind.VARCHAR, length=40), "n": ColumnType(ColumnKind.INT)}


@pytest.mark.parametrize(
    ("pattern", "java"),
    [
        ("[0-9]+", "(?d)[0-9]+"),
        ("^a.c$", "(?d)^a.c\\z"),  # RE2's $ is the end of the text only
        ("\\s", "(?d)[\\t\\n\\f\\r ]"),  # Java's \s adds \x0B
        ("\\v", "(?d)\\x0B"),  # Java's \v is a class
        ("[a&&b[c]", "(?d)[a\\&\\&b\\[c]"),  # Java would intersect and nest
        ("x{,2}", "(?d)x\\{\\,2\\}"),  # RE2 reads a { that starts no repetition as itself
        ("a{2,3}?", "(?d)a{2,3}?"),
        ("[]a-]", "(?d)[\\]a\\-]"),
        ("[a-c-e]", "(?d)[a-c\\-e]"),  # a '-' right after a range stands for itself
        ("[--/]", "(?d)[\\--\\/]"),  # a range from '-'
        ("[!^-a]", "(?d)[\\!\\^-a]"),  # from an escaped character
        ("[[:alpha:]_]", "(?d)[A-Za-z_]"),
        ("(?i)ab(?-i:c)", "(?d)(?iu)ab(?-iu:c)"),  # RE2 folds Unicode case
        ("(?P<w>\\w+)", "(?d)(?<w>\\w+)"),
        ("\\x41\\x{263A}", "(?d)\\x{41}\\x{263A}"),
        ("\\Q.*\\E", "(?d)\\.\\*"),
    ],
)
def test_a_pattern_reads_in_java_as_re2_reads_it(pattern, java):
    assert translate(pattern).pattern == java


def test_match_types_and_a_case_folding_collation_become_java_flags():
    assert translate("a", "i").flags == "(?diu)"
    assert translate("a", case_insensitive=True).flags == "(?diu)"
    assert translate("a", "c", case_insensitive=True).flags == "(?d)"  # c wins over the collation
    assert translate("a", "ic").flags == "(?d)"  # the rightmost wins
    assert translate("a.", "s").flags == "(?ds)"
    assert translate("a$", "m").pattern == "(?dm)a$"


@pytest.mark.parametrize(
    ("pattern", "match_type"),
    [
        ("", ""), ("\\bword", ""), ("\\p{Greek}", ""), ("\\1", ""), ("(?U)a+", ""), ("^a", "m"),
        ("a", "x"), ("(?P<my_name>a)", ""), ("a**", ""), ("[[:^alpha:]]", ""), ("(a", ""),
    ],
)  # fmt: skip
def test_what_re2_and_java_read_differently_is_refused(pattern, match_type):
    with pytest.raises(Unsupported):
        translate(pattern, match_type)


def test_what_can_match_the_empty_string_is_known():
    assert translate("a|b*").matches_empty
    assert translate("(x?)$").matches_empty
    assert not translate("a+|b{1,2}").matches_empty
    assert translate("([a-z]+)-(?:[a-z]+)(?P<n>\\d)").groups == 2


def test_a_replacement_reads_groups_and_escapes_as_tidb_does():
    assert replacement("\\2-\\1", 2) == "$2-$1"
    assert replacement("a$b\\\\c\\", 0) == "a\\$b\\\\c"  # \\ is \, a final \ is dropped
    assert replacement("\\x\\0", 0) == "x$0"
    with pytest.raises(Unsupported):
        replacement("\\3", 2)


def test_the_regexp_functions_type_over_text_with_literal_patterns_at_their_defaults():
    assert typed("REGEXP_LIKE(`s`, _UTF8MB4'^a')", TEXT).type.kind == "bool"
    assert typed("`s` REGEXP 'a'", TEXT).op == "regexp_like"
    assert typed("REGEXP_SUBSTR(s, 'a', 1, 1, 'i')", TEXT).value.flags == "(?diu)"
    assert typed("REGEXP_INSTR(s, 'b+', 1, 1, 0)", TEXT).type.kind == "int"
    assert typed("REGEXP_REPLACE(s, '(a)', '<\\\\1>')", TEXT).extra == ("<$1>",)
    assert typed("REGEXP_LIKE(s, 'abc')", TEXT, ["S"]).value.flags == "(?diu)"
    column = ColumnType(ColumnKind.VARCHAR, length=40)
    for refused in (
        "REGEXP_LIKE(n, '1')",  # MySQL would convert the number to text
        "REGEXP_LIKE(s, s)",  # a pattern that is no literal
        "REGEXP_SUBSTR(s, 'a', 2)",  # a position other than 1
        "REGEXP_REPLACE(s, 'a', 'b', 1, 1)",  # one occurrence only
        "REGEXP_REPLACE(s, 'x*', '-')",  # Go and Java replace empty matches differently
    ):
        assert check(refused, TEXT, column), refused
    assert check("REGEXP_LIKE(CONCAT(s, 'x'), 'a')", TEXT, column, ["s"])  # the collation of an expression

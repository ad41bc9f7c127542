"""TiDB's regular expressions (Go's RE2 syntax) -> Java patterns that match exactly the same. Pure.

TiDB compiles a REGEXP function's pattern with Go's ``regexp`` package, flags first (``(?i)`` from a
case-insensitive collation or match type ``i``, ``s``, ``m``); Spark matches with ``java.util.regex``. The two
agree on most syntax and differ on a few points, each handled here:

- Java ends a line at ``\\r``, ``\\u0085``, ``\\u2028`` and ``\\u2029`` too, so every pattern runs under
  UNIX_LINES (``(?d)``): ``.`` and ``$`` see ``\\n`` only, as RE2 does.
- RE2's ``$`` (without ``m``) is the end of the text, Java's also before a final newline: it becomes ``\\z``.
- ``\\s`` is ``[\\t\\n\\f\\r ]`` in RE2 and adds ``\\x0B`` in Java; ``\\v`` is one character in RE2 and
  a class in Java: both are written out.
- Inside a class Java reads ``[`` as a nested class and ``&&`` as an intersection: both are escaped, as is
  every other ASCII punctuation character (Java accepts an escape of any of them).
- RE2 reads a ``{`` that starts no repetition as itself; Java refuses it: it is escaped.
- Case folding: RE2's ``(?i)`` folds Unicode, Java's only ASCII unless ``u`` is added.

What RE2 and Java read differently and cannot be rewritten simply is refused with a reason (``\\b`` and
``\\B``, Unicode classes ``\\p``, octal escapes, ``(?U)``, ``^`` under ``m``). The translation also says how
many groups the pattern captures and whether it can match the empty string: Go and Java replace empty
matches differently (Java also replaces one right after a match).
"""

from __future__ import annotations

from dataclasses import dataclass

from ingest.mysql.expr_types import Unsupported

_SPACE = "\\t\\n\\f\\r "  # RE2's \s, written out
_ESCAPED_CHARS = {"n": "\\n", "t": "\\t", "r": "\\r", "f": "\\f", "v": "\\x0B", "a": "\\x07"}
_PERL_CLASSES = ("d", "D", "w", "W")  # ASCII in both
_POSIX = {
    "alnum": "0-9A-Za-z", "alpha": "A-Za-z", "ascii": "\\x00-\\x7F", "blank": "\\t ",
    "cntrl": "\\x00-\\x1F\\x7F", "digit": "0-9", "graph": "!-~", "lower": "a-z", "print": " -~",
    "punct": "!-/:-@\\[-`{-~", "space": "\\t\\n\\x0B\\f\\r ", "upper": "A-Z", "word": "0-9A-Za-z_",
    "xdigit": "0-9A-Fa-f",
}  # fmt: skip


@dataclass(frozen=True)
class JavaRegex:
    """A pattern as Java reads it (its flags, then its body), the groups it captures, and whether it can
    match the empty string."""

    flags: str
    body: str
    groups: int
    matches_empty: bool

    @property
    def pattern(self) -> str:
        return self.flags + self.body


def translate(pattern: str, match_type: str = "", case_insensitive: bool = False) -> JavaRegex:
    """RE2 ``pattern`` under TiDB's flags (match type letters ``c i m s``; ``case_insensitive``: the
    collation folds case) as a Java pattern; raises Unsupported."""
    if not pattern:
        raise Unsupported("an empty regular expression (TiDB refuses it)")
    flags = set("i" if case_insensitive else "")
    for letter in match_type:
        if letter not in "cims":
            raise Unsupported(f"match type {match_type!r} (TiDB takes c, i, m and s)")
        flags.discard("i") if letter == "c" else flags.add(letter)
    parser = _Parser(pattern, multiline="m" in flags)
    body, empty = parser.alternation()
    if parser.at < len(pattern):
        raise Unsupported(f"unbalanced ')' in regular expression {pattern!r}")
    prefix = (
        "(?d" + ("iu" if "i" in flags else "") + ("s" if "s" in flags else "") + ("m" if "m" in flags else "")
    )
    return JavaRegex(prefix + ")", body, parser.groups, empty)


def replacement(text: str, groups: int) -> str:
    """TiDB's REGEXP_REPLACE replacement (``\\N`` is group N, ``\\x`` is x, a final ``\\`` is dropped) as a
    Java replacement string."""
    out, i = [], 0
    while i < len(text):
        char = text[i]
        if char != "\\":
            out.append("\\" + char if char in "\\$" else char)
            i += 1
            continue
        if i + 1 >= len(text):
            break
        following = text[i + 1]
        if following.isdigit() and following.isascii():
            if int(following) > groups:
                raise Unsupported(f"replacement {text!r} names group {following}, which the pattern lacks")
            if groups >= 10 and i + 2 < len(text) and text[i + 2].isdigit():
                raise Unsupported(
                    f"replacement {text!r}: a group followed by a digit reads differently in Java"
                )
            out.append("$" + following)
        else:
            out.append("\\" + following if following in "\\$" else following)
        i += 2
    return "".join(out)


class _Parser:
    """Recursive descent over RE2 syntax, writing Java syntax as it goes."""

    def __init__(self, pattern: str, multiline: bool) -> None:
        self.text, self.at, self.groups, self.multiline = pattern, 0, 0, multiline

    def _peek(self, ahead: int = 0) -> str:
        index = self.at + ahead
        return self.text[index] if index < len(self.text) else ""

    def alternation(self) -> tuple[str, bool]:
        branches = [self.sequence()]
        while self._peek() == "|":
            self.at += 1
            branches.append(self.sequence())
        return "|".join(b for b, _ in branches), any(e for _, e in branches)

    def sequence(self) -> tuple[str, bool]:
        parts, empty = [], True
        while self._peek() not in ("", "|", ")"):
            atom, atom_empty = self.atom()
            quantifier, optional = self.quantifier()
            parts.append(atom + quantifier)
            empty = empty and (atom_empty or optional)
        return "".join(parts), empty

    def quantifier(self) -> tuple[str, bool]:
        char = self._peek()
        if char in ("*", "+", "?"):
            self.at += 1
            text, optional = char, char != "+"
        elif char == "{" and (repeat := self._repeat()) is not None:
            text, optional = repeat
        else:
            return "", False
        if self._peek() == "?":
            self.at += 1
            text += "?"
        if self._peek() in ("*", "+", "?") or (self._peek() == "{" and self._repeat(peek=True)):
            raise Unsupported(f"a repeated repetition in {self.text!r} (RE2 refuses it)")
        return text, optional

    def _repeat(self, peek: bool = False) -> tuple[str, bool] | None:
        end = self.text.find("}", self.at)
        inner = self.text[self.at + 1 : end] if end > 0 else ""
        low, comma, high = inner.partition(",")
        if not low.isdigit() or not (high.isdigit() or high == "") or (not comma and high):
            return None
        if not peek:
            self.at = end + 1
        return "{" + inner + "}", int(low) == 0

    def atom(self) -> tuple[str, bool]:
        char = self._peek()
        self.at += 1
        if char == "(":
            return self._group()
        if char == "[":
            return self._class(), False
        if char == "\\":
            return self._escape()
        if char == ".":
            return ".", False
        if char == "^":
            if self.multiline:
                raise Unsupported("^ under match type m (Java and RE2 differ after a final newline)")
            return "^", True
        if char == "$":
            return ("$" if self.multiline else "\\z"), True
        if char in "*+?":
            raise Unsupported(f"a repetition of nothing in {self.text!r} (RE2 refuses it)")
        return _literal(char), False

    def _group(self) -> tuple[str, bool]:
        opening = "("
        if self._peek() == "?":
            opening = self._group_kind()
            if opening.endswith(")"):  # flags for the rest of the enclosing group
                return opening, True
        else:
            self.groups += 1
        inner, empty = self.alternation()
        if self._peek() != ")":
            raise Unsupported(f"a group without ')' in {self.text!r}")
        self.at += 1
        return opening + inner + ")", empty

    def _group_kind(self) -> str:
        rest = self.text[self.at :]
        for named in ("?P<", "?<"):
            if rest.startswith(named):
                end = rest.find(">")
                name = rest[len(named) : end]
                if end < 0 or not name.isascii() or not name.isalnum() or not name[0].isalpha():
                    raise Unsupported(f"group name {name!r} (Java names are letters and digits)")
                self.at += end + 1
                self.groups += 1
                return "(?<" + name + ">"
        end = min((i for i in (rest.find(":"), rest.find(")")) if i > 0), default=-1)
        flags = rest[1:end] if end > 0 else ""
        on, _, off = flags.partition("-")
        bare = rest[end : end + 1] == ":" and not flags  # (?:...)
        if end < 0 or (
            not bare and (not on + off or flags.endswith("-") or any(f not in "is" for f in on + off))
        ):
            raise Unsupported(f"group {rest[: max(end, 1) + 1]!r} (the mirror follows flags i and s only)")
        self.at += end + 1
        return "(?" + flags.replace("i", "iu") + (":" if rest[end] == ":" else ")")

    def _escape(self) -> tuple[str, bool]:
        char = self._peek()
        self.at += 1
        if char == "":
            raise Unsupported(f"a trailing backslash in {self.text!r}")
        if char in _PERL_CLASSES:
            return "\\" + char, False
        if char == "s":
            return "[" + _SPACE + "]", False
        if char == "S":
            return "[^" + _SPACE + "]", False
        if char in ("A", "z"):
            return "\\" + char, True
        if char == "Q":
            end = self.text.find("\\E", self.at)
            quoted = self.text[self.at : end if end >= 0 else len(self.text)]
            self.at = end + 2 if end >= 0 else len(self.text)
            return "".join(_literal(c) for c in quoted), not quoted
        return self._character_escape(char), False

    def _character_escape(self, char: str) -> str:
        """An escape that stands for one character (shared with classes)."""
        if char in _ESCAPED_CHARS:
            return _ESCAPED_CHARS[char]
        if char == "x":
            braced = self._peek() == "{"
            end = self.text.find("}", self.at) if braced else self.at + 2
            digits = self.text[self.at + 1 : end] if braced else self.text[self.at : end]
            self.at = end + 1 if braced else end
            if not digits or any(c not in "0123456789abcdefABCDEF" for c in digits) or end < 0:
                raise Unsupported(f"escape \\x{digits} in {self.text!r}")
            return "\\x{" + digits + "}"
        if char.isascii() and not char.isalnum():
            return _literal(char)
        raise Unsupported(f"escape \\{char} in {self.text!r} (RE2 and Java read it differently)")

    def _class(self) -> str:
        out = "["
        if self._peek() == "^":
            self.at += 1
            out += "^"
        # Whether the last item was one character that no range has used yet (it may start one), and
        # whether a range is open (its '-' written, its end next).
        first, may_start, open_range = True, False, False
        while True:
            char = self._peek()
            if char == "":
                raise Unsupported(f"a class without ']' in {self.text!r}")
            if char == "]" and not first:
                self.at += 1
                return out + "]"
            first = False
            if self.text.startswith("[:", self.at):
                out, may_start, open_range = out + self._posix(), False, False
                continue
            self.at += 1
            if char == "-" and may_start and self._peek() != "]":
                out, may_start, open_range = out + "-", False, True
                continue
            item, single = self._class_escape() if char == "\\" else (_literal(char), True)
            out, may_start, open_range = out + item, single and not open_range, False

    def _posix(self) -> str:
        end = self.text.find(":]", self.at)
        name = self.text[self.at + 2 : end] if end > 0 else ""
        negated = name.startswith("^")
        name = name.removeprefix("^")
        if name not in _POSIX or negated:
            raise Unsupported(f"class [:{name}:] in {self.text!r}")
        self.at = end + 2
        return _POSIX[name]

    def _class_escape(self) -> tuple[str, bool]:
        """An escape inside a class, and whether it is one character (which may start a range)."""
        char = self._peek()
        self.at += 1
        if char in ("d", "w"):
            return "\\" + char, False
        if char == "s":
            return _SPACE, False
        if char == "":
            raise Unsupported(f"a class without ']' in {self.text!r}")
        return self._character_escape(char), True


def _literal(char: str) -> str:
    """One character that stands for itself, escaped where Java would read it otherwise."""
    return "\\" + char if char.isascii() and not char.isalnum() and char not in " _" else char

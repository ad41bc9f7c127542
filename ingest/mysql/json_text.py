"""Text -> JSON as TiDB stores and prints it. Pure.

TiDB parses JSON text into its binary form and prints that form back (``pkg/types/json_binary.go``):
object keys sorted by their bytes (a repeated key keeps its last value), ``", "`` and ``": "`` between
items, a number an int64 if it parses as one, else a uint64, else a float64 printed as ES6 does (shortest
digits, an exponent only below 1e-6 or from 1e21), strings escaped as Go's encoder escapes them. The mirror
needs this where TiDB turns text into JSON without sending row events: a MODIFY COLUMN from text to JSON.
"""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

_INT64 = (-(2**63), 2**63 - 1)
_UINT64_MAX = 2**64 - 1


class _Number:
    """A JSON number kept as TiDB reads it: an int (int64 or uint64) or a float64."""

    def __init__(self, text: str) -> None:
        self.value: int | float
        try:
            whole = int(text) if text.lstrip("-").isdigit() else None
        except ValueError:
            whole = None
        if whole is not None and _INT64[0] <= whole <= _UINT64_MAX:
            self.value = whole
        else:
            self.value = float(text)


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def tidb_json_text(text: str | None) -> str | None:
    """``text`` as TiDB prints the JSON it parses from it; None for None, or for text that is not JSON."""
    if text is None:
        return None
    try:
        value = json.loads(text, parse_int=_Number, parse_float=_Number, parse_constant=_refuse_constant)
    except (ValueError, OverflowError):
        return None
    try:
        return _render(value)
    except ValueError:
        return None


def _render(value: Any) -> str:
    if isinstance(value, dict):
        items = sorted(value.items(), key=lambda kv: kv[0].encode("utf-8", "surrogatepass"))
        return "{" + ", ".join(f"{_string(k)}: {_render(v)}" for k, v in items) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_render(v) for v in value) + "]"
    if isinstance(value, _Number):
        return str(value.value) if isinstance(value.value, int) else es6_number(value.value)
    if value is True:
        return "true"
    if value is False:
        return "false"
    if value is None:
        return "null"
    return _string(value)


def es6_number(number: float) -> str:
    """A float64 as TiDB (and Go's encoding/json) prints it: shortest digits, fixed notation for magnitudes
    from 1e-6 up to 1e21, else ``d.ddde±d``."""
    if number != number or number in (float("inf"), float("-inf")):
        raise ValueError("NaN and infinities are not JSON")
    exact = Decimal(repr(number)).normalize()
    magnitude = abs(number)
    if magnitude == 0 or 1e-6 <= magnitude < 1e21:
        return format(exact, "f")
    sign, digits, exponent = exact.as_tuple()
    assert isinstance(exponent, int)
    text = "".join(map(str, digits))
    power = exponent + len(text) - 1
    mantissa = text[0] + ("." + text[1:] if len(text) > 1 else "")
    return f"{'-' if sign else ''}{mantissa}e{'+' if power >= 0 else '-'}{abs(power):02d}".replace(
        "e-0", "e-"
    )


def _string(text: str) -> str:
    out = ['"']
    for char in text:
        code = ord(char)
        if char in '"\\':
            out.append("\\" + char)
        elif char == "\n":
            out.append("\\n")
        elif char == "\r":
            out.append("\\r")
        elif char == "\t":
            out.append("\\t")
        elif code < 0x20:
            out.append(f"\\u00{code:02x}")
        elif char in "\u2028\u2029":
            out.append(f"\\u{code:04x}")
        elif 0xD800 <= code <= 0xDFFF:
            out.append("\\ufffd")  # a lone surrogate is no UTF-8: Go writes the replacement character
        else:
            out.append(char)
    out.append('"')
    return "".join(out)


def path_json(path: tuple[str | int, ...]) -> str:
    """A JSON path's steps as JSON text (how a path travels to the executors)."""
    return json.dumps(list(path))


def path_from_json(text: str) -> tuple[str | int, ...]:
    return tuple(json.loads(text))


def json_extract(document: str | None, path: tuple[str | int, ...]) -> str | None:
    """JSON_EXTRACT(document, path) as TiDB prints it: the value at ``path`` (keys and array indexes) of a
    JSON document; None where the document is None, is no JSON, or has nothing at ``path``."""
    if document is None:
        return None
    try:
        value = json.loads(document, parse_int=_Number, parse_float=_Number, parse_constant=_refuse_constant)
    except (ValueError, OverflowError):
        return None
    for step in path:
        value = _step(value, step)
        if value is _MISSING:
            return None
    return _render(value)


_MISSING = object()


def _step(value: Any, step: str | int) -> Any:
    """The member ``step`` of a JSON array or object, or _MISSING."""
    if isinstance(step, int):
        return value[step] if isinstance(value, list) and step < len(value) else _MISSING
    return value[step] if isinstance(value, dict) and step in value else _MISSING


def json_unquote(text: str | None) -> str | None:
    """JSON_UNQUOTE(text): the string a JSON string literal holds; any other text as it is."""
    if text is None or len(text) < 2 or not (text.startswith('"') and text.endswith('"')):
        return text
    try:
        value = json.loads(text)
    except ValueError:
        return text
    return value if isinstance(value, str) else text

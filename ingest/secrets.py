"""Secret references in settings, resolved once at start, and the resolved values kept out of every log line.

Any setting may be given as a reference instead of its value:

- ``{{env:NAME}}``: the environment variable ``NAME``;
- ``{{file:/path}}``: the contents of a file (a mounted secret), without its trailing newline;
- ``{{secrets/<scope>/<key>}}``: a Databricks secret (``dbutils.secrets.get``), Databricks' own spelling.

A reference that cannot be resolved is a configuration error naming the reference, never a value. Every
resolved value is remembered, and from then on any log record that would contain it shows ``[REDACTED]``
in its place, whichever logger wrote it, and so does the traceback of an exception nothing caught.
"""

from __future__ import annotations

import logging
import os
import re
import sys
import threading
import traceback
from collections.abc import Callable, Mapping
from pathlib import Path
from types import TracebackType

from ingest.errors import ConfigError

MASK = "[REDACTED]"
REFERENCE = re.compile(r"\{\{\s*(?:(env|file):(.+?)|secrets/([^/{}]+)/([^{}]+?))\s*\}\}")
# A value shorter than this is not masked: masking "1" or "ab" would blank every digit of every log line.
MIN_MASKED_LENGTH = 4

ScopeReader = Callable[[str, str], str]

_known: set[str] = set()
_lock = threading.Lock()
_installed = False


def resolve(
    text: str,
    *,
    setting: str,
    environ: Mapping[str, str] | None = None,
    scopes: ScopeReader | None = None,
) -> str:
    """``text`` with each secret reference in it replaced by the secret (a whole value, or a part of one such
    as the password in a Kafka JAAS line); each resolved value is masked in every later log line.

    Raises:
        ConfigError: a variable is unset, a file cannot be read or is empty, or a secret scope cannot be
            reached; the message names ``setting`` and the reference, never a value.
    """
    return REFERENCE.sub(lambda match: _secret(match, setting, environ, scopes), text)


def _secret(
    match: re.Match[str], setting: str, environ: Mapping[str, str] | None, scopes: ScopeReader | None
) -> str:
    kind, name, scope, key = (g.strip() if g else g for g in match.groups())
    reference = match.group(0)
    if kind == "env":
        value = (os.environ if environ is None else environ).get(name)
        if not value:
            raise ConfigError(
                f"{setting}: the environment variable {name} named by {reference} is unset or empty"
            )
    elif kind == "file":
        path = Path(name).expanduser()
        try:
            value = path.read_text(encoding="utf-8").rstrip("\r\n")
        except OSError as exc:
            raise ConfigError(f"{setting}: cannot read {path} named by {reference}: {exc.strerror}") from None
        if not value:
            raise ConfigError(f"{setting}: the file {path} named by {reference} is empty")
    else:
        reader = scopes or databricks_scopes
        try:
            value = reader(scope, key)
        except ConfigError:
            raise
        except Exception as exc:  # dbutils raises its own kinds; the message must not carry a value
            raise ConfigError(
                f"{setting}: the Databricks secret {scope}/{key} named by {reference} could not be read "
                f"({type(exc).__name__}); check the scope, the key and that this principal may read it"
            ) from None
        if not value:
            raise ConfigError(f"{setting}: the Databricks secret {scope}/{key} is empty")
    remember(value)
    return value


def databricks_scopes(scope: str, key: str) -> str:
    """``dbutils.secrets.get`` where Databricks provides it."""
    try:
        from databricks.sdk.runtime import dbutils  # type: ignore[import-untyped,unused-ignore]
    except ImportError:
        raise ConfigError(
            f"{{{{secrets/{scope}/{key}}}}} names a Databricks secret, and this is not a Databricks runtime; "
            "give the value as {{env:NAME}} or {{file:/path}} instead"
        ) from None
    return str(dbutils.secrets.get(scope=scope, key=key))


def remember(value: str) -> None:
    """Mask ``value`` in every log record from now on."""
    if len(value) < MIN_MASKED_LENGTH:
        return
    with _lock:
        _known.add(value)
    _install()


def redact(text: str) -> str:
    """``text`` with every remembered secret replaced by the mask, longest first."""
    with _lock:
        values = sorted(_known, key=len, reverse=True)
    for value in values:
        if value in text:
            text = text.replace(value, MASK)
    return text


class _Masked(Exception):
    """An exception's message with every remembered secret masked."""


def _install() -> None:
    """Wrap the log record factory once: each record's message is formatted and redacted as it is made, so
    every handler, formatter and logger sees only the masked text. And the hook that prints an uncaught
    exception's traceback: an error from a library may quote a value it was given."""
    global _installed
    with _lock:
        if _installed:
            return
        _installed = True
    previous = logging.getLogRecordFactory()

    def factory(*args: object, **kwargs: object) -> logging.LogRecord:
        record = previous(*args, **kwargs)
        if _known:
            try:
                message = record.getMessage()
            except Exception:  # a malformed record is logging's to report, not ours
                return record
            masked = redact(message)
            if masked != message:
                record.msg, record.args = masked, None
            if record.exc_info and record.exc_info[0] is not None:
                # Formatters print exc_text when it is set: the traceback is masked once, here.
                kind, error, trace = record.exc_info
                text = logging.Formatter().formatException(record.exc_info)
                record.exc_text = redact(text)
                if record.exc_text != text:
                    # A formatter that reads the exception itself (pyspark's JSON one: its class, its
                    # message, its frames) gets a stand-in whose message is masked.
                    record.exc_info = (kind, _Masked(redact(str(error))), trace)
        return record

    logging.setLogRecordFactory(factory)
    print_uncaught = sys.excepthook

    def excepthook(kind: type[BaseException], error: BaseException, trace: TracebackType | None) -> None:
        if not _known:
            print_uncaught(kind, error, trace)
            return
        sys.stderr.write(redact("".join(traceback.format_exception(kind, error, trace))))

    sys.excepthook = excepthook

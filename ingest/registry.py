"""A Confluent-compatible schema registry over HTTP: writer schemas by id (cached), and registration. I/O.

Only the driver talks to the registry: it looks up the ids a batch names, once each, and ships the
schemas to the executors with the decode. Transient failures (connection refused, timeouts, 5xx) are
retried with backoff within a bounded budget; then the run stops with an error that names the registry.
"""

from __future__ import annotations

import json
import logging
import urllib.error
import urllib.request
from collections.abc import Iterable
from typing import Any

from tenacity import (
    RetryError,
    Retrying,
    before_sleep_log,
    retry_if_exception_type,
    stop_after_attempt,
    stop_after_delay,
    wait_random_exponential,
)

from ingest.errors import RegistryUnavailable

logger = logging.getLogger(__name__)

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"


class _Transient(Exception):
    """A failure worth retrying: the registry may come back."""


class SchemaRegistry:
    """Client of one registry (``url`` is the API root, e.g. ``http://host:8081``)."""

    def __init__(self, url: str, *, budget_seconds: float = 60.0, attempts: int = 8) -> None:
        self.url = url.rstrip("/")
        self.budget_seconds = budget_seconds
        self.attempts = attempts
        self._by_id: dict[int, str | None] = {}

    def schemas(self, ids: Iterable[int]) -> dict[int, str | None]:
        """The schema text of each id; None for an id the registry does not know (HTTP 404)."""
        for schema_id in sorted(set(ids) - set(self._by_id)):
            body = self._call(f"/schemas/ids/{schema_id}", None, missing_ok=True)
            self._by_id[schema_id] = None if body is None else str(body["schema"])
            logger.info("schema registry: fetched writer schema %d", schema_id)
        return {i: self._by_id[i] for i in ids}

    def register(self, subject: str, schema: str) -> int:
        """Register ``schema`` under ``subject`` (an identical schema keeps its id); returns the id."""
        body = self._call(f"/subjects/{subject}/versions", {"schema": schema}, missing_ok=False)
        assert body is not None
        schema_id = int(body["id"])
        self._by_id[schema_id] = schema
        return schema_id

    def _call(self, path: str, payload: dict[str, Any] | None, *, missing_ok: bool) -> dict[str, Any] | None:
        retrying = Retrying(
            retry=retry_if_exception_type(_Transient),
            stop=stop_after_delay(self.budget_seconds) | stop_after_attempt(self.attempts),
            wait=wait_random_exponential(multiplier=0.5, max=10),
            before_sleep=before_sleep_log(logger, logging.WARNING),
        )
        try:
            for attempt in retrying:
                with attempt:
                    return self._once(path, payload, missing_ok=missing_ok)
        except RetryError as exc:
            cause = exc.last_attempt.exception()
            raise RegistryUnavailable(
                f"schema registry {self.url} did not answer {path} after {exc.last_attempt.attempt_number} "
                f"attempts within {self.budget_seconds:.0f}s ({cause}); check --schema-registry and that "
                "the registry is up. Nothing was applied and progress did not move"
            ) from exc
        raise AssertionError("unreachable")  # pragma: no cover

    def _once(self, path: str, payload: dict[str, Any] | None, *, missing_ok: bool) -> dict[str, Any] | None:
        data = json.dumps(payload).encode() if payload is not None else None
        request = urllib.request.Request(
            self.url + path, data=data, headers={"Content-Type": CONTENT_TYPE, "Accept": CONTENT_TYPE}
        )
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return dict(json.loads(response.read()))
        except urllib.error.HTTPError as exc:
            if exc.code == 404 and missing_ok:
                return None
            if exc.code >= 500 or exc.code == 429:
                raise _Transient(f"HTTP {exc.code}") from exc
            detail = exc.read().decode(errors="replace")[:300]
            raise RegistryUnavailable(
                f"schema registry {self.url} refused {path}: HTTP {exc.code} {detail}"
            ) from exc
        except (urllib.error.URLError, TimeoutError, ConnectionError) as exc:
            raise _Transient(str(getattr(exc, "reason", exc))) from exc

"""A Confluent-compatible schema registry over HTTP(S): writer schemas by id (cached), and registration. I/O.

Only the driver talks to the registry: it looks up the ids a batch names, once each, and ships the
schemas to the executors with the decode. Transient failures (connection refused, timeouts, 5xx) are
retried with backoff within a bounded budget; then the run stops with an error that names the registry.
Refused credentials (HTTP 401 or 403), an untrusted certificate and a refused client certificate are not
outages: they stop the run at once, with what to check. Credentials are sent as HTTP basic auth
(Confluent's ``user:password`` user info, or user info in the URL) or as a bearer token; TLS may use a CA
bundle of its own and a client certificate. No error or log line carries a credential or the URL's user
info.
"""

from __future__ import annotations

import base64
import json
import logging
import ssl
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterable
from dataclasses import dataclass
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

from ingest import secrets
from ingest.config import IngestConfig
from ingest.errors import RegistryRefused, RegistryUnavailable

logger = logging.getLogger(__name__)

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"


class _Transient(Exception):
    """A failure worth retrying: the registry may come back."""


@dataclass(frozen=True)
class RegistryAccess:
    """How to reach a secured registry. ``user_info`` is ``user:password``; ``ca_file`` a PEM bundle of the
    CAs to trust instead of the system's; ``cert_file`` (and ``key_file``, unless the key is in it) a client
    certificate. Values, not references: secret references are resolved before this is built."""

    user_info: str | None = None
    bearer_token: str | None = None
    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None

    def __repr__(self) -> str:
        shown = {
            "user": self.user_info.split(":", 1)[0] if self.user_info else None,
            "bearer_token": secrets.MASK if self.bearer_token else None,
            "ca_file": self.ca_file,
            "cert_file": self.cert_file,
        }
        return f"RegistryAccess({', '.join(f'{k}={v!r}' for k, v in shown.items() if v)})"


class SchemaRegistry:
    """Client of one registry (``url`` is the API root, e.g. ``https://host:8081``)."""

    def __init__(
        self,
        url: str,
        *,
        budget_seconds: float = 60.0,
        attempts: int = 8,
        access: RegistryAccess | None = None,
    ) -> None:
        access = access or RegistryAccess()
        parts = urllib.parse.urlsplit(url.rstrip("/"))
        user_info = access.user_info
        if parts.username is not None:
            # Confluent's basic.auth.credentials.source=URL: the URL's user info is the credential.
            user_info = user_info or urllib.parse.unquote(
                parts.username + (":" + parts.password if parts.password is not None else "")
            )
            parts = parts._replace(netloc=parts.netloc.rsplit("@", 1)[1])
        self.url = urllib.parse.urlunsplit(parts)
        self.budget_seconds = budget_seconds
        self.attempts = attempts
        self._headers = {"Content-Type": CONTENT_TYPE, "Accept": CONTENT_TYPE}
        if user_info is not None:
            token = base64.b64encode(user_info.encode()).decode()
            self._headers["Authorization"] = f"Basic {token}"
        elif access.bearer_token is not None:
            self._headers["Authorization"] = f"Bearer {access.bearer_token}"
        self._credentials = (
            "the user info" if user_info else "the bearer token" if access.bearer_token else None
        )
        self._context = _tls_context(access) if parts.scheme == "https" else None
        self._by_id: dict[int, str | None] = {}

    def schemas(self, ids: Iterable[int]) -> dict[int, str | None]:
        """The schema text of each id; None for an id the registry does not know (HTTP 404).

        An id names one schema forever, so what was fetched is kept for the client's life; an unknown id
        is asked again next time, for a registry restored from a backup may know it by then.
        """
        wanted = set(ids)
        found: dict[int, str | None] = {i: self._by_id[i] for i in wanted & set(self._by_id)}
        for schema_id in sorted(wanted - set(found)):
            body = self._call(f"/schemas/ids/{schema_id}", None, missing_ok=True)
            found[schema_id] = None if body is None else str(body["schema"])
            if body is not None:
                self._by_id[schema_id] = found[schema_id]
            logger.info("schema registry: fetched writer schema %d", schema_id)
        return found

    def check_access(self) -> None:
        """One read of the kind the mirror makes (a schema by id; id 0 is never given out, so 404 is the
        answer), raising what a refused credential or an untrusted certificate raises."""
        self._call("/schemas/ids/0", None, missing_ok=True)

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
        request = urllib.request.Request(self.url + path, data=data, headers=self._headers)
        try:
            with urllib.request.urlopen(request, timeout=30, context=self._context) as response:
                return dict(json.loads(response.read()))
        except urllib.error.HTTPError as exc:
            if exc.code == 404 and missing_ok:
                return None
            if exc.code >= 500 or exc.code == 429:
                raise _Transient(f"HTTP {exc.code}") from exc
            if exc.code in (401, 403):
                given = f"{self._credentials} given" if self._credentials else "no credentials given"
                raise RegistryRefused(
                    f"schema registry {self.url} refused {path} with HTTP {exc.code} ({given}): check "
                    "--schema-registry-user-info (user:password, e.g. a Confluent API key and secret) or "
                    "--schema-registry-bearer-token, and that this principal may read the registry. "
                    "Nothing was applied and progress did not move"
                ) from None
            detail = exc.read().decode(errors="replace")[:300]
            raise RegistryUnavailable(
                f"schema registry {self.url} refused {path}: HTTP {exc.code} {detail}"
            ) from exc
        except urllib.error.URLError as exc:
            if isinstance(exc.reason, ssl.SSLError):
                raise self._tls_refused(exc.reason) from None
            raise _Transient(str(exc.reason)) from exc
        except ssl.SSLError as exc:  # a client certificate refused after the handshake (TLS 1.3)
            raise self._tls_refused(exc) from None
        except (TimeoutError, ConnectionError) as exc:
            raise _Transient(str(exc)) from exc

    def _tls_refused(self, error: ssl.SSLError) -> RegistryRefused:
        # A failed verification says why (an unknown issuer, an expired certificate, a wrong host name).
        reason = getattr(error, "verify_message", None) or error.reason or error
        return RegistryRefused(
            f"schema registry {self.url}: TLS failed ({reason}); check "
            "--schema-registry-ca-file (the PEM bundle of the CA that signed the registry's certificate) "
            "and, if the registry asks for one, --schema-registry-cert-file and --schema-registry-key-file. "
            "Nothing was applied and progress did not move"
        )


def _tls_context(access: RegistryAccess) -> ssl.SSLContext:
    """The system's trust store, or ``ca_file`` instead; a client certificate when one is given."""
    context = ssl.create_default_context(cafile=access.ca_file)
    if access.cert_file:
        context.load_cert_chain(access.cert_file, access.key_file)
    return context


_clients: dict[tuple[str, RegistryAccess, float], SchemaRegistry] = {}


def registry_for(config: IngestConfig) -> SchemaRegistry:
    """The client of the run's registry, with its credentials and TLS settings.

    One client per registry, credentials and budget in a process: a long-running stream then fetches each
    writer schema once, not once per micro-batch.
    """
    if config.schema_registry is None:
        raise AssertionError("IngestConfig requires --schema-registry for --protocol avro")
    access = RegistryAccess(
        user_info=config.schema_registry_user_info,
        bearer_token=config.schema_registry_bearer_token,
        ca_file=config.schema_registry_ca_file,
        cert_file=config.schema_registry_cert_file,
        key_file=config.schema_registry_key_file,
    )
    key = (config.schema_registry, access, config.schema_registry_timeout)
    if key not in _clients:
        _clients[key] = SchemaRegistry(key[0], budget_seconds=key[2], access=access)
    return _clients[key]


def check_access(config: IngestConfig) -> None:
    """When the run reads through a registry, reach it once before anything is written: wrong credentials or
    an untrusted certificate then stop the run at its start, with nothing to clean up."""
    if config.schema_registry is not None:
        registry_for(config).check_access()

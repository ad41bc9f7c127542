"""The registry client against a real HTTPS server on 127.0.0.1 that demands basic auth (and, in one test, a
client certificate), with certificates made by ``openssl`` for the test: the right credentials fetch a
schema; wrong ones, an untrusted CA and a missing secret each stop at once with one clear error that
carries no secret.

The server is Python's own HTTPS server answering the registry's ``/schemas/ids/<id>`` call, not a registry:
what is under test is the client's HTTP and TLS, which a registry behind a TLS proxy sees the same way.
"""

from __future__ import annotations

import base64
import json
import logging
import ssl
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from ingest import secrets
from ingest.config import IngestConfig
from ingest.errors import ConfigError, RegistryRefused
from ingest.source.registry import registry_for
from testkit.tls import Certificates, make_certificates

USER, PASSWORD = "cdc-reader", "Regi5try-S3cret-for-tests"
SCHEMA = '{"type": "record", "name": "r", "fields": []}'


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    return make_certificates(tmp_path_factory.mktemp("tls"))


@dataclass
class Server:
    url: str
    requests: list[str] = field(default_factory=list)


def _serve(certificates: Certificates, *, client_certificate: bool) -> Iterator[Server]:
    expected = "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
    seen: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append(self.path)
            if self.headers.get("Authorization") != expected:
                self.send_response(401)
                self.send_header("WWW-Authenticate", 'Basic realm="registry"')
                self.end_headers()
                return
            if self.path != "/schemas/ids/1":
                self.send_response(404)
                self.end_headers()
                return
            body = json.dumps({"schema": SCHEMA}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/vnd.schemaregistry.v1+json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass

    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(certificates.server_cert, certificates.server_key)
    if client_certificate:
        context.verify_mode = ssl.CERT_REQUIRED
        context.load_verify_locations(certificates.ca)
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield Server(f"https://127.0.0.1:{server.server_address[1]}", seen)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


@pytest.fixture
def server(certificates: Certificates) -> Iterator[Server]:
    yield from _serve(certificates, client_certificate=False)


@pytest.fixture
def mtls_server(certificates: Certificates) -> Iterator[Server]:
    yield from _serve(certificates, client_certificate=True)


def _config(url: str, tmp_path: Path, **params: str) -> IngestConfig:
    return IngestConfig.from_params(
        {
            "input": str(tmp_path),
            "target-path": str(tmp_path / "lake"),
            "protocol": "avro",
            "schema-registry": url,
            "schema-registry-timeout": "30",
            **params,
        }
    )


def test_the_right_credentials_from_a_secret_reference_fetch_the_schema(
    server, certificates, tmp_path, monkeypatch
):
    monkeypatch.setenv("REGISTRY_USER_INFO", f"{USER}:{PASSWORD}")
    config = _config(
        server.url,
        tmp_path,
        **{
            "schema-registry-user-info": "{{env:REGISTRY_USER_INFO}}",
            "schema-registry-ca-file": str(certificates.ca),
        },
    )
    assert registry_for(config).schemas([1]) == {1: SCHEMA}


def test_user_info_in_the_url_works_and_stays_out_of_the_client_url_and_the_log(
    server, certificates, tmp_path, monkeypatch, caplog
):
    monkeypatch.setattr(secrets, "_known", set())  # no other test's secret may mask this one
    url = server.url.replace("https://", f"https://{USER}:{PASSWORD}@")
    config = _config(url, tmp_path, **{"schema-registry-ca-file": str(certificates.ca)})
    registry = registry_for(config)
    assert registry.schemas([1]) == {1: SCHEMA}
    assert PASSWORD not in registry.url and USER not in registry.url
    with caplog.at_level(logging.INFO):
        logging.getLogger("ingest.cli").info("config: %s", config)
    assert "config: " in caplog.text and PASSWORD not in caplog.text


def test_a_client_certificate_reaches_a_registry_that_asks_for_one(mtls_server, certificates, tmp_path):
    registry = registry_for(
        _config(
            mtls_server.url,
            tmp_path,
            **{
                "schema-registry-user-info": f"{USER}:{PASSWORD}",
                "schema-registry-ca-file": str(certificates.ca),
                "schema-registry-cert-file": str(certificates.client_cert),
                "schema-registry-key-file": str(certificates.client_key),
            },
        )
    )
    assert registry.schemas([1]) == {1: SCHEMA}


def test_a_wrong_password_stops_at_once_with_one_request_and_no_secret_in_the_error(
    server, certificates, tmp_path, caplog
):
    wrong = "Wrong-Pa55word-for-tests"
    config = _config(
        server.url,
        tmp_path,
        **{"schema-registry-user-info": f"{USER}:{wrong}", "schema-registry-ca-file": str(certificates.ca)},
    )
    started = time.monotonic()
    with caplog.at_level(logging.DEBUG), pytest.raises(RegistryRefused) as raised:
        registry_for(config).schemas([1])
    assert time.monotonic() - started < 5
    assert server.requests == ["/schemas/ids/1"]  # refused credentials are not retried
    message = str(raised.value)
    assert "HTTP 401" in message and server.url in message and "--schema-registry-user-info" in message
    for text in (message, caplog.text, repr(config)):
        assert wrong not in text and PASSWORD not in text


def test_a_registry_certificate_from_an_unknown_ca_stops_at_once(server, certificates, tmp_path):
    config = _config(
        server.url,
        tmp_path,
        **{
            "schema-registry-user-info": f"{USER}:{PASSWORD}",
            "schema-registry-ca-file": str(certificates.other_ca),
        },
    )
    started = time.monotonic()
    with pytest.raises(RegistryRefused, match=r"TLS failed.*--schema-registry-ca-file") as raised:
        registry_for(config).schemas([1])
    assert time.monotonic() - started < 5
    assert server.requests == []
    assert PASSWORD not in str(raised.value)


def test_a_missing_secret_stops_before_any_request(server, certificates, tmp_path, monkeypatch):
    monkeypatch.delenv("REGISTRY_USER_INFO", raising=False)
    with pytest.raises(ConfigError, match="REGISTRY_USER_INFO named by"):
        _config(server.url, tmp_path, **{"schema-registry-user-info": "{{env:REGISTRY_USER_INFO}}"})
    assert server.requests == []


def test_a_run_fetches_each_schema_once_and_asks_again_for_an_unknown_one(server, certificates, tmp_path):
    params = {"schema-registry-user-info": f"{USER}:{PASSWORD}"}
    params["schema-registry-ca-file"] = str(certificates.ca)

    for _batch in range(3):  # each micro-batch asks for its writer schemas through the run's client
        assert registry_for(_config(server.url, tmp_path, **params)).schemas([1, 2]) == {1: SCHEMA, 2: None}

    assert server.requests == ["/schemas/ids/1", "/schemas/ids/2", "/schemas/ids/2", "/schemas/ids/2"]

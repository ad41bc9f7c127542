"""Certificates for the local services' TLS, made by ``openssl``: a CA, a server certificate for 127.0.0.1 and
a client certificate it signed, the same server key in a certificate that CA signed for one day in 2020 (an
expired one), and a second CA that signed nothing the services serve (an "unknown CA")."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Certificates:
    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path
    other_ca: Path
    expired_server_cert: Path

    @property
    def server_bundle(self) -> Path:
        """The server's private key followed by its certificate: Kafka's PEM key store is one such file."""
        return self.server_cert.with_name("server-bundle.pem")


_FILES = ("ca.pem", "server.pem", "server.key", "client.pem", "client.key", "other-ca.pem", "expired.pem")
# `openssl ca` is the one openssl command that takes a certificate's dates, which an expired one needs.
_CA_CONFIG = """[ca]
default_ca = signer
[signer]
database = index.txt
serial = serial
new_certs_dir = .
default_md = sha256
policy = any
x509_extensions = server
[any]
commonName = supplied
[server]
subjectAltName = IP:127.0.0.1,DNS:localhost
"""


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def make_certificates(directory: Path, days: int = 2) -> Certificates:
    """Make a fresh set in ``directory`` (created if missing); keys are unencrypted PKCS#8, as Kafka's PEM
    key store takes them without a key password."""
    d = directory
    d.mkdir(parents=True, exist_ok=True)
    for ca in ("ca", "other-ca"):
        _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", str(days), "-subj", f"/CN={ca}",
                 "-keyout", f"{ca}.key", "-out", f"{ca}.pem", cwd=d)  # fmt: skip
    (d / "server.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    (d / "client.ext").write_text("extendedKeyUsage=clientAuth\n")
    for name in ("server", "client"):
        _openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={name}", "-keyout", f"{name}.key",
                 "-out", f"{name}.csr", cwd=d)  # fmt: skip
        _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
                 "-days", str(days), "-extfile", f"{name}.ext", "-out", f"{name}.pem", cwd=d)  # fmt: skip
    (d / "ca.cnf").write_text(_CA_CONFIG)
    (d / "index.txt").write_text("")
    (d / "serial").write_text("1000\n")
    _openssl("ca", "-batch", "-config", "ca.cnf", "-cert", "ca.pem", "-keyfile", "ca.key",
             "-in", "server.csr", "-startdate", "20200101000000Z", "-enddate", "20200102000000Z",
             "-out", "expired.pem", cwd=d)  # fmt: skip
    made = Certificates(*(d / name for name in _FILES))
    made.server_bundle.write_text(made.server_key.read_text() + made.server_cert.read_text())
    return made

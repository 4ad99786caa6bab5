"""A throwaway CA with server and client certificates (PEM files) for TLS and mTLS tests."""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


@dataclass(frozen=True)
class KeyPair:
    cert: Path
    key: Path


@dataclass(frozen=True)
class Pki:
    ca: Path
    server: KeyPair
    client: KeyPair
    stranger: KeyPair
    """A client certificate from another CA."""


def make_pki(directory: Path) -> Pki:
    """CA, a server certificate for 127.0.0.1/localhost, a client one and a foreign client one."""
    directory.mkdir(parents=True, exist_ok=True)
    ca_key, ca_cert = _certificate("kvq test CA", None, None, ca=True)
    other_key, other_cert = _certificate("other CA", None, None, ca=True)
    ca = _write(directory / "ca.crt", ca_cert)
    return Pki(
        ca=ca,
        server=_pair(directory, "server", _certificate("127.0.0.1", ca_key, ca_cert, server=True)),
        client=_pair(directory, "client", _certificate("prometheus", ca_key, ca_cert)),
        stranger=_pair(directory, "stranger", _certificate("stranger", other_key, other_cert)),
    )


def _certificate(name, issuer_key, issuer_cert, ca=False, server=False):
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer_cert.subject if issuer_cert else subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        # Key identifiers: strict verification (Python 3.13's default, VERIFY_X509_STRICT)
        # refuses a certificate without them, as OpenSSL's strict mode does.
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key((issuer_key or key).public_key()),
            critical=False,
        )
    )
    if ca:
        builder = builder.add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                crl_sign=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
    else:
        usage = ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH
        builder = builder.add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
    if server:
        builder = builder.add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
    elif not ca:  # a client names itself, for client_allowed_sans
        builder = builder.add_extension(
            x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False
        )
    cert = builder.sign(issuer_key or key, hashes.SHA256())
    return key, cert


def _pair(directory: Path, name: str, key_and_cert) -> KeyPair:
    key, cert = key_and_cert
    key_path = directory / f"{name}.key"
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return KeyPair(_write(directory / f"{name}.crt", cert), key_path)


def _write(path: Path, cert) -> Path:
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return path

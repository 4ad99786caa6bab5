"""A throwaway CA with server and client certificates (PEM files) for TLS and mTLS tests, and
Secrets laid out as Strimzi writes them and the kubelet mounts them (PEM, PKCS12), renewed in place
as the kubelet swaps them."""

from __future__ import annotations

import datetime
import ipaddress
import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import pkcs12
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


def _certificate(name, issuer_key, issuer_cert, ca=False, server=False, key=None):
    key = key or ec.generate_private_key(ec.SECP256R1())
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


@dataclass(frozen=True)
class CertificateAuthority:
    """A CA that issues certificates and can be renewed (a new certificate, the same key: what
    Strimzi does when a CA certificate nears its end while the key stays)."""

    key: Any
    cert: Any

    @classmethod
    def new(cls, name: str = "kvq test cluster CA") -> CertificateAuthority:
        return cls(*_certificate(name, None, None, ca=True))

    def renewed(self) -> CertificateAuthority:
        name = self.cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value
        return CertificateAuthority(*_certificate(name, None, None, ca=True, key=self.key))

    def issue(self, name: str, server: bool = False) -> Issued:
        """A certificate for `name` (a server: 127.0.0.1 and localhost) signed by this CA."""
        return Issued(*_certificate(name, self.key, self.cert, server=server))

    @property
    def pem(self) -> str:
        return self.cert.public_bytes(serialization.Encoding.PEM).decode()


@dataclass(frozen=True)
class Issued:
    """A private key and its certificate."""

    key: Any
    cert: Any

    @property
    def cert_pem(self) -> str:
        return self.cert.public_bytes(serialization.Encoding.PEM).decode()

    @property
    def key_pem(self) -> str:
        return _key_pem(self.key).decode()


def strimzi_user_secret(user: Issued, ca: CertificateAuthority, password: str) -> dict[str, bytes]:
    """A tls KafkaUser's Secret as Strimzi's User Operator writes it: `user.crt`, `user.key`,
    `user.p12` (key, certificate and the clients CA) and its `user.password`; with `ca.crt`, the
    clients CA."""
    p12 = pkcs12.serialize_key_and_certificates(
        b"user",
        user.key,
        user.cert,
        [ca.cert],
        serialization.BestAvailableEncryption(password.encode()),
    )
    return {
        "ca.crt": ca.pem.encode(),
        "user.crt": user.cert_pem.encode(),
        "user.key": user.key_pem.encode(),
        "user.p12": p12,
        "user.password": password.encode(),
    }


def strimzi_ca_secret(cas: list[CertificateAuthority], password: str) -> dict[str, bytes]:
    """The cluster CA's `<cluster>-cluster-ca-cert` Secret: `ca.crt` and `ca.p12` (a Java PKCS12
    truststore of trusted certificate entries, written by keytool as Strimzi's are) with its
    `ca.password`. Several CAs: a renewal in progress, when Strimzi's `ca.crt` holds both."""
    p12 = java_truststore(cas, password)
    return {
        "ca.crt": "".join(ca.pem for ca in cas).encode(),
        "ca.p12": p12,
        "ca.password": password.encode(),
    }


def java_truststore(cas: list[CertificateAuthority], password: str, kind: str = "PKCS12") -> bytes:
    """A Java truststore of trusted certificate entries (`kind`: PKCS12 or JKS) written by
    keytool."""
    with tempfile.TemporaryDirectory(prefix="kvq-truststore-") as tmp:
        store = Path(tmp, "truststore")
        for index, ca in enumerate(cas):
            Path(tmp, "ca.crt").write_text(ca.pem)
            done = subprocess.run(
                [_keytool(), "-importcert", "-noprompt", "-storetype", kind,
                 "-keystore", str(store), "-storepass", password, "-alias", f"ca-{index}",
                 "-file", str(Path(tmp, "ca.crt"))],
                capture_output=True,
                text=True,
            )  # fmt: skip
            if done.returncode != 0:  # e.g. a password shorter than keytool's 6 characters
                raise RuntimeError(f"keytool -importcert failed: {done.stdout}{done.stderr}")
        return store.read_bytes()


def _keytool() -> str:
    """keytool of the Java runtime that runs Kafka (JAVA_HOME, else PATH)."""
    home = os.environ.get("JAVA_HOME")
    found = Path(home, "bin", "keytool") if home else None
    if found is not None and found.is_file():
        return str(found)
    on_path = shutil.which("keytool")
    if on_path is None:
        raise FileNotFoundError("no keytool (JAVA_HOME or PATH): apt-get install default-jre")
    return on_path


def project_secret(directory: Path, files: dict[str, bytes]) -> None:
    """Write `files` into `directory` as the kubelet mounts a Secret, and swap them in as it does
    on an update: the files go into a new hidden timestamped directory, the `..data` symlink is
    replaced atomically to point at it, every name is a symlink through `..data`, and the old
    directory is removed. A reader sees the old set or the new one, never a mix."""
    directory.mkdir(parents=True, exist_ok=True)
    stamp = directory / f"..{time.strftime('%Y_%m_%d_%H_%M_%S')}.{time.monotonic_ns()}"
    stamp.mkdir(mode=0o755)
    for name, content in files.items():
        (stamp / name).write_bytes(content)
    data = directory / "..data"
    previous = os.readlink(data) if data.is_symlink() else None
    swap = directory / "..data_tmp"
    swap.symlink_to(stamp.name)
    os.replace(swap, data)
    for name in files:
        link = directory / name
        if not link.is_symlink():
            link.symlink_to(f"..data/{name}")
    if previous is not None:
        shutil.rmtree(directory / previous)


def _key_pem(key) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _pair(directory: Path, name: str, key_and_cert) -> KeyPair:
    key, cert = key_and_cert
    key_path = directory / f"{name}.key"
    key_path.write_bytes(_key_pem(key))
    return KeyPair(_write(directory / f"{name}.crt", cert), key_path)


def _write(path: Path, cert) -> Path:
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return path

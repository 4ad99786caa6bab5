"""Trust and key stores as Strimzi mounts them, read in memory, and the SSL context built from them.

Strimzi's Secrets hold a KafkaUser's key and certificate as PEM (`user.crt`, `user.key`) and as a
PKCS12 keystore (`user.p12`, password `user.password`), and the cluster CA as PEM (`ca.crt`) and
as a PKCS12 truststore (`ca.p12`, password `ca.password`). librdkafka and kafka-python read only
PEM, so a PKCS12 store is opened here with the `cryptography` package (the maintained library
that reads PKCS12, including the Java truststores keytool writes) and handed on as PEM text:
librdkafka takes it in memory (`ssl.ca.pem`, `ssl.certificate.pem`, `ssl.key.pem`), kafka-python
as an `ssl.SSLContext` built here. Python's `ssl` loads a certificate chain only from a file name,
so the key is written, encrypted with a one-time passphrase, to an anonymous in-memory file
(`memfd_create`, Linux) and read back through `/proc/self/fd`; where that does not exist, to a 0600
temporary file removed as soon as it is read. Nothing else is ever written.

Each error is one line naming the property and the file, never the password.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
import ssl
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

from kvq.settings.config import DIRECTORY_REF

JKS_MAGIC = (b"\xfe\xed\xfe\xed", b"\xce\xce\xce\xce")
"""The first bytes of a JKS and of a JCEKS store (a PKCS12 store starts with a DER sequence)."""


class StoreError(ValueError):
    """A store that cannot be read; the message names the property and the file."""


@dataclass(frozen=True)
class StorePem:
    """What a store holds, as PEM text."""

    certificates: str
    """The store's certificates: a truststore's trusted CAs; a keystore's certificate first,
    then its chain."""
    key: str | None = None
    """A keystore's private key (unencrypted PKCS8 PEM); None for a truststore."""


def store_kind(path: str, declared: str | None) -> str:
    """`PEM`, `JKS` or `PKCS12`: the declared `ssl.*store.type` where it is PEM, else what the
    file is (Java reads a PKCS12 file whatever the declared type, so kvq does too, and PEM text
    too)."""
    if declared is not None and declared.strip().upper() == "PEM":
        return "PEM"
    with open(path, "rb") as store:
        head = store.read(64)
    if head[:4] in JKS_MAGIC:
        return "JKS"
    return "PEM" if head.lstrip().startswith(b"-----BEGIN") else "PKCS12"


def read_pkcs12(path: str, password: str | None, prop: str, keystore: bool) -> StorePem:
    """The certificates (and, for a keystore, the key) of the PKCS12 store at `path`.

    `prop` is the property that names the file (`kafka.admin.ssl.keystore.location`), for the
    messages. Raises StoreError: not readable, wrong password or not PKCS12, no key in a
    keystore, no certificate.
    """
    from cryptography.hazmat.primitives.serialization import pkcs12

    where = f"{prop}={path}"
    password_prop = prop.replace(".location", ".password")
    try:
        with open(path, "rb") as store:
            data = store.read()
    except OSError as exc:
        raise StoreError(f"{where}: no readable file there ({exc.strerror})") from None
    try:
        loaded = pkcs12.load_pkcs12(data, password.encode() if password else None)
    except ValueError:
        given = "is set" if password else "is not set"
        raise StoreError(
            f"{where}: cannot open it as a PKCS12 store with {password_prop} (it {given}): a "
            "wrong password, or not a PKCS12 file"
        ) from None
    certificates = [c.certificate for c in loaded.additional_certs]
    if keystore:
        if loaded.key is None or loaded.cert is None:
            raise StoreError(
                f"{where}: the PKCS12 store holds no private key and certificate; a keystore "
                "is the client's key and certificate (Strimzi's user.p12), the cluster CA "
                "(ca.p12) is a truststore"
            )
        certificates.insert(0, loaded.cert.certificate)
    elif loaded.cert is not None:
        certificates.insert(0, loaded.cert.certificate)
    if not certificates:
        raise StoreError(f"{where}: the PKCS12 store holds no certificate")
    return StorePem(_pem_certificates(certificates), _pem_key(loaded.key) if keystore else None)


def _pem_certificates(certificates: Sequence) -> str:
    from cryptography.hazmat.primitives.serialization import Encoding

    return "".join(c.public_bytes(Encoding.PEM).decode() for c in certificates)


def _pem_key(key) -> str:  # type: ignore[no-untyped-def]
    from cryptography.hazmat.primitives import serialization

    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()


@dataclass(frozen=True)
class ClientTls:
    """What kafka-python's SSL context is built from: PEM text in memory or PEM file names."""

    ca_pem: str | None = None
    ca_file: str | None = None
    certificate_pem: str | None = None
    key_pem: str | None = None
    certificate_file: str | None = None
    key_file: str | None = None
    key_password: str | None = None
    check_hostname: bool = True


def ssl_context(tls: ClientTls) -> ssl.SSLContext:
    """A client SSL context as kafka-python builds its own (TLS 1.2 or newer, the server's
    certificate verified), from `tls`. Raises ssl.SSLError or OSError."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.check_hostname = tls.check_hostname
    if tls.ca_pem is not None:
        context.load_verify_locations(cadata=tls.ca_pem)
    elif tls.ca_file is not None:
        context.load_verify_locations(cafile=tls.ca_file)
    else:
        context.load_default_certs()
    if tls.certificate_pem is not None and tls.key_pem is not None:
        _load_chain_in_memory(context, tls.certificate_pem, tls.key_pem)
    elif tls.certificate_file is not None:
        context.load_cert_chain(tls.certificate_file, tls.key_file, tls.key_password)
    return context


def _load_chain_in_memory(context: ssl.SSLContext, certificates: str, key: str) -> None:
    """Load a certificate chain and its key given as PEM text: the key encrypted with a one-time
    passphrase, read back from an anonymous memory file (or a 0600 file removed at once)."""
    from cryptography.hazmat.primitives import serialization

    passphrase = secrets.token_hex(32)
    private_key = serialization.load_pem_private_key(key.encode(), None)
    encrypted = private_key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(passphrase.encode()),
    )
    with _transient_file(certificates.encode() + encrypted) as path:
        context.load_cert_chain(path, password=passphrase)


@contextlib.contextmanager
def _transient_file(content: bytes) -> Iterator[str]:
    """A file name whose content is `content` while the block runs, then gone."""
    if hasattr(os, "memfd_create") and os.path.isdir("/proc/self/fd"):
        descriptor = os.memfd_create("kvq-tls", os.MFD_CLOEXEC)
        try:
            os.write(descriptor, content)
            yield f"/proc/self/fd/{descriptor}"
        finally:
            os.close(descriptor)
        return
    descriptor, path = tempfile.mkstemp(prefix="kvq-tls-")  # mode 0600
    try:
        os.write(descriptor, content)
        os.close(descriptor)
        yield path
    finally:
        with contextlib.suppress(OSError):
            os.close(descriptor)
        os.unlink(path)


class FileWatch:
    """Whether the files a client's TLS settings name have changed since the last look.

    A look costs one `stat` per file (following symlinks: the kubelet swaps a mounted Secret's
    files by pointing its `..data` link at a new directory); only when a file's inode, size or
    modification time moved is it read and hashed, and only a different content counts.
    """

    def __init__(self, paths: Sequence[str]) -> None:
        self.paths = tuple(paths)
        self._stats = self._stat_all()
        self._digests = self._digest_all()

    def changed(self) -> bool:
        """True once per change of content (a rewrite with the same bytes is no change)."""
        stats = self._stat_all()
        if stats == self._stats:
            return False
        self._stats = stats
        digests = self._digest_all()
        if digests == self._digests:
            return False
        self._digests = digests
        return True

    def _stat_all(self) -> tuple[tuple[int, ...] | None, ...]:
        return tuple(_stat(path) for path in self.paths)

    def _digest_all(self) -> tuple[str | None, ...]:
        return tuple(_digest(path) for path in self.paths)


def _stat(path: str) -> tuple[int, ...] | None:
    try:
        found = os.stat(path)
    except OSError:
        return None
    return (found.st_dev, found.st_ino, found.st_size, found.st_mtime_ns)


def _digest(path: str) -> str | None:
    try:
        with open(path, "rb") as file:
            return hashlib.sha256(file.read()).hexdigest()
    except OSError:
        return None


def watched_files(props: Mapping[str, str]) -> list[str]:
    """The files the `kafka.admin.*` settings name (stores, CA, certificate, key) or read
    (`${directory:DIR:FILE}`: a store's password from the same Secret)."""
    keys = (
        "ssl.keystore.location",
        "ssl.truststore.location",
        "ssl.ca.location",
        "ssl.certificate.location",
        "ssl.key.location",
    )
    named = {props[key] for key in keys if props.get(key)}
    read = {os.path.join(*ref) for value in props.values() for ref in DIRECTORY_REF.findall(value)}
    return sorted(named | read)

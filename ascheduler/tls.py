"""The secure port's serving certificate: the files given (`--tls-cert-file`,
`--tls-private-key-file`), else one made at start, as kube-scheduler does.

The certificate made at start mirrors k8s.io/client-go's `GenerateSelfSignedCertKey`: a CA
of its own (`localhost-ca@<unix time>`) signing a serving certificate (`localhost@<unix
time>`) for 127.0.0.1 and `localhost`, or the bind address when it is not the unspecified
one, valid a year. With `--cert-dir` the pair is written there as `<pair>.crt` and
`<pair>.key` (and read back on the next start); without it, it lives in memory only (an
anonymous in-memory file hands it to `ssl`, which reads certificates from paths), so a
read-only root filesystem is no obstacle. The keys are ECDSA P-256: a millisecond to make
on the event loop, where RSA 2048 would take a hundred.

`--client-ca-file` asks clients for a certificate (optional) and verifies it against that
bundle; `ascheduler.auth` maps a verified one to a user, as kube's x509 authenticator does.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import ipaddress
import os
import ssl
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import structlog
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

log = structlog.get_logger(__name__)

_VALIDITY = dt.timedelta(days=365)


@dataclass(frozen=True)
class ServingCertificate:
    """Where the serving certificate comes from (kube's SecureServingOptions.ServerCert)."""

    cert_file: str = ""
    key_file: str = ""
    #: Where a certificate made at start is written and read back ("": in memory).
    cert_dir: str = ""
    pair_name: str = "ascheduler"
    #: PEM bundle of CAs whose client certificates authenticate users ("": none asked for).
    client_ca_file: str = ""


def self_signed(bind_host: str) -> tuple[bytes, bytes]:
    """(certificate chain PEM, key PEM) for `localhost` and 127.0.0.1, plus `bind_host`
    when it names one address (else `localhost` again, as kube adds for 0.0.0.0)."""
    now = dt.datetime.now(dt.UTC)
    stamp = int(time.time())
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"localhost-ca@{stamp}")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + _VALIDITY)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .sign(ca_key, hashes.SHA256())
    )
    ips: list[ipaddress.IPv4Address | ipaddress.IPv6Address] = [ipaddress.ip_address("127.0.0.1")]
    names = ["localhost"]
    try:
        bound = ipaddress.ip_address(bind_host)
    except ValueError:
        bound = None
    if bound is not None and not bound.is_unspecified and bound not in ips:
        ips.append(bound)
    key = ec.generate_private_key(ec.SECP256R1())
    alt: list[x509.GeneralName] = [x509.DNSName(n) for n in names]
    alt += [x509.IPAddress(ip) for ip in ips]
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"localhost@{stamp}")]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + _VALIDITY)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectAlternativeName(alt), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    pem = serialization.Encoding.PEM
    chain = cert.public_bytes(pem) + ca.public_bytes(pem)
    key_pem = key.private_bytes(
        pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return chain, key_pem


@contextlib.contextmanager
def _in_memory(data: bytes) -> Iterator[str]:
    """A path `ssl` can read `data` from, never on a disk where the platform allows."""
    if hasattr(os, "memfd_create"):
        fd = os.memfd_create("ascheduler-serving", 0)
        try:
            os.write(fd, data)
            yield f"/proc/self/fd/{fd}"
        finally:
            os.close(fd)
        return
    with tempfile.TemporaryDirectory(prefix="ascheduler-serving-") as where:
        path = Path(where) / "pem"
        path.touch(mode=0o600)
        path.write_bytes(data)
        yield str(path)


def server_context(source: ServingCertificate, bind_host: str) -> ssl.SSLContext:
    """The TLS context of the secure port; OSError, ssl.SSLError or ValueError when the
    files given cannot be used."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    if bool(source.cert_file) != bool(source.key_file):
        raise ValueError("--tls-cert-file and --tls-private-key-file go together")
    if source.cert_file:
        context.load_cert_chain(source.cert_file, source.key_file)
    elif source.cert_dir:
        directory = Path(source.cert_dir)
        cert = directory / f"{source.pair_name}.crt"
        key = directory / f"{source.pair_name}.key"
        if not (cert.is_file() and key.is_file()):
            chain, key_pem = self_signed(bind_host)
            directory.mkdir(parents=True, exist_ok=True)
            cert.write_bytes(chain)
            key.touch(mode=0o600)
            key.write_bytes(key_pem)
            log.info("self_signed_certificate", cert=str(cert), key=str(key))
        context.load_cert_chain(str(cert), str(key))
    else:
        chain, key_pem = self_signed(bind_host)
        with _in_memory(chain) as cert_path, _in_memory(key_pem) as key_path:
            context.load_cert_chain(cert_path, key_path)
        log.info("self_signed_certificate", where="in memory")
    if source.client_ca_file:
        context.load_verify_locations(cafile=source.client_ca_file)
        context.verify_mode = ssl.CERT_OPTIONAL
    else:
        context.verify_mode = ssl.CERT_NONE
    return context

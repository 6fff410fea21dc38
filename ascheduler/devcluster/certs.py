"""Certificates for the local control plane: a CA, the apiserver's serving certificate,
client certificates (admin in `system:masters`, `system:kube-scheduler`), and the service-account
signing key pair. Everything is written under the plane's state directory, keys mode 0600.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
from dataclasses import dataclass
from pathlib import Path

try:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec, rsa
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
except ImportError as exc:  # pragma: no cover - depends on the installation
    raise ImportError(
        "the local control plane needs the 'devcluster' extra: pip install 'ascheduler[devcluster]'"
    ) from exc

_VALIDITY = dt.timedelta(days=365)


@dataclass(frozen=True)
class KeyPair:
    cert: Path
    key: Path


@dataclass(frozen=True)
class PlaneCertificates:
    ca: KeyPair
    serving: KeyPair
    admin: KeyPair
    scheduler: KeyPair
    service_account_key: Path
    service_account_pub: Path


def _write_key(path: Path, key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey) -> None:
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    path.chmod(0o600)


def _name(common_name: str, organization: str | None = None) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
    if organization:
        attrs.insert(0, x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization))
    return x509.Name(attrs)


def _issue(
    directory: Path,
    stem: str,
    subject: x509.Name,
    *,
    ca: tuple[x509.Certificate, ec.EllipticCurvePrivateKey] | None,
    server: bool = False,
) -> tuple[KeyPair, x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = ec.generate_private_key(ec.SECP256R1())
    now = dt.datetime.now(dt.UTC) - dt.timedelta(minutes=5)
    issuer_name, signing_key = (ca[0].subject, ca[1]) if ca else (subject, key)
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + _VALIDITY)
    )
    if ca is None:
        builder = builder.add_extension(
            x509.BasicConstraints(ca=True, path_length=None), critical=True
        )
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
        builder = builder.add_extension(
            x509.BasicConstraints(ca=False, path_length=None), critical=True
        )
        usage = ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH
        builder = builder.add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        if server:
            builder = builder.add_extension(
                x509.SubjectAlternativeName(
                    [
                        x509.DNSName("localhost"),
                        x509.DNSName("kubernetes"),
                        x509.DNSName("kubernetes.default"),
                        x509.DNSName("kubernetes.default.svc"),
                        x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                        x509.IPAddress(ipaddress.ip_address("10.0.0.1")),
                    ]
                ),
                critical=False,
            )
    cert = builder.sign(signing_key, hashes.SHA256())
    pair = KeyPair(cert=directory / f"{stem}.crt", key=directory / f"{stem}.key")
    pair.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    _write_key(pair.key, key)
    return pair, cert, key


def generate(directory: Path) -> PlaneCertificates:
    """Mint every certificate the plane needs into `directory`."""
    directory.mkdir(parents=True, exist_ok=True)
    ca_pair, ca_cert, ca_key = _issue(directory, "ca", _name("ascheduler-local-ca"), ca=None)
    ca = (ca_cert, ca_key)
    serving, _, _ = _issue(directory, "apiserver", _name("kube-apiserver"), ca=ca, server=True)
    admin, _, _ = _issue(directory, "admin", _name("ascheduler-admin", "system:masters"), ca=ca)
    scheduler, _, _ = _issue(directory, "scheduler", _name("system:kube-scheduler"), ca=ca)

    sa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    sa_key_path = directory / "service-account.key"
    sa_pub_path = directory / "service-account.pub"
    _write_key(sa_key_path, sa_key)
    sa_pub_path.write_bytes(
        sa_key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    return PlaneCertificates(
        ca=ca_pair,
        serving=serving,
        admin=admin,
        scheduler=scheduler,
        service_account_key=sa_key_path,
        service_account_pub=sa_pub_path,
    )

"""The plane's certificates chain to its CA and carry the identities RBAC relies on."""

from __future__ import annotations

import ipaddress
from pathlib import Path

from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from ascheduler.devcluster import certs


def _load(path: Path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(path.read_bytes())


def test_certificates_chain_and_identities(tmp_path: Path) -> None:
    pki = certs.generate(tmp_path)
    ca = _load(pki.ca.cert)
    for pair in (pki.serving, pki.admin, pki.scheduler):
        cert = _load(pair.cert)
        cert.verify_directly_issued_by(ca)
        assert pair.key.stat().st_mode & 0o077 == 0

    admin = _load(pki.admin.cert)
    assert (
        admin.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)[0].value == "system:masters"
    )
    scheduler = _load(pki.scheduler.cert)
    assert (
        scheduler.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value
        == "system:kube-scheduler"
    )
    assert (
        ExtendedKeyUsageOID.CLIENT_AUTH
        in scheduler.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    )

    serving = _load(pki.serving.cert)
    san = serving.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert ipaddress.ip_address("127.0.0.1") in san.get_values_for_type(x509.IPAddress)
    assert "localhost" in san.get_values_for_type(x509.DNSName)
    assert pki.service_account_key.read_text().startswith("-----BEGIN PRIVATE KEY-----")

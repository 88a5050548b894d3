"""Certificates and keys for the lab control plane.

Creates, once, under ``<lab dir>/pki``:

- ``ca.crt`` / ``ca.key``: a self-signed CA (the cluster CA and client CA);
- ``apiserver.crt`` / ``apiserver.key``: kube-apiserver serving cert for 127.0.0.1 / localhost;
- ``admin.crt`` / ``admin.key``: client cert ``CN=lab-admin, O=system:masters``;
- ``sa.key`` / ``sa.pub``: the service-account token signing key pair.

All keys are EC P-256 (``cryptography``), certificates valid for 365 days. Files are
written 0600. Nothing here is used outside the lab.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

VALIDITY = dt.timedelta(days=365)


def _write(path: Path, data: bytes) -> None:
    path.write_bytes(data)
    path.chmod(0o600)


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _cert(
    subject: x509.Name,
    key: ec.EllipticCurvePrivateKey,
    issuer: x509.Name,
    issuer_key: ec.EllipticCurvePrivateKey,
    *,
    ca: bool = False,
    server: bool = False,
    client: bool = False,
) -> x509.Certificate:
    now = dt.datetime.now(dt.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + VALIDITY)
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if ca:
        builder = builder.add_extension(
            x509.KeyUsage(
                digital_signature=True, key_cert_sign=True, crl_sign=True, content_commitment=False,
                key_encipherment=False, data_encipherment=False, key_agreement=False,
                encipher_only=False, decipher_only=False,
            ),
            critical=True,
        )
    usages = []
    if server:
        usages.append(ExtendedKeyUsageOID.SERVER_AUTH)
        builder = builder.add_extension(
            x509.SubjectAlternativeName(
                [
                    x509.DNSName("localhost"),
                    x509.DNSName("kubernetes"),
                    x509.DNSName("kubernetes.default.svc"),
                    x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                ]
            ),
            critical=False,
        )
    if client:
        usages.append(ExtendedKeyUsageOID.CLIENT_AUTH)
    if usages:
        builder = builder.add_extension(x509.ExtendedKeyUsage(usages), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


def ensure_pki(directory: Path) -> Path:
    """Create the lab PKI in ``directory`` unless it is already complete.

    Returns:
        ``directory``. Raises ``OSError`` if it cannot be written.
    """
    directory.mkdir(parents=True, exist_ok=True)
    names = ["ca.crt", "ca.key", "apiserver.crt", "apiserver.key", "admin.crt", "admin.key",
             "sa.key", "sa.pub"]
    if all((directory / n).exists() for n in names):
        return directory

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "composable-gpu-lab-ca")])
    ca_cert = _cert(ca_name, ca_key, ca_name, ca_key, ca=True)
    _write(directory / "ca.key", _key_pem(ca_key))
    _write(directory / "ca.crt", ca_cert.public_bytes(serialization.Encoding.PEM))

    srv_key = ec.generate_private_key(ec.SECP256R1())
    srv_cert = _cert(
        x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kube-apiserver")]),
        srv_key, ca_name, ca_key, server=True,
    )
    _write(directory / "apiserver.key", _key_pem(srv_key))
    _write(directory / "apiserver.crt", srv_cert.public_bytes(serialization.Encoding.PEM))

    adm_key = ec.generate_private_key(ec.SECP256R1())
    adm_cert = _cert(
        x509.Name(
            [
                x509.NameAttribute(NameOID.ORGANIZATION_NAME, "system:masters"),
                x509.NameAttribute(NameOID.COMMON_NAME, "lab-admin"),
            ]
        ),
        adm_key, ca_name, ca_key, client=True,
    )
    _write(directory / "admin.key", _key_pem(adm_key))
    _write(directory / "admin.crt", adm_cert.public_bytes(serialization.Encoding.PEM))

    sa_key = ec.generate_private_key(ec.SECP256R1())
    _write(directory / "sa.key", _key_pem(sa_key))
    _write(
        directory / "sa.pub",
        sa_key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        ),
    )
    return directory

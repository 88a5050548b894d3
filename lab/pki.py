"""Certificates and keys for the lab control plane.

Creates, once, under ``<lab dir>/pki``:

- ``ca.crt`` / ``ca.key``: a self-signed CA (the cluster CA and client CA);
- ``apiserver.crt`` / ``apiserver.key``: kube-apiserver serving cert for 127.0.0.1 / localhost;
- ``admin.crt`` / ``admin.key``: client cert ``CN=lab-admin, O=system:masters``;
- ``sa.key`` / ``sa.pub``: the service-account token signing key pair;
- on demand (:func:`ensure_node_cert`), ``node-<name>.crt`` / ``.key``: the lab node's kubelet
  client cert ``CN=system:node:<name>, O=system:nodes`` (the Node authorizer's identity).

The API server cert also names the lab node's address (:data:`NODE_IP`), where the node's
Pods reach the API server; a cert from before that is re-issued with the same CA.

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
#: The lab node's address (``lab.node.NODE_IP``), a SAN of the API server cert.
NODE_IP = "10.89.0.1"


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
                    x509.IPAddress(ipaddress.ip_address(NODE_IP)),
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
        if not _serves(directory / "apiserver.crt", NODE_IP):
            _issue_apiserver_cert(directory, *_load_ca(directory))
        return directory

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "composable-gpu-lab-ca")])
    ca_cert = _cert(ca_name, ca_key, ca_name, ca_key, ca=True)
    _write(directory / "ca.key", _key_pem(ca_key))
    _write(directory / "ca.crt", ca_cert.public_bytes(serialization.Encoding.PEM))

    _issue_apiserver_cert(directory, ca_name, ca_key)

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


def _issue_apiserver_cert(directory: Path, ca_name: x509.Name, ca_key: ec.EllipticCurvePrivateKey) -> None:
    # The key is written before the cert: kube-apiserver reloads the pair when the cert changes.
    srv_key = ec.generate_private_key(ec.SECP256R1())
    srv_cert = _cert(
        x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kube-apiserver")]),
        srv_key, ca_name, ca_key, server=True,
    )
    _write(directory / "apiserver.key", _key_pem(srv_key))
    _write(directory / "apiserver.crt", srv_cert.public_bytes(serialization.Encoding.PEM))


def _load_ca(directory: Path) -> tuple[x509.Name, ec.EllipticCurvePrivateKey]:
    ca_cert = x509.load_pem_x509_certificate((directory / "ca.crt").read_bytes())
    ca_key = serialization.load_pem_private_key((directory / "ca.key").read_bytes(), password=None)
    assert isinstance(ca_key, ec.EllipticCurvePrivateKey)
    return ca_cert.subject, ca_key


def _serves(cert_path: Path, ip: str) -> bool:
    cert = x509.load_pem_x509_certificate(cert_path.read_bytes())
    try:
        sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return False
    return ipaddress.ip_address(ip) in sans.get_values_for_type(x509.IPAddress)


def ensure_node_cert(directory: Path, node: str) -> tuple[Path, Path]:
    """Client cert and key of node ``node``'s kubelet (``CN=system:node:<node>, O=system:nodes``),
    signed by the lab CA in ``directory`` (made by :func:`ensure_pki`). Created once.

    Returns:
        ``(cert path, key path)``.
    """
    crt, key = directory / f"node-{node}.crt", directory / f"node-{node}.key"
    if crt.exists() and key.exists():
        return crt, key
    ca_name, ca_key = _load_ca(directory)
    node_key = ec.generate_private_key(ec.SECP256R1())
    node_cert = _cert(
        x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "system:nodes"),
                   x509.NameAttribute(NameOID.COMMON_NAME, f"system:node:{node}")]),
        node_key, ca_name, ca_key, client=True,
    )
    _write(key, _key_pem(node_key))
    _write(crt, node_cert.public_bytes(serialization.Encoding.PEM))
    return crt, key

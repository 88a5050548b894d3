"""Self-signed TLS material for the BMC simulator (a hardware stand-in's HTTPS).

BMCs ship self-signed certificates; clients either pin them through a CA bundle or switch
verification off. This module makes a small self-signed CA and a server certificate for
``127.0.0.1`` / ``localhost`` signed by it, so clients can verify with ``ca.pem`` as their
CA bundle. Files (in ``tls_dir``): ``ca.pem`` (give this to clients), ``server.pem``,
``server-key.pem``. Existing files are reused, so a pinned bundle survives restarts.

Generated with the ``cryptography`` package when it is importable, else the ``openssl`` CLI.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class TlsFiles:
    """Paths of the CA bundle, the server certificate and its private key."""

    ca: Path
    cert: Path
    key: Path


def ensure_tls(tls_dir: Path) -> TlsFiles:
    """Create (or reuse) the CA and server certificate in ``tls_dir``.

    Raises:
        RuntimeError: neither ``cryptography`` nor ``openssl`` is available, or openssl failed.
    """
    files = TlsFiles(ca=tls_dir / "ca.pem", cert=tls_dir / "server.pem", key=tls_dir / "server-key.pem")
    if files.ca.exists() and files.cert.exists() and files.key.exists():
        return files
    tls_dir.mkdir(parents=True, exist_ok=True)
    try:
        import cryptography  # noqa: F401
    except ImportError:
        _with_openssl(files)
    else:
        _with_cryptography(files)
    files.key.chmod(0o600)
    return files


def _key_usage(*, cert_sign: bool) -> object:
    from cryptography import x509

    return x509.KeyUsage(digital_signature=not cert_sign, content_commitment=False, key_encipherment=False,
                         data_encipherment=False, key_agreement=not cert_sign, key_cert_sign=cert_sign,
                         crl_sign=cert_sign, encipher_only=False, decipher_only=False)


def _with_cryptography(files: TlsFiles) -> None:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = dt.datetime.now(dt.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "redfish-sim test CA")])
    ca_ski = x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key())
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(ca_name).issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5)).not_valid_after(now + dt.timedelta(days=3650))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(_key_usage(cert_sign=True), critical=True)
        .add_extension(ca_ski, critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5)).not_valid_after(now + dt.timedelta(days=825))
        .add_extension(x509.SubjectAlternativeName([
            x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_key_usage(cert_sign=False), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ca_ski), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    files.ca.write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    files.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    files.key.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                            serialization.NoEncryption()))


def _with_openssl(files: TlsFiles) -> None:
    openssl = shutil.which("openssl")
    if openssl is None:
        raise RuntimeError("--tls needs the 'cryptography' package or the 'openssl' CLI; neither was found")
    d = files.ca.parent
    ca_key, csr, ext = d / "ca-key.pem", d / "server.csr", d / "server-ext.cnf"
    ext.write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=critical,CA:FALSE\n"
                   "keyUsage=critical,digitalSignature,keyAgreement\nextendedKeyUsage=serverAuth\n")
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    steps = [
        [openssl, "req", "-x509", *ec, "-keyout", str(ca_key), "-out", str(files.ca), "-days", "3650",
         "-subj", "/CN=redfish-sim test CA", "-addext", "basicConstraints=critical,CA:TRUE,pathlen:0",
         "-addext", "keyUsage=critical,keyCertSign,cRLSign"],
        [openssl, "req", *ec, "-keyout", str(files.key), "-out", str(csr), "-subj", "/CN=localhost"],
        [openssl, "x509", "-req", "-in", str(csr), "-CA", str(files.ca), "-CAkey", str(ca_key),
         "-CAcreateserial", "-out", str(files.cert), "-days", "825", "-extfile", str(ext)],
    ]
    for argv in steps:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
        if proc.returncode != 0:
            raise RuntimeError(f"openssl failed ({' '.join(argv[:2])}): {proc.stderr.strip()[-500:]}")
    ca_key.chmod(0o600)

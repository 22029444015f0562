"""A self-signed certificate for 127.0.0.1, made with the openssl command at test time (skips without it)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest


def self_signed(directory: Path) -> tuple[Path, Path]:
    """(PEM key store: key then certificate, the certificate alone as a trust store)."""
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("the openssl command is needed to make a test certificate")
    key, cert = directory / "key.pem", directory / "cert.pem"
    subprocess.run([openssl, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                    "-keyout", str(key), "-out", str(cert), "-subj", "/CN=localhost", "-days", "2",
                    "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"], check=True, capture_output=True)
    store = directory / "keystore.pem"
    store.write_text(key.read_text() + cert.read_text())
    return store, cert

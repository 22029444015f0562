"""Test certificates made at test time with the ``openssl`` command: a CA, a broker, clients (no key is committed).

Tests import from here (``from tls_certs import ...``). EC P-256 keys keep generation fast (a few milliseconds each).
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

OPENSSL = shutil.which("openssl") or "/usr/bin/openssl"


def _run(*args: str) -> None:
    subprocess.run([OPENSSL, *args], check=True, capture_output=True)


@dataclass(frozen=True)
class Issued:
    """A key and certificate, and the files Kafka's PEM settings point at."""

    key: Path
    cert: Path
    keystore: Path
    """Kafka's ``ssl.keystore.location`` for ``ssl.keystore.type=PEM``: the key, then the certificate chain."""

    def key_text(self) -> str:
        return self.key.read_text()

    def chain_text(self) -> str:
        return self.cert.read_text()


@dataclass(frozen=True)
class Authority:
    key: Path
    cert: Path
    directory: Path

    def issue(self, name: str, subject: str, *, sans: str | None = None, key_password: str | None = None,
              multivalue: bool = False) -> Issued:
        """A certificate for ``subject`` (openssl's ``/CN=x/O=y`` form, first the least specific), signed by this
        CA; ``sans`` like ``IP:127.0.0.1,DNS:localhost``; ``key_password`` encrypts the key (PKCS#8, AES-256)."""
        key = self.directory / f"{name}.key"
        csr = self.directory / f"{name}.csr"
        cert = self.directory / f"{name}.pem"
        ext = self.directory / f"{name}.ext"
        lines = ["basicConstraints=CA:FALSE", "extendedKeyUsage=serverAuth,clientAuth"]
        if sans:
            lines.append(f"subjectAltName={sans}")
        ext.write_text("\n".join(lines) + "\n")
        req = ["req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", str(key),
               "-out", str(csr), "-subj", subject, "-utf8"]
        if multivalue:
            req.append("-multivalue-rdn")
        _run(*req)
        _run("x509", "-req", "-in", str(csr), "-CA", str(self.cert), "-CAkey", str(self.key), "-CAcreateserial",
             "-out", str(cert), "-days", "2", "-extfile", str(ext))
        if key_password is not None:
            encrypted = self.directory / f"{name}.enc.key"
            _run("pkcs8", "-topk8", "-in", str(key), "-out", str(encrypted), "-passout", f"pass:{key_password}",
                 "-v2", "aes-256-cbc")
            key = encrypted
        keystore = self.directory / f"{name}.keystore.pem"
        keystore.write_text(key.read_text() + cert.read_text() + self.cert.read_text())
        return Issued(key, cert, keystore)


def make_authority(directory: Path, subject: str = "/CN=odradek-test-ca") -> Authority:
    directory.mkdir(parents=True, exist_ok=True)
    key = directory / "ca.key"
    cert = directory / "ca.pem"
    _run("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", str(key),
         "-out", str(cert), "-subj", subject, "-days", "2")
    return Authority(key, cert, directory)


@dataclass(frozen=True)
class TestPki:
    """A CA, a broker certificate for 127.0.0.1 and localhost, and two client certificates."""

    ca: Authority
    broker: Issued
    alice: Issued
    bob: Issued

    __test__ = False


def make_pki(directory: Path) -> TestPki:
    ca = make_authority(directory)
    broker = ca.issue("broker", "/O=acme/CN=localhost", sans="IP:127.0.0.1,DNS:localhost")
    alice = ca.issue("alice", "/O=acme/OU=eng/CN=alice")
    bob = ca.issue("bob", "/O=acme/OU=ops/CN=bob", key_password="bob-secret")
    return TestPki(ca, broker, alice, bob)

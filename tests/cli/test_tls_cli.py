"""``--command-config`` with ``security.protocol=SSL``: odradek's own client verifies the server's certificate
from a PEM truststore, as Kafka's tools do with ``ssl.truststore.type=PEM``.

Until SSL listeners are on main, the TLS endpoint is a TLS-terminating relay in front of the test broker's
PLAINTEXT listener (real TLS from Python's ssl module, real Kafka frames behind it); certificates come from the
``openssl`` command line.
"""

from __future__ import annotations

import asyncio
import shutil
import ssl
import subprocess
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from click.testing import Result

from odradek.testing import ThreadedCluster

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command")


def _openssl(folder: Path, *args: str) -> None:
    subprocess.run(["openssl", *args], cwd=folder, check=True, capture_output=True, timeout=60)


def _certificates(folder: Path, name: str) -> None:
    """``{name}-ca.pem`` and a ``{name}-server.pem`` (key and chain) for 127.0.0.1, signed by that CA."""
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    _openssl(folder, "req", "-x509", *ec, "-keyout", f"{name}-ca.key", "-out", f"{name}-ca.pem", "-days", "2",
             "-subj", f"/CN={name}-ca", "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    _openssl(folder, "req", *ec, "-keyout", f"{name}-server.key", "-out", f"{name}-server.csr", "-subj",
             "/CN=broker")
    (folder / "san.ext").write_text("subjectAltName=IP:127.0.0.1\n")
    _openssl(folder, "x509", "-req", "-in", f"{name}-server.csr", "-CA", f"{name}-ca.pem", "-CAkey",
             f"{name}-ca.key", "-CAcreateserial", "-out", f"{name}-server.crt", "-days", "2", "-extfile", "san.ext")
    (folder / f"{name}-server.pem").write_text((folder / f"{name}-server.key").read_text()
                                               + (folder / f"{name}-server.crt").read_text())


class TlsRelay:
    """Accepts TLS on 127.0.0.1:0 and relays the plain bytes to ``target``, on its own loop thread."""

    def __init__(self, target: str, certificate: Path) -> None:
        self.host, _, port = target.rpartition(":")
        self.port = int(port)
        self.context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self.context.load_cert_chain(certificate)
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.server = asyncio.run_coroutine_threadsafe(
            asyncio.start_server(self._relay, "127.0.0.1", 0, ssl=self.context), self.loop).result(10)
        self.address = f"127.0.0.1:{self.server.sockets[0].getsockname()[1]}"

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection(self.host, self.port)

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            try:
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            except (ConnectionError, ssl.SSLError):
                pass
            finally:
                dst.close()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))

    def close(self) -> None:
        self.server.close()
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("tls")
    _certificates(folder, "good")
    _certificates(folder, "other")
    return folder


@pytest.fixture(scope="module")
def relay(cluster: ThreadedCluster, certificates: Path) -> Iterator[TlsRelay]:
    r = TlsRelay(cluster.bootstrap, certificates / "good-server.pem")
    yield r
    r.close()


def _ssl_properties(path: Path, truststore: Path) -> str:
    path.write_text(f"security.protocol=SSL\nssl.truststore.type=PEM\nssl.truststore.location={truststore}\n")
    return str(path)


def test_topics_over_tls(relay: TlsRelay, certificates: Path, tmp_path: Path, cli: Callable[..., Result],
                         name: str) -> None:
    config = _ssl_properties(tmp_path / "ssl.properties", certificates / "good-ca.pem")
    created = cli("topics", "--bootstrap-server", relay.address, "--command-config", config, "--create",
                  "--topic", name, "--partitions", "1", "--replication-factor", "1")
    assert created.exit_code == 0, created.output
    listed = cli("topics", "--bootstrap-server", relay.address, "--command-config", config, "--list")
    assert listed.exit_code == 0, listed.output
    assert name in listed.stdout.split()


def test_untrusted_certificate_is_one_line(relay: TlsRelay, certificates: Path, tmp_path: Path,
                                           cli: Callable[..., Result]) -> None:
    config = _ssl_properties(tmp_path / "ssl.properties", certificates / "other-ca.pem")
    result = cli("topics", "--bootstrap-server", relay.address, "--command-config", config, "--list")
    assert result.exit_code == 1
    assert result.stderr.startswith("Error: TLS handshake failed: ")
    assert "CERTIFICATE_VERIFY_FAILED" in result.stderr


def test_jks_truststore_is_refused_up_front(tmp_path: Path, cli: Callable[..., Result]) -> None:
    (tmp_path / "ts.jks").write_bytes(b"\xfe\xed\xfe\xed")
    config = tmp_path / "jks.properties"
    config.write_text(f"security.protocol=SSL\nssl.truststore.location={tmp_path / 'ts.jks'}\n")
    result = cli("topics", "--bootstrap-server", "127.0.0.1:1", "--command-config", str(config), "--list")
    assert result.exit_code == 2
    assert "ssl.truststore.type=JKS" in result.stderr and "PEM" in result.stderr

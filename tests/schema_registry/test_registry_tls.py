"""``odradek schema-registry --ssl-config``: HTTPS from Kafka's ``ssl.*`` names, a certificate made at test time."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient

from brokers import BrokerProcess, wait_for


def test_https_with_a_pem_key_store(broker: BrokerProcess, tmp_path: Path) -> None:
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("the openssl command is needed to make a test certificate")
    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    subprocess.run([openssl, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                    "-keyout", str(key), "-out", str(cert), "-subj", "/CN=localhost", "-days", "2",
                    "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"], check=True, capture_output=True)
    store = tmp_path / "keystore.pem"
    store.write_text(key.read_text() + cert.read_text())
    config = tmp_path / "ssl.properties"
    config.write_text(f"ssl.keystore.type=PEM\nssl.keystore.location={store}\n"
                      f"ssl.truststore.type=PEM\nssl.truststore.location={cert}\n")
    ready = tmp_path / "sr.ready"
    proc = subprocess.Popen([sys.executable, "-m", "odradek", "schema-registry", "--bootstrap-server",
                             broker.bootstrap, "--ssl-config", str(config), "--port", "0", "--ready-file", str(ready)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=dict(os.environ))
    try:
        wait_for(lambda: ready.exists() and ready.read_text().strip(), 60, what="the registry's ready file")
        url = ready.read_text().split("=", 1)[1].strip()
        assert url.startswith("https://127.0.0.1:")
        client = SchemaRegistryClient({"url": url, "ssl.ca.location": str(cert)})
        assert client.register_schema("tls", Schema('"string"', "AVRO")) == 1
        assert client.get_schema(1).schema_str == '"string"'
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0

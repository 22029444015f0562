"""``odradek schema-registry --ssl-config``: HTTPS from Kafka's ``ssl.*`` names, a certificate made at test time."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from registry_certs import self_signed

from brokers import BrokerProcess, wait_for


def test_https_with_a_pem_key_store(broker: BrokerProcess, tmp_path: Path) -> None:
    store, cert = self_signed(tmp_path)
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

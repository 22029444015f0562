"""The registry ``odradek up`` starts beside a secured cluster: it connects with the brokers' inter-broker security,
asks for HTTP Basic credentials that log in with SCRAM, and serves HTTPS when its listener is TLS."""

from __future__ import annotations

import base64
import json
import ssl
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from registry_certs import self_signed

from brokers import PLAIN_ADMIN_JAAS, SASL_PLAINTEXT_ARGS, BrokerProcess
from odradek.cli import main
from odradek.ready_file import read_ready_file

pytestmark = pytest.mark.timeout(240)


def _start(tmp_path: Path, args: list[str], admin_properties: str) -> tuple[BrokerProcess, str]:
    """An ``odradek up`` with a registry, a SCRAM user alice made through the listener; (broker, registry URL)."""
    broker = BrokerProcess(tmp_path / "broker", [*args, "--schema-registry-port", "0"]).start()
    admin = tmp_path / "admin.properties"
    admin.write_text(admin_properties)
    made = CliRunner().invoke(main, ["configs", "--bootstrap-server", broker.bootstrap, "--command-config",
                                     str(admin), "--alter", "--entity-type", "users", "--entity-name", "alice",
                                     "--add-config", "SCRAM-SHA-256=[password=alice-secret]"])
    assert made.exit_code == 0, made.output
    return broker, read_ready_file(tmp_path / "broker.ready")["schema.registry.url"]


ADMIN_PLAIN = ("sasl.mechanism=PLAIN\nsasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule "
               'required username="admin" password="admin-secret";\n')


@pytest.fixture
def sasl_cluster(tmp_path: Path) -> Iterator[str]:
    broker, url = _start(tmp_path, SASL_PLAINTEXT_ARGS, "security.protocol=SASL_PLAINTEXT\n" + ADMIN_PLAIN)
    try:
        yield url
    finally:
        broker.stop()


def _get(url: str, user_info: str | None, context: ssl.SSLContext | None = None) -> tuple[int, dict[str, object]]:
    headers = {} if user_info is None else {"Authorization": "Basic " + base64.b64encode(user_info.encode()).decode()}
    try:
        with urllib.request.urlopen(urllib.request.Request(f"{url}/subjects", headers=headers), timeout=60,
                                    context=context) as resp:
            return int(resp.status), {"subjects": json.loads(resp.read())}
    except urllib.error.HTTPError as exc:
        assert exc.headers["WWW-Authenticate"] == 'Basic realm="SchemaRegistry"'
        return int(exc.code), json.loads(exc.read())


def test_a_sasl_cluster_asks_for_scram_credentials(sasl_cluster: str) -> None:
    assert sasl_cluster.startswith("http://")
    assert _get(sasl_cluster, None) == (401, {"error_code": 401, "message": "Unauthorized"})
    assert _get(sasl_cluster, "alice:wrong")[0] == 401
    assert _get(sasl_cluster, "alice:alice-secret") == (200, {"subjects": []})
    client = SchemaRegistryClient({"url": sasl_cluster, "basic.auth.user.info": "alice:alice-secret"})
    assert client.register_schema("secured", Schema('"string"', "AVRO")) == 1
    assert client.get_schema(1).schema_str == '"string"'


def test_a_sasl_ssl_cluster_serves_https(tmp_path: Path) -> None:
    store, cert = self_signed(tmp_path)
    tls = {"ssl.keystore.type": "PEM", "ssl.keystore.location": str(store),
           "ssl.truststore.type": "PEM", "ssl.truststore.location": str(cert)}
    args = [
        "--override", "listeners=SASL_SSL://127.0.0.1:0",
        "--override", "inter.broker.listener.name=SASL_SSL",
        "--override", "sasl.mechanism.inter.broker.protocol=PLAIN",
        "--override", "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256",
        "--override", f"listener.name.sasl_ssl.plain.sasl.jaas.config={PLAIN_ADMIN_JAAS}",
        "--override", "group.initial.rebalance.delay.ms=0",
        *[arg for name, value in tls.items() for arg in ("--override", f"{name}={value}")],
    ]
    properties = "security.protocol=SASL_SSL\n" + ADMIN_PLAIN + "".join(f"{k}={v}\n" for k, v in tls.items())
    broker, url = _start(tmp_path, args, properties)
    try:
        assert url.startswith("https://127.0.0.1:")
        context = ssl.create_default_context(cafile=str(cert))
        assert _get(url, None, context)[0] == 401
        assert _get(url, "alice:wrong", context)[0] == 401
        client = SchemaRegistryClient({"url": url, "ssl.ca.location": str(cert),
                                       "basic.auth.user.info": "alice:alice-secret"})
        assert client.register_schema("tls", Schema('"string"', "AVRO")) == 1
        assert client.get_subjects() == ["tls"]
    finally:
        broker.stop()

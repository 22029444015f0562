"""HTTP Basic authentication against the cluster's SCRAM users: ``odradek schema-registry --basic-auth`` in front of
a broker whose only listener is SASL_PLAINTEXT."""

from __future__ import annotations

import base64
import os
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient

from brokers import SASL_PLAINTEXT_ARGS, BrokerProcess, wait_for
from odradek.cli import main
from odradek.schema_registry.basic_auth import basic_credentials

pytestmark = pytest.mark.timeout(180)


def test_basic_credentials_parse() -> None:
    assert basic_credentials("Basic " + base64.b64encode(b"alice:pa:ss").decode()) == ("alice", "pa:ss")
    for bad in (None, "", "Bearer x", "Basic !!!", "Basic " + base64.b64encode(b"no-colon").decode()):
        assert basic_credentials(bad) is None


@pytest.fixture
def registry_url(tmp_path: Path) -> Iterator[str]:
    broker = BrokerProcess(tmp_path / "broker", SASL_PLAINTEXT_ARGS).start()
    admin = tmp_path / "admin.properties"
    admin.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
                     "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required "
                     'username="admin" password="admin-secret";\n')
    bootstrap = broker.listeners["SASL_PLAINTEXT"]
    made = CliRunner().invoke(main, ["configs", "--bootstrap-server", bootstrap, "--command-config", str(admin),
                                     "--alter", "--entity-type", "users", "--entity-name", "alice",
                                     "--add-config", "SCRAM-SHA-256=[password=alice-secret]"])
    assert made.exit_code == 0, made.output
    ready = tmp_path / "sr.ready"
    proc = subprocess.Popen([sys.executable, "-m", "odradek", "schema-registry", "--bootstrap-server", bootstrap,
                             "--command-config", str(admin), "--basic-auth", "--port", "0", "--ready-file",
                             str(ready)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=dict(os.environ))
    try:
        wait_for(lambda: ready.exists() and ready.read_text().strip(), 60, what="the registry's ready file")
        yield ready.read_text().split("=", 1)[1].strip()
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)
        broker.stop()


def _status(url: str, user_info: str | None) -> int:
    headers = {} if user_info is None else {"Authorization": "Basic " + base64.b64encode(user_info.encode()).decode()}
    try:
        with urllib.request.urlopen(urllib.request.Request(f"{url}/subjects", headers=headers), timeout=60) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as exc:
        assert exc.headers["WWW-Authenticate"] == 'Basic realm="SchemaRegistry"'
        return int(exc.code)


def test_only_the_clusters_scram_users_get_in(registry_url: str) -> None:
    assert _status(registry_url, None) == 401
    assert _status(registry_url, "alice:wrong") == 401
    assert _status(registry_url, "mallory:alice-secret") == 401
    assert _status(registry_url, "alice:alice-secret") == 200
    client = SchemaRegistryClient({"url": registry_url, "basic.auth.user.info": "alice:alice-secret"})
    assert client.register_schema("secured", Schema('"string"', "AVRO")) == 1

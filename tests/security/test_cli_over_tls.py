"""Operator commands with ``--command-config`` over TLS listeners: SASL_SSL (PLAIN over TLS, the broker's certificate
checked against a PEM truststore) and SSL with ``ssl.client.auth=required`` (the tool's own certificate from a PEM
keystore), on odradek's own client (``topics``) and on confluent-kafka's (``groups``, the file translated to
librdkafka's ``ssl.ca.location``/``ssl.certificate.location``/``ssl.key.location``).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from tls_certs import TestPki, make_authority

from brokers import BrokerProcess
from odradek.cli import main

pytestmark = pytest.mark.timeout(180)
PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
              'password="admin-secret" user_admin="admin-secret";')


@pytest.fixture(scope="module")
def broker(pki: TestPki, tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    overrides = {
        "listeners": "SASL_SSL://127.0.0.1:0,SSL://127.0.0.1:0",
        "inter.broker.listener.name": "SASL_SSL",
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_ssl.plain.sasl.jaas.config": PLAIN_JAAS,
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(pki.broker.keystore),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(pki.ca.cert),
        "listener.name.ssl.ssl.client.auth": "required",
    }
    b = BrokerProcess(tmp_path_factory.mktemp("cli-tls") / "broker",
                      [arg for k, v in overrides.items() for arg in ("--override", f"{k}={v}")])
    b.start()
    yield b
    b.stop()


def _run(*args: str) -> Result:
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def _sasl_ssl(path: Path, truststore: Path) -> str:
    path.write_text("security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\n"
                    "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required "
                    "username=\"admin\" password=\"admin-secret\";\n"
                    f"ssl.truststore.type=PEM\nssl.truststore.location={truststore}\n")
    return str(path)


def test_topics_and_groups_over_sasl_ssl(broker: BrokerProcess, pki: TestPki, tmp_path: Path) -> None:
    bootstrap, config = broker.listeners["SASL_SSL"], _sasl_ssl(tmp_path / "admin.properties", pki.ca.cert)
    topic = f"tls-{uuid.uuid4().hex[:8]}"
    created = _run("topics", "--bootstrap-server", bootstrap, "--command-config", config, "--create", "--topic", topic,
                   "--partitions", "1", "--replication-factor", "1")
    assert created.exit_code == 0, created.output
    listed = _run("topics", "--bootstrap-server", bootstrap, "--command-config", config, "--list")
    assert listed.exit_code == 0, listed.output
    assert topic in listed.stdout.split()
    groups = _run("groups", "--bootstrap-server", bootstrap, "--command-config", config, "--list")
    assert groups.exit_code == 0, groups.output


def test_mutual_tls_with_a_pem_keystore(broker: BrokerProcess, pki: TestPki, tmp_path: Path) -> None:
    bootstrap = broker.listeners["SSL"]
    config = tmp_path / "mtls.properties"
    config.write_text(f"security.protocol=SSL\nssl.truststore.type=PEM\nssl.truststore.location={pki.ca.cert}\n"
                      f"ssl.keystore.type=PEM\nssl.keystore.location={pki.alice.keystore}\n")
    listed = _run("topics", "--bootstrap-server", bootstrap, "--command-config", str(config), "--list")
    assert listed.exit_code == 0, listed.output
    groups = _run("groups", "--bootstrap-server", bootstrap, "--command-config", str(config), "--list")
    assert groups.exit_code == 0, groups.output
    without_key = tmp_path / "no-key.properties"
    without_key.write_text(f"security.protocol=SSL\nssl.truststore.type=PEM\nssl.truststore.location={pki.ca.cert}\n")
    refused = _run("topics", "--bootstrap-server", bootstrap, "--command-config", str(without_key), "--list")
    assert refused.exit_code == 1
    assert refused.stderr.startswith("Error: ") and "Traceback" not in refused.stderr


def test_untrusted_broker_certificate_is_one_line(broker: BrokerProcess, tmp_path: Path) -> None:
    other = make_authority(tmp_path / "other-ca", "/CN=someone-else")
    config = _sasl_ssl(tmp_path / "other.properties", other.cert)
    topics = _run("topics", "--bootstrap-server", broker.listeners["SASL_SSL"], "--command-config", config, "--list")
    assert topics.exit_code == 1
    assert topics.stderr.startswith("Error: TLS handshake failed: ") and "CERTIFICATE_VERIFY_FAILED" in topics.stderr
    groups = _run("groups", "--bootstrap-server", broker.listeners["SASL_SSL"], "--command-config", config, "--list")
    assert groups.exit_code == 1
    assert "Traceback" not in groups.stderr and "certificate verify failed" in groups.stderr.lower()


def test_jks_truststore_is_refused_up_front(tmp_path: Path) -> None:
    (tmp_path / "ts.jks").write_bytes(b"\xfe\xed\xfe\xed")
    config = tmp_path / "jks.properties"
    config.write_text(f"security.protocol=SSL\nssl.truststore.location={tmp_path / 'ts.jks'}\n")
    result = _run("topics", "--bootstrap-server", "127.0.0.1:1", "--command-config", str(config), "--list")
    assert result.exit_code == 2
    assert "ssl.truststore.type=JKS is not supported" in result.stderr

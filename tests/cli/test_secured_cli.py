"""Operator commands against a broker whose only listener is SASL_PLAINTEXT, with ``--command-config`` files as
Kafka's tools read them (``security.protocol``, ``sasl.mechanism``, ``sasl.jaas.config``).

The admin user logs in with PLAIN; alice gets SCRAM credentials through ``odradek configs`` (itself over SASL) and
then drives the same commands with SCRAM-SHA-256 and -512. A wrong password ends a command with one clear line and
exit code 1, on odradek's own client (topics) and on confluent-kafka's (groups).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from click.testing import Result
from confluent_kafka import Consumer

from brokers import SASL_PLAINTEXT_ARGS, BrokerProcess
from kafka_clients import opened
from odradek.security.client_config import ClientConfigError, librdkafka_properties, read_properties

pytestmark = pytest.mark.timeout(180)


def _properties(path: Path, mechanism: str, user: str, password: str) -> Path:
    module = "plain.PlainLoginModule" if mechanism == "PLAIN" else "scram.ScramLoginModule"
    path.write_text("# written as for kafka-topics.sh --command-config\n"
                    "security.protocol=SASL_PLAINTEXT\n"
                    f"sasl.mechanism={mechanism}\n"
                    f"sasl.jaas.config=org.apache.kafka.common.security.{module} required \\\n"
                    f"    username=\"{user}\" password=\"{password}\";\n")
    return path


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    b = BrokerProcess(tmp_path_factory.mktemp("secured-cli") / "broker", SASL_PLAINTEXT_ARGS)
    b.start()
    yield b
    b.stop()


@pytest.fixture(scope="module")
def configs(broker: BrokerProcess, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Properties files by mechanism (alice's SCRAM credentials made with ``odradek configs`` over PLAIN)."""
    from click.testing import CliRunner

    from odradek.cli import main

    folder = tmp_path_factory.mktemp("properties")
    admin = _properties(folder / "admin.properties", "PLAIN", "admin", "admin-secret")
    made = CliRunner().invoke(main, [
        "configs", "--bootstrap-server", broker.listeners["SASL_PLAINTEXT"], "--command-config", str(admin),
        "--alter", "--entity-type", "users", "--entity-name", "alice", "--add-config",
        "SCRAM-SHA-256=[password=alice-secret],SCRAM-SHA-512=[password=alice-secret]"])
    assert made.exit_code == 0, made.output
    return {"PLAIN": admin,
            **{m: _properties(folder / f"{m}.properties", m, "alice", "alice-secret")
               for m in ("SCRAM-SHA-256", "SCRAM-SHA-512")},
            "wrong": _properties(folder / "wrong.properties", "SCRAM-SHA-256", "alice", "not-her-password")}


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_topics_over_sasl(broker: BrokerProcess, configs: dict[str, Path], cli: Callable[..., Result],
                          mechanism: str) -> None:
    bootstrap, config = broker.listeners["SASL_PLAINTEXT"], str(configs[mechanism])
    topic = f"sec-{uuid.uuid4().hex[:8]}"
    created = cli("topics", "--bootstrap-server", bootstrap, "--command-config", config, "--create", "--topic", topic,
                  "--partitions", "2", "--replication-factor", "1")
    assert created.exit_code == 0, created.output
    assert created.stdout.strip() == f"Created topic {topic}."
    listed = cli("topics", "--bootstrap-server", bootstrap, "--command-config", config, "--list")
    assert listed.exit_code == 0, listed.output
    assert topic in listed.stdout.split()
    described = cli("topics", "--bootstrap-server", bootstrap, "--command-config", config, "--describe",
                    "--topic", topic)
    assert described.exit_code == 0, described.output
    assert f"Topic: {topic}" in described.stdout and "PartitionCount: 2" in described.stdout


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-512"])
def test_groups_and_perf_over_sasl(broker: BrokerProcess, configs: dict[str, Path], cli: Callable[..., Result],
                                   mechanism: str) -> None:
    bootstrap, config = broker.listeners["SASL_PLAINTEXT"], str(configs[mechanism])
    topic, group = f"perf-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    produced = cli("perf", "produce", "--topic", topic, "--num-records", "50", "--record-size", "64",
                   "--throughput", "-1", "--command-config", config, "--producer-props",
                   f"bootstrap.servers={bootstrap}", "acks=all")
    assert produced.exit_code == 0, produced.output
    assert produced.stdout.splitlines()[-1].startswith("50 records sent")
    consumer = opened(Consumer({**librdkafka_properties(read_properties(configs[mechanism])),
                                "bootstrap.servers": bootstrap,
                                "group.id": group, "auto.offset.reset": "earliest"}))
    consumer.subscribe([topic])
    got, deadline = 0, time.monotonic() + 60
    while got < 50 and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            got += 1
    assert got == 50
    try:
        listed = cli("groups", "--bootstrap-server", bootstrap, "--command-config", config, "--list")
        assert listed.exit_code == 0, listed.output
        assert group in listed.stdout.split()
        described = cli("groups", "--bootstrap-server", bootstrap, "--command-config", config, "--describe",
                        "--group", group)
        assert described.exit_code == 0, described.output
        assert topic in described.stdout and group in described.stdout
    finally:
        consumer.close()


def test_wrong_password_is_one_clear_line(broker: BrokerProcess, configs: dict[str, Path],
                                          cli: Callable[..., Result]) -> None:
    bootstrap, config = broker.listeners["SASL_PLAINTEXT"], str(configs["wrong"])
    topics = cli("topics", "--bootstrap-server", bootstrap, "--command-config", config, "--list")
    assert topics.exit_code == 1
    assert topics.stdout == ""
    assert topics.stderr.startswith("Error: SASL authentication as alice refused: Authentication failed during "
                                    "authentication due to invalid credentials with SASL mechanism SCRAM-SHA-256")
    assert "Traceback" not in topics.stderr
    groups = cli("groups", "--bootstrap-server", bootstrap, "--command-config", config, "--list")
    assert groups.exit_code == 1
    assert "Authentication failed" in groups.stderr and "Traceback" not in groups.stderr
    perf = cli("perf", "produce", "--bootstrap-server", bootstrap, "--topic", "never", "--num-records", "5",
               "--record-size", "10", "--throughput", "-1", "--command-config", config)
    assert perf.exit_code == 1
    assert "Authentication failed" in perf.stderr and "Traceback" not in perf.stderr


def test_bad_properties_file_is_a_usage_error(broker: BrokerProcess, tmp_path: Path,
                                              cli: Callable[..., Result]) -> None:
    bad = tmp_path / "bad.properties"
    bad.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=GSSAPI\n")
    result = cli("topics", "--bootstrap-server", broker.listeners["SASL_PLAINTEXT"], "--command-config", str(bad),
                 "--list")
    assert result.exit_code == 2
    assert "sasl.mechanism=GSSAPI is not supported" in result.stderr
    java_only = tmp_path / "java.properties"
    java_only.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.username=admin\n"
                         "sasl.password=admin-secret\nsasl.login.refresh.buffer.seconds=300\n")
    refused = cli("groups", "--bootstrap-server", broker.listeners["SASL_PLAINTEXT"], "--command-config",
                  str(java_only), "--list")
    assert refused.exit_code == 1
    assert "sasl.login.refresh.buffer.seconds" in refused.stderr and "Traceback" not in refused.stderr


def test_librdkafka_translation() -> None:
    props = {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-256",
             "sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule required '
                                 'username="alice" password="a b";',
             "ssl.truststore.type": "PEM", "ssl.truststore.location": "/ca.pem",
             "ssl.endpoint.identification.algorithm": "", "client.id": "ops"}
    assert librdkafka_properties(props) == {
        "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": "alice",
        "sasl.password": "a b", "ssl.ca.location": "/ca.pem", "ssl.endpoint.identification.algorithm": "none",
        "client.id": "ops"}
    with pytest.raises(ClientConfigError, match="needs a username and password"):
        librdkafka_properties({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN"})


def test_secured_listener_without_command_config_says_so(broker: BrokerProcess, cli: Callable[..., Result]) -> None:
    result = cli("topics", "--bootstrap-server", broker.listeners["SASL_PLAINTEXT"], "--list")
    assert result.exit_code == 1
    assert result.stderr.startswith("Error: Connection to the broker failed: ")
    assert "needs --command-config" in result.stderr

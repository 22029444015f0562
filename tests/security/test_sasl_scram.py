"""SCRAM-SHA-256/512 with real clients, users made with ``odradek configs --entity-type users`` (kafka-configs.sh).

One broker with a PLAINTEXT listener (where the operator creates users) and a SASL_PLAINTEXT listener enabling PLAIN
and both SCRAM mechanisms. confluent-kafka, kafka-python and aiokafka authenticate and produce, consume and join a
group; a wrong password, an unknown user and a deleted credential get Kafka's generic refusal; a forged nonce and
a truncated message close the connection with one log line.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, Producer
from security_helpers import PLAIN_JAAS, assert_refused, sasl_connection

from brokers import BrokerProcess, wait_for
from kafka_clients import opened
from odradek.errors import ErrorCode
from odradek.security.scram import ScramClient

pytestmark = pytest.mark.timeout(180)
GENERIC = "Authentication failed during authentication due to invalid credentials with SASL mechanism {}"


def odradek_configs(broker: BrokerProcess, *args: str) -> str:
    done = subprocess.run([sys.executable, "-m", "odradek", "configs", "--bootstrap-server",
                           broker.listeners["PLAINTEXT"], *args], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    b = BrokerProcess(tmp_path_factory.mktemp("sasl-scram") / "broker", [
        "--override", "listeners=PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "--override", "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "--override", f"listener.name.sasl_plaintext.plain.sasl.jaas.config={PLAIN_JAAS}",
        "--override", "group.initial.rebalance.delay.ms=0",
        "--override", "connection.failed.authentication.delay.ms=10",
    ])
    b.start()
    out = odradek_configs(b, "--alter", "--entity-type", "users", "--entity-name", "alice", "--add-config",
                          "SCRAM-SHA-256=[iterations=8192,password=alice-secret],SCRAM-SHA-512=[password=alice-secret]")
    assert out.strip() == "Completed updating config for user alice."
    odradek_configs(b, "--alter", "--entity-type", "users", "--entity-name", "carol", "--add-config",
                    "SCRAM-SHA-256=[password=carol-secret]")
    yield b
    b.stop()


def _conf(broker: BrokerProcess, mechanism: str, user: str = "alice", password: str = "alice-secret") -> dict:
    return {"bootstrap.servers": broker.listeners["SASL_PLAINTEXT"], "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": password}


def test_describe_shows_mechanisms_and_iterations(broker: BrokerProcess) -> None:
    out = odradek_configs(broker, "--describe", "--entity-type", "users", "--entity-name", "alice")
    assert out.strip() == ("SCRAM credential configs for user-principal 'alice' are "
                           "SCRAM-SHA-256=iterations=8192, SCRAM-SHA-512=iterations=4096")
    everyone = odradek_configs(broker, "--describe", "--entity-type", "users").strip().splitlines()
    assert [line.split("'")[1] for line in everyone] == ["alice", "carol"]


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_confluent_kafka_over_scram(broker: BrokerProcess, mechanism: str) -> None:
    topic, group = f"scram-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    conf = _conf(broker, mechanism)
    producer = opened(Producer(conf))
    for i in range(4):
        producer.produce(topic, f"s{i}".encode())
    assert producer.flush(30) == 0
    consumer = opened(Consumer({**conf, "group.id": group, "auto.offset.reset": "earliest"}))
    consumer.subscribe([topic])
    got: list[bytes] = []
    deadline = time.monotonic() + 60
    while len(got) < 4 and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            got.append(msg.value())
    consumer.commit(asynchronous=False)
    consumer.close()
    assert got == [f"s{i}".encode() for i in range(4)]


def test_kafka_python_over_scram_sha_512(broker: BrokerProcess) -> None:
    from kafka import KafkaConsumer, KafkaProducer

    topic, group = f"kps-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    conf = {"bootstrap_servers": broker.listeners["SASL_PLAINTEXT"], "security_protocol": "SASL_PLAINTEXT",
            "sasl_mechanism": "SCRAM-SHA-512", "sasl_plain_username": "alice", "sasl_plain_password": "alice-secret"}
    producer = KafkaProducer(**conf)
    producer.send(topic, b"one").get(timeout=30)
    producer.close()
    consumer = KafkaConsumer(topic, group_id=group, auto_offset_reset="earliest", consumer_timeout_ms=20000, **conf)
    got = next(iter(consumer)).value
    consumer.commit()
    consumer.close()
    assert got == b"one"


@pytest.mark.parametrize(("mechanism", "user", "password"), [
    ("PLAIN", "alice", "alice-secret"), ("SCRAM-SHA-256", "carol", "carol-secret")])
async def test_aiokafka_over_plain_and_scram(broker: BrokerProcess, mechanism: str, user: str, password: str) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    topic, group = f"aio-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    conf = {"bootstrap_servers": broker.listeners["SASL_PLAINTEXT"], "security_protocol": "SASL_PLAINTEXT",
            "sasl_mechanism": mechanism, "sasl_plain_username": user, "sasl_plain_password": password}

    async def produce_and_consume() -> list[bytes]:
        producer = AIOKafkaProducer(**conf)
        await producer.start()
        try:
            for i in range(3):
                await producer.send_and_wait(topic, f"a{i}".encode())
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(topic, group_id=group, auto_offset_reset="earliest", **conf)
        await consumer.start()
        try:
            got = []
            async with asyncio.timeout(60):
                while len(got) < 3:
                    got.append((await consumer.getone()).value)
            await consumer.commit()
            return got
        finally:
            await consumer.stop()

    assert await produce_and_consume() == [b"a0", b"a1", b"a2"]


@pytest.mark.parametrize(("mechanism", "user", "password"), [
    ("SCRAM-SHA-256", "alice", "wrong"), ("SCRAM-SHA-512", "mallory", "x"), ("SCRAM-SHA-512", "carol", "carol-secret")])
def test_refusals_are_authentication_errors(broker: BrokerProcess, mechanism: str, user: str, password: str) -> None:
    assert_refused(_conf(broker, mechanism, user, password))


def test_the_refusal_is_kafkas_generic_message_and_closes(broker: BrokerProcess) -> None:
    for user, password in (("alice", "wrong"), ("nobody", "alice-secret")):
        conn = sasl_connection(broker.listeners["SASL_PLAINTEXT"])
        assert conn.handshake("SCRAM-SHA-256").error_code == ErrorCode.none
        client = ScramClient("SCRAM-SHA-256", user, password)
        first = conn.authenticate(client.first_message())
        if first.error_code == ErrorCode.none:  # a known user: the proof is what fails
            first = conn.authenticate(client.final_message(bytes(first.auth_bytes)))
        assert first.error_code == ErrorCode.sasl_authentication_failed
        assert first.error_message == GENERIC.format("SCRAM-SHA-256")
        assert conn.ends_after_refusal()


def test_forged_nonce_and_truncated_messages_close_the_connection(broker: BrokerProcess) -> None:
    conn = sasl_connection(broker.listeners["SASL_PLAINTEXT"])
    conn.handshake("SCRAM-SHA-512")
    client = ScramClient("SCRAM-SHA-512", "alice", "alice-secret")
    server_first = bytes(conn.authenticate(client.first_message()).auth_bytes)
    final = client.final_message(server_first)
    forged = final.replace(server_first.split(b",")[0][2:], client.client_nonce.encode() + b"forgedforgedforged")
    answer = conn.authenticate(forged)
    assert answer.error_code == ErrorCode.sasl_authentication_failed and conn.ends_after_refusal()
    wait_for(lambda: "Invalid client nonce in the final client message." in broker.log_text(), what="the log line")
    for truncated in (b"n,,n=alice", b"n,,n=alice,r="):
        conn = sasl_connection(broker.listeners["SASL_PLAINTEXT"])
        conn.handshake("SCRAM-SHA-256")
        assert conn.authenticate(truncated).error_code == ErrorCode.sasl_authentication_failed
        assert conn.ends_after_refusal()
    conn = sasl_connection(broker.listeners["SASL_PLAINTEXT"])
    conn.handshake("SCRAM-SHA-256")
    client = ScramClient("SCRAM-SHA-256", "alice", "alice-secret")
    server_first = bytes(conn.authenticate(client.first_message()).auth_bytes)
    assert conn.authenticate(client.final_message(server_first)[:20]).error_code == \
        ErrorCode.sasl_authentication_failed
    assert conn.ends_after_refusal()
    # and the broker still serves a good client
    test_confluent_kafka_over_scram(broker, "SCRAM-SHA-256")


def test_a_deleted_credential_is_refused_at_the_next_authentication(broker: BrokerProcess) -> None:
    odradek_configs(broker, "--alter", "--entity-type", "users", "--entity-name", "dave", "--add-config",
                    "SCRAM-SHA-512=[password=dave-secret]")
    conn = sasl_connection(broker.listeners["SASL_PLAINTEXT"])
    conn.handshake("SCRAM-SHA-512")
    client = ScramClient("SCRAM-SHA-512", "dave", "dave-secret")
    server_first = bytes(conn.authenticate(client.first_message()).auth_bytes)
    done = conn.authenticate(client.final_message(server_first))
    assert done.error_code == ErrorCode.none
    client.verify_final(bytes(done.auth_bytes))  # the server proved it knows dave's server key
    odradek_configs(broker, "--alter", "--entity-type", "users", "--entity-name", "dave", "--delete-config",
                    "SCRAM-SHA-512")
    assert_refused(_conf(broker, "SCRAM-SHA-512", "dave", "dave-secret"))

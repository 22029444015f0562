"""Listeners and SASL/PLAIN with real clients: one broker with a PLAINTEXT and a SASL_PLAINTEXT listener (ports 0).

confluent-kafka and kafka-python authenticate with PLAIN and produce, consume and join a group; a wrong password, an
unknown user and a mechanism that is not enabled are refused with an authentication error; Metadata answers with the
endpoints of the listener the client came through; a request before authentication closes the connection with one
log line and the broker keeps serving.
"""

from __future__ import annotations

import logging
import struct
import time
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, Producer
from security_helpers import PLAIN_JAAS, assert_refused, plain_token, sasl_connection

from brokers import BrokerProcess, peer_closed, wait_for
from kafka_clients import opened
from odradek.client import KafkaConnection
from odradek.errors import ErrorCode
from odradek.protocol.entities import entity_schemas

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    b = BrokerProcess(tmp_path_factory.mktemp("sasl-plain") / "broker", [
        "--override", "listeners=PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "--override", "sasl.enabled.mechanisms=PLAIN",
        "--override", f"listener.name.sasl_plaintext.plain.sasl.jaas.config={PLAIN_JAAS}",
        "--override", "group.initial.rebalance.delay.ms=0",
        "--override", "connection.failed.authentication.delay.ms=20",
    ])
    b.start()
    yield b
    b.stop()


def _sasl_conf(broker: BrokerProcess, user: str, password: str, mechanism: str = "PLAIN") -> dict[str, object]:
    return {"bootstrap.servers": broker.listeners["SASL_PLAINTEXT"], "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": password}


def test_ready_file_lists_every_listener(broker: BrokerProcess) -> None:
    assert list(broker.listeners) == ["PLAINTEXT", "SASL_PLAINTEXT"]
    assert broker.bootstrap == broker.listeners["PLAINTEXT"]  # the ready line names the first listener
    assert broker.listeners["PLAINTEXT"] != broker.listeners["SASL_PLAINTEXT"]


def test_confluent_kafka_produces_consumes_and_joins_a_group_over_sasl_plain(broker: BrokerProcess) -> None:
    topic, group = f"plain-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    conf = _sasl_conf(broker, "alice", "alice-secret")
    producer = opened(Producer(conf))
    for i in range(5):
        producer.produce(topic, f"m{i}".encode())
    assert producer.flush(30) == 0
    consumer = opened(Consumer({**conf, "group.id": group, "auto.offset.reset": "earliest"}))
    consumer.subscribe([topic])
    got: list[bytes] = []
    deadline = time.monotonic() + 60
    while len(got) < 5 and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            got.append(msg.value())
    consumer.commit(asynchronous=False)
    consumer.close()
    assert got == [f"m{i}".encode() for i in range(5)]


def test_kafka_python_produces_consumes_and_joins_a_group_over_sasl_plain(broker: BrokerProcess) -> None:
    from kafka import KafkaConsumer, KafkaProducer

    topic, group = f"kp-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    conf = {"bootstrap_servers": broker.listeners["SASL_PLAINTEXT"], "security_protocol": "SASL_PLAINTEXT",
            "sasl_mechanism": "PLAIN", "sasl_plain_username": "admin", "sasl_plain_password": "admin-secret"}
    producer = KafkaProducer(**conf)
    for i in range(3):
        producer.send(topic, f"k{i}".encode()).get(timeout=30)
    producer.close()
    consumer = KafkaConsumer(topic, group_id=group, auto_offset_reset="earliest", consumer_timeout_ms=20000, **conf)
    got = []
    for msg in consumer:
        got.append(msg.value)
        if len(got) == 3:
            break
    consumer.commit()
    consumer.close()
    assert got == [b"k0", b"k1", b"k2"]


@pytest.mark.parametrize(("user", "password", "mechanism"), [
    ("alice", "wrong", "PLAIN"),
    ("mallory", "alice-secret", "PLAIN"),
    ("alice", "alice-secret", "SCRAM-SHA-256"),
])
def test_confluent_kafka_is_refused_with_an_authentication_error(broker: BrokerProcess, user: str, password: str,
                                                                 mechanism: str) -> None:
    assert_refused(_sasl_conf(broker, user, password, mechanism))


def test_kafka_python_wrong_password_is_an_authentication_error(broker: BrokerProcess,
                                                               caplog: pytest.LogCaptureFixture) -> None:
    from kafka import KafkaAdminClient
    from kafka.errors import KafkaError as KpError

    # kafka-python 3.0 drops data read together with the end of the stream: the broker lingers after the refusal
    # until the client closes, so the refusal is read on the first attempt
    with caplog.at_level(logging.WARNING, logger="kafka"), pytest.raises(KpError):
        KafkaAdminClient(bootstrap_servers=broker.listeners["SASL_PLAINTEXT"],
                         security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN",
                         sasl_plain_username="alice", sasl_plain_password="nope", request_timeout_ms=8000,
                         bootstrap_timeout_ms=5000)
    assert "SaslAuthenticationFailedError" in caplog.text
    assert "Authentication failed: Invalid username or password" in caplog.text


def test_a_refused_client_that_keeps_its_side_open_is_closed_after_the_linger(broker: BrokerProcess) -> None:
    conn = sasl_connection(broker.listeners["SASL_PLAINTEXT"])
    conn.sock.settimeout(30)
    assert conn.handshake("PLAIN").error_code == ErrorCode.none
    assert conn.authenticate(plain_token("alice", "bad")).error_code == ErrorCode.sasl_authentication_failed
    assert conn.closed_by_peer()  # the client never closes: the broker does once its linger ran out


def test_the_server_answers_kafkas_plain_messages(broker: BrokerProcess) -> None:
    conn = sasl_connection(broker.listeners["SASL_PLAINTEXT"])
    assert conn.handshake("PLAIN").error_code == ErrorCode.none
    answer = conn.authenticate(plain_token("alice", "bad"))
    assert answer.error_code == ErrorCode.sasl_authentication_failed
    assert answer.error_message == "Authentication failed: Invalid username or password"
    assert conn.ends_after_refusal()
    conn = sasl_connection(broker.listeners["SASL_PLAINTEXT"])
    reply = conn.handshake("SCRAM-SHA-512")
    assert reply.error_code == ErrorCode.unsupported_sasl_mechanism and tuple(reply.mechanisms) == ("PLAIN",)
    assert conn.ends_after_refusal()
    conn = sasl_connection(broker.listeners["SASL_PLAINTEXT"])
    conn.handshake("PLAIN")
    answer = conn.authenticate(b"only-one-token")
    assert answer.error_message == "Invalid SASL/PLAIN response: expected 3 tokens, got 1"


def test_authenticated_connection_serves_and_sees_its_listener_in_metadata(broker: BrokerProcess) -> None:
    conn = sasl_connection(broker.listeners["SASL_PLAINTEXT"])
    conn.handshake("PLAIN")
    answer = conn.authenticate(plain_token("alice", "alice-secret"))
    assert answer.error_code == ErrorCode.none and answer.session_lifetime.total_seconds() == 0
    sasl_brokers = conn.metadata_brokers()
    with KafkaConnection(broker.listeners["PLAINTEXT"]) as plain:
        request = entity_schemas(3, 12).request(topics=(), allow_auto_topic_creation=False,
                                                include_topic_authorized_operations=False)
        plain_brokers = [(int(b.node_id), b.host, b.port) for b in plain.request(3, request).brokers]
    assert [f"{h}:{p}" for _n, h, p in sasl_brokers] == [broker.listeners["SASL_PLAINTEXT"]]
    assert [f"{h}:{p}" for _n, h, p in plain_brokers] == [broker.listeners["PLAINTEXT"]]


def test_requests_before_authentication_close_the_connection(broker: BrokerProcess) -> None:
    conn = sasl_connection(broker.listeners["SASL_PLAINTEXT"])
    conn.send_raw_metadata()
    assert conn.closed_by_peer()
    wait_for(lambda: "Unexpected Kafka request of type METADATA during SASL handshake." in broker.log_text(),
             what="the refusal's log line")
    conn = sasl_connection(broker.listeners["SASL_PLAINTEXT"])
    conn.handshake("PLAIN")
    conn.send_raw_metadata()  # after the handshake, before SaslAuthenticate
    assert conn.closed_by_peer()
    wait_for(lambda: "during SASL authentication." in broker.log_text(), what="the refusal's log line")
    conn = sasl_connection(broker.listeners["SASL_PLAINTEXT"])
    conn.handshake("PLAIN")
    versions = conn.request(18, 3, entity_schemas(18, 3).request(client_software_name="x", client_software_version="1"))
    assert versions.error_code == ErrorCode.illegal_sasl_state  # Kafka's answer to a stray request mid-exchange
    assert conn.ends_after_refusal()
    # garbage where the first request should be
    sock = sasl_connection(broker.listeners["SASL_PLAINTEXT"]).sock
    sock.sendall(struct.pack(">i", 12) + b"\xde\xad\xbe\xef" * 3)
    assert peer_closed(sock)
    test_authenticated_connection_serves_and_sees_its_listener_in_metadata(broker)


def test_plaintext_listener_answers_sasl_requests_with_illegal_sasl_state(broker: BrokerProcess) -> None:
    with KafkaConnection(broker.listeners["PLAINTEXT"]) as plain:
        response = plain.request(17, entity_schemas(17, 1).request(mechanism="PLAIN"))
        assert response.error_code == ErrorCode.illegal_sasl_state

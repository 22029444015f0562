"""KIP-368 re-authentication: ``connections.max.reauth.ms`` gives SASL sessions a lifetime.

confluent-kafka re-authenticates on its open connection when the broker tells it the session lifetime, and keeps
producing; a connection that lets its session expire is closed at its next request, with one log line; a
re-authentication must keep the mechanism and the principal.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import Producer
from security_helpers import PLAIN_JAAS, plain_token, sasl_connection

from brokers import BrokerProcess, wait_for
from kafka_clients import opened
from odradek.errors import ErrorCode

pytestmark = pytest.mark.timeout(120)
LIFETIME_MS = 1500


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    b = BrokerProcess(tmp_path_factory.mktemp("reauth") / "broker", [
        "--override", "listeners=SASL_PLAINTEXT://127.0.0.1:0,PLAINTEXT://127.0.0.1:0",
        "--override", "sasl.enabled.mechanisms=PLAIN",
        "--override", "security.inter.broker.protocol=PLAINTEXT",
        "--override", f"listener.name.sasl_plaintext.plain.sasl.jaas.config={PLAIN_JAAS}",
        "--override", f"connections.max.reauth.ms={LIFETIME_MS}",
        "--override", "connection.failed.authentication.delay.ms=0",
    ])
    b.start()
    yield b
    b.stop()


def test_confluent_kafka_reauthenticates_and_keeps_producing(broker: BrokerProcess) -> None:
    topic = f"reauth-{uuid.uuid4().hex[:8]}"
    producer = opened(Producer({"bootstrap.servers": broker.listeners["SASL_PLAINTEXT"],
                                "security.protocol": "SASL_PLAINTEXT",
                                "sasl.mechanism": "PLAIN", "sasl.username": "alice", "sasl.password": "alice-secret"}))
    producer.produce(topic, b"before")
    assert producer.flush(30) == 0
    wait_for(lambda: "re-authenticated as User:alice" in broker.log_text(), 30, what="a re-authentication")
    producer.produce(topic, b"after")
    assert producer.flush(30) == 0
    assert "SASL session of User:alice expired" not in broker.log_text()


def test_an_expired_session_is_closed_at_its_next_request(broker: BrokerProcess) -> None:
    conn = sasl_connection(broker.listeners["SASL_PLAINTEXT"])
    conn.handshake("PLAIN")
    answer = conn.authenticate(plain_token("admin", "admin-secret"), version=1)
    assert answer.error_code == ErrorCode.none
    assert answer.session_lifetime.total_seconds() * 1000 == LIFETIME_MS
    assert conn.metadata_brokers()  # served while the session lasts
    expiry = time.monotonic() + LIFETIME_MS / 1000
    wait_for(lambda: time.monotonic() > expiry + 0.1, 10, what="the session's expiry")
    conn.send_raw_metadata()
    assert conn.closed_by_peer()
    wait_for(lambda: "the SASL session of User:admin expired" in broker.log_text(), what="the log line")


def test_reauthentication_keeps_principal_and_mechanism(broker: BrokerProcess) -> None:
    conn = sasl_connection(broker.listeners["SASL_PLAINTEXT"])
    conn.handshake("PLAIN")
    assert conn.authenticate(plain_token("admin", "admin-secret")).error_code == ErrorCode.none
    assert conn.handshake("PLAIN").error_code == ErrorCode.none  # a re-authentication begins
    answer = conn.authenticate(plain_token("alice", "alice-secret"))
    assert answer.error_code == ErrorCode.sasl_authentication_failed
    assert answer.error_message == "Cannot change principals during re-authentication from User.admin: User.alice"
    assert conn.ends_after_refusal()
    conn = sasl_connection(broker.listeners["SASL_PLAINTEXT"])
    conn.handshake("PLAIN")
    conn.authenticate(plain_token("admin", "admin-secret"))
    assert conn.handshake("SCRAM-SHA-256").error_code == ErrorCode.unsupported_sasl_mechanism
    assert conn.ends_after_refusal()
    conn = sasl_connection(broker.listeners["SASL_PLAINTEXT"])  # a same-principal re-authentication keeps serving
    conn.handshake("PLAIN")
    conn.authenticate(plain_token("admin", "admin-secret"))
    conn.handshake("PLAIN")
    assert conn.authenticate(plain_token("admin", "admin-secret")).error_code == ErrorCode.none
    assert conn.metadata_brokers()


def test_a_client_that_cannot_reauthenticate_gets_illegal_sasl_state_and_keeps_its_connection(
        broker: BrokerProcess) -> None:
    conn = sasl_connection(broker.listeners["SASL_PLAINTEXT"])
    conn.handshake("PLAIN")
    assert conn.authenticate(plain_token("admin", "admin-secret"), version=0).error_code == ErrorCode.none
    assert conn.handshake("PLAIN").error_code == ErrorCode.illegal_sasl_state
    assert conn.metadata_brokers()


def test_odradek_client_reauthenticates_before_its_session_expires(broker: BrokerProcess) -> None:
    """The operator tools' client (KafkaConnection) keeps a long-lived connection (``reassign --verify --watch``)
    usable past the session lifetime by authenticating again in place."""
    from odradek.admin import list_topics
    from odradek.client import KafkaConnection
    from odradek.security.broker_client import OutgoingSecurity

    security = OutgoingSecurity("", "SASL_PLAINTEXT", "PLAIN", "alice", "alice-secret")
    with KafkaConnection(broker.listeners["SASL_PLAINTEXT"], security=security) as conn:
        assert conn.reauthenticate_at_ms is not None
        first_deadline = conn.reauthenticate_at_ms
        list_topics(conn)
        expiry = time.monotonic() + LIFETIME_MS / 1000
        wait_for(lambda: time.monotonic() > expiry + 0.1, 10, what="the first session's expiry")
        list_topics(conn)  # the broker would close an expired session here
        assert conn.reauthenticate_at_ms > first_deadline

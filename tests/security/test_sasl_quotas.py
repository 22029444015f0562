"""Client quotas follow the SASL principal: a ``user`` quota for ``alice`` throttles the producer that authenticated
as alice, while another user with the same client id goes free."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from confluent_kafka import Producer, ThrottleEvent
from security_helpers import PLAIN_JAAS

from brokers import BrokerProcess, wait_for
from kafka_clients import opened
from odradek import admin
from odradek.client import KafkaConnection
from odradek.errors import ErrorCode

pytestmark = pytest.mark.timeout(120)

QUOTA = 50_000


@pytest.fixture
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    b = BrokerProcess(tmp_path_factory.mktemp("sasl-quotas") / "broker", [
        "--override", "listeners=PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "--override", "sasl.enabled.mechanisms=PLAIN",
        "--override", f"listener.name.sasl_plaintext.plain.sasl.jaas.config={PLAIN_JAAS}",
        "--override", "quota.window.num=2",
    ])
    b.start()
    yield b
    b.stop()


def _throttled_after(broker: BrokerProcess, user: str, password: str, limit: int) -> bool:
    """Produce up to ``limit`` bytes as ``user``; whether the broker throttled it before that."""
    throttles: list[float] = []

    def throttled(event: ThrottleEvent) -> None:
        if event.throttle_time > 0:
            throttles.append(event.throttle_time)

    producer = opened(Producer({"bootstrap.servers": broker.listeners["SASL_PLAINTEXT"],
                                "security.protocol": "SASL_PLAINTEXT",
                                "sasl.mechanism": "PLAIN", "sasl.username": user, "sasl.password": password,
                                "client.id": "shared-app", "linger.ms": 5, "batch.size": 16_384,
                                "throttle_cb": throttled}))
    sent = 0
    while not throttles and sent < limit:
        producer.produce("quota-topic", b"x" * 1000)
        sent += 1000
        if sent % (QUOTA // 2) == 0:
            assert producer.flush(30) == 0
        producer.poll(0)
    assert producer.flush(30) == 0
    producer.poll(0)
    return bool(throttles)


def test_a_user_quota_applies_to_the_authenticated_principal(broker: BrokerProcess) -> None:
    with KafkaConnection(broker.listeners["PLAINTEXT"]) as conn:
        assert admin.alter_client_quotas(conn, [("user", "alice")], {"producer_byte_rate": QUOTA}) == (
            ErrorCode.none, None)
    wait_for(lambda: "client quotas of users/alice are now" in broker.log_text(), 30, what="quota applied")

    assert _throttled_after(broker, "alice", "alice-secret", QUOTA * 20)
    assert not _throttled_after(broker, "admin", "admin-secret", QUOTA * 6)  # no quota for admin (nor a default)

"""GetTelemetrySubscriptions (issue 12): hidden from ApiVersions, as a Kafka broker without a client-telemetry
receiver hides it, and answered with an empty subscription (such a Kafka closes the connection instead: a listed
difference); librdkafka (which asks only when the key is advertised) works on."""

from __future__ import annotations

import uuid

from confluent_kafka import Producer
from kio.index import load_request_schema

from brokers import BrokerProcess
from kafka_clients import opened
from odradek.client import KafkaConnection
from odradek.errors import ErrorCode


def test_telemetry_subscription_is_empty_and_unadvertised(broker: BrokerProcess) -> None:
    with KafkaConnection(broker.bootstrap) as conn:
        versions_cls = load_request_schema(18, 3)
        keys = {k.api_key for k in conn.request(18, versions_cls(client_software_name="t",
                                                                 client_software_version="1"), 3).api_keys}
        assert 71 not in keys and 72 not in keys
        assert 75 in keys and 21 in keys
        cls = load_request_schema(71, 0)
        answer = conn.request(71, cls(client_instance_id=uuid.UUID(int=0)), 0)
    assert answer.error_code == ErrorCode.none
    assert answer.client_instance_id.int != 0, "a zero id gets a fresh instance id"
    assert answer.requested_metrics == ()
    assert tuple(answer.accepted_compression_types) == (4, 3, 1, 2)
    producer = opened(Producer({"bootstrap.servers": broker.bootstrap, "enable.metrics.push": True}))
    producer.produce("telemetry-free", b"x")
    assert producer.flush(30) == 0

"""Pattern subscriptions and topic auto-creation as Kafka does them, with real clients.

A consumer subscribing by regex asks for every topic's metadata (a null topic list), so it never creates a topic;
one subscribing by name creates it only when its Metadata request allows it (``allow.auto.create.topics``: on in
kafka-python; off by default in librdkafka's consumer, whose 2.16 does not send it even when set) and the broker's
``auto.create.topics.enable`` is on. A topic created later that matches the pattern is picked up: by the client for
classic groups, by the broker for KIP-848 groups (covered in test_consumer_protocol_clients).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable

from confluent_kafka import Consumer, KafkaError
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer

from brokers import BrokerProcess
from kafka_clients import opened


def _topics(admin: AdminClient) -> set[str]:
    return set(admin.list_topics(timeout=30).topics)


def _poll_errors(c: Consumer, errors: list[KafkaError]) -> None:
    """librdkafka reports a subscribed topic that does not exist as an error event from poll()."""
    msg = c.poll(0.1)
    if msg is not None and msg.error() is not None:
        errors.append(msg.error())


def _wait(predicate: Callable[[], bool], poll: Callable[[], object], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached"
        poll()


def test_subscriptions_create_topics_only_when_asked(broker_factory: Callable[..., BrokerProcess]) -> None:
    broker = broker_factory("--override", "group.initial.rebalance.delay.ms=0")
    admin = opened(AdminClient({"bootstrap.servers": broker.bootstrap}))
    prefix = f"px{uuid.uuid4().hex[:6]}"
    errors: list[KafkaError] = []
    # librdkafka's consumer: named subscription, allow.auto.create.topics=false (its default).
    named = opened(Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"g-{prefix}-n",
                             "error_cb": errors.append, "topic.metadata.refresh.interval.ms": 500}))
    # kafka-python: a pattern subscription (its allow_auto_create_topics=True does not apply to patterns).
    pattern = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=f"g-{prefix}-p",
                            auto_offset_reset="earliest", metadata_max_age_ms=500,
                            session_timeout_ms=6000, heartbeat_interval_ms=500)
    try:
        named.subscribe([f"{prefix}-named"])
        pattern.subscribe(pattern=f"^{prefix}-.*")
        _wait(lambda: any(e.code() == KafkaError.UNKNOWN_TOPIC_OR_PART for e in errors),
              lambda: (_poll_errors(named, errors), pattern.poll(timeout_ms=100)))
        for _ in range(5):
            pattern.poll(timeout_ms=100)
        assert not {t for t in _topics(admin) if t.startswith(prefix)}

        # A topic created later that matches the pattern is picked up by the pattern consumer.
        admin.create_topics([NewTopic(f"{prefix}-later", 2, 1)])[f"{prefix}-later"].result(30)
        _wait(lambda: {tp.topic for tp in pattern.assignment()} == {f"{prefix}-later"},
              lambda: pattern.poll(timeout_ms=100))
    finally:
        named.close()
        pattern.close()

    # A named subscription whose client allows it (kafka-python's default) creates the topic.
    creating = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=f"g-{prefix}-c",
                             session_timeout_ms=6000, heartbeat_interval_ms=500)
    try:
        creating.subscribe([f"{prefix}-created"])
        _wait(lambda: f"{prefix}-created" in _topics(admin), lambda: creating.poll(timeout_ms=100))
    finally:
        creating.close()


def test_broker_setting_turns_auto_creation_off(broker_factory: Callable[..., BrokerProcess]) -> None:
    broker = broker_factory("--override", "auto.create.topics.enable=false")
    admin = opened(AdminClient({"bootstrap.servers": broker.bootstrap}))
    name = f"off-{uuid.uuid4().hex[:6]}"
    c = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=f"g-{name}", allow_auto_create_topics=True,
                      session_timeout_ms=6000, heartbeat_interval_ms=500)
    try:
        c.subscribe([name])
        # kafka-python keeps asking for the topic (allowing creation) while the broker refuses to create it.
        for _ in range(20):
            c.poll(timeout_ms=100)
        assert name not in _topics(admin)
        assert name not in c.topics()
    finally:
        c.close()

"""KIP-848's online migration with real clients: a classic consumer group (librdkafka, classic protocol) is
upgraded in place when a ``group.protocol=consumer`` member joins, both consume disjoint partitions covering the
topic, and when the new member leaves the group is classic again with the classic member owning everything.
Nothing produced is lost across the two rebalances (at-least-once: duplicates allowed), and a broker restart in
the middle of the upgraded phase resumes the group from ``__consumer_offsets``.
"""

from __future__ import annotations

import importlib
import logging
import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import Consumer, ConsumerGroupType, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from brokers import BrokerProcess
from kafka_clients import opened
from odradek.client import KafkaConnection

PARTITIONS = 4
RECORDS = 200


def _consumer(broker: BrokerProcess, group: str, protocol: str, **extra: Any) -> Consumer:
    conf: dict[str, Any] = {
        "bootstrap.servers": broker.bootstrap,
        "group.id": group,
        "group.protocol": protocol,
        "enable.auto.commit": True,
        "auto.commit.interval.ms": 200,
        "auto.offset.reset": "earliest",
        **extra,
    }
    if protocol == "classic":
        conf.update({"session.timeout.ms": 6000, "heartbeat.interval.ms": 300})
    return opened(Consumer(conf))


def _owned(c: Consumer) -> set[tuple[str, int]]:
    return {(tp.topic, tp.partition) for tp in c.assignment()}


def _poll_until(consumers: list[Consumer], seen: set[bytes], predicate: Callable[[], bool], timeout: float = 60.0,
                ) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached"
        for c in consumers:
            msg = c.poll(0.05)
            if msg is not None and msg.error() is None:
                seen.add(msg.value())


def _produce(broker: BrokerProcess, topic: str, start: int, count: int) -> set[bytes]:
    producer = opened(Producer({"bootstrap.servers": broker.bootstrap}))
    values = {f"v{i}".encode() for i in range(start, start + count)}
    for i, value in enumerate(sorted(values)):
        producer.produce(topic, value, partition=i % PARTITIONS)
    assert producer.flush(30) == 0
    return values


class _Collect(logging.Handler):
    def __init__(self, out: list[str]) -> None:
        super().__init__()
        self.out = out

    def emit(self, record: logging.LogRecord) -> None:
        self.out.append(record.getMessage())


def _member_types(broker: BrokerProcess, group: str) -> list[int]:
    """ConsumerGroupDescribe v1's member types (0 classic, 1 consumer), sorted."""
    mod = importlib.import_module("kio.schema.consumer_group_describe.v1.request")
    with KafkaConnection(broker.bootstrap) as conn:
        described = conn.request(69, mod.ConsumerGroupDescribeRequest(group_ids=(group,),
                                                                       include_authorized_operations=False), 1)
    return sorted(int(m.member_type) for m in described.groups[0].members)


def _group_type(admin: AdminClient, group: str) -> ConsumerGroupType:
    listed = admin.list_consumer_groups().result(30).valid
    return next(g.type for g in listed if g.group_id == group)


@pytest.mark.parametrize("restart", [False, True], ids=["steady", "restart"])
def test_classic_group_upgrades_and_downgrades_online(
    broker_factory: Callable[..., BrokerProcess], restart: bool
) -> None:
    broker = broker_factory(
        "--override", "group.initial.rebalance.delay.ms=0", "--override", "group.consumer.heartbeat.interval.ms=300",
        "--override", "group.min.session.timeout.ms=1000",
    )
    admin = opened(AdminClient({"bootstrap.servers": broker.bootstrap}))
    topic, group = f"t-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(30)
    everything = {(topic, p) for p in range(PARTITIONS)}
    produced = _produce(broker, topic, 0, RECORDS)
    seen: set[bytes] = set()

    classic = _consumer(broker, group, "classic")
    modern: Consumer | None = None
    try:
        classic.subscribe([topic])
        _poll_until([classic], seen, lambda: _owned(classic) == everything and len(seen) >= RECORDS // 2)
        assert _group_type(admin, group) == ConsumerGroupType.CLASSIC

        modern = _consumer(broker, group, "consumer")
        modern.subscribe([topic])
        produced |= _produce(broker, topic, RECORDS, RECORDS)

        def split() -> bool:
            a, b = _owned(classic), _owned(modern) if modern is not None else set()
            return bool(a) and bool(b) and not a & b and a | b == everything

        _poll_until([classic, modern], seen, split)
        assert _group_type(admin, group) == ConsumerGroupType.CONSUMER
        assert _member_types(broker, group) == [0, 1]

        if restart:
            broker.restart()
            produced |= _produce(broker, topic, 2 * RECORDS, RECORDS)
            # Both members come back to the same group (the coordinator reloaded it) and stay split.
            _poll_until([classic, modern], seen, lambda: produced <= seen and split(), timeout=90)
            assert _group_type(admin, group) == ConsumerGroupType.CONSUMER

        modern.close()
        modern = None
        produced |= _produce(broker, topic, 3 * RECORDS, RECORDS)
        _poll_until([classic], seen, lambda: _owned(classic) == everything and produced <= seen)
        assert _group_type(admin, group) == ConsumerGroupType.CLASSIC
    finally:
        for c in (classic, modern):
            if c is not None:
                try:
                    c.close()
                except KafkaException:
                    pass
    assert produced <= seen


def test_migration_disabled_keeps_the_classic_group(broker_factory: Callable[..., BrokerProcess]) -> None:
    broker = broker_factory(
        "--override", "group.initial.rebalance.delay.ms=0", "--override", "group.consumer.migration.policy=disabled",
        "--override", "group.min.session.timeout.ms=1000",
    )
    admin = opened(AdminClient({"bootstrap.servers": broker.bootstrap}))
    topic, group = f"t-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(30)
    seen: set[bytes] = set()
    errors: list[str] = []
    client_log = logging.getLogger(f"rdkafka-{group}")
    client_log.addHandler(_Collect(errors))
    classic = _consumer(broker, group, "classic")
    # librdkafka logs the fatal error; whether poll() raises it as well depends on where its thread is.
    modern = _consumer(broker, group, "consumer", logger=client_log)
    try:
        classic.subscribe([topic])
        _poll_until([classic], seen, lambda: _owned(classic) == {(topic, p) for p in range(PARTITIONS)})
        modern.subscribe([topic])
        deadline = time.monotonic() + 30
        while not any("group id does not exist" in e for e in errors):  # GROUP_ID_NOT_FOUND, fatal for librdkafka
            assert time.monotonic() < deadline, f"the consumer-protocol member should be refused: {errors}"
            classic.poll(0.05)
            try:
                modern.poll(0.05)
            except KafkaException as exc:
                errors.append(str(exc))
        assert _owned(classic) == {(topic, p) for p in range(PARTITIONS)}
        assert _group_type(admin, group) == ConsumerGroupType.CLASSIC
    finally:
        classic.close()
        modern.close()


def test_kafka_python_classic_member_across_the_migration(broker_factory: Callable[..., BrokerProcess]) -> None:
    """kafka-python's classic consumer (eager ``range``, its own subscription encoding) through both conversions."""
    from kafka import KafkaConsumer

    broker = broker_factory(
        "--override", "group.initial.rebalance.delay.ms=0", "--override", "group.consumer.heartbeat.interval.ms=300",
        "--override", "group.min.session.timeout.ms=1000",
    )
    admin = opened(AdminClient({"bootstrap.servers": broker.bootstrap}))
    topic, group = f"t-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(30)
    everything = {(topic, p) for p in range(PARTITIONS)}
    produced = _produce(broker, topic, 0, RECORDS)
    seen: set[bytes] = set()
    kp = KafkaConsumer(
        topic, bootstrap_servers=broker.bootstrap, group_id=group, auto_offset_reset="earliest",
        session_timeout_ms=6000, heartbeat_interval_ms=300, auto_commit_interval_ms=200,
    )

    def kp_owned() -> set[tuple[str, int]]:
        return {(tp.topic, tp.partition) for tp in kp.assignment()}

    def poll_all(consumers: list[Consumer], predicate: Callable[[], bool]) -> None:
        deadline = time.monotonic() + 60
        while not predicate():
            assert time.monotonic() < deadline, "condition not reached"
            for records in kp.poll(timeout_ms=50).values():
                seen.update(r.value for r in records)
            for c in consumers:
                msg = c.poll(0.05)
                if msg is not None and msg.error() is None:
                    seen.add(msg.value())

    modern: Consumer | None = None
    try:
        poll_all([], lambda: kp_owned() == everything)
        modern = _consumer(broker, group, "consumer")
        modern.subscribe([topic])
        produced |= _produce(broker, topic, RECORDS, RECORDS)

        def split() -> bool:
            a, b = kp_owned(), _owned(modern) if modern is not None else set()
            return bool(a) and bool(b) and not a & b and a | b == everything and produced <= seen

        poll_all([modern], split)
        assert _group_type(admin, group) == ConsumerGroupType.CONSUMER
        modern.close()
        modern = None
        produced |= _produce(broker, topic, 2 * RECORDS, RECORDS)
        poll_all([], lambda: kp_owned() == everything and produced <= seen)
        assert _group_type(admin, group) == ConsumerGroupType.CLASSIC
    finally:
        kp.close()
        if modern is not None:
            modern.close()


def test_classic_member_joins_a_consumer_group_then_takes_over(broker_factory: Callable[..., BrokerProcess]) -> None:
    """A cooperative classic member joins a group that already speaks the consumer protocol (the consumer group
    serves its JoinGroup/SyncGroup/Heartbeat, reconciling with the partitions it reports owning); when the
    consumer-protocol member leaves, the group is downgraded and the classic member owns everything."""
    broker = broker_factory(
        "--override", "group.initial.rebalance.delay.ms=0", "--override", "group.consumer.heartbeat.interval.ms=300",
        "--override", "group.min.session.timeout.ms=1000",
    )
    admin = opened(AdminClient({"bootstrap.servers": broker.bootstrap}))
    topic, group = f"t-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    admin.create_topics([NewTopic(topic, 6, 1)])[topic].result(30)
    everything = {(topic, p) for p in range(6)}
    seen: set[bytes] = set()
    modern: Consumer | None = _consumer(broker, group, "consumer")
    classic = _consumer(broker, group, "classic", **{"partition.assignment.strategy": "cooperative-sticky"})
    try:
        assert modern is not None
        modern.subscribe([topic])
        _poll_until([modern], seen, lambda: modern is not None and _owned(modern) == everything)
        classic.subscribe([topic])

        def split() -> bool:
            a, b = _owned(classic), _owned(modern) if modern is not None else set()
            return len(a) == 3 and len(b) == 3 and a | b == everything

        _poll_until([modern, classic], seen, split)
        assert _group_type(admin, group) == ConsumerGroupType.CONSUMER
        modern.close()
        modern = None
        _poll_until([classic], seen, lambda: _owned(classic) == everything)
        assert _group_type(admin, group) == ConsumerGroupType.CLASSIC
    finally:
        classic.close()
        if modern is not None:
            modern.close()

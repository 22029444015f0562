"""DeleteRecords (issue 12) through confluent-kafka's and kafka-python's admin clients on replicated partitions: the
answer's low watermark, every replica's log start offset, ListOffsets EARLIEST, the high-watermark bound."""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from harness import ThreadedCluster
from kafka import KafkaAdminClient
from kafka.errors import OffsetOutOfRangeError
from kafka.structs import TopicPartition as KpTopicPartition
from workload import create_topic_with_assignment

from brokers import wait_for
from kafka_clients import opened
from odradek.errors import KafkaError

TOPIC = "pruned"


def _produce(bootstrap: str, count: int) -> None:
    producer = opened(Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0}))
    for i in range(count):
        producer.produce(TOPIC, value=f"v{i}".encode(), partition=i % 2)
    assert producer.flush(30) == 0


def _log_starts(c: ThreadedCluster, partition: int) -> dict[int, int]:
    def read() -> dict[int, int]:
        starts = {}
        for b, broker in c.cluster.brokers.items():
            try:
                starts[b] = broker.replicas.partition(TOPIC, partition).log.log_start_offset
            except KafkaError:  # not a replica of this partition
                pass
        return starts

    return dict(c.run(read))


def _earliest(bootstrap: str, partition: int) -> int:
    consumer = opened(Consumer({"bootstrap.servers": bootstrap, "group.id": "probe"}))
    try:
        low, _high = consumer.get_watermark_offsets(TopicPartition(TOPIC, partition), timeout=10)
        return int(low)
    finally:
        consumer.close()


def _first_value(bootstrap: str, partition: int) -> tuple[int, bytes]:
    consumer = opened(Consumer({"bootstrap.servers": bootstrap, "group.id": "reader", "auto.offset.reset": "earliest",
                                "enable.auto.commit": False}))
    try:
        consumer.assign([TopicPartition(TOPIC, partition, -2)])  # OFFSET_BEGINNING
        got: list[Any] = []

        def poll() -> bool:
            m = consumer.poll(1)
            if m is not None and m.error() is None:
                got.append(m)
            return bool(got)

        wait_for(poll, 30, what="a record from the pruned partition")
        return got[0].offset(), got[0].value()
    finally:
        consumer.close()


def test_delete_records_moves_the_start_on_every_replica(cluster_factory) -> None:
    c = cluster_factory(3)
    create_topic_with_assignment(c.bootstrap, TOPIC, {0: [0, 1, 2], 1: [1, 2, 0]})  # Kafka wants one RF
    wait_for(lambda: c.full_isr(TOPIC, 1), 30, what="full ISR")
    _produce(c.bootstrap, 100)  # 50 records a partition

    admin = opened(AdminClient({"bootstrap.servers": c.bootstrap}))
    [fut] = admin.delete_records([TopicPartition(TOPIC, 0, 20)], request_timeout=30).values()
    assert fut.result(30).low_watermark == 20
    assert _log_starts(c, 0) == {0: 20, 1: 20, 2: 20}, "every ISR replica has the new start when the answer comes"
    assert _earliest(c.bootstrap, 0) == 20
    assert _first_value(c.bootstrap, 0) == (20, b"v40")

    # kafka-python: -1 deletes up to the high watermark; beyond it is OFFSET_OUT_OF_RANGE
    kp = KafkaAdminClient(bootstrap_servers=c.bootstrap)
    try:
        answer = kp.delete_records({KpTopicPartition(TOPIC, 1): -1}, timeout_ms=30000)
        assert answer[KpTopicPartition(TOPIC, 1)]["low_watermark"] == 50
        with pytest.raises(OffsetOutOfRangeError):
            kp.delete_records({KpTopicPartition(TOPIC, 1): 51}, timeout_ms=30000)
    finally:
        kp.close()
    assert _log_starts(c, 1) == {0: 50, 1: 50, 2: 50}
    assert _earliest(c.bootstrap, 1) == 50


def test_the_start_offset_survives_a_cluster_restart(cluster_factory) -> None:
    c = cluster_factory(2)
    create_topic_with_assignment(c.bootstrap, TOPIC, {0: [0, 1], 1: [1, 0]})
    wait_for(lambda: c.full_isr(TOPIC, 2), 30, what="full ISR")
    _produce(c.bootstrap, 40)
    admin = opened(AdminClient({"bootstrap.servers": c.bootstrap}))
    [fut] = admin.delete_records([TopicPartition(TOPIC, 0, 15)], request_timeout=30).values()
    assert fut.result(30).low_watermark == 15
    # both down, so no replica can relearn the start from a leader: it comes back from log-start-offset-checkpoint
    c.stop(1)
    c.stop(0, controlled=False)
    c.start_broker(0)
    c.start_broker(1)
    wait_for(lambda: c.full_isr(TOPIC, 2), 60, what="broker 0 back in the ISR")
    assert _log_starts(c, 0) == {0: 15, 1: 15}
    assert _earliest(c.bootstrap, 0) == 15

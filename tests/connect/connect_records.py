"""Reading what Connect and MirrorMaker 2 write to their topics (offsets, checkpoints), for the tests beside this."""

from __future__ import annotations

from confluent_kafka import Consumer, TopicPartition

from brokers import wait_for
from kafka_clients import opened


def records(bootstrap: str, topic: str) -> list[tuple[bytes | None, bytes | None]]:
    """(key, value) of every record of ``topic`` up to the end offsets it has now, partition by partition, each in
    offset order; no group, nothing committed."""
    consumer = opened(Consumer({"bootstrap.servers": bootstrap, "group.id": "connect-records",
                                "enable.auto.commit": False}))
    read: list[tuple[bytes | None, bytes | None]] = []
    for partition in sorted(consumer.list_topics(topic, timeout=30).topics[topic].partitions):
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=30)
        if high > low:
            consumer.assign([TopicPartition(topic, partition, low)])
            wait_for(lambda high=high: _poll_until(consumer, high, read), 60, 0, f"{topic}-{partition} to {high}")
    consumer.close()
    return read


def _poll_until(consumer: Consumer, end: int, read: list[tuple[bytes | None, bytes | None]]) -> bool:
    """One poll, its record appended to ``read``; whether the assigned partition has been read up to ``end``."""
    message = consumer.poll(1)
    if message is None or message.error():
        return False
    read.append((message.key(), message.value()))
    return bool(message.offset() + 1 >= end)

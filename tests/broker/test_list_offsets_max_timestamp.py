"""ListOffsets MAX_TIMESTAMP (-3) through confluent-kafka: the offset of the record with the largest timestamp, as
Kafka 3.8+ answers it (KAFKA-16310), even when that record sits inside a compressed, multi-record batch."""

from __future__ import annotations

import time

from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec

from brokers import BrokerProcess
from kafka_clients import opened

TOPIC = "stamped"


def test_max_timestamp_is_the_records_offset_not_its_batchs(broker: BrokerProcess) -> None:
    admin = opened(AdminClient({"bootstrap.servers": broker.bootstrap}))
    admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(30)
    producer = opened(Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 200, "compression.type": "gzip"}))
    now = int(time.time() * 1000)
    # one batch of five (linger): the largest timestamp is the third record's, offset 2
    for i, ts in enumerate([now, now + 10, now + 500, now + 20, now + 30]):
        producer.produce(TOPIC, value=b"v%d" % i, partition=0, timestamp=ts)
    assert producer.flush(30) == 0
    tp = TopicPartition(TOPIC, 0)
    [future] = admin.list_offsets({tp: OffsetSpec.max_timestamp()}, request_timeout=20).values()
    answer = future.result(30)
    assert (answer.offset, answer.timestamp) == (2, now + 500)

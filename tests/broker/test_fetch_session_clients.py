"""A real client's fetch session (kafka-python, which speaks KIP-227 as the Java consumer does) survives a partition
added to its topic and a topic it stops subscribing to: one session id throughout, the broker's session following
the assignment. (librdkafka, hence confluent-kafka, sends sessionless fetches: session id 0, epoch -1.)"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic
from kafka import KafkaConsumer

from brokers import wait_for
from cluster.harness import ThreadedCluster
from kafka_clients import opened

A, B = "grows", "dropped"


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[ThreadedCluster]:
    c = ThreadedCluster(1, tmp_path / "cluster", overrides={"zookeeper.session.timeout.ms": "2000",
                                                           "group.initial.rebalance.delay.ms": "0"}).start()
    try:
        yield c
    finally:
        c.close()


def _broker_sessions(c: ThreadedCluster) -> dict[int, set[tuple[str, int]]]:
    def read() -> dict[int, set[tuple[str, int]]]:
        cache = c.cluster.brokers[0].fetch_sessions
        return {sid: {(str(key), p) for key, parts in s.topics.items() for p in parts}
                for sid, s in cache.sessions.items()}

    return c.run(read)


def _client_session(consumer: KafkaConsumer) -> int:
    handlers = consumer._fetcher._session_handlers
    return int(handlers[0].next_metadata.session_id) if 0 in handlers else 0


def test_a_kafka_python_session_survives_a_partition_added_and_a_topic_dropped(cluster) -> None:
    admin = opened(AdminClient({"bootstrap.servers": cluster.bootstrap}))
    for f in admin.create_topics([NewTopic(A, 2, 1), NewTopic(B, 1, 1)]).values():
        f.result(30)

    def produce(topic: str, partition: int, value: bytes) -> None:
        producer = opened(Producer({"bootstrap.servers": cluster.bootstrap,
                                    "linger.ms": 0}))  # fresh metadata each time
        producer.produce(topic, value, partition=partition)
        assert producer.flush(30) == 0

    consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap, group_id="g", auto_offset_reset="earliest",
                             metadata_max_age_ms=300, fetch_max_wait_ms=100, enable_auto_commit=False)
    got: list[tuple[str, int, bytes]] = []

    def poll_until(value: bytes) -> bool:
        for records in consumer.poll(timeout_ms=200).values():
            got.extend((r.topic, r.partition, r.value) for r in records)
        return any(v == value for _t, _p, v in got)

    try:
        consumer.subscribe([A, B])
        for topic, partition in ((A, 0), (A, 1), (B, 0)):
            produce(topic, partition, f"{topic}-{partition}".encode())
        wait_for(lambda: poll_until(b"dropped-0") and len(got) >= 3, 60, what="the first records")
        wait_for(lambda: _client_session(consumer) != 0, 30, what="a fetch session")
        session = _client_session(consumer)
        assert _broker_sessions(cluster)[session] == {(A, 0), (A, 1), (B, 0)}

        admin.create_partitions([NewPartitions(A, 3)])[A].result(30)
        wait_for(lambda: cluster.leader_of(A, 2) == 0, 30, what="a leader for the new partition")
        produce(A, 2, b"added")
        wait_for(lambda: poll_until(b"added"), 60, what="a record of the added partition")
        assert _client_session(consumer) == session
        wait_for(lambda: _broker_sessions(cluster).get(session) == {(A, 0), (A, 1), (A, 2), (B, 0)}, 30,
                 what="the added partition in the broker's session")

        consumer.subscribe([A])
        wait_for(lambda: (poll_until(b"nothing"), consumer.assignment())[1] == _assigned(A, 3), 60,
                 what="the assignment without the dropped topic")
        dropped_at = len(got)
        produce(B, 0, b"unseen")
        produce(A, 0, b"after")
        wait_for(lambda: poll_until(b"after"), 60, what="a record after the topic was dropped")
        assert all(t == A for t, _p, _v in got[dropped_at:])
        assert _client_session(consumer) == session
        wait_for(lambda: _broker_sessions(cluster).get(session) == {(A, 0), (A, 1), (A, 2)}, 30,
                 what="the dropped topic forgotten by the broker's session")
    finally:
        consumer.close()


def _assigned(topic: str, n: int) -> set[Any]:
    from kafka import TopicPartition

    return {TopicPartition(topic, p) for p in range(n)}

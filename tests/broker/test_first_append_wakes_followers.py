"""The first record written to a new partition is replicated without waiting out the followers' parked fetches.

A follower's fetcher has one fetch in flight per leader, parked there for up to ``replica.fetch.wait.max.ms``. A
partition the follower starts replicating while that fetch is parked is asked for only in its next fetch, so unless
the leader answers the parked fetch on the partition's first append, an acks=all produce to a new topic waits one
full fetch wait before either follower sees the record.

Three brokers on a clock that never moves, and a fetch wait of ten minutes: the followers' fetches for an older
topic park at every leader, a new topic is created and reaches every follower's fetcher, then one record is produced
with acks=all. Its acknowledgement must arrive, and within the test's deadline, which is far shorter than the fetch
wait; no timing is measured. The older topic's records start the followers' incremental fetch sessions, so the
fetches parked when the new topic arrives are session fetches, as in a running cluster.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from brokers import wait_for
from kafka_clients import opened
from odradek.clock import ManualClock
from odradek.placement.model import TopicPartition
from odradek.testing import FAST_TEST_OVERRIDES, ThreadedCluster

FETCH_WAIT_MS = 600_000


@pytest.fixture
def frozen_three(tmp_path: Path) -> Iterator[tuple[ThreadedCluster, ManualClock]]:
    clock = ManualClock()
    overrides = {**FAST_TEST_OVERRIDES, "replica.fetch.wait.max.ms": str(FETCH_WAIT_MS)}
    cluster = ThreadedCluster(3, tmp_path / "data", overrides=overrides, clock=clock).start()
    try:
        yield cluster, clock
    finally:
        cluster.close()


def _sessions_parked(cluster: ThreadedCluster) -> bool:
    """Every broker has an incremental fetch session of each of the two others, its fetch parked there."""
    def read() -> bool:
        for broker_id, broker in cluster.cluster.brokers.items():
            cache = broker.fetch_sessions
            assert cache is not None
            parked = {s.replica_id for s in cache.sessions.values() if s.waiter is not None and not s.waiter.done()}
            if parked != set(cluster.cluster.broker_ids) - {broker_id} \
                    or not all(broker.replicas.parked_fetches.waiting(r) for r in parked):
                return False
        return True

    return cluster.run(read)


def _followed_everywhere(cluster: ThreadedCluster, topic: str) -> bool:
    """Both followers of ``topic``-0 have it in their fetcher from its leader (their fetches to it still parked)."""
    tp = TopicPartition(topic, 0)

    def read() -> bool:
        brokers = cluster.cluster.brokers.values()
        leaders = [b.broker_id for b in brokers if (p := b.replicas.get(tp)) is not None and p.is_leader]
        if len(leaders) != 1:
            return False
        fetching = [b for b in brokers
                    if (f := b.replicas.fetchers.fetchers.get(leaders[0])) is not None and tp in f.partitions]
        return len(fetching) == 2

    return cluster.run(read)


def test_an_acks_all_record_to_a_new_topic_is_acknowledged_without_a_fetch_wait(
    frozen_three: tuple[ThreadedCluster, ManualClock],
) -> None:
    cluster, clock = frozen_three
    started = clock.monotonic_ms()
    admin = opened(AdminClient({"bootstrap.servers": cluster.bootstrap}))
    older, new = f"older-{uuid.uuid4().hex[:8]}", f"new-{uuid.uuid4().hex[:8]}"
    admin.create_topics([NewTopic(older, 3, 3)])[older].result(60)  # a leader on each broker
    producer = opened(Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "linger.ms": 0,
                                "message.timeout.ms": 120_000}))
    for partition in range(3):  # answers the followers' first (full) fetches: their sessions start
        producer.produce(older, b"older", partition=partition)
    assert producer.flush(60) == 0
    wait_for(lambda: _sessions_parked(cluster), 60, what="every follower's session fetch parked at every leader")
    admin.create_topics([NewTopic(new, 1, 3)])[new].result(60)
    wait_for(lambda: _followed_everywhere(cluster, new), 60, what=f"{new} in both followers' fetchers")

    delivered: list[KafkaError | None] = []
    producer.produce(new, b"first", on_delivery=lambda err, _msg: delivered.append(err))
    wait_for(lambda: producer.poll(0.1) or delivered, 60, what="the first record's acknowledgement")
    assert delivered == [None]
    assert clock.monotonic_ms() == started, "no broker time had to pass"

"""A transaction coordinator that dies between PrepareCommit and its markers: the next leader of its
``__transaction_state`` partition loads the PrepareCommit and finishes the commit (three brokers, RF 3).

The dying coordinator is made to stop right after the client was answered: its marker sender is replaced by one that
only records (as if the process died at that instant), then the broker is killed. Everything else is real.
"""

from __future__ import annotations

import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from brokers import wait_for
from odradek.broker.txn.config import TRANSACTION_STATE_TOPIC
from odradek.broker.txn.coordinator import partition_for

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "cluster"))
from harness import ThreadedCluster
from workload import create_replicated_topic

TOPIC, PARTITIONS = "failover-txn", 2


class FrozenMarkers:
    """A marker sender that sends nothing: the coordinator's process 'stops' right after PrepareCommit."""

    def __init__(self) -> None:
        self.pending: list[Any] = []

    def add(self, pending: Any) -> None:
        self.pending.append(pending)

    def remove_for_partition(self, txn_partition: int) -> None:
        pass


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[ThreadedCluster]:
    overrides = {"group.initial.rebalance.delay.ms": "0", "zookeeper.session.timeout.ms": "2000",
                 "replica.lag.time.max.ms": "3000"}
    c = ThreadedCluster(3, tmp_path / "cluster", overrides=overrides).start()
    try:
        yield c
    finally:
        c.close()


def read_committed(bootstrap: str, expected: int, timeout_s: float = 60.0) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "check-" + uuid.uuid4().hex[:6],
                         "isolation.level": "read_committed", "enable.auto.commit": False})
    consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
    seen: list[bytes] = []
    deadline = time.monotonic() + timeout_s
    try:
        while len(seen) < expected:
            assert time.monotonic() < deadline, f"read_committed saw only {seen}"
            msg = consumer.poll(0.2)
            if msg is not None and not msg.error():
                seen.append(msg.value())
    finally:
        consumer.close()
    return sorted(seen)


def test_new_coordinator_completes_a_commit_its_predecessor_prepared(cluster: ThreadedCluster) -> None:
    bootstrap = cluster.bootstrap
    create_replicated_topic(bootstrap, TOPIC, PARTITIONS)
    tid = "failover-" + uuid.uuid4().hex[:6]
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid, "transaction.timeout.ms": 60000})
    producer.init_transactions(60)
    txn_partition = partition_for(tid, 50)
    coordinator = cluster.leader_of(TRANSACTION_STATE_TOPIC, txn_partition)
    frozen = FrozenMarkers()
    cluster.run(lambda: setattr(cluster.broker(coordinator).transactions.coordinator, "markers", frozen))

    producer.begin_transaction()
    values = [b"v%d" % i for i in range(6)]
    for i, v in enumerate(values):
        producer.produce(TOPIC, v, partition=i % PARTITIONS)
    producer.commit_transaction(60)  # answered once PrepareCommit is durable on the in-sync replicas
    assert [(p.transactional_id, p.commit) for p in frozen.pending] == [(tid, True)]

    cluster.kill(coordinator)
    wait_for(lambda: cluster.leader_of(TRANSACTION_STATE_TOPIC, txn_partition) not in (-1, coordinator), 60,
             what="a new leader of the transaction's partition")
    assert read_committed(bootstrap, len(values)) == sorted(values)

    # the id carries on with the new coordinator
    producer.begin_transaction()
    producer.produce(TOPIC, b"after", partition=0)
    producer.commit_transaction(60)
    assert read_committed(bootstrap, len(values) + 1) == sorted([*values, b"after"])

"""Transactions across brokers (three, RF 3 for ``__transaction_state``).

A transaction coordinator that dies between PrepareCommit and its markers: the next leader of its
``__transaction_state`` partition loads the PrepareCommit and finishes the commit. The dying coordinator is made to
stop right after the client was answered: its marker sender is replaced by one that only records (as if the process
died at that instant), then the broker is killed. Everything else is real.

A partition led by another broker than the coordinator: its leader verifies a transactional produce with
AddPartitionsToTxn ``verify_only`` over the network, and the coordinator writes its marker with WriteTxnMarkers.
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
from kafka_clients import opened
from odradek.broker.txn.config import TRANSACTION_STATE_TOPIC
from odradek.broker.txn.coordinator import partition_for

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "cluster"))
from harness import ThreadedCluster
from txn_requests import add_partitions, call, end_txn, init, nested, produce_txn, wait_for_state
from workload import create_replicated_topic, create_topic_with_assignment

from odradek.client import KafkaConnection
from odradek.errors import ErrorCode as E

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
    consumer = opened(Consumer({"bootstrap.servers": bootstrap, "group.id": "check-" + uuid.uuid4().hex[:6],
                                "isolation.level": "read_committed", "enable.auto.commit": False}))
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


@pytest.mark.parametrize("commit", [True, False], ids=["commit", "abort"])
def test_new_coordinator_completes_what_its_predecessor_prepared(cluster: ThreadedCluster, commit: bool) -> None:
    bootstrap = cluster.bootstrap
    create_replicated_topic(bootstrap, TOPIC, PARTITIONS)
    tid = "failover-" + uuid.uuid4().hex[:6]
    producer = opened(Producer({"bootstrap.servers": bootstrap, "transactional.id": tid,
                                "transaction.timeout.ms": 60000}))
    producer.init_transactions(60)
    txn_partition = partition_for(tid, 50)
    coordinator = cluster.leader_of(TRANSACTION_STATE_TOPIC, txn_partition)
    frozen = FrozenMarkers()
    cluster.run(lambda: setattr(cluster.broker(coordinator).transactions.coordinator, "markers", frozen))

    producer.begin_transaction()
    values = [b"v%d" % i for i in range(6)]
    for i, v in enumerate(values):
        producer.produce(TOPIC, v, partition=i % PARTITIONS)
    producer.flush(60)
    # answered once PrepareCommit/PrepareAbort is durable on the in-sync replicas
    if commit:
        producer.commit_transaction(60)
    else:
        producer.abort_transaction(60)
    assert [(p.transactional_id, p.commit) for p in frozen.pending] == [(tid, commit)]

    cluster.kill(coordinator)
    wait_for(lambda: cluster.leader_of(TRANSACTION_STATE_TOPIC, txn_partition) not in (-1, coordinator), 60,
             what="a new leader of the transaction's partition")
    # the id carries on with the new coordinator; its commit is visible only once the earlier transaction's
    # markers were written by the new coordinator (until then the last stable offset stays before it)
    producer.begin_transaction()
    producer.produce(TOPIC, b"after", partition=0)
    producer.commit_transaction(60)
    expected = [*values, b"after"] if commit else [b"after"]
    assert read_committed(bootstrap, len(expected)) == sorted(expected)


def test_partition_led_elsewhere_is_verified_and_marked_over_the_network(cluster: ThreadedCluster) -> None:
    tid = "remote-" + uuid.uuid4().hex[:6]
    with KafkaConnection(cluster.bootstrap) as any_broker:
        assert call(any_broker, 10, 3, key=tid, key_type=1).error_code is E.none  # creates __transaction_state
    coordinator = cluster.leader_of(TRANSACTION_STATE_TOPIC, partition_for(tid, 50))
    other = next(b for b in (0, 1, 2) if b != coordinator)
    create_topic_with_assignment(cluster.bootstrap, "remote", {0: [other], 1: [other]})
    wait_for(lambda: cluster.leader_of("remote", 1) == other, 30, what="the topic's leader")
    with KafkaConnection(f"127.0.0.1:{cluster.broker(coordinator).port}") as coord, \
            KafkaConnection(f"127.0.0.1:{cluster.broker(other).port}") as leader:
        ok = init(coord, tid)
        pid, epoch = ok.producer_id, ok.producer_epoch
        assert add_partitions(coord, tid, pid, epoch, [("remote", 0)]) == {("remote", 0): E.none}
        assert produce_txn(leader, "remote", tid, pid, epoch, 1) is E.invalid_txn_state  # never added
        assert produce_txn(leader, "remote", tid, pid, epoch, 0) is E.none
        assert end_txn(coord, tid, pid, epoch, True) is E.none
        wait_for_state(coord, tid, "CompleteCommit")  # the marker was acknowledged by the other broker
        described = call(leader, 61, 0, topics=(nested(61, 0, "TopicRequest")(name="remote", partition_indexes=(0,)),))
        [state] = described.topics[0].partitions[0].active_producers
        assert (state.producer_id, state.current_txn_start_offset) == (pid, -1)  # no transaction open any more
        # a stale coordinator epoch is refused by the partition leader
        marker_cls, topic_cls = nested(27, 1, "WritableTxnMarker"), nested(27, 1, "WritableTxnMarkerTopic")
        stale = call(leader, 27, 1, markers=(marker_cls(
            producer_id=pid, producer_epoch=epoch, transaction_result=False, coordinator_epoch=-1,
            topics=(topic_cls(name="remote", partition_indexes=(0,)),)),))
        assert stale.markers[0].topics[0].partitions[0].error_code is E.transaction_coordinator_fenced

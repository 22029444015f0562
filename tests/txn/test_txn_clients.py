"""Transactional producers of three real clients against a real broker: commits are visible under read_committed,
aborts only under read_uncommitted; a second producer with the same transactional.id fences the first; a producer
that goes silent mid-transaction is aborted after its timeout.

Each test ends its writes with a committed "sentinel" on every partition and reads until it has seen them: under
read_committed a sentinel is only visible once everything before it is decided, so "not seen" is a real answer and
no test waits on time alone.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from brokers import BrokerProcess
from kafka_clients import opened

PARTITIONS = 2
SENTINEL = b"sentinel"


@pytest.fixture
def txn_broker(broker_factory: Callable[..., BrokerProcess]) -> BrokerProcess:
    return broker_factory("--override", "group.initial.rebalance.delay.ms=0",
                          "--override", "transaction.abort.timed.out.transaction.cleanup.interval.ms=200")


def new_topic(bootstrap: str) -> str:
    topic = "txn-" + uuid.uuid4().hex[:8]
    admin = opened(AdminClient({"bootstrap.servers": bootstrap}))  # kept alive until the future is done
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(30)
    return topic


def read_until_sentinels(bootstrap: str, topic: str, isolation: str, timeout_s: float = 30.0) -> list[bytes]:
    """Every value before the sentinels, in partition order, as a consumer with ``isolation`` sees them."""
    consumer = opened(Consumer({"bootstrap.servers": bootstrap, "group.id": "r-" + uuid.uuid4().hex[:6],
                                "isolation.level": isolation, "enable.auto.commit": False}))
    consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    seen: list[bytes] = []
    sentinels = 0
    deadline = time.monotonic() + timeout_s
    try:
        while sentinels < PARTITIONS:
            assert time.monotonic() < deadline, f"saw {sentinels} sentinels and {seen} under {isolation}"
            msg = consumer.poll(0.2)
            if msg is None or msg.error():
                continue
            if msg.value() == SENTINEL:
                sentinels += 1
            else:
                seen.append(msg.value())
    finally:
        consumer.close()
    return sorted(seen)


def commit_sentinels(bootstrap: str, topic: str) -> None:
    p = opened(Producer({"bootstrap.servers": bootstrap, "transactional.id": "sentinel-" + uuid.uuid4().hex[:6]}))
    p.init_transactions(30)
    p.begin_transaction()
    for partition in range(PARTITIONS):
        p.produce(topic, SENTINEL, partition=partition)
    p.commit_transaction(30)


def check_visibility(bootstrap: str, topic: str, committed: list[bytes], aborted: list[bytes]) -> None:
    commit_sentinels(bootstrap, topic)
    assert read_until_sentinels(bootstrap, topic, "read_committed") == sorted(committed)
    assert read_until_sentinels(bootstrap, topic, "read_uncommitted") == sorted(committed + aborted)


def test_confluent_kafka_commit_and_abort(txn_broker: BrokerProcess) -> None:
    bs = txn_broker.bootstrap
    topic = new_topic(bs)
    p = opened(Producer({"bootstrap.servers": bs, "transactional.id": "ck-" + uuid.uuid4().hex[:6]}))
    p.init_transactions(30)
    committed, aborted = [], []
    for n in range(4):
        p.begin_transaction()
        values = [b"t%d-%d" % (n, i) for i in range(6)]
        for i, v in enumerate(values):
            p.produce(topic, v, partition=i % PARTITIONS)
        p.flush(30)  # the records reach the log before the outcome is decided
        if n % 2:
            p.abort_transaction(30)
            aborted += values
        else:
            p.commit_transaction(30)
            committed += values
    check_visibility(bs, topic, committed, aborted)


def test_kafka_python_commit_and_abort(txn_broker: BrokerProcess) -> None:
    from kafka import KafkaProducer

    bs = txn_broker.bootstrap
    topic = new_topic(bs)
    p = KafkaProducer(bootstrap_servers=bs, transactional_id="kp-" + uuid.uuid4().hex[:6])
    try:
        p.init_transactions()
        p.begin_transaction()
        for i in range(4):
            p.send(topic, b"c%d" % i, partition=i % PARTITIONS)
        p.commit_transaction()
        p.begin_transaction()
        for i in range(4):
            p.send(topic, b"a%d" % i, partition=i % PARTITIONS)
        p.flush()
        p.abort_transaction()
    finally:
        p.close()
    check_visibility(bs, topic, [b"c%d" % i for i in range(4)], [b"a%d" % i for i in range(4)])


async def test_aiokafka_commit_and_abort(txn_broker: BrokerProcess) -> None:
    from aiokafka import AIOKafkaProducer

    bs = txn_broker.bootstrap
    topic = new_topic(bs)

    p = AIOKafkaProducer(bootstrap_servers=bs, transactional_id="aio-" + uuid.uuid4().hex[:6])
    await p.start()
    try:
        async with p.transaction():
            for i in range(4):
                await p.send_and_wait(topic, b"c%d" % i, partition=i % PARTITIONS)
        await p.begin_transaction()
        for i in range(4):
            await p.send_and_wait(topic, b"a%d" % i, partition=i % PARTITIONS)
        await p.abort_transaction()
    finally:
        await p.stop()

    check_visibility(bs, topic, [b"c%d" % i for i in range(4)], [b"a%d" % i for i in range(4)])


def test_second_producer_fences_the_first(txn_broker: BrokerProcess) -> None:
    bs = txn_broker.bootstrap
    topic = new_topic(bs)
    tid = "zombie-" + uuid.uuid4().hex[:6]
    zombie = opened(Producer({"bootstrap.servers": bs, "transactional.id": tid}))
    zombie.init_transactions(30)
    zombie.begin_transaction()
    for i in range(4):
        zombie.produce(topic, b"zombie%d" % i, partition=i % PARTITIONS)
    zombie.flush(30)

    successor = opened(Producer({"bootstrap.servers": bs, "transactional.id": tid}))
    successor.init_transactions(30)  # aborts the zombie's transaction and bumps the epoch
    successor.begin_transaction()
    successor.produce(topic, b"successor", partition=0)
    successor.commit_transaction(30)

    with pytest.raises(KafkaException) as fenced:
        zombie.produce(topic, b"late", partition=1)
        zombie.commit_transaction(30)
    assert fenced.value.args[0].fatal() or fenced.value.args[0].txn_requires_abort()
    check_visibility(bs, topic, [b"successor"], [b"zombie%d" % i for i in range(4)])


def test_silent_producer_is_aborted_after_its_timeout(txn_broker: BrokerProcess) -> None:
    bs = txn_broker.bootstrap
    topic = new_topic(bs)
    silent = opened(Producer({"bootstrap.servers": bs, "transactional.id": "silent-" + uuid.uuid4().hex[:6],
                              "transaction.timeout.ms": 1000}))
    silent.init_transactions(30)
    silent.begin_transaction()
    for i in range(4):
        silent.produce(topic, b"hung%d" % i, partition=i % PARTITIONS)
    silent.flush(30)
    # ... and nothing more from it: the coordinator aborts its transaction, so the LSO moves past it and later
    # transactions on the same partitions become visible under read_committed
    later = opened(Producer({"bootstrap.servers": bs, "transactional.id": "later-" + uuid.uuid4().hex[:6]}))
    later.init_transactions(30)
    later.begin_transaction()
    for i in range(2):
        later.produce(topic, b"later%d" % i, partition=i % PARTITIONS)
    later.commit_transaction(30)
    check_visibility(bs, topic, [b"later0", b"later1"], [b"hung%d" % i for i in range(4)])
    with pytest.raises(KafkaException):
        silent.commit_transaction(30)  # its epoch was bumped by the abort: fenced


def test_transaction_state_survives_a_restart(txn_broker: BrokerProcess) -> None:
    """What the coordinator reads back from ``__transaction_state`` after a restart: a committed transaction stays
    committed, and an open one is aborted when the next producer of its id arrives."""
    bs = txn_broker.bootstrap
    topic = new_topic(bs)
    tid = "restart-" + uuid.uuid4().hex[:6]
    first = opened(Producer({"bootstrap.servers": bs, "transactional.id": tid}))
    first.init_transactions(30)
    first.begin_transaction()
    first.produce(topic, b"kept", partition=0)
    first.commit_transaction(30)
    first.begin_transaction()
    for i in range(2):
        first.produce(topic, b"open%d" % i, partition=i % PARTITIONS)
    first.flush(30)
    txn_broker.restart()
    bs = txn_broker.bootstrap
    successor = opened(Producer({"bootstrap.servers": bs, "transactional.id": tid}))
    successor.init_transactions(60)
    successor.begin_transaction()
    successor.produce(topic, b"successor", partition=1)
    successor.commit_transaction(30)
    check_visibility(bs, topic, [b"kept", b"successor"], [b"open0", b"open1"])

"""Acknowledged data survives restarts: clean, SIGKILL (with flush.messages=1) and a torn tail on disk."""

from __future__ import annotations

import os
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition

from brokers import BrokerProcess
from kafka_clients import opened
from odradek.admin import create_topic
from odradek.client import KafkaConnection
from odradek.errors import ErrorCode

Acked = dict[tuple[int, int], tuple[bytes, bytes]]


def _produce(bootstrap: str, topic: str, n: int, start: int = 0) -> Acked:
    acked: Acked = {}
    errors: list[object] = []

    def on_delivery(err: object, msg: object) -> None:
        if err is not None:
            errors.append(err)
        else:
            acked[(msg.partition(), msg.offset())] = (msg.key(), msg.value())  # type: ignore[attr-defined]

    producer = opened(Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                                "linger.ms": 5}))
    for i in range(start, start + n):
        producer.produce(topic, key=f"k{i % 17}".encode(), value=f"value-{i}".encode(), on_delivery=on_delivery)
        if i % 500 == 0:
            producer.poll(0)
    assert producer.flush(30) == 0
    assert not errors
    return acked


def _read_all(bootstrap: str, topic: str, partitions: int, expected: int) -> Acked:
    consumer = opened(Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "reader", "enable.auto.commit": False,
         "auto.offset.reset": "earliest"}
    ))
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    seen: Acked = {}
    idle = 0
    while len(seen) < expected and idle < 20:
        msgs = consumer.consume(1000, 0.5)
        idle = 0 if msgs else idle + 1
        for m in msgs:
            assert m.error() is None, m.error()
            seen[(m.partition(), m.offset())] = (m.key(), m.value())
    consumer.close()
    return seen


def _commit_group(bootstrap: str, topic: str, offsets: dict[int, int]) -> None:
    consumer = opened(Consumer({"bootstrap.servers": bootstrap, "group.id": "committer", "enable.auto.commit": False}))
    consumer.commit(offsets=[TopicPartition(topic, p, o) for p, o in offsets.items()], asynchronous=False)
    consumer.close()


def _committed(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    consumer = opened(Consumer({"bootstrap.servers": bootstrap, "group.id": "committer", "enable.auto.commit": False}))
    result = consumer.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=20)
    consumer.close()
    return {tp.partition: tp.offset for tp in result}


def _scenario(broker: BrokerProcess, kill: bool) -> None:
    with KafkaConnection(broker.bootstrap) as conn:
        assert create_topic(conn, "durable", 3, 1, {})[0] == ErrorCode.none
    acked = _produce(broker.bootstrap, "durable", 3000)
    commits = {0: 11, 1: 22, 2: 33}
    _commit_group(broker.bootstrap, "durable", commits)
    if kill:
        broker.kill()
        broker.start()
    else:
        broker.restart()
    assert _read_all(broker.bootstrap, "durable", 3, len(acked)) == acked
    assert _committed(broker.bootstrap, "durable", 3) == commits
    # and the log goes on from where it stopped: new offsets follow the old ones
    more = _produce(broker.bootstrap, "durable", 300, start=3000)
    for (p, offset) in more:
        assert offset > max(o for (q, o) in acked if q == p)


def test_clean_restart_keeps_every_acknowledged_message(broker_factory) -> None:
    _scenario(broker_factory("--override", "group.initial.rebalance.delay.ms=0"), kill=False)


def test_sigkill_keeps_every_acknowledged_message(broker_factory) -> None:
    broker = broker_factory(
        "--override", "group.initial.rebalance.delay.ms=0", "--override", "log.flush.interval.messages=1"
    )
    _scenario(broker, kill=True)


def test_torn_tail_is_truncated_to_last_whole_batch(broker_factory) -> None:
    broker = broker_factory("--override", "group.initial.rebalance.delay.ms=0")
    with KafkaConnection(broker.bootstrap) as conn:
        assert create_topic(conn, "torn", 1, 1, {})[0] == ErrorCode.none
    acked: Acked = {}
    for round_ in range(5):  # five produce rounds, so the log holds several batches
        acked.update(_produce(broker.bootstrap, "torn", 100, start=round_ * 100))
    broker.stop()
    segment = max(Path(broker.data_dir, "broker-0", "torn-0").glob("*.log"))
    size = segment.stat().st_size
    with open(segment, "r+b") as f:
        f.truncate(size - 7)  # cut the last batch mid-way
        f.flush()
        os.fsync(f.fileno())
    broker.start()
    log = broker.log_text()
    assert "torn-0" in log and "truncat" in log.lower()
    survivors = _read_all(broker.bootstrap, "torn", 1, len(acked))
    assert survivors, "everything before the torn batch must still be there"
    last = max(o for (_p, o) in survivors)
    assert all(acked[(0, o)] == survivors[(0, o)] for (_p, o) in survivors)
    assert {o for (_p, o) in survivors} == set(range(last + 1)), "no gap before the torn batch"
    assert last < max(o for (_p, o) in acked), "the torn batch itself is gone"

"""Brokers die and come back under load; nothing acknowledged is lost, nothing seen disappears (issue 5)."""

from __future__ import annotations

import threading
from collections import defaultdict
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition
from harness import ThreadedCluster

from brokers import wait_for
from odradek.admin import create_topic
from odradek.client import KafkaConnection
from odradek.errors import ErrorCode

TOPIC = "ha"
PARTITIONS = 3


class Load:
    """An idempotent acks=all producer and a read_committed-style consumer running until stopped."""

    def __init__(self, bootstrap: str) -> None:
        self.acked: dict[tuple[int, int], bytes] = {}
        self.seen: dict[tuple[int, int], bytes] = {}
        self.errors: list[str] = []
        self.stop = threading.Event()
        self.producer = Producer({
            "bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 2,
            "message.timeout.ms": 120000, "retry.backoff.ms": 50, "topic.metadata.refresh.interval.ms": 1000,
        })
        self.consumer = Consumer({
            "bootstrap.servers": bootstrap, "group.id": "observer", "enable.auto.commit": False,
            "topic.metadata.refresh.interval.ms": 1000,
        })
        self.consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
        self.threads = [threading.Thread(target=self._produce), threading.Thread(target=self._consume)]
        for t in self.threads:
            t.start()

    def _produce(self) -> None:
        seq = 0

        def on_delivery(err: Any, msg: Any) -> None:
            if err is not None:
                self.errors.append(str(err))
            else:
                self.acked[(msg.partition(), msg.offset())] = msg.value()

        while not self.stop.is_set():
            try:
                self.producer.produce(TOPIC, key=str(seq % 31).encode(), value=b"%010d" % seq, on_delivery=on_delivery)
                seq += 1
            except BufferError:
                pass
            self.producer.poll(0.001 if seq % 20 == 0 else 0)
        self.producer.flush(120)

    def _consume(self) -> None:
        while not self.stop.is_set():
            for m in self.consumer.consume(500, 0.2):
                if m.error() is None:
                    self.seen[(m.partition(), m.offset())] = m.value()
        self.consumer.close()

    def progress(self, more: int) -> None:
        target = len(self.acked) + more
        wait_for(lambda: len(self.acked) >= target, 90, what=f"{more} more acknowledged messages")

    def finish(self) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(180)


def _read_back(bootstrap: str) -> dict[tuple[int, int], bytes]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "final", "enable.auto.commit": False})
    ends = {p: consumer.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=30)[1] for p in range(PARTITIONS)}
    consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
    out: dict[tuple[int, int], bytes] = {}

    def read_more() -> bool:
        for m in consumer.consume(2000, 0.5):
            if m.error() is None:
                out[(m.partition(), m.offset())] = m.value()
        return all(sum(1 for (p, _o) in out if p == q) >= ends[q] for q in ends)

    wait_for(read_more, 120, what="reading every partition to its end")
    consumer.close()
    return out


def _check(load: Load, final: dict[tuple[int, int], bytes]) -> None:
    assert not load.errors, load.errors[:5]
    for key, value in load.acked.items():
        assert final.get(key) == value, f"acknowledged {value!r} at {key} is gone or moved"
    for key, value in load.seen.items():
        assert final.get(key) == value, f"a consumer saw {value!r} at {key}, which later disappeared"
    per_partition: dict[int, list[int]] = defaultdict(list)
    for (p, _o), v in sorted(final.items()):
        per_partition[p].append(int(v))
    for p, values in per_partition.items():
        assert len(values) == len(set(values)), f"partition {p} holds a duplicate"
        assert values == sorted(values), f"partition {p} is out of order"


def _full_isr(c: ThreadedCluster) -> bool:
    metas = [c.partition_meta(TOPIC, p) for p in range(PARTITIONS)]
    return all(m is not None and sorted(m.isr) == [0, 1, 2] for m in metas)


def test_leaders_killed_and_stopped_in_turn_lose_nothing(cluster_factory) -> None:
    c = cluster_factory(3)
    with KafkaConnection(c.bootstrap) as conn:
        error, message = create_topic(conn, TOPIC, PARTITIONS, 3, {"min.insync.replicas": "2"})
        assert error == ErrorCode.none, message
    load = Load(c.bootstrap)
    try:
        load.progress(500)
        for clean in (False, True):
            for p in range(PARTITIONS):
                leader = c.leader_of(TOPIC, p)
                if clean:
                    c.stop_broker(leader, controlled=True)
                else:
                    c.kill(leader)
                wait_for(lambda p=p, leader=leader: c.leader_of(TOPIC, p) not in (leader, -1), 60,
                         what=f"a new leader for {TOPIC}-{p}")
                load.progress(300)
                c.start_broker(leader)
                wait_for(lambda: _full_isr(c), 60, what="every partition back to its full ISR")
                load.progress(300)
    finally:
        load.finish()
    _check(load, _read_back(c.bootstrap))
    assert _full_isr(c)


def test_controller_failover_moves_to_another_broker_with_a_higher_epoch(cluster_factory) -> None:
    c = cluster_factory(3)
    wait_for(lambda: c.controller_id() is not None, 30, what="a controller")
    first = c.controller_id()
    assert first is not None
    epoch = c.controller_epoch(first)
    c.kill(first)
    wait_for(lambda: c.controller_id() not in (None, first), 30, what="a new controller")
    new = c.controller_id()
    assert new is not None
    assert c.controller_epoch(new) > epoch
    # the new controller serves at once: a topic created now gets leaders
    with KafkaConnection(c.bootstrap) as conn:
        assert create_topic(conn, "after-failover", 2, 2, {})[0] == ErrorCode.none

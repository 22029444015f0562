"""Workloads: real confluent-kafka producers and group consumers on threads, recording into a checker History.

- :class:`ProducerWorkload` sends keyed records (value ``<name>:<sequence>``) at a steady rate to every partition,
  recording each acknowledgement with its offset and the times it was sent and acknowledged.
- :class:`GroupConsumers` runs consumers of one group that commit offsets synchronously every few records and
  record what they read, what they committed, and where each newly assigned partition started.
- :func:`read_final` reads every partition from its start to its end once the cluster is whole again.

The transactional consume-transform-produce workload and its read_committed readers are in
:mod:`odradek.lab.transactional`.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from odradek.lab.checker import Ack, Assignment, Commit, History, Read
from odradek.lab.processes import wait_until

__all__ = ["GroupConsumers", "ProducerWorkload", "read_final"]

_QUIET = {"log_level": 2}  # librdkafka's connection-failure errors (level 3) are expected here by the thousand


def _record(m: Any) -> tuple[str, int, int, bytes]:
    """A consumed message's coordinates and value (never None for a message without an error)."""
    return m.topic(), m.partition(), m.offset(), m.value()


class ProducerWorkload:
    def __init__(self, name: str, bootstrap: str, topic: str, history: History, *, acks: str, idempotent: bool,
                 rate: float = 200.0, keys: int = 64) -> None:
        self.name = name
        self.topic = topic
        self.history = history
        self.rate = rate
        self.keys = keys
        self.stop_flag = threading.Event()
        self.lock = threading.Lock()
        self.acked = 0
        config: dict[str, Any] = {
            "bootstrap.servers": bootstrap, "acks": acks, "enable.idempotence": idempotent, "linger.ms": 5,
            "message.timeout.ms": 120_000, "retry.backoff.ms": 100, "topic.metadata.refresh.interval.ms": 2000,
            "socket.timeout.ms": 10_000, **_QUIET,
        }
        if not idempotent:
            config["max.in.flight.requests.per.connection"] = 5
        self.producer = Producer(config)
        self.thread = threading.Thread(target=self._run, name=f"producer-{name}", daemon=True)

    def start(self) -> ProducerWorkload:
        self.thread.start()
        return self

    def _on_delivery(self, sent: float) -> Any:
        def done(err: Any, msg: Any) -> None:
            now = time.time()
            with self.lock:
                if err is not None:
                    self.history.failed_sends[self.topic] = self.history.failed_sends.get(self.topic, 0) + 1
                else:
                    self.history.acks.append(Ack(self.topic, msg.partition(), msg.offset(), msg.value(), sent, now))
                    self.acked += 1
        return done

    def _run(self) -> None:
        seq = 0
        interval = 1.0 / self.rate
        next_at = time.monotonic()
        while not self.stop_flag.is_set():
            now = time.monotonic()
            if now < next_at:
                self.producer.poll(min(next_at - now, 0.05))
                continue
            next_at += interval
            if next_at < now - 1.0:  # behind by more than a second (a full queue): do not burst to catch up
                next_at = now
            try:
                self.producer.produce(self.topic, key=b"k%d" % (seq % self.keys), value=f"{self.name}:{seq}".encode(),
                                      on_delivery=self._on_delivery(time.time()))
                seq += 1
            except BufferError:
                self.producer.poll(0.1)
        self.producer.flush(150)

    def stop(self) -> None:
        self.stop_flag.set()
        self.thread.join(180)


class GroupConsumers:
    """``count`` consumers of ``group`` subscribed to ``topics``, each committing synchronously every ``every``
    records (and on revocation), as an application with at-least-once processing does."""

    def __init__(self, bootstrap: str, group: str, topics: list[str], history: History, *, count: int = 2,
                 every: int = 50) -> None:
        self.bootstrap = bootstrap
        self.group = group
        self.topics = topics
        self.history = history
        self.every = every
        self.lock = threading.Lock()
        self.stop_flag = threading.Event()
        self.threads = [threading.Thread(target=self._run, args=(f"{group}-{n}",), daemon=True) for n in range(count)]

    def start(self) -> GroupConsumers:
        for t in self.threads:
            t.start()
        return self

    def _run(self, name: str) -> None:
        consumer = Consumer({
            "bootstrap.servers": self.bootstrap, "group.id": self.group, "enable.auto.commit": False,
            "auto.offset.reset": "earliest", "session.timeout.ms": 10_000, "heartbeat.interval.ms": 1000,
            "topic.metadata.refresh.interval.ms": 2000, "socket.timeout.ms": 10_000, "client.id": name, **_QUIET,
        })
        fresh: dict[tuple[str, int], float] = {}  # assigned, nothing read there yet: assignment time
        position: dict[tuple[str, int], int] = {}  # next offset to commit
        uncommitted = 0

        def commit() -> None:
            nonlocal uncommitted
            if not position:
                return
            offsets = [TopicPartition(t, p, o) for (t, p), o in position.items()]
            try:
                result = consumer.commit(offsets=offsets, asynchronous=False)
            except KafkaException:
                return  # not acknowledged: the next commit carries the same or later offsets
            now = time.time()
            with self.lock:
                for tp in result or []:
                    if tp.error is None:
                        self.history.commits.append(Commit(name, tp.topic, tp.partition, tp.offset, now))
            uncommitted = 0

        def on_assign(c: Any, partitions: list[TopicPartition]) -> None:
            now = time.time()
            for tp in partitions:
                fresh[(tp.topic, tp.partition)] = now

        def on_revoke(c: Any, partitions: list[TopicPartition]) -> None:
            commit()
            for tp in partitions:
                position.pop((tp.topic, tp.partition), None)
                fresh.pop((tp.topic, tp.partition), None)

        consumer.subscribe(self.topics, on_assign=on_assign, on_revoke=on_revoke)
        while not self.stop_flag.is_set():
            for m in consumer.consume(200, 0.2):
                if m.error() is not None:
                    continue
                topic, partition, offset, value = _record(m)
                tp = (topic, partition)
                with self.lock:
                    self.history.reads.append(Read(name, topic, partition, offset, value))
                    assigned_at = fresh.pop(tp, None)
                    if assigned_at is not None:
                        self.history.assignments.append(Assignment(name, topic, partition, offset, assigned_at))
                position[tp] = offset + 1
                uncommitted += 1
            if uncommitted >= self.every:
                commit()
        commit()
        consumer.close()

    def stop(self) -> None:
        self.stop_flag.set()
        for t in self.threads:
            t.join(120)

    def final_committed(self, partitions: dict[str, int]) -> dict[tuple[str, int], int]:
        """The group's committed offsets, asked of the coordinator by a client that does not join the group."""
        c = Consumer({"bootstrap.servers": self.bootstrap, "group.id": self.group, **_QUIET})
        try:
            tps = [TopicPartition(t, p) for t, n in partitions.items() for p in range(n)]
            return {(tp.topic, tp.partition): tp.offset for tp in c.committed(tps, timeout=60) if tp.offset >= 0}
        finally:
            c.close()


def read_final(bootstrap: str, partitions: dict[str, int], timeout: float = 120, *,
               read_committed: bool = False) -> dict[tuple[str, int], list[tuple[int, bytes]]]:
    """Every partition from its log start to its high watermark (with ``read_committed``, what that isolation level
    returns of it: once no transaction is open the last stable offset is the high watermark, and the consumer's
    position passes the control records and aborted batches it skips)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "lab-final-reader", "enable.auto.commit": False,
                  "isolation.level": "read_committed" if read_committed else "read_uncommitted", **_QUIET})
    try:
        ends: dict[tuple[str, int], int] = {}
        for t, n in partitions.items():
            for p in range(n):
                ends[(t, p)] = c.get_watermark_offsets(TopicPartition(t, p), timeout=30)[1]
        out: dict[tuple[str, int], list[tuple[int, bytes]]] = {tp: [] for tp in ends}
        c.assign([TopicPartition(t, p, 0) for (t, p) in ends])
        nxt = {tp: 0 for tp in ends}

        def drained() -> bool:
            for m in c.consume(5000, 0.5):
                if m.error() is None:
                    topic, partition, offset, value = _record(m)
                    out[(topic, partition)].append((offset, value))
                    nxt[(topic, partition)] = offset + 1
            for tp in c.position([TopicPartition(t, p) for (t, p) in ends]):
                if tp.offset >= 0:
                    nxt[(tp.topic, tp.partition)] = max(nxt[(tp.topic, tp.partition)], tp.offset)
            return all(nxt[tp] >= ends[tp] for tp in ends)

        wait_until(drained, timeout, "reading every partition to its end", 0)
        return {tp: [(o, v) for o, v in log if o < ends[tp]] for tp, log in out.items()}
    finally:
        c.close()

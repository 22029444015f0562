"""Consume-transform-produce with transactions survives broker failures: each input appears in the output once.

Issue 10's acceptance test. Three brokers, RF 3 (min.insync.replicas 2) for the input, the output, the offsets
and the transaction log. A confluent-kafka processor reads the input under read_committed, writes a transformed
record per input and commits its consumer offsets with send_offsets_to_transaction, the way Kafka Streams-style
processors do; every fourth transaction is aborted on purpose (and its input re-read). Meanwhile the broker
hosting the processor's transaction coordinator is killed and restarted, then the leader of an output partition.
At the end a read_committed consumer must find every input transformed exactly once in the output, and the
group's committed offsets must be at the end of the input.
"""

from __future__ import annotations

import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from brokers import wait_for
from kafka_clients import opened
from odradek.placement.java import coordinator_partition

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "cluster"))
from harness import ThreadedCluster
from workload import create_replicated_topic

INPUT, OUTPUT, PARTITIONS = "orders", "orders-enriched", 3
RECORDS = 600
PER_TXN = 20
ABORT_EVERY = 4
TXN_ID, GROUP = "enricher-1", "enricher"
TXN_STATE_PARTITIONS = 50


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[ThreadedCluster]:
    overrides = {
        "group.initial.rebalance.delay.ms": "0", "zookeeper.session.timeout.ms": "2000",
        "replica.lag.time.max.ms": "3000", "leader.imbalance.check.interval.seconds": "300",
    }
    c = ThreadedCluster(3, tmp_path / "cluster", overrides=overrides).start()
    try:
        yield c
    finally:
        c.close()


class Processor:
    """The consume-transform-produce loop, with the error handling Kafka's transactional clients require."""

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap
        self.transactions = 0
        self.aborted = 0
        self.failure: BaseException | None = None
        self.consumer = opened(Consumer({
            "bootstrap.servers": bootstrap, "group.id": GROUP, "isolation.level": "read_committed",
            "enable.auto.commit": False, "auto.offset.reset": "earliest", "topic.metadata.refresh.interval.ms": 1000,
        }))
        self.partitions = [TopicPartition(INPUT, p) for p in range(PARTITIONS)]
        self.consumer.assign(self.partitions)
        self.producer = self._producer()

    def _producer(self) -> Producer:
        producer = opened(Producer({
            "bootstrap.servers": self.bootstrap, "transactional.id": TXN_ID, "linger.ms": 5,
            "transaction.timeout.ms": 30000, "topic.metadata.refresh.interval.ms": 1000, "retry.backoff.ms": 50,
        }))
        _retry(lambda: producer.init_transactions(30))
        return producer

    def rewind(self) -> None:
        """Back to the group's committed offsets (what the last committed transaction consumed)."""
        committed = _retry(lambda: self.consumer.committed(self.partitions, timeout=30))
        for tp in committed:
            self.consumer.seek(TopicPartition(INPUT, tp.partition, tp.offset if tp.offset >= 0 else 0))

    def step(self) -> None:
        """One transaction: up to PER_TXN inputs, transformed, plus the consumed offsets; commit or abort."""
        messages = [m for m in self.consumer.consume(PER_TXN, timeout=1.0) if m.error() is None]
        if not messages:
            return
        positions: dict[int, int] = {}
        for m in messages:
            positions[m.partition()] = m.offset() + 1
        self.transactions += 1
        abort = self.transactions % ABORT_EVERY == 0
        try:
            self.producer.begin_transaction()
            for m in messages:
                self.producer.produce(OUTPUT, key=m.key(), value=b"enriched:" + m.value())
            offsets = [TopicPartition(INPUT, p, o) for p, o in positions.items()]
            self.producer.send_offsets_to_transaction(offsets, self.consumer.consumer_group_metadata(), 30)
            if abort:
                self.producer.abort_transaction(30)
                self.aborted += 1
                self.rewind()
            else:
                self._commit()
        except KafkaException as exc:
            self._recover(exc)

    def _commit(self) -> None:
        deadline = time.monotonic() + 60
        while True:
            try:
                self.producer.commit_transaction(30)
                return
            except KafkaException as exc:
                error: KafkaError = exc.args[0]
                if not error.retriable() or time.monotonic() > deadline:
                    raise
                time.sleep(0.1)

    def _recover(self, exc: KafkaException) -> None:
        """Abort what is abortable; replace a producer that hit a fatal error (fenced or unrecoverable)."""
        error: KafkaError = exc.args[0]
        if not error.fatal():
            try:
                _retry(lambda: self.producer.abort_transaction(30))
            except KafkaException as again:
                if again.args[0].code() == KafkaError._STATE:
                    pass  # no transaction open any more (it completed or was aborted): the rewind resyncs
                elif again.args[0].fatal():
                    error = again.args[0]
                else:
                    raise
        if error.fatal():
            self.producer = self._producer()  # init_transactions fences the old epoch and aborts its transaction
        self.rewind()

    def run(self, stop: threading.Event) -> None:
        try:
            while not stop.is_set():
                self.step()
        except BaseException as exc:  # handed to the test thread, which fails with it
            self.failure = exc

    def close(self) -> None:
        self.consumer.close()


# Coordinator errors Kafka documents as retriable, which librdkafka's committed() raises without the retriable flag
# when the group's coordinator moves between its lookup and its OffsetFetch.
COORDINATOR_MOVING = {KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_NOT_AVAILABLE,
                      KafkaError.COORDINATOR_LOAD_IN_PROGRESS}


def _retry(call: Callable[[], Any], timeout_s: float = 60.0) -> Any:
    """Retriable client errors while a broker is down or a coordinator is moving."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return call()
        except KafkaException as exc:
            error: KafkaError = exc.args[0]
            if not (error.retriable() or error.code() in COORDINATOR_MOVING) or time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def _caught_up(bootstrap: str, ends: dict[int, int]) -> bool:
    """The group's committed offsets (asked with require_stable, as read_committed does) are at the input's end."""
    consumer = opened(Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP,
                                "isolation.level": "read_committed"}))
    try:
        committed = _retry(lambda: consumer.committed([TopicPartition(INPUT, p) for p in ends], timeout=30))
        return all(tp.offset == ends[tp.partition] for tp in committed)
    finally:
        consumer.close()


def _produce_input(bootstrap: str) -> None:
    producer = opened(Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                                "linger.ms": 5}))
    for i in range(RECORDS):
        producer.produce(INPUT, key=b"%d" % i, value=b"order-%05d" % i, partition=i % PARTITIONS)
    assert producer.flush(60) == 0


def _read_output(bootstrap: str) -> list[bytes]:
    consumer = opened(Consumer({
        "bootstrap.servers": bootstrap, "group.id": "verifier", "isolation.level": "read_committed",
        "enable.auto.commit": False, "auto.offset.reset": "earliest",
    }))
    consumer.assign([TopicPartition(OUTPUT, p, 0) for p in range(PARTITIONS)])
    values: list[bytes] = []
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        batch = [m.value() for m in consumer.consume(500, timeout=1.0) if m.error() is None]
        values += batch
        if not batch and len(values) >= RECORDS:
            break  # everything is there and a further second brought nothing more (no late duplicates)
    consumer.close()
    return values


def test_consume_transform_produce_is_exactly_once_across_coordinator_and_leader_failures(cluster) -> None:
    c = cluster
    bootstrap = c.bootstrap
    create_replicated_topic(bootstrap, INPUT, PARTITIONS)
    create_replicated_topic(bootstrap, OUTPUT, PARTITIONS)
    _produce_input(bootstrap)
    ends = dict.fromkeys(range(PARTITIONS), RECORDS // PARTITIONS)

    processor = Processor(bootstrap)
    stop = threading.Event()
    worker = threading.Thread(target=processor.run, args=(stop,), name="processor")
    worker.start()

    def progress(transactions: int, down_s: float | None = None) -> None:
        """Wait for ``transactions`` more; with ``down_s``, at most that long (a broker is down meanwhile: the
        processor may stall in librdkafka, see below, and the broker's return is what lets it continue)."""
        target = processor.transactions + transactions
        deadline = time.monotonic() + (down_s if down_s is not None else 60)
        while processor.transactions < target and processor.failure is None:
            if time.monotonic() > deadline:
                assert down_s is not None, f"the processor made no progress ({processor.transactions} transactions)"
                return
            time.sleep(0.05)
        assert processor.failure is None, processor.failure

    # The processor runs on its own thread so that the test can bring brokers back whatever the client does:
    # librdkafka's send_offsets_to_transaction can wait, past its timeout, for a group coordinator whose broker
    # left the metadata until some broker changes state (confluentinc/librdkafka#5511, #5456); on Kafka too.
    try:
        progress(6)
        state_partition = coordinator_partition(TXN_ID, TXN_STATE_PARTITIONS)
        wait_for(lambda: c.leader_of("__transaction_state", state_partition) >= 0, 30, what="a coordinator")
        coordinator = c.leader_of("__transaction_state", state_partition)
        c.kill(coordinator)
        progress(6, down_s=10)
        c.start_broker(coordinator)
        wait_for(lambda: c.full_isr(OUTPUT, PARTITIONS), 60, what="the output's full ISR again")
        leader = c.leader_of(OUTPUT, 0)
        c.kill(leader)
        progress(6, down_s=10)
        c.start_broker(leader)
        wait_for(lambda: processor.failure is not None or _caught_up(bootstrap, ends), 90, interval=0.5,
                 what="the processor to finish the input")
        assert processor.failure is None, processor.failure
        assert processor.aborted >= 3
    finally:
        stop.set()
        worker.join(120)
        processor.close()

    output = _read_output(bootstrap)
    counts = Counter(output)
    expected = {b"enriched:order-%05d" % i for i in range(RECORDS)}
    duplicates = {v: n for v, n in counts.items() if n > 1}
    assert not duplicates, f"{len(duplicates)} inputs appear more than once"
    assert set(counts) == expected, f"missing {len(expected - set(counts))}, unexpected {len(set(counts) - expected)}"

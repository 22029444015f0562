"""The transactional workload: a consume-transform-produce stage and read_committed readers of its output.

:class:`TransformStage` reads an input topic under read_committed (as a group member by assignment) and, per
transaction, writes each input record to the same partition of the output topic as ``<input value>/<transaction
number>``, commits the consumed offsets with ``send_offsets_to_transaction`` and commits; every ``abort_every``-th
transaction is aborted on purpose and its input re-read from the group's committed offsets. What the client was told
goes into the :class:`~odradek.lab.checker.History`: a committed transaction's records as acks, an aborted one's as
``aborted``, one whose outcome it never learned as ``in_doubt``.

librdkafka's ``send_offsets_to_transaction`` (and the calls around it) can block past their timeouts when the group
coordinator's broker leaves the metadata (confluentinc/librdkafka#5511, #5456). The stage therefore runs on a worker
thread watched by a supervisor: a worker inside one client call for ``stall_s`` is abandoned and a new one started
with a new producer of the same ``transactional.id``, whose ``init_transactions`` fences the old one and aborts or
completes its open transaction. Each such stall is counted (:attr:`TransformStage.stalls`), never a failure.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer, TopicPartition

from odradek.lab.checker import Ack, History, Read
from odradek.lab.workload import _record

__all__ = ["CommittedReaders", "TransformStage", "group_lag", "wait_caught_up"]

log = logging.getLogger(__name__)

_QUIET = {"log_level": 2}
# What librdkafka does not flag retriable on committed() but is only a group coordinator moving under the nemesis.
_COORDINATOR_MOVING = {KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_NOT_AVAILABLE,
                       KafkaError.COORDINATOR_LOAD_IN_PROGRESS, KafkaError._TIMED_OUT, KafkaError._TRANSPORT}


class _Abandoned(Exception):
    """The supervisor replaced this worker while it was blocked; it must not touch the history again."""


class TransformStage:
    def __init__(self, bootstrap: str, source: str, output: str, partitions: int, history: History, *,
                 transactional_id: str = "lab-transform", group: str = "lab-transform", per_txn: int = 100,
                 abort_every: int = 5, stall_s: float = 45.0, say: Callable[[str], None] = print) -> None:
        self.bootstrap = bootstrap
        self.source = source
        self.output = output
        self.partitions = partitions
        self.history = history
        self.transactional_id = transactional_id
        self.group = group
        self.per_txn = per_txn
        self.abort_every = abort_every
        self.stall_s = stall_s
        self.say = say
        self.lock = threading.Lock()
        self.stop_flag = threading.Event()
        self.numbers = itertools.count(1)
        self.committed = 0
        self.aborted = 0  # on purpose
        self.failed = 0  # a transaction that hit an error (aborted after it, or in doubt)
        self.stalls = 0  # workers abandoned while blocked in a client call
        self.recreated = 0  # producers replaced after a fatal error
        self.generation = 0
        self.call_started: float | None = None  # monotonic start of the worker's current client call
        self.in_flight: list[bytes] = []  # values of the worker's open transaction
        self.worker: threading.Thread | None = None
        history.transforms[output] = source
        history.aborted.setdefault(output, set())
        history.in_doubt.setdefault(output, set())
        self.supervisor = threading.Thread(target=self._supervise, name="transform-supervisor", daemon=True)

    def start(self) -> TransformStage:
        self._spawn()
        self.supervisor.start()
        return self

    def stop(self) -> None:
        self.stop_flag.set()
        self.supervisor.join(120)

    def summary(self) -> str:
        return (f"transform {self.source} -> {self.output}: {self.committed} transactions committed, {self.aborted} "
                f"aborted on purpose, {self.failed} failed, {self.recreated} producers recreated after a fatal "
                f"error, {self.stalls} stalled clients abandoned")

    # -- the supervisor

    def _spawn(self) -> None:
        with self.lock:
            self.generation += 1
            generation = self.generation
            self.call_started = None
            self.worker = threading.Thread(target=self._worker, args=(generation,), name=f"transform-{generation}",
                                           daemon=True)
            self.worker.start()

    def _supervise(self) -> None:
        """Until stopped and the worker has finished its transaction: replace a worker blocked too long."""
        while True:
            time.sleep(0.5)
            with self.lock:
                started = self.call_started
                stuck = started is not None and time.monotonic() - started > self.stall_s
                if stuck:
                    self.stalls += 1
                    self.generation += 1  # the blocked worker records nothing more
                    self.history.in_doubt[self.output].update(self.in_flight)
                    self.in_flight = []
                worker = self.worker
            assert worker is not None
            if stuck:
                self.say(f"    transform: a client call blocked over {self.stall_s:.0f}s; worker abandoned"
                         + ("" if self.stop_flag.is_set() else ", a new producer fences it"))
                if self.stop_flag.is_set():
                    return
                self._spawn()
            elif self.stop_flag.is_set() and not worker.is_alive():
                return

    # -- the worker

    def _call(self, generation: int, call: Callable[[], Any]) -> Any:
        """One client call, timed for the supervisor; raises :class:`_Abandoned` if replaced meanwhile."""
        with self.lock:
            if generation != self.generation:
                raise _Abandoned
            self.call_started = time.monotonic()
        try:
            return call()
        finally:
            with self.lock:
                if generation != self.generation:
                    raise _Abandoned
                self.call_started = None

    def _retry(self, generation: int, call: Callable[[], Any], timeout_s: float = 60.0) -> Any:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                return self._call(generation, call)
            except KafkaException as exc:
                error: KafkaError = exc.args[0]
                if not (error.retriable() or error.code() in _COORDINATOR_MOVING) or time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    def _producer(self, generation: int) -> Producer:
        producer = Producer({
            "bootstrap.servers": self.bootstrap, "transactional.id": self.transactional_id, "linger.ms": 5,
            "transaction.timeout.ms": 30_000, "topic.metadata.refresh.interval.ms": 2000, "retry.backoff.ms": 100,
            "socket.timeout.ms": 10_000, **_QUIET,
        })
        while True:  # a coordinator may be unreachable for a while under the nemesis
            try:
                self._retry(generation, lambda: producer.init_transactions(30))
                return producer
            except KafkaException as exc:
                log.info("transform: init_transactions: %s; again", exc)

    def _worker(self, generation: int) -> None:
        consumer = Consumer({
            "bootstrap.servers": self.bootstrap, "group.id": self.group, "isolation.level": "read_committed",
            "enable.auto.commit": False, "auto.offset.reset": "earliest", "topic.metadata.refresh.interval.ms": 2000,
            "socket.timeout.ms": 10_000, **_QUIET,
        })
        tps = [TopicPartition(self.source, p) for p in range(self.partitions)]
        try:
            producer = self._producer(generation)
            consumer.assign(tps)
            self._rewind(generation, consumer, tps)
            while not self.stop_flag.is_set():
                producer = self._step(generation, consumer, producer, tps)
        except _Abandoned:
            if self.stop_flag.is_set():
                consumer.close()
            return  # else its clients may still be blocked; they are left to the garbage collector
        except Exception:  # a worker must never die silently: log it and let a new one take over
            log.exception("transform worker %d failed", generation)
            with self.lock:
                if generation == self.generation:
                    self.failed += 1
                    self.history.in_doubt[self.output].update(self.in_flight)
                    self.in_flight = []
            if not self.stop_flag.is_set():
                self._spawn()
            return
        consumer.close()

    def _rewind(self, generation: int, consumer: Consumer, tps: list[TopicPartition]) -> None:
        """Back to the group's committed offsets: what the last committed transaction consumed."""
        committed = self._retry(generation, lambda: consumer.committed(tps, timeout=30))
        for tp in committed:
            consumer.seek(TopicPartition(self.source, tp.partition, tp.offset if tp.offset >= 0 else OFFSET_BEGINNING))

    def _step(self, generation: int, consumer: Consumer, producer: Producer, tps: list[TopicPartition]) -> Producer:
        messages = [m for m in self._call(generation, lambda: consumer.consume(self.per_txn, 0.5))
                    if m.error() is None]
        if not messages:
            return producer
        number = next(self.numbers)
        abort = number % self.abort_every == 0
        begun = time.time()
        delivered: dict[bytes, tuple[int, int]] = {}

        def on_delivery(err: Any, msg: Any) -> None:
            if err is None:
                delivered[msg.value()] = (msg.partition(), msg.offset())

        positions: dict[int, int] = {}
        values = [m.value() + b"/%d" % number for m in messages]
        with self.lock:
            self.in_flight = list(values)
        try:
            self._call(generation, producer.begin_transaction)
            for m, value in zip(messages, values, strict=True):
                producer.produce(self.output, key=m.key(), value=value, partition=m.partition(),
                                 on_delivery=on_delivery)  # never blocks (a queue of up to 100,000 records)
                positions[m.partition()] = m.offset() + 1
            offsets = [TopicPartition(self.source, p, o) for p, o in positions.items()]
            self._call(generation, lambda: producer.send_offsets_to_transaction(
                offsets, consumer.consumer_group_metadata(), 30))
            if abort:
                self._call(generation, lambda: producer.abort_transaction(30))
                self._record(generation, values, "aborted", delivered, begun)
                self.aborted += 1
                self._rewind(generation, consumer, tps)
                return producer
            self._retry(generation, lambda: producer.commit_transaction(30))
            self._record(generation, values, "committed", delivered, begun)
            self.committed += 1
            return producer
        except KafkaException as exc:
            return self._recover(generation, consumer, producer, tps, exc, values, delivered, begun)

    def _recover(self, generation: int, consumer: Consumer, producer: Producer, tps: list[TopicPartition],
                 exc: KafkaException, values: list[bytes], delivered: dict[bytes, tuple[int, int]],
                 begun: float) -> Producer:
        """Abort what is abortable (then the outcome is known: aborted); replace a producer that hit a fatal error
        (its transaction's outcome is then in doubt until the new producer's init_transactions settles it)."""
        self.failed += 1
        error: KafkaError = exc.args[0]
        outcome = "in doubt"
        if not error.fatal():
            try:
                self._retry(generation, lambda: producer.abort_transaction(30))
                outcome = "aborted"
            except KafkaException as again:
                if again.args[0].fatal():
                    error = again.args[0]
                elif again.args[0].code() != KafkaError._STATE:
                    raise
        self._record(generation, values, outcome, delivered, begun)
        if error.fatal():
            self.recreated += 1
            producer = self._producer(generation)
        self._rewind(generation, consumer, tps)
        return producer

    def _record(self, generation: int, values: list[bytes], outcome: str, delivered: dict[bytes, tuple[int, int]],
                begun: float) -> None:
        now = time.time()
        with self.lock:
            if generation != self.generation:
                raise _Abandoned
            self.in_flight = []
            if outcome == "committed":
                for v in values:
                    p, offset = delivered[v]
                    self.history.acks.append(Ack(self.output, p, offset, v, begun, now))
            elif outcome == "aborted":
                self.history.aborted[self.output].update(values)
            else:
                self.history.in_doubt[self.output].update(values)


class CommittedReaders:
    """``count`` consumers reading every partition of ``topic`` from its start under read_committed, recording
    each record they are given (by assignment, no group: they must see everything)."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, history: History, *, count: int = 1) -> None:
        self.bootstrap = bootstrap
        self.topic = topic
        self.partitions = partitions
        self.history = history
        self.lock = threading.Lock()
        self.stop_flag = threading.Event()
        self.threads = [threading.Thread(target=self._run, args=(f"rc-reader-{n}",), daemon=True)
                        for n in range(count)]

    def start(self) -> CommittedReaders:
        for t in self.threads:
            t.start()
        return self

    def _run(self, name: str) -> None:
        consumer = Consumer({
            "bootstrap.servers": self.bootstrap, "group.id": name, "isolation.level": "read_committed",
            "enable.auto.commit": False, "topic.metadata.refresh.interval.ms": 2000, "socket.timeout.ms": 10_000,
            "client.id": name, **_QUIET,
        })
        consumer.assign([TopicPartition(self.topic, p, OFFSET_BEGINNING) for p in range(self.partitions)])
        while not self.stop_flag.is_set():
            for m in consumer.consume(500, 0.2):
                if m.error() is None:
                    topic, partition, offset, value = _record(m)
                    with self.lock:
                        self.history.reads.append(Read(name, topic, partition, offset, value))
        consumer.close()

    def stop(self) -> None:
        self.stop_flag.set()
        for t in self.threads:
            t.join(60)


def group_lag(bootstrap: str, group: str, topic: str, partitions: int) -> int | None:
    """How far the group's committed offsets (asked as read_committed does, require_stable) are behind the topic's
    end, summed over its partitions; None if the cluster did not answer."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "isolation.level": "read_committed",
                         **_QUIET})
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        ends = {tp.partition: consumer.get_watermark_offsets(tp, timeout=10)[1] for tp in tps}
        committed = consumer.committed(tps, timeout=10)
        return sum(ends[tp.partition] - max(tp.offset, 0) for tp in committed)
    except KafkaException:
        return None
    finally:
        consumer.close()


def wait_caught_up(bootstrap: str, group: str, topic: str, partitions: int, stalled_s: float = 90.0) -> None:
    """Until the group has committed the whole topic; TimeoutError only if its lag stops shrinking for
    ``stalled_s`` (a stage far behind after many faults may need minutes, and that is not a failure)."""
    best, since = None, time.monotonic()
    while True:
        lag = group_lag(bootstrap, group, topic, partitions)
        if lag == 0:
            return
        if lag is not None and (best is None or lag < best):
            best, since = lag, time.monotonic()
        if time.monotonic() - since > stalled_s:
            raise TimeoutError(f"group {group} stalled {best} records behind the end of {topic}")
        time.sleep(0.5)

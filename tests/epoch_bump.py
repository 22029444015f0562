"""librdkafka writing records twice across an epoch bump (confluentinc/librdkafka#4953), reproduced on demand.

Issue 15's open anomaly: one lab run found 22 acks=all records of an idempotent confluent-kafka producer written
twice in one partition, no send reported failed. Kafka's idempotence holds per producer id and epoch; librdkafka
breaks it from the client side when two things meet:

- partition LOST's Produce request is written by its leader (broker 0) but the response is lost with the
  connection: librdkafka keeps the messages, "possibly persisted", for a retry (the :mod:`fault_proxy` in front of
  broker 0 loses the response, then refuses connections, so the retry has to wait);
- meanwhile messages of partition TIMED_OUT (led by broker 1, whose proxy refuses every connection) reach
  ``message.timeout.ms`` in the queue; librdkafka then drains and bumps its epoch (rdkafka_broker.c: "Message
  timeouts will lead to gaps in the message sequence ... Bump the epoch to reset the base msgid"). For an
  idempotent producer InitProducerId gives a new producer id, as in Kafka.

Once the new producer id is in place the proxy heals, and librdkafka re-sends LOST's possibly-persisted messages
under the new producer id and new sequences: a broker sees a new session and must append them again.

The TIMED_OUT records are produced GAP_S before the LOST ones because ``message.timeout.ms`` counts from
``produce()`` and librdkafka has no per-message timeout: the gap is what makes the TIMED_OUT records time out
(and the epoch bump happen) while the LOST records are still waiting for their retry. Every other step waits on
a condition: the proxy having thrown the response away, the broker's log holding the batch, librdkafka's own
debug line saying the new producer id was acquired.

Shared by ``tests/lab/test_lab_epoch_bump.py`` (the broker's guarantee and the checker's classification) and
``bench/epoch_bump_duplicates.py`` (N runs, the numbers in bench/RESULTS.md).
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from brokers import wait_for
from fault_proxy import FaultProxy, LostResponse
from kafka_clients import opened
from odradek.cluster import LocalCluster
from odradek.lab import checker
from odradek.lab.batches import Batch, read_batches
from odradek.testing import FAST_TEST_OVERRIDES, ThreadedCluster

TOPIC = "epoch-bump"
LOST, TIMED_OUT = 0, 1  # partition -> led by broker 0 (response lost) and broker 1 (connections refused)
PRODUCER = "p-bump"
TIMED_OUT_RECORDS = 5
DEBUG_LINE = re.compile(r"DRAIN|GETPID|IDEMPSTATE|NEWPID|TIMEOUT|ERRPID|message.timeout.ms|epoch bump", re.I)
# librdkafka bumps an idempotent producer's epoch itself once drained (KIP-360: same id, epoch + 1); a version
# that asked the broker instead (InitProducerId) would say "Acquired PID{...} (previous PID{...})"
BUMPED = re.compile(r"bumped epoch to PID\{Id:(\d+),Epoch:(\d+)\}|Acquired PID\{Id:(\d+),Epoch:(\d+)\} \(previous")

# Clients reach brokers 0 and 1 only through their proxies (their advertised PLAINTEXT listener); the brokers talk
# to each other on a REPLICATION listener that no proxy sits in front of, so the faults touch clients only.
LISTENERS = {
    "listeners": "PLAINTEXT://127.0.0.1:0,REPLICATION://127.0.0.1:0",
    "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,REPLICATION:PLAINTEXT",
    "inter.broker.listener.name": "REPLICATION",
}


class _ProxiedCluster(LocalCluster):
    """A LocalCluster whose brokers may each get settings of their own (here: the proxy's port to advertise)."""

    def __init__(self, brokers: int, data_dir: Path, *, per_broker: dict[int, dict[str, str]], **kwargs: Any) -> None:
        super().__init__(brokers, data_dir, **kwargs)
        self.per_broker = per_broker

    def _config(self, broker_id: int, port: int | None = None, listener_ports: Any = None) -> Any:
        shared = self.overrides
        self.overrides = {**shared, **self.per_broker.get(broker_id, {})}
        try:
            return super()._config(broker_id, port, listener_ports)
        finally:
            self.overrides = shared


class ProxiedCluster(ThreadedCluster):
    @staticmethod
    async def _make(brokers: int, data_dir: Path, kwargs: dict[str, Any]) -> LocalCluster:
        return _ProxiedCluster(brokers, data_dir, **kwargs)


@dataclass(frozen=True)
class Copy:
    partition: int
    offset: int
    batch: Batch

    @property
    def session(self) -> tuple[int, int]:
        return self.batch.producer_id, self.batch.producer_epoch

    def describe(self) -> str:
        return f"{self.partition}/{self.offset}: {self.batch.describe(self.offset)}"


@dataclass
class Outcome:
    sent: int = 0
    acked: int = 0
    failed: dict[str, int] = field(default_factory=dict)  # delivery error name -> records
    failed_in: dict[int, int] = field(default_factory=dict)  # partition -> records whose delivery failed
    lost_responses: list[LostResponse] = field(default_factory=list)
    written_before_heal: int = 0  # LOST records in broker 0's log when the response was thrown away
    bumped_to: tuple[int, int] | None = None  # the producer session librdkafka moved to: (id, epoch)
    client_lines: list[str] = field(default_factory=list)  # librdkafka's debug lines about the bump
    copies: dict[bytes, list[Copy]] = field(default_factory=dict)  # every record value -> where it is
    report: checker.Report | None = None

    @property
    def duplicates(self) -> dict[bytes, list[Copy]]:
        return {v: c for v, c in self.copies.items() if len(c) > 1}

    def same_session_duplicates(self) -> dict[bytes, list[Copy]]:
        """Records written twice under one producer id and epoch: what a broker must never do."""
        return {v: c for v, c in self.duplicates.items() if len({x.session for x in c}) < len(c)}


class _Lines(logging.Handler):
    """librdkafka's log lines (confluent-kafka hands them to a Python logger from ``poll()``)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []
        self.guard = threading.Lock()

    def emit(self, record: logging.LogRecord) -> None:
        with self.guard:
            self.lines.append(record.getMessage())

    def matching(self, pattern: re.Pattern[str]) -> list[str]:
        with self.guard:
            return [line for line in self.lines if pattern.search(line)]


def _wait(predicate: Callable[[], object], timeout: float, what: str, producer: Producer | None = None) -> object:
    """:func:`brokers.wait_for`, serving the producer's callbacks and logs between checks when there is one."""
    if producer is None:
        return wait_for(predicate, timeout, what=what)

    served_producer = producer

    def served() -> object:
        result = predicate()
        if not result:
            served_producer.poll(0.05)  # the wait between checks, delivering callbacks and log lines meanwhile
        return result

    return wait_for(served, timeout, interval=0, what=what)


def reproduce(work_dir: Path, records: int = 20, message_timeout_ms: int = 5000, gap_s: float = 3.0,
              bump: bool = True, log: Callable[[str], None] | None = None) -> Outcome:
    """One run on a fresh three-broker cluster in ``work_dir``; the outcome whether or not librdkafka duplicates.

    Without ``bump`` nothing times out: the proxy heals as soon as the response is lost, and librdkafka retries
    the batch under the same producer id, epoch and sequences, which the broker must acknowledge without writing
    it again (the control: the same fault, no new session)."""
    out = Outcome()
    lossy, refusing = FaultProxy(), FaultProxy()
    per_broker = {b: {"advertised.listeners": f"PLAINTEXT://127.0.0.1:{p.port},REPLICATION://127.0.0.1:0"}
                  for b, p in ((0, lossy), (1, refusing))}
    cluster = ProxiedCluster(3, work_dir, per_broker=per_broker,
                             overrides={**FAST_TEST_OVERRIDES, **LISTENERS, "offsets.topic.replication.factor": "1"})
    producer: Producer | None = None
    lines = _Lines()
    client_log = logging.getLogger(f"epoch-bump.librdkafka.{id(lines)}")
    client_log.propagate = False
    client_log.setLevel(logging.DEBUG)
    client_log.addHandler(lines)
    try:
        cluster.start()
        for b, p in ((0, lossy), (1, refusing)):
            p.point_at("127.0.0.1", cluster.run(lambda b=b: cluster.cluster.brokers[b].bound_ports["PLAINTEXT"]))
        host, port = cluster.run(lambda: cluster.cluster.brokers[2].advertised["PLAINTEXT"])
        bootstrap = f"{host}:{port}"
        _create_topic(bootstrap)
        sends: dict[bytes, float] = {}
        acks: list[checker.Ack] = []

        def delivered(err: KafkaError | None, msg: Any) -> None:
            if err is None:
                acks.append(checker.Ack(TOPIC, msg.partition(), msg.offset(), msg.value(), sends[msg.value()],
                                        time.monotonic()))
            else:
                out.failed[err.name()] = out.failed.get(err.name(), 0) + 1
                out.failed_in[msg.partition()] = out.failed_in.get(msg.partition(), 0) + 1

        producer = opened(Producer({
            "bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
            "message.timeout.ms": message_timeout_ms, "linger.ms": 20,
            # a healed proxy is found again quickly (librdkafka's default backoff grows to 10 s)
            "reconnect.backoff.ms": 50, "reconnect.backoff.max.ms": 200, "retry.backoff.ms": 50,
            "debug": "eos,msg", "logger": client_log,
        }))
        seq = 0

        def produce(partition: int, n: int) -> None:
            nonlocal seq
            for _ in range(n):
                value = f"{PRODUCER}:{seq}".encode()
                seq += 1
                sends[value] = time.monotonic()
                producer.produce(TOPIC, value, partition=partition, on_delivery=delivered)
            out.sent += n

        produce(LOST, 1)  # the first producer id, and both leaders' connections, before any fault
        produce(TIMED_OUT, 1)
        _wait(lambda: len(acks) == 2, 30, "the first two records acknowledged", producer)

        if bump:
            refusing.refuse()
            started = time.monotonic()
            produce(TIMED_OUT, TIMED_OUT_RECORDS)
            # the gap (see the module's docstring): these time out while the LOST records still wait for a retry
            _wait(lambda: time.monotonic() - started >= gap_s, gap_s + 1,
                  "the gap between the two partitions' sends", producer)
        lossy.lose_next_produce_response()
        produce(LOST, records)
        _wait(lossy.lost_event.is_set, 30, "a Produce response to broker 0 thrown away", producer)
        out.lost_responses = list(lossy.lost)
        out.written_before_heal = cluster.run(lambda: cluster.cluster.brokers[0].replicas.logs.get(TOPIC, LOST)
                                              .log_end_offset) - 1
        if log:
            log(f"broker 0 wrote {out.written_before_heal} records; the client never got the response")
        try:
            if bump:
                _wait(lambda: lines.matching(BUMPED), message_timeout_ms / 1000 + 20,
                      "librdkafka bumping its epoch after the timeouts", producer)
        except AssertionError as exc:
            raise AssertionError(f"{exc}; librdkafka said:\n" + "\n".join(lines.matching(DEBUG_LINE)[-40:])) from None
        finally:
            lossy.heal()
            refusing.heal()
        if bump:
            first_bump = lines.matching(BUMPED)[0]
            m = BUMPED.search(first_bump)
            assert m is not None
            out.bumped_to = (int(m[1] or m[3]), int(m[2] or m[4]))
            if log:
                log(f"librdkafka: {first_bump}")
        _wait(lambda: producer.flush(0.1) == 0, message_timeout_ms / 1000 + 20, "every record delivered or failed",
              producer)
        out.acked = len(acks)
        out.client_lines = lines.matching(DEBUG_LINE)
        final = _read_back(bootstrap)
    finally:
        if producer is not None:
            producer.flush(5)
        try:
            cluster.close()
        finally:
            lossy.close()
            refusing.close()
            client_log.removeHandler(lines)
    data_dirs = [work_dir / f"broker-{b}" for b in range(3)]
    batches = {(TOPIC, p): read_batches(data_dirs, TOPIC, p) for p in (LOST, TIMED_OUT)}
    for (_t, p), log_ in final.items():
        for offset, value in log_:
            out.copies.setdefault(value, []).append(Copy(p, offset, batches[(TOPIC, p)][offset]))
    history = checker.History(
        semantics={TOPIC: replace(checker.ACKS_ALL_IDEMPOTENT, name="acks=all, idempotent")},
        partitions={TOPIC: 2}, acks=acks, failed_sends={TOPIC: sum(out.failed.values())}, final=final,
        batches=batches)
    out.report = checker.check(history)
    return out


def _create_topic(bootstrap: str) -> None:
    admin = opened(AdminClient({"bootstrap.servers": bootstrap}))
    topic = NewTopic(TOPIC, num_partitions=2, replica_assignment=[[0], [1]])  # LOST on broker 0, TIMED_OUT on 1
    futures = admin.create_topics([topic], operation_timeout=30)
    futures[TOPIC].result(30)


def _read_back(bootstrap: str) -> dict[tuple[str, int], list[tuple[int, bytes]]]:
    """Every record of both partitions, read by a real consumer up to the high watermark."""
    consumer = opened(Consumer({"bootstrap.servers": bootstrap, "group.id": "epoch-bump-check",
                                "enable.auto.commit": False}))
    try:
        ends = {p: consumer.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=30)[1] for p in (LOST, TIMED_OUT)}
        consumer.assign([TopicPartition(TOPIC, p, 0) for p in (LOST, TIMED_OUT)])
        final: dict[tuple[str, int], list[tuple[int, bytes]]] = {(TOPIC, p): [] for p in (LOST, TIMED_OUT)}
        deadline = time.monotonic() + 30
        while sum(len(v) for v in final.values()) < sum(ends.values()):
            if time.monotonic() > deadline:
                raise AssertionError(f"read back {final} of {ends} in 30s")
            msg = consumer.poll(0.2)
            if msg is None or msg.error():
                continue
            final[(TOPIC, msg.partition())].append((msg.offset(), msg.value()))
        return final
    finally:
        consumer.close()

"""Batch and streaming sinks: rows become records through an idempotent, acks=all producer.

Streaming delivery: Spark's own Kafka sink is at-least-once because a micro-batch that was fully written
is replayed when the query dies before Spark records the batch as committed. This sink closes that
window: after every task of batch N succeeded, the driver appends a marker "N committed" to a small
per-query topic (``<prefix>.<queryId>``), and tasks of a replayed batch whose id is at or below the last
marker write nothing. What remains at-least-once is a batch that failed part way (some tasks delivered,
the batch never committed): its retry writes everything again.

Transactional mode (option ``transactionalIdPrefix``) closes that window too. Each task writes its rows inside
one Kafka transaction under ``transactional.id = <prefix>-<partitionId>`` and, in the same transaction, commits
"batch N done" as the offset N+1 of a consumer group named like the transactional id on partition 0 of the
query's commit topic (TxnOffsetCommit, KIP-447). Rows and marker become visible together or not at all. A task
(re)starting batch N first calls init_transactions, which fences any earlier attempt with the same id and
finishes or aborts its transaction, then reads the group's committed offset with require_stable (librdkafka asks
for stable offsets under read_committed): at N+1 or beyond, this task's part of batch N is already in the log and
the task writes nothing. The driver writes no marker in this mode.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import ArrayType, BinaryType, IntegerType, StringType, StructType

from odradek.spark.cluster import Cluster
from odradek.spark.fetch import FetchConnection
from odradek.spark.options import OptionError, SinkOptions
from odradek.spark.recordbatch import decode_batches, split_batches

_FLUSH_TIMEOUT_S = 120.0
_HEADERS_TYPE = ArrayType(StructType().add("key", StringType()).add("value", BinaryType()))


def validate_sink_schema(schema: StructType, opts: SinkOptions) -> None:
    """Reject a DataFrame the sink cannot write before any task starts, as Spark's Kafka sink does."""
    fields = {f.name.lower(): f.dataType for f in schema.fields}
    if "value" not in fields:
        raise OptionError("the sink needs a value column (binary or string)")
    for name in ("key", "value"):
        if name in fields and not isinstance(fields[name], BinaryType | StringType):
            raise OptionError(f"column {name} must be binary or string, not {fields[name].simpleString()}")
    if opts.topic is None and "topic" not in fields:
        raise OptionError("give a topic option or a topic column")
    if "topic" in fields and not isinstance(fields["topic"], StringType):
        raise OptionError("column topic must be a string")
    if "partition" in fields and not isinstance(fields["partition"], IntegerType):
        raise OptionError("column partition must be an int")
    if "headers" in fields:
        headers = fields["headers"]
        if not (
            isinstance(headers, ArrayType)
            and isinstance(headers.elementType, StructType)
            and [f.name for f in headers.elementType.fields] == ["key", "value"]
            and isinstance(headers.elementType["key"].dataType, StringType)
            and isinstance(headers.elementType["value"].dataType, BinaryType)
        ):
            raise OptionError(f"column headers must be {_HEADERS_TYPE.simpleString()}")


@dataclass
class SinkCommit(WriterCommitMessage):
    """What one task reports: how many records it delivered, or that it skipped a committed batch."""

    records: int
    query_id: str | None = None
    skipped: bool = False
    transactional: bool = False


def _as_bytes(value: Any) -> bytes | None:
    return value.encode("utf-8") if isinstance(value, str) else value


class _Delivery:
    """Owns a producer for one task and turns asynchronous delivery failures into an exception at the end."""

    def __init__(self, config: dict[str, str], producer: Producer | None = None) -> None:
        self.producer = producer or Producer({**config, "acks": "all", "enable.idempotence": True})
        self.error: KafkaError | None = None
        self.count = 0

    def _on_delivery(self, err: KafkaError | None, _msg: Any) -> None:
        if err is not None and self.error is None:
            self.error = err

    def send(self, topic: str, value: Any, key: Any, partition: int | None, headers: Any) -> None:
        kwargs: dict[str, Any] = {
            "value": _as_bytes(value),
            "key": _as_bytes(key),
            "on_delivery": self._on_delivery,
        }
        if partition is not None:
            kwargs["partition"] = partition
        if headers:
            kwargs["headers"] = [(h["key"], h["value"]) for h in headers]
        while True:
            try:
                self.producer.produce(topic, **kwargs)
                break
            except BufferError:
                self.producer.poll(0.05)  # local queue full: let deliveries drain
        self.count += 1

    def finish(self) -> int:
        remaining = self.producer.flush(_FLUSH_TIMEOUT_S)
        if self.error is not None:
            raise KafkaException(self.error)
        if remaining:
            raise KafkaException(KafkaError(KafkaError._MSG_TIMED_OUT, f"{remaining} records were not delivered"))
        return self.count


def _column(batch: pa.RecordBatch, name: str) -> list[Any]:
    """A column as Python values by case-insensitive name; all None when the DataFrame lacks it."""
    for i, field_name in enumerate(batch.schema.names):
        if field_name.lower() == name:
            return batch.column(i).to_pylist()
    return [None] * batch.num_rows


def write_arrow(batches: Iterator[pa.RecordBatch], opts: SinkOptions, delivery: _Delivery | None = None) -> int:
    """Produce every row of ``batches``; returns the number delivered, raises if any delivery failed."""
    delivery = delivery or _Delivery(opts.client_config)
    for batch in batches:
        values, keys = _column(batch, "value"), _column(batch, "key")
        topics = [opts.topic] * batch.num_rows if opts.topic is not None else _column(batch, "topic")
        partitions, headers = _column(batch, "partition"), _column(batch, "headers")
        for i in range(batch.num_rows):
            topic = topics[i]
            if topic is None:
                raise OptionError("a row has a null topic and no topic option is set")
            delivery.send(topic, values[i], keys[i], partitions[i], headers[i])
    return delivery.finish()


class OdradekBatchWriter(DataSourceArrowWriter):
    """DataFrame.write: append only; every task flushes before it reports success."""

    def __init__(self, opts: SinkOptions) -> None:
        self.opts = opts

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SinkCommit:  # type: ignore[override]
        return SinkCommit(write_arrow(iterator, self.opts))


def commit_topic(opts: SinkOptions, query_id: str) -> str:
    return f"{opts.commit_topic_prefix}.{query_id}"


def last_committed_batch(opts: SinkOptions, topic: str) -> int | None:
    """The batch id in the newest marker of ``topic``, or None when the query never committed.

    The marker topic is created first, as :meth:`Cluster.ensure_topic` replicates it: looking its leader up is a
    Metadata request, and a broker with ``auto.create.topics.enable`` would otherwise create it from that request
    with ``default.replication.factor`` (1 by default), leaving the sink unable to commit while that one broker is
    down.
    """
    cluster = Cluster(opts.client_config)
    cluster.ensure_topic(topic)
    leader = cluster.leader((topic, 0))
    if leader is None:
        return None
    end = cluster.latest([(topic, 0)])[(topic, 0)]
    if end <= 0:
        return None
    conn = FetchConnection(*leader, timeout_s=30.0)
    try:
        conn.send_fetch(topic, 0, end - 1, max_wait_ms=0, max_bytes=1024 * 1024)
        data = conn.receive_fetch(topic, 0)
    finally:
        conn.close()
    if data.error_code:
        raise KafkaException(KafkaError(data.error_code, f"reading sink commits from {topic}"))
    batch = decode_batches(
        data.records,
        split_batches(data.records),
        topic=topic,
        partition=0,
        lo=end - 1,
        hi=end,
        include_headers=False,
    )
    values = batch.column("value").to_pylist()
    if not values:
        raise KafkaException(KafkaError(KafkaError._INCONSISTENT, f"marker at offset {end - 1} of {topic} missing"))
    return int(json.loads(values[-1])["batchId"])


_TXN_TIMEOUT_S = 60.0


def write_transactional(
    batches: Iterator[pa.RecordBatch], opts: SinkOptions, query_id: str, batch_id: int, task: int
) -> SinkCommit:
    """Write one task's share of micro-batch ``batch_id`` and its done-marker in one transaction, unless a
    previous attempt already committed it (see the module docstring)."""
    assert opts.transactional_id_prefix is not None
    transactional_id = f"{opts.transactional_id_prefix}-{task}"
    marker = TopicPartition(commit_topic(opts, query_id), 0)
    Cluster(opts.client_config).ensure_topic(marker.topic)
    producer = Producer(
        {**opts.client_config, "transactional.id": transactional_id, "acks": "all", "enable.idempotence": True}
    )
    consumer = Consumer(
        {
            **opts.client_config,
            "group.id": transactional_id,
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
        }
    )
    try:
        producer.init_transactions(_TXN_TIMEOUT_S)
        (done,) = consumer.committed([marker], timeout=_TXN_TIMEOUT_S)
        if done.error is not None:
            raise KafkaException(done.error)
        if done.offset > batch_id:
            for _ in batches:
                pass
            return SinkCommit(0, query_id, skipped=True, transactional=True)
        producer.begin_transaction()
        try:
            delivery = _Delivery(opts.client_config, producer)
            count = write_arrow(batches, opts, delivery)
            marker.offset = batch_id + 1
            producer.send_offsets_to_transaction([marker], consumer.consumer_group_metadata(), _TXN_TIMEOUT_S)
            producer.commit_transaction(_TXN_TIMEOUT_S)
        except BaseException:
            try:
                producer.abort_transaction(_TXN_TIMEOUT_S)
            except KafkaException:
                pass  # fenced or the coordinator gone: the transaction times out and aborts on its own
            raise
        return SinkCommit(count, query_id, transactional=True)
    finally:
        consumer.close()


class OdradekStreamWriter(DataSourceStreamArrowWriter):
    """Streaming sink that skips replayed micro-batches it already committed (see the module docstring)."""

    def __init__(self, opts: SinkOptions) -> None:
        self.opts = opts

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SinkCommit:  # type: ignore[override]
        from pyspark import TaskContext

        ctx = TaskContext.get()
        batch_id = ctx.getLocalProperty("streaming.sql.batchId") if ctx else None
        query_id = ctx.getLocalProperty("sql.streaming.queryId") if ctx else None
        if self.opts.transactional_id_prefix is not None:
            if ctx is None or batch_id is None or not query_id:
                raise OptionError("transactionalIdPrefix needs a streaming query (batch id and query id)")
            return write_transactional(iterator, self.opts, query_id, int(batch_id), ctx.partitionId())
        if batch_id is not None and query_id:
            last = last_committed_batch(self.opts, commit_topic(self.opts, query_id))
            if last is not None and int(batch_id) <= last:
                for _ in iterator:
                    pass
                return SinkCommit(0, query_id, skipped=True)
        return SinkCommit(write_arrow(iterator, self.opts), query_id)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # type: ignore[override]
        done = [m for m in messages if isinstance(m, SinkCommit)]
        query_ids = {m.query_id for m in done if m.query_id}
        if not query_ids or all(m.skipped or m.transactional for m in done):
            return
        (query_id,) = query_ids
        topic = commit_topic(self.opts, query_id)
        Cluster(self.opts.client_config).ensure_topic(topic)
        delivery = _Delivery(self.opts.client_config)
        marker = {"batchId": batchId, "records": sum(m.records for m in done)}
        delivery.send(topic, json.dumps(marker), query_id, 0, None)
        delivery.finish()

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # type: ignore[override]
        """Nothing to undo: records already delivered stay (that batch is at-least-once on retry)."""

"""Transactions through Spark: the read_committed source drops aborted records and never emits control batches;
the transactional streaming sink writes a replayed micro-batch once."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from confluent_kafka import Producer
from spark_brokers import Broker

from kafka_clients import opened
from odradek.protocol.records import build_control_batch, encode_batch
from odradek.spark.options import OptionError, parse_sink_options, parse_source_options
from odradek.spark.recordbatch import control_type, drop_aborted, split_batches

QUERY_TIMEOUT_S = 240


def _log(*batches: bytearray) -> bytes:
    """Batches laid out as a fetch response carries them: consecutive base offsets."""
    out = bytearray()
    offset = 0
    for batch in batches:
        struct.pack_into(">q", batch, 0, offset)
        offset += struct.unpack_from(">i", batch, 57)[0]
        out += batch
    return bytes(out)


def _txn(producer_id: int, *values: bytes) -> bytearray:
    return encode_batch([(None, v, ()) for v in values], timestamp_ms=0, producer_id=producer_id, producer_epoch=0,
                        base_sequence=0, transactional=True)


def test_drop_aborted_follows_the_consumer_algorithm() -> None:
    blob = _log(
        _txn(1, b"a0", b"a1"),  # 0-1: producer 1, aborted below
        _txn(2, b"c0"),  # 2: producer 2, committed
        encode_batch([(None, b"plain", ())], timestamp_ms=0),  # 3: not transactional
        build_control_batch(1, 0, 0, commit=False, timestamp_ms=0),  # 4: ABORT for producer 1
        _txn(1, b"c1"),  # 5: producer 1's next transaction, committed
        build_control_batch(2, 0, 0, commit=True, timestamp_ms=0),  # 6
        build_control_batch(1, 0, 0, commit=True, timestamp_ms=0),  # 7
    )
    batches = split_batches(blob)
    assert [control_type(blob, b) for b in batches if b.is_control] == [0, 1, 1]
    kept = drop_aborted(blob, batches, [(1, 0)])
    assert [b.base_offset for b in kept] == [2, 3, 5]
    # Without an aborted list nothing transactional is dropped, but control batches still are.
    assert [b.base_offset for b in drop_aborted(blob, batches, [])] == [0, 2, 3, 5]


def test_isolation_and_transactional_options() -> None:
    base = {"kafka.bootstrap.servers": "x:1", "subscribe": "t"}
    assert parse_source_options({**base, "kafka.isolation.level": "read_committed"}, streaming=True).read_committed
    assert not parse_source_options(base, streaming=True).read_committed
    with pytest.raises(OptionError, match=r"isolation\.level"):
        parse_source_options({**base, "kafka.isolation.level": "serializable"}, streaming=True)
    sink = {"kafka.bootstrap.servers": "x:1", "topic": "out"}
    assert parse_sink_options({**sink, "transactionalIdPrefix": "job"}).transactional_id_prefix == "job"
    assert parse_sink_options(sink).transactional_id_prefix is None
    with pytest.raises(OptionError, match="transactionalIdPrefix"):
        parse_sink_options({**sink, "kafka.transactional.id": "job"})
    with pytest.raises(OptionError, match="empty"):
        parse_sink_options({**sink, "transactionalIdPrefix": " "})


def _transaction(broker: Broker, topic: str, values: list[bytes], *, commit: bool | None, tid: str) -> Producer:
    """Commit, abort, or (None) leave the transaction open."""
    producer = opened(Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": tid, "linger.ms": 5}))
    producer.init_transactions(60)
    producer.begin_transaction()
    for i, v in enumerate(values):
        producer.produce(topic, value=v, partition=i % 2)
    producer.flush(60)
    if commit is True:
        producer.commit_transaction(60)
    elif commit is False:
        producer.abort_transaction(60)
    return producer


@pytest.mark.spark
def test_read_committed_source_skips_aborted_records(spark, reader, broker: Broker) -> None:
    topic = broker.create_topic(2)
    committed = [b"c%d" % i for i in range(40)]
    aborted = [b"a%d" % i for i in range(30)]
    _transaction(broker, topic, committed[:20], commit=True, tid=f"{topic}-1")
    _transaction(broker, topic, aborted, commit=False, tid=f"{topic}-2")
    broker.produce(topic, [{"value": b"plain", "partition": 0}])
    _transaction(broker, topic, committed[20:], commit=True, tid=f"{topic}-1")
    # An open transaction holds each partition's last stable offset: neither it nor what follows it is read.
    pending = [b"p0", b"p1"]
    open_txn = _transaction(broker, topic, pending, commit=None, tid=f"{topic}-3")
    broker.produce(topic, [{"value": b"after-open", "partition": 0}])

    def values(isolation: str) -> list[bytes]:
        rows = reader().option("subscribe", topic).option("kafka.isolation.level", isolation).load().collect()
        return sorted(r.value for r in rows)

    try:
        assert values("read_committed") == sorted([*committed, b"plain"])
        # read_uncommitted reads to the high watermark, aborted records included; neither sees a control batch.
        assert values("read_uncommitted") == sorted([*committed, *aborted, *pending, b"plain", b"after-open"])
    finally:
        open_txn.abort_transaction(60)


@pytest.mark.spark
def test_transactional_sink_writes_a_replayed_batch_once(spark, reader, broker: Broker, tmp_path: Path) -> None:
    source, sink = broker.create_topic(2), broker.create_topic(2)
    broker.produce(source, [{"key": b"k%d" % i, "value": b"%d" % i, "partition": i % 2} for i in range(200)])
    checkpoint = tmp_path / "checkpoint"

    def run():
        query = (
            spark.readStream.format("odradek")
            .option("kafka.bootstrap.servers", broker.bootstrap)
            .option("subscribe", source)
            .option("startingOffsets", "earliest")
            .option("maxOffsetsPerTrigger", "80")
            .load()
            .selectExpr("key", "value")
            .writeStream.format("odradek")
            .option("kafka.bootstrap.servers", broker.bootstrap)
            .option("topic", sink)
            .option("transactionalIdPrefix", f"{sink}-job")
            .option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True)
            .start()
        )
        assert query.awaitTermination(QUERY_TIMEOUT_S)
        return query

    run()
    # Spark forgets it committed the last batch and runs it again on restart: every task finds its marker
    # (committed with its rows in one transaction) and writes nothing.
    commits = sorted((checkpoint / "commits").glob("[0-9]*"), key=lambda p: int(p.name))
    assert len(commits) == 3
    commits[-1].unlink()
    (checkpoint / "commits" / f".{commits[-1].name}.crc").unlink(missing_ok=True)
    replay = run()
    assert [p["batchId"] for p in replay.recentProgress][:1] == [2]

    rows = reader().option("subscribe", sink).option("kafka.isolation.level", "read_committed").load().collect()
    assert sorted(int(r.value) for r in rows) == list(range(200))
    # Nothing uncommitted either: the replay opened no transaction that wrote rows.
    everything = reader().option("subscribe", sink).load().collect()
    assert len(everything) == 200

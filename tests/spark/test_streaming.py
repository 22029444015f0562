"""Structured Streaming through the odradek source (and sink) on a local[2] session."""

from __future__ import annotations

import contextlib
import threading
from pathlib import Path

import pytest
from pyspark.errors import StreamingQueryException
from spark_brokers import Broker, wait_for

pytestmark = pytest.mark.spark

QUERY_TIMEOUT_S = 240


def _stream(spark, broker: Broker, topic: str, **options: str):
    reader = (
        spark.readStream.format("odradek")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
    )
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def _to_parquet(df, out: Path, checkpoint: Path):
    return (
        df.selectExpr("partition", "offset", "CAST(value AS STRING) AS value")
        .writeStream.format("parquet")
        .option("path", str(out))
        .option("checkpointLocation", str(checkpoint))
    )


def _input_rows(query) -> list[int]:
    return [p["numInputRows"] for p in query.recentProgress if p["numInputRows"] > 0]


def test_available_now_obeys_max_offsets_and_a_restart_under_load_is_exactly_once(
    spark, broker: Broker, tmp_path: Path
) -> None:
    topic = broker.create_topic(3)
    broker.produce(topic, [{"value": b"%d" % i, "partition": i % 3} for i in range(300)])
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"

    first = _to_parquet(_stream(spark, broker, topic, maxOffsetsPerTrigger="70"), out, checkpoint)
    query = first.trigger(availableNow=True).start()
    assert query.awaitTermination(QUERY_TIMEOUT_S)
    assert _input_rows(query) == [70, 70, 70, 70, 20]

    # More data arrives while a continuously triggered query runs; it is stopped mid-stream and then
    # restarted from the same checkpoint until everything produced has been read.
    produced = 300
    stop_producing = threading.Event()

    def keep_producing() -> None:
        nonlocal produced
        while not stop_producing.is_set() and produced < 1_500:
            broker.produce(topic, [{"value": b"%d" % i, "partition": i % 3} for i in range(produced, produced + 50)])
            produced += 50

    producer = threading.Thread(target=keep_producing)
    producer.start()
    try:
        query = (
            _to_parquet(_stream(spark, broker, topic, maxOffsetsPerTrigger="100"), out, checkpoint)
            .trigger(processingTime="200 milliseconds")
            .start()
        )
        wait_for(lambda: len(_input_rows(query)) >= 2, what="two micro-batches", timeout_s=QUERY_TIMEOUT_S)
        query.stop()
    finally:
        stop_producing.set()
        producer.join()
    query = _to_parquet(_stream(spark, broker, topic), out, checkpoint).trigger(availableNow=True).start()
    assert query.awaitTermination(QUERY_TIMEOUT_S)

    rows = spark.read.parquet(str(out)).collect()
    values = sorted(int(r.value) for r in rows)
    assert values == list(range(produced)), f"{len(values)} rows for {produced} records"
    assert len({(r.partition, r.offset) for r in rows}) == produced


def test_partitions_added_between_batches_are_read_from_their_start(spark, broker: Broker, tmp_path: Path) -> None:
    from confluent_kafka.admin import NewPartitions

    topic = broker.create_topic(1)
    broker.produce(topic, [{"value": b"%d" % i} for i in range(10)])
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    query = _to_parquet(_stream(spark, broker, topic), out, checkpoint).trigger(availableNow=True).start()
    assert query.awaitTermination(QUERY_TIMEOUT_S)

    admin = broker.admin()
    for future in admin.create_partitions([NewPartitions(topic, 3)]).values():
        future.result()
    wait_for(lambda: len(admin.list_topics(topic, timeout=10).topics[topic].partitions) == 3, what="3 partitions")
    broker.produce(topic, [{"value": b"%d" % i, "partition": i % 3} for i in range(10, 40)])
    query = _to_parquet(_stream(spark, broker, topic), out, checkpoint).trigger(availableNow=True).start()
    assert query.awaitTermination(QUERY_TIMEOUT_S)

    rows = spark.read.parquet(str(out)).collect()
    assert sorted(int(r.value) for r in rows) == list(range(40))
    assert {r.partition for r in rows} == {0, 1, 2}


def test_a_deleted_topic_fails_the_query_unless_fail_on_data_loss_is_false(
    spark, broker: Broker, tmp_path: Path
) -> None:
    keep, doomed = broker.create_topic(1), broker.create_topic(1)
    broker.produce(keep, [{"value": b"k%d" % i} for i in range(5)])
    broker.produce(doomed, [{"value": b"d%d" % i} for i in range(5)])
    both = f"{keep},{doomed}"

    def run(checkpoint: Path, **options: str):
        out = tmp_path / f"out-{checkpoint.name}"
        query = _to_parquet(_stream(spark, broker, both, **options), out, checkpoint).trigger(availableNow=True).start()
        with contextlib.suppress(StreamingQueryException):  # a failed query is inspected via exception()
            query.awaitTermination(QUERY_TIMEOUT_S)
        return query, out

    strict, lenient = tmp_path / "strict", tmp_path / "lenient"
    for checkpoint in (strict, lenient):
        query, _ = run(checkpoint)
        assert query.exception() is None
    admin = broker.admin()
    for future in admin.delete_topics([doomed]).values():
        future.result()
    wait_for(lambda: doomed not in admin.list_topics(timeout=10).topics, what=f"{doomed} to be deleted")
    broker.produce(keep, [{"value": b"k%d" % i} for i in range(5, 8)])

    query, _ = run(strict)
    assert query.exception() is not None and "failOnDataLoss" in str(query.exception())
    query, out = run(lenient, failOnDataLoss="false")
    assert query.exception() is None
    assert sorted(r.value for r in spark.read.parquet(str(out)).collect()) == sorted(
        [f"k{i}" for i in range(8)] + [f"d{i}" for i in range(5)]
    )

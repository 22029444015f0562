"""The odradek sink: batch and streaming round trips, and replayed micro-batches written only once."""

from __future__ import annotations

from pathlib import Path

import pytest
from spark_brokers import Broker

pytestmark = pytest.mark.spark

QUERY_TIMEOUT_S = 240


def _read_back(reader, topic: str):
    return reader().option("subscribe", topic).option("includeHeaders", "true").load().collect()


def test_batch_write_round_trips_key_value_partition_and_headers(spark, reader, broker: Broker) -> None:
    topic = broker.create_topic(3)
    rows = [(f"k{i}", b"v%d" % i, i % 3, [("h", b"%d" % i)]) for i in range(90)]
    df = spark.createDataFrame(
        rows, "key string, value binary, partition int, headers array<struct<key:string,value:binary>>"
    )
    df.write.format("odradek").option("kafka.bootstrap.servers", broker.bootstrap).option("topic", topic).mode(
        "append"
    ).save()
    got = sorted(
        (r.key, r.value, r.partition, [(h.key, h.value) for h in r.headers]) for r in _read_back(reader, topic)
    )
    assert got == sorted((k.encode(), v, p, h) for k, v, p, h in rows)


def test_batch_write_routes_rows_by_topic_column(spark, reader, broker: Broker) -> None:
    a, b = broker.create_topic(1), broker.create_topic(1)
    df = spark.createDataFrame([(a, "x"), (b, "y"), (a, "z")], "topic string, value string")
    df.write.format("odradek").option("kafka.bootstrap.servers", broker.bootstrap).mode("append").save()
    assert sorted(r.value for r in _read_back(reader, a)) == [b"x", b"z"]
    assert [r.value for r in _read_back(reader, b)] == [b"y"]


def test_sink_rejects_a_dataframe_without_value(spark, broker: Broker) -> None:
    df = spark.createDataFrame([("k",)], "key string")
    with pytest.raises(Exception, match="value column"):
        df.write.format("odradek").option("kafka.bootstrap.servers", broker.bootstrap).option("topic", "x").mode(
            "append"
        ).save()


def test_streaming_write_round_trips_and_a_replayed_batch_is_not_written_twice(
    spark, reader, broker: Broker, tmp_path: Path
) -> None:
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
            .option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True)
            .start()
        )
        assert query.awaitTermination(QUERY_TIMEOUT_S)
        return query

    run()
    # Forget that the last batch was committed: Spark re-runs it on restart, exactly the window in which
    # Spark's own Kafka sink duplicates. The sink's commit marker must make the replay write nothing.
    commits = sorted((checkpoint / "commits").glob("[0-9]*"), key=lambda p: int(p.name))
    assert len(commits) == 3
    commits[-1].unlink()
    (checkpoint / "commits" / f".{commits[-1].name}.crc").unlink(missing_ok=True)
    replay = run()
    assert [p["batchId"] for p in replay.recentProgress][:1] == [2]

    got = sorted(int(r.value) for r in _read_back(reader, sink))
    assert got == list(range(200))

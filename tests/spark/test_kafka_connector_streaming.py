"""Spark's own Kafka connector streaming on three odradek brokers: a read_committed query from a subscribePattern
into a Kafka sink keeps running while the input's leader is killed, then restarts from its checkpoint under
Trigger.AvailableNow with maxOffsetsPerTrigger, and the output topic holds every committed record exactly once."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from kafka_connector_cluster import QUERY_TIMEOUT_S, create_topics, leader_killed, prefix, transactions
from spark_brokers import wait_for

from odradek.testing import ThreadedCluster

pytestmark = pytest.mark.spark

MAX_OFFSETS = 40


def _chunk(name: str, size: int = 60) -> tuple[list[bytes], list[bytes]]:
    return [f"{name}-{i}".encode() for i in range(size)], [f"{name}-aborted-{i}".encode() for i in range(10)]


def test_stream_across_a_killed_leader_and_a_restart_from_the_checkpoint(
    spark, three_brokers: ThreadedCluster, tmp_path: Path
) -> None:
    p = prefix()
    inputs, out = [f"{p}in-a", f"{p}in-b"], f"{p}out"
    create_topics(three_brokers, {inputs[0]: 3, inputs[1]: 1, out: 2})
    bootstrap = three_brokers.bootstrap_servers
    checkpoint = str(tmp_path / "checkpoint")

    def query(**trigger: object):
        source = (
            spark.readStream.format("kafka").option("kafka.bootstrap.servers", bootstrap)
            .option("subscribePattern", f"{p}in-.*").option("startingOffsets", "earliest")
            .option("maxOffsetsPerTrigger", str(MAX_OFFSETS)).option("minPartitions", "4")
            .option("includeHeaders", "true").option("kafka.isolation.level", "read_committed").load()
        )
        return (
            source.selectExpr("topic AS key", "value", "headers").writeStream.format("kafka")
            .option("kafka.bootstrap.servers", bootstrap).option("topic", out)
            .option("checkpointLocation", checkpoint).trigger(**trigger).start()
        )

    def output() -> Counter[tuple[str, bytes]]:
        df = spark.read.format("kafka").option("kafka.bootstrap.servers", bootstrap).option("subscribe", out).load()
        return Counter((bytes(r.key).decode(), bytes(r.value)) for r in df.select("key", "value").collect())

    expected: Counter[tuple[str, bytes]] = Counter()

    def send(name: str) -> None:
        for topic in inputs:
            committed, aborted = _chunk(f"{topic}-{name}")
            transactions(three_brokers, topic, [(committed[:30], True), (aborted, False), (committed[30:], True)])
            expected.update((topic, v) for v in committed)

    send("first")
    running = query(processingTime="500 milliseconds")
    try:
        wait_for(lambda: output() == expected, what="the first records in the output", timeout_s=QUERY_TIMEOUT_S,
                 interval_s=1)
        with leader_killed(three_brokers, inputs[0], 0):
            send("second")
            wait_for(lambda: output() == expected or running.exception() is not None,
                     what="the records sent after the kill in the output", timeout_s=QUERY_TIMEOUT_S, interval_s=1)
        assert running.exception() is None
    finally:
        running.stop()
    assert all(batch["numInputRows"] <= MAX_OFFSETS for batch in running.recentProgress)

    send("third")
    restarted = query(availableNow=True)
    assert restarted.awaitTermination(QUERY_TIMEOUT_S)
    assert restarted.exception() is None
    batches = [b["numInputRows"] for b in restarted.recentProgress if b["numInputRows"]]
    assert sum(batches) == 2 * 60 and max(batches) <= MAX_OFFSETS  # only the third chunk, in limited batches
    assert output() == expected

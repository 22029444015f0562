"""Spark's own Kafka connector (``format("kafka")``, spark-sql-kafka-0-10 through ``spark.jars``) on three odradek
brokers: a batch write with a partition leader killed between its halves, then batch reads with every offset and
subscription option the connector has, and read_committed leaving a transaction's aborted records out."""

from __future__ import annotations

from collections import Counter

import pytest
from kafka_connector_cluster import create_topics, leader_killed, prefix, produce, transactions

from odradek.testing import ThreadedCluster

pytestmark = pytest.mark.spark

PER_PARTITION = 60
WRITE_SCHEMA = "topic string, partition int, key string, value string, headers array<struct<key:string,value:binary>>"


def _kafka(spark, cluster: ThreadedCluster):
    return spark.read.format("kafka").option("kafka.bootstrap.servers", cluster.bootstrap_servers)


def _rows(topic: str, partitions: int, lo: int, hi: int) -> list[tuple]:
    return [(topic, p, f"k{p}-{i}", f"{topic}/{p}/{i}", [("seq", str(i).encode())])
            for p in range(partitions) for i in range(lo, hi)]


def _write(spark, cluster: ThreadedCluster, rows: list[tuple]) -> None:
    # One slice, so each partition receives its rows in list order and offset i holds row i.
    df = spark.createDataFrame(spark.sparkContext.parallelize(rows, 1), WRITE_SCHEMA)
    df.write.format("kafka").option("kafka.bootstrap.servers", cluster.bootstrap_servers).save()


def test_batch_write_across_a_killed_leader_then_batch_reads(spark, three_brokers: ThreadedCluster) -> None:
    p = prefix()
    a, b = f"{p}a", f"{p}b"
    create_topics(three_brokers, {a: 3, b: 2})
    half = PER_PARTITION // 2
    _write(spark, three_brokers, _rows(a, 3, 0, half) + _rows(b, 2, 0, 10))
    with leader_killed(three_brokers, a, 0):
        _write(spark, three_brokers, _rows(a, 3, half, PER_PARTITION))
        _check_reads(spark, three_brokers, p)


def _check_reads(spark, three_brokers: ThreadedCluster, p: str) -> None:
    a, b = f"{p}a", f"{p}b"
    # subscribe + includeHeaders + minPartitions: every row once, at the offset it was written to, headers intact.
    df = _kafka(spark, three_brokers).option("subscribe", a).option("includeHeaders", "true") \
        .option("minPartitions", "6").load()
    assert df.rdd.getNumPartitions() >= 6
    got = {(r.partition, r.offset): (r.key.decode(), r.value.decode(), [(h.key, bytes(h.value)) for h in r.headers])
           for r in df.collect()}
    assert got == {(q, i): (f"k{q}-{i}", f"{a}/{q}/{i}", [("seq", str(i).encode())])
                   for q in range(3) for i in range(PER_PARTITION)}

    # subscribePattern finds both topics.
    by_topic = Counter(r.topic for r in _kafka(spark, three_brokers).option("subscribePattern", f"{p}.*")
                       .load().select("topic").collect())
    assert by_topic == {a: 3 * PER_PARTITION, b: 20}

    # assign with per-partition startingOffsets / endingOffsets (-2 earliest, -1 latest).
    ranged = _kafka(spark, three_brokers).option("assign", f'{{"{a}":[0,2]}}') \
        .option("startingOffsets", f'{{"{a}":{{"0":10,"2":-2}}}}') \
        .option("endingOffsets", f'{{"{a}":{{"0":20,"2":-1}}}}').load()
    assert sorted((r.partition, r.offset) for r in ranged.select("partition", "offset").collect()) == \
        [(0, i) for i in range(10, 20)] + [(2, i) for i in range(PER_PARTITION)]


def test_starting_offsets_by_timestamp(spark, three_brokers: ThreadedCluster) -> None:
    topic = f"{prefix()}ts"
    create_topics(three_brokers, {topic: 2})
    base = 1_700_000_000_000
    produce(three_brokers, topic, ({"value": f"{q}/{i}".encode(), "partition": q, "timestamp": base + 1000 * i}
                                   for q in range(2) for i in range(40)))
    df = _kafka(spark, three_brokers).option("subscribe", topic) \
        .option("startingOffsetsByTimestamp", f'{{"{topic}":{{"0":{base + 25_000},"1":{base + 30_500}}}}}').load()
    assert sorted((r.partition, r.offset) for r in df.select("partition", "offset").collect()) == \
        [(0, i) for i in range(25, 40)] + [(1, i) for i in range(31, 40)]


def test_read_committed_leaves_aborted_records_out(spark, three_brokers: ThreadedCluster) -> None:
    topic = f"{prefix()}txn"
    create_topics(three_brokers, {topic: 2})
    committed = [[b"c1-%d" % i for i in range(15)], [b"c2-%d" % i for i in range(15)]]
    aborted = [b"ab-%d" % i for i in range(15)]
    transactions(three_brokers, topic, [(committed[0], True), (aborted, False), (committed[1], True)])

    def values(**options: str) -> Counter[bytes]:
        reader = _kafka(spark, three_brokers).option("subscribe", topic)
        for k, v in options.items():
            reader = reader.option(k, v)
        return Counter(bytes(r.value) for r in reader.load().select("value").collect())

    assert values(**{"kafka.isolation.level": "read_committed"}) == Counter(committed[0] + committed[1])
    assert values() == Counter(committed[0] + aborted + committed[1])

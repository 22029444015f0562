"""Batch reads through ``spark.read.format("odradek")`` on a local[2] session."""

from __future__ import annotations

import json
import time

import pytest
from spark_brokers import Broker, lose_first_records

pytestmark = pytest.mark.spark


def _produce_three_partitions(broker: Broker, per_partition: int = 200) -> tuple[str, list[dict]]:
    topic = broker.create_topic(3)
    sent = [
        {"key": b"k%d" % i, "value": b"value-%d" % i, "partition": i % 3, "headers": [("n", b"%d" % i)]}
        for i in range(3 * per_partition)
    ]
    broker.produce(topic, sent)
    return topic, sent


def test_batch_read_returns_exactly_what_was_produced(reader, broker: Broker) -> None:
    topic, sent = _produce_three_partitions(broker)
    rows = reader().option("subscribe", topic).option("includeHeaders", "true").load().collect()
    got = sorted((r.partition, r.offset, r.key, r.value, [(h.key, h.value) for h in r.headers]) for r in rows)
    want = sorted((s["partition"], i // 3, s["key"], s["value"], [("n", b"%d" % i)]) for i, s in enumerate(sent))
    assert got == want
    assert {r.topic for r in rows} == {topic}
    assert {r.timestampType for r in rows} == {0}


def test_min_partitions_splits_ranges_without_changing_the_rows(reader, broker: Broker) -> None:
    topic, sent = _produce_three_partitions(broker)
    df = reader().option("subscribe", topic).option("minPartitions", "9").load()
    assert df.rdd.getNumPartitions() >= 9
    rows = df.select("partition", "offset").collect()
    assert sorted((r.partition, r.offset) for r in rows) == sorted((i % 3, i // 3) for i in range(len(sent)))


def test_starting_and_ending_offsets_json(reader, broker: Broker) -> None:
    topic, _ = _produce_three_partitions(broker, per_partition=50)
    start = json.dumps({topic: {"0": 10, "1": -2, "2": 45}})
    end = json.dumps({topic: {"0": 20, "1": 5, "2": -1}})
    rows = (
        reader().option("subscribe", topic).option("startingOffsets", start).option("endingOffsets", end).load()
    ).collect()
    got = sorted((r.partition, r.offset) for r in rows)
    want = [(0, o) for o in range(10, 20)] + [(1, o) for o in range(0, 5)] + [(2, o) for o in range(45, 50)]
    assert got == want


def test_starting_timestamp_starts_at_the_first_later_record(reader, broker: Broker) -> None:
    topic = broker.create_topic(2)
    now = int(time.time() * 1000)
    broker.produce(
        topic, [{"value": b"%d" % i, "partition": i % 2, "timestamp": now - 10_000 + 1000 * i} for i in range(8)]
    )
    # partition 0 holds t = now-10s, -8s, -6s, -4s; partition 1 holds -9s, -7s, -5s, -3s
    rows = reader().option("subscribe", topic).option("startingTimestamp", str(now - 6_500)).load().collect()
    assert sorted(int(r.value) for r in rows) == [4, 5, 6, 7]
    by_partition = json.dumps({topic: {"0": now - 8_000, "1": now - 3_000}})
    rows = reader().option("subscribe", topic).option("startingOffsetsByTimestamp", by_partition).load().collect()
    assert sorted(int(r.value) for r in rows) == [2, 4, 6, 7]


def test_subscribe_pattern_and_assign(reader, broker: Broker) -> None:
    stem = f"pat-{int(time.time() * 1000)}"
    a = broker.create_topic(1, name=f"{stem}-a")
    b = broker.create_topic(2, name=f"{stem}-b")
    broker.produce(a, [{"value": b"a"}])
    broker.produce(b, [{"value": b"b0", "partition": 0}, {"value": b"b1", "partition": 1}])
    rows = reader().option("subscribePattern", f"{stem}-.*").load().collect()
    assert sorted(r.value for r in rows) == [b"a", b"b0", b"b1"]
    rows = reader().option("assign", json.dumps({b: [1]})).load().collect()
    assert [(r.topic, r.partition, r.value) for r in rows] == [(b, 1, b"b1")]


def test_empty_topic_reads_no_rows(reader, broker: Broker) -> None:
    topic = broker.create_topic(2)
    assert reader().option("subscribe", topic).load().count() == 0


def test_deleted_offsets_fail_with_fail_on_data_loss_and_are_skipped_without(reader, broker: Broker) -> None:
    topic = broker.create_topic(1)
    lose_first_records(broker, topic, 30)
    broker.produce(topic, [{"value": b"%d" % i} for i in range(30, 50)])
    start = json.dumps({topic: {"0": 0}})
    with pytest.raises(Exception, match="failOnDataLoss"):
        reader().option("subscribe", topic).option("startingOffsets", start).load().collect()
    rows = (
        reader().option("subscribe", topic).option("startingOffsets", start).option("failOnDataLoss", "false").load()
    ).collect()
    assert sorted(r.offset for r in rows) == list(range(30, 50))

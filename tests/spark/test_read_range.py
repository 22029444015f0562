"""The executor-side read loop against a live broker: real producers, every codec, vanished offsets."""

from __future__ import annotations

import time

import pytest
from spark_brokers import Broker, lose_first_records

from odradek.spark.cluster import Cluster
from odradek.spark.options import Subscription
from odradek.spark.planning import DataLossError
from odradek.spark.reader import RangePartition, read_range


def _part(broker: Broker, topic: str, start: int, end: int, *, fail: bool = True, max_bytes: int = 1 << 20):
    leader = Cluster({"bootstrap.servers": broker.bootstrap}).partitions(Subscription(topics=(topic,)))[(topic, 0)]
    return RangePartition(
        topic, 0, start, end, leader, {"bootstrap.servers": broker.bootstrap}, True, fail, 20_000, max_bytes
    )


def _rows(part: RangePartition) -> list[dict]:
    return [row for batch in read_range(part) for row in batch.to_pylist()]


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_records_from_confluent_kafka_come_back_exactly(broker: Broker, codec: str) -> None:
    topic = broker.create_topic(1)
    now = int(time.time() * 1000) - 10_000  # recent: time-based retention must not delete them
    sent = [
        {
            "key": None if i % 7 == 0 else b"k%d" % i,
            "value": None if i % 11 == 0 else bytes([i % 256]) * (i % 300),
            "headers": [("h", b"%d" % i)] if i % 3 == 0 else None,
            "timestamp": now + i,
        }
        for i in range(2_000)
    ]
    broker.produce(topic, sent, **{"compression.type": codec, "batch.num.messages": 300})
    # A small fetch size forces many fetches, partial trailing batches and the pipelined next request.
    rows = _rows(_part(broker, topic, 17, 1_990, max_bytes=16_384))
    assert [r["offset"] for r in rows] == list(range(17, 1_990))
    for r in rows:
        s = sent[r["offset"]]
        assert (r["key"], r["value"]) == (s["key"], s["value"])
        assert [(h["key"], h["value"]) for h in r["headers"]] == (s["headers"] or [])
        assert int(r["timestamp"].timestamp() * 1000) == s["timestamp"]


def test_deleted_offsets_fail_or_are_skipped_by_fail_on_data_loss(broker: Broker) -> None:
    topic = broker.create_topic(1)
    lose_first_records(broker, topic, 40)
    broker.produce(topic, [{"value": b"%d" % i} for i in range(40, 100)])
    with pytest.raises(DataLossError):
        _rows(_part(broker, topic, 10, 100, fail=True))
    rows = _rows(_part(broker, topic, 10, 100, fail=False))
    assert [r["offset"] for r in rows] == list(range(40, 100))

"""The hand-written encoders must produce exactly what kio's readers (generated from Kafka's schemas) accept."""

from __future__ import annotations

import uuid

import pytest
from kio.index import load_response_schema
from kio.serial import entity_reader

from odradek.protocol.encoders import (
    FetchPartitionResult,
    MetadataPartition,
    MetadataTopic,
    ProducePartitionResult,
    encode_fetch_response,
    encode_metadata_response,
    encode_produce_response,
)
from odradek.protocol.records import encode_batch


def _decode(api_key: int, version: int, chunks: list) -> object:
    data = b"".join(bytes(c) for c in chunks)
    value, size = entity_reader(load_response_schema(api_key, version))(data, 0)
    assert size == len(data), "encoder wrote trailing bytes the schema does not have"
    return value


@pytest.mark.parametrize("version", range(3, 13))
def test_produce_response_matches_schema(version: int) -> None:
    parts = [
        ProducePartitionResult(0, 0, 42, -1, 0),
        ProducePartitionResult(1, 6, -1, -1, -1, error_message="not leader", record_errors=[(0, "bad")]),
    ]
    resp = _decode(0, version, encode_produce_response(version, [("orders", parts)], throttle_ms=5))
    topic = resp.responses[0]
    assert topic.name == "orders"
    assert [p.index for p in topic.partition_responses] == [0, 1]
    assert topic.partition_responses[0].base_offset == 42
    assert topic.partition_responses[1].error_code == 6
    if version >= 8:
        assert topic.partition_responses[1].error_message == "not leader"
        assert topic.partition_responses[1].record_errors[0].batch_index_error_message == "bad"
    assert resp.throttle_time.total_seconds() == pytest.approx(0.005)


@pytest.mark.parametrize("version", range(4, 17))
def test_fetch_response_matches_schema_and_passes_records_through(version: int) -> None:
    batch = encode_batch([(b"k", b"v" * 100, [])], base_offset=7, timestamp_ms=1)
    tid = uuid.uuid4()
    parts = [
        FetchPartitionResult(0, 0, 8, 8, 0, [memoryview(batch)], len(batch)),
        FetchPartitionResult(1, 1, 5, 5, 0),
    ]
    if version >= 12:
        parts.append(FetchPartitionResult(2, 0, 3, 3, 0, diverging_epoch=(4, 2)))
    chunks = encode_fetch_response(version, [("t", tid, parts)])
    assert any(isinstance(c, memoryview) for c in chunks), "record bytes must not be copied into the header buffer"
    resp = _decode(1, version, chunks)
    topic = resp.responses[0]
    if version >= 13:
        assert topic.topic_id == tid
    else:
        assert topic.topic == "t"
    p0, p1 = topic.partitions[0], topic.partitions[1]
    assert bytes(p0.records) == bytes(batch)
    assert p0.high_watermark == 8
    assert p1.error_code == 1
    if version >= 12:
        assert topic.partitions[2].diverging_epoch.epoch == 4
        assert topic.partitions[2].diverging_epoch.end_offset == 2


@pytest.mark.parametrize("version", range(0, 14))
def test_metadata_response_matches_schema(version: int) -> None:
    tid = uuid.uuid4()
    topics = [
        MetadataTopic("t", tid, [MetadataPartition(0, 1, 3, [1, 2], [1], [2])]),
        MetadataTopic("missing", None, [], error_code=3),
    ]
    resp = _decode(3, version, encode_metadata_response(version, [(1, "h", 9092, "r1")], "cid", 1, topics))
    assert resp.brokers[0].host == "h"
    assert resp.brokers[0].port == 9092
    t = resp.topics[0]
    assert t.name == "t"
    assert list(t.partitions[0].replica_nodes) == [1, 2]
    assert list(t.partitions[0].isr_nodes) == [1]
    if version >= 7:
        assert t.partitions[0].leader_epoch == 3
    if version >= 10:
        assert t.topic_id == tid
    if version >= 2:
        assert resp.cluster_id == "cid"
    assert resp.topics[1].error_code == 3

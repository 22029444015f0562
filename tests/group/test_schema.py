"""The ``__consumer_offsets`` record formats and the group → partition mapping, checked against Kafka's
bytes."""

from __future__ import annotations

import struct

import pytest

from odradek.broker.group.config import GroupConfig
from odradek.broker.group.schema import (
    GroupKey,
    GroupValue,
    MemberValue,
    OffsetKey,
    OffsetValue,
    SchemaError,
    decode_group_value,
    decode_key,
    decode_offset_value,
    encode_group_value,
    encode_key,
    encode_offset_value,
    java_string_hashcode,
    partition_for,
)

# Computed with Java 17's String.hashCode() and Kafka's Utils.abs(h) % 50 (GroupMetadataManager.partitionFor).
JAVA = [
    ("", 0, 0),
    ("a", 97, 47),
    ("hello", 99162322, 22),
    ("my-group", -1906497762, 12),
    ("console-consumer-12345", 158455506, 6),
    ("gr\u00fcppe", -1233264812, 12),
    ("\U0001f600emoji", -1233692477, 27),
    ("a-very-long-group-name-that-overflows-int32-many-times", 212125451, 1),
]


@pytest.mark.parametrize(("group", "hashcode", "partition"), JAVA)
def test_java_hashcode_and_partition(group: str, hashcode: int, partition: int) -> None:
    assert java_string_hashcode(group) == hashcode
    assert partition_for(group, 50) == partition


def test_offset_commit_key_and_value_bytes() -> None:
    key = encode_key(OffsetKey("g", "t", 7))
    assert key == struct.pack(">hh1sh1si", 1, 1, b"g", 1, b"t", 7)
    value = encode_offset_value(OffsetValue(42, 3, "meta", 1_700_000_000_000))
    assert value == struct.pack(">hqih4sq", 3, 42, 3, 4, b"meta", 1_700_000_000_000)
    assert decode_key(key) == OffsetKey("g", "t", 7)
    assert decode_offset_value(value) == OffsetValue(42, 3, "meta", 1_700_000_000_000)


def test_old_offset_value_versions_are_read() -> None:
    v0 = struct.pack(">hqh1sq", 0, 5, 1, b"m", 10)
    v1 = struct.pack(">hqh1sqq", 1, 5, 1, b"m", 10, 99)
    assert decode_offset_value(v0) == OffsetValue(5, -1, "m", 10)
    assert decode_offset_value(v1) == OffsetValue(5, -1, "m", 10, expire_timestamp=99)
    with pytest.raises(SchemaError):
        decode_offset_value(struct.pack(">h", 9))


def test_group_metadata_key_and_value_roundtrip() -> None:
    assert encode_key(GroupKey("grp")) == struct.pack(">hh3s", 2, 3, b"grp")
    value = GroupValue(
        protocol_type="consumer",
        generation=4,
        protocol="range",
        leader="m1",
        current_state_timestamp=123,
        members=[
            MemberValue("m1", "inst-1", "client", "/127.0.0.1", 30000, 10000, b"sub", b"asg"),
            MemberValue("m2", None, "client", "/127.0.0.1", 30000, 10000, b"", b""),
        ],
    )
    raw = encode_group_value(value)
    assert raw[:2] == b"\x00\x03"
    assert decode_group_value(raw) == value
    empty = GroupValue("consumer", 5, None, None, 456, [])
    assert decode_group_value(encode_group_value(empty)) == empty


def test_group_value_v0_is_read_with_session_timeout_as_rebalance_timeout() -> None:
    member = struct.pack(">h2sh1sh2sii1si1s", 2, b"m1", 1, b"c", 2, b"/h", 10000, 1, b"s", 1, b"a")
    raw = struct.pack(">hh8sih5sh2si", 0, 8, b"consumer", 3, 5, b"range", 2, b"m1", 1) + member
    decoded = decode_group_value(raw)
    assert decoded.members == [MemberValue("m1", None, "c", "/h", 10000, 10000, b"s", b"a")]
    assert decoded.current_state_timestamp == -1


def test_config_from_overrides_uses_kafka_names() -> None:
    config = GroupConfig.from_overrides(
        {"group.initial.rebalance.delay.ms": "0", "offsets.retention.minutes": "1", "log.segment.bytes": "10"}
    )
    assert config.initial_rebalance_delay_ms == 0
    assert config.offsets_retention_ms == 60_000
    assert config.offsets_topic_num_partitions == 50
    with pytest.raises(ValueError, match=r"group\.max\.size"):
        GroupConfig.from_overrides({"group.max.size": "many"})

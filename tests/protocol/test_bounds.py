"""Lengths in a Kafka message are checked against the bytes after them before kio decodes it (kio's native reader
allocates what an array length claims, and a failed allocation aborts the process)."""

from __future__ import annotations

import io
import struct
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.index import load_request_schema, load_response_schema
from kio.serial import entity_writer
from kio.static.primitive import Records

from odradek.broker.api_registry import load_apis
from odradek.protocol.bounds import LengthError, check_lengths

st.register_type_strategy(Records, st.binary(max_size=64))

SERVED = [(key, version) for key, module in sorted(load_apis().items()) if not getattr(module, "RAW", False)
          for version in range(module.MIN_VERSION, module.MAX_VERSION + 1)]


def _encode(entity: Any) -> bytes:
    buf = io.BytesIO()
    entity_writer(type(entity))(buf, entity)
    return buf.getvalue()


@pytest.mark.parametrize(("key", "version"), SERVED)
def test_every_valid_request_and_response_passes_and_ends_where_it_ends(key: int, version: int) -> None:
    """The walk agrees with kio's own encoding, byte for byte, for every API version the broker serves."""

    @settings(max_examples=4, deadline=None, suppress_health_check=list(HealthCheck), database=None,
              derandomize=True)
    @given(st.data())
    def check(data: st.DataObject) -> None:
        for schema in (load_request_schema(key, version), load_response_schema(key, version)):
            raw = _encode(data.draw(st.from_type(schema)))
            assert check_lengths(schema, raw, 0) == len(raw)

    check()


def test_an_array_longer_than_the_message_is_refused() -> None:
    metadata_v1 = load_request_schema(3, 1)  # topics: int32 length
    with pytest.raises(LengthError, match="array of 2147483647 elements"):
        check_lengths(metadata_v1, struct.pack(">i", 0x7FFFFFFF), 0)
    metadata_v12 = load_request_schema(3, 12)  # topics: compact (uvarint) length
    with pytest.raises(LengthError, match="array of 4294967294 elements"):
        check_lengths(metadata_v12, b"\xff\xff\xff\xff\x0f\x00\x00\x00", 0)


def test_a_nested_array_is_checked_against_what_remains() -> None:
    fetch_v11 = load_request_schema(1, 11)  # fixed-size partitions: one multiplication per topic
    head = struct.pack(">iiiiBii", -1, 500, 1, 1 << 20, 0, 0, -1)
    topic = struct.pack(">h", 1) + b"t" + struct.pack(">i", 1000)  # 1,000 partitions of 28 bytes promised
    with pytest.raises(LengthError, match="fixed-size elements"):
        check_lengths(fetch_v11, head + struct.pack(">i", 1) + topic + b"\x00" * 2000, 0)


def test_lengths_that_run_past_the_end_are_refused() -> None:
    metadata_v12 = load_request_schema(3, 12)
    with pytest.raises(LengthError, match="varint"):
        check_lengths(metadata_v12, b"\xff\xff\xff\xff\xff\xff", 0)
    with pytest.raises(LengthError):
        check_lengths(load_request_schema(3, 1), struct.pack(">i", 1) + struct.pack(">h", 5) + b"ab", 0)

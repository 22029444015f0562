"""The vectorized RecordBatch decoder against a plain reference encoder and against real producers."""

from __future__ import annotations

import pytest
from batch_encoder import Rec, encode
from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.spark.recordbatch import CorruptRecordBatch, decode_batches, split_batches

TS = 1_700_000_000_000


def _decode(blob: bytes, lo: int = 0, hi: int = 1 << 62, headers: bool = True) -> list[dict]:
    return decode_batches(
        blob, split_batches(blob), topic="t", partition=7, lo=lo, hi=hi, include_headers=headers
    ).to_pylist()


def _expected(records: list[Rec], base: int, step: int = 1) -> list[tuple]:
    return [
        (r.key, r.value, base + i * step, r.timestamp, [(k, v) for k, v in r.headers]) for i, r in enumerate(records)
    ]


def _got(rows: list[dict]) -> list[tuple]:
    assert all(r["topic"] == "t" and r["partition"] == 7 for r in rows)
    return [
        (
            r["key"],
            r["value"],
            r["offset"],
            int(r["timestamp"].timestamp() * 1000),
            [(h["key"], h["value"]) for h in r["headers"]],
        )
        for r in rows
    ]


records_strategy = st.lists(
    st.builds(
        Rec,
        key=st.none() | st.binary(max_size=20),
        value=st.none() | st.binary(max_size=300),
        timestamp=st.integers(TS, TS + 100_000),
        headers=st.lists(st.tuples(st.text(max_size=5), st.none() | st.binary(max_size=5)), max_size=2),
    ),
    min_size=1,
    max_size=200,
)


@settings(max_examples=60, deadline=None)
@given(records=records_strategy, codec=st.sampled_from([0, 1, 2, 3, 4]), base=st.integers(0, 1 << 40))
def test_any_records_any_codec_round_trip(records: list[Rec], codec: int, base: int) -> None:
    blob = encode(records, base_offset=base, codec=codec)
    assert _got(_decode(blob)) == _expected(records, base)


@settings(max_examples=20, deadline=None)
@given(value_size=st.integers(0, 400), count=st.integers(1, 20_000))
def test_uniform_records_take_the_run_path_and_stay_exact(value_size: int, count: int) -> None:
    # Equal-size records are decoded through the galloping run check; the record length still changes
    # where the offset delta's varint grows (64, 8192), which must not shift a single record.
    records = [Rec(b"k%d" % (i % 10), bytes([i % 251]) * value_size, TS) for i in range(count)]
    rows = _decode(encode(records, base_offset=5), headers=False)
    assert len(rows) == count
    assert [r["offset"] for r in rows] == list(range(5, 5 + count))
    assert all(r["value"] == bytes([i % 251]) * value_size for i, r in enumerate(rows))
    assert all(r["key"] == b"k%d" % (i % 10) for i, r in enumerate(rows))


def test_offset_window_filters_records_of_straddling_batches() -> None:
    a = [Rec(b"a", b"%d" % i, TS + i) for i in range(10)]
    b = [Rec(b"b", b"%d" % i, TS + i) for i in range(10)]
    blob = encode(a, base_offset=100) + encode(b, base_offset=110)
    rows = _decode(blob, lo=105, hi=113)
    assert [r["offset"] for r in rows] == list(range(105, 113))
    assert [r["value"] for r in rows] == [b"5", b"6", b"7", b"8", b"9", b"0", b"1", b"2"]


def test_control_batches_are_skipped_and_gaps_from_compaction_kept() -> None:
    data = encode([Rec(b"k", b"v", TS)] * 3, base_offset=0, offset_step=3)
    marker = encode([Rec(b"\x00\x00\x00\x01", b"\x00\x00\x00\x00\x00\x00", TS)], base_offset=7, control=True)
    rows = _decode(data + marker)
    assert [r["offset"] for r in rows] == [0, 3, 6]


def test_log_append_time_uses_the_batch_timestamp() -> None:
    blob = encode([Rec(None, b"x", TS), Rec(None, b"y", TS + 5)], base_offset=0, log_append_time=TS + 999)
    rows = _decode(blob)
    assert [int(r["timestamp"].timestamp() * 1000) for r in rows] == [TS + 999, TS + 999]
    assert [r["timestampType"] for r in rows] == [1, 1]


def test_trailing_partial_batch_is_left_for_the_next_fetch() -> None:
    full = encode([Rec(b"k", b"v", TS)], base_offset=0)
    nxt = encode([Rec(b"k", b"w", TS)], base_offset=1)
    batches = split_batches(full + nxt[:-3])
    assert [(b.base_offset, b.last_offset) for b in batches] == [(0, 0)]


def test_crc_mismatch_is_reported() -> None:
    blob = bytearray(encode([Rec(b"k", b"value", TS)], base_offset=0))
    blob[-1] ^= 0xFF
    with pytest.raises(CorruptRecordBatch):
        _decode(bytes(blob))


def test_arrow_types_match_the_spark_schema() -> None:
    batch = decode_batches(
        encode([Rec(b"k", b"v", TS)], base_offset=0),
        split_batches(encode([Rec(b"k", b"v", TS)], base_offset=0)),
        topic="t",
        partition=0,
        lo=0,
        hi=10,
        include_headers=True,
    )
    assert [str(f.type) for f in batch.schema] == [
        "binary",
        "binary",
        "string",
        "int32",
        "int64",
        "timestamp[us, tz=UTC]",
        "int32",
        "list<element: struct<key: string, value: binary>>",
    ]

"""Decode Kafka RecordBatch v2 bytes straight into Arrow columns.

Why not row by row: a Python loop that builds one tuple per record tops out near 0.5M rows/s inside a
Spark worker. Here the only per-record Python work is finding where each record starts (records are
variable length, so that walk is inherently sequential, and it is skipped entirely when a batch holds
records of one size). Every field is then decoded for all records of a fetch at once with numpy
gathers, and keys/values become Arrow ``binary_view`` arrays pointing into the fetched buffer, which
Arrow's C++ cast compacts into the ``binary`` arrays Spark wants.

Layout (Kafka's ``DefaultRecordBatch``/``DefaultRecord``): a 61-byte batch header, then per record
length, attributes, timestampDelta, offsetDelta, keyLength, key, valueLength, value, header count and
headers; all lengths and deltas are zigzag varints.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass

import crc32c
import numpy as np
import pyarrow as pa

from odradek.spark.compression import decompress
from odradek.spark.schema import HEADERS_TYPE, arrow_schema

BATCH_HEADER = struct.Struct(">qiibIhiqqqhii")
BATCH_HEADER_LEN = BATCH_HEADER.size  # 61
_LOG_OVERHEAD = 12  # baseOffset + batchLength precede the part batchLength counts
_CRC_START = 21
_COMPRESSION_MASK = 0x07
_TIMESTAMP_TYPE_BIT = 0x08
_CONTROL_BIT = 0x20
_PAD = 16  # zero bytes after the buffer so fixed-width gathers never index past its end

_TIMESTAMP_TYPE = pa.timestamp("us", tz="UTC")


class CorruptRecordBatch(ValueError):
    """Fetched bytes that are not a well-formed RecordBatch v2."""


@dataclass(frozen=True, slots=True)
class BatchInfo:
    """What a batch header says; ``start`` is where the batch begins inside the fetched blob."""

    start: int
    size: int
    base_offset: int
    last_offset: int
    attributes: int
    base_timestamp: int
    max_timestamp: int
    records: int

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & _CONTROL_BIT)

    @property
    def codec(self) -> int:
        return self.attributes & _COMPRESSION_MASK

    @property
    def log_append_time(self) -> bool:
        return bool(self.attributes & _TIMESTAMP_TYPE_BIT)


def split_batches(blob: bytes | memoryview) -> list[BatchInfo]:
    """Parse the batch headers of a fetched records blob, dropping a trailing partial batch.

    Brokers cut fetch responses at a byte limit, so the last batch may be incomplete; consumers ignore it
    and fetch again from its base offset.
    """
    view = memoryview(blob)
    out: list[BatchInfo] = []
    pos = 0
    end = len(view)
    while pos + BATCH_HEADER_LEN <= end:
        (
            base_offset,
            batch_len,
            _epoch,
            magic,
            _crc,
            attributes,
            last_delta,
            base_ts,
            max_ts,
            _pid,
            _pepoch,
            _seq,
            count,
        ) = BATCH_HEADER.unpack_from(view, pos)
        size = _LOG_OVERHEAD + batch_len
        if pos + size > end:
            break
        if magic != 2:
            raise CorruptRecordBatch(f"record batch magic {magic} at offset {base_offset}; only v2 is read")
        out.append(
            BatchInfo(pos, size, base_offset, base_offset + last_delta, attributes, base_ts, max_ts, count)
        )
        pos += size
    return out


def verify_crc(blob: bytes | memoryview, batch: BatchInfo) -> None:
    """Check a batch's CRC-32C (bytes 21..end), as the Java consumer does by default."""
    view = memoryview(blob)
    (stored,) = struct.unpack_from(">I", view, batch.start + 17)
    actual = crc32c.crc32c(view[batch.start + _CRC_START : batch.start + batch.size])
    if actual != stored:
        raise CorruptRecordBatch(f"CRC mismatch in batch at offset {batch.base_offset}")


def _zigzag(raw: np.ndarray) -> np.ndarray:
    raw = raw.astype(np.int64, copy=False)
    return (raw >> 1) ^ -(raw & 1)


def _varints(arr: np.ndarray, pos: np.ndarray, width: int) -> tuple[np.ndarray, np.ndarray]:
    """Decode one zigzag varint at every position in ``pos``; returns (values, encoded sizes)."""
    first = arr[pos]
    if not (first & 0x80).any():
        return _zigzag(first), np.ones(len(pos), dtype=np.int64)
    window = arr[pos[:, None] + np.arange(width)]
    more = (window & 0x80) != 0
    sizes = np.argmin(more, axis=1).astype(np.int64) + 1
    shifts = np.arange(width, dtype=np.uint64) * np.uint64(7)
    digits = (window & 0x7F).astype(np.uint64) << shifts
    digits[np.arange(width) >= sizes[:, None]] = 0
    raw = np.bitwise_or.reduce(digits, axis=1)
    values = (raw >> np.uint64(1)).astype(np.int64) ^ -(raw & np.uint64(1)).astype(np.int64)
    return values, sizes


def _scalar_varint(buf: bytes, pos: int) -> tuple[int, int]:
    raw = 0
    shift = 0
    p = pos
    while True:
        b = buf[p]
        raw |= (b & 0x7F) << shift
        p += 1
        if b < 0x80:
            break
        shift += 7
    return (raw >> 1) ^ -(raw & 1), p - pos


def _zigzag_bytes(value: int) -> bytes:
    raw = (value << 1) ^ (value >> 63)
    out = bytearray()
    while raw >= 0x80:
        out.append((raw & 0x7F) | 0x80)
        raw >>= 7
    out.append(raw)
    return bytes(out)


def record_starts(buf: bytes, arr: np.ndarray, begin: int, end: int, count: int) -> np.ndarray:
    """Byte positions of the ``count`` records laid out in ``buf[begin:end]``.

    Fast path: if the first record's size times ``count`` fills the section exactly and every stride
    position starts with the same length varint, the walk is proven without visiting records one by one.
    """
    if count <= 0:
        return np.empty(0, dtype=np.int64)
    first_len, first_size = _scalar_varint(buf, begin)
    stride = first_size + first_len
    if stride > 0 and stride * count == end - begin:
        starts = begin + np.arange(count, dtype=np.int64) * stride
        encoded = _zigzag_bytes(first_len)
        if all(bool((arr[starts + k] == encoded[k]).all()) for k in range(len(encoded))):
            return starts
    out = np.empty(count, dtype=np.int64)
    p = begin
    i = 0
    while p < end and i < count:
        out[i] = p
        b = buf[p]
        if b < 0x80:
            p += 1 + (b >> 1)
        else:
            length, size = _scalar_varint(buf, p)
            p += size + length
        i += 1
    if i != count or p != end:
        raise CorruptRecordBatch(f"batch declares {count} records but its bytes hold {i}")
    return out


def _binary_column(arr: np.ndarray, data: pa.Buffer, starts: np.ndarray, lengths: np.ndarray) -> pa.Array:
    """Build a ``binary`` array whose i-th value is ``data[starts[i]:starts[i]+lengths[i]]`` (null if length<0).

    Goes through ``binary_view`` (16-byte views: length, 4-byte prefix, buffer index, offset; values up to
    12 bytes inline) so that the only byte copy is Arrow's own cast.
    """
    n = len(starts)
    valid = lengths >= 0
    lens = np.where(valid, lengths, 0).astype(np.int32)
    views = np.zeros((n, 16), dtype=np.uint8)
    views[:, 0:4] = lens.view(np.uint8).reshape(n, 4)
    window = arr[starts[:, None] + np.arange(12)]
    window[np.arange(12) >= lens[:, None]] = 0
    long_mask = lens > 12
    views[:, 4:16] = window
    if long_mask.any():
        tail = np.zeros((n, 8), dtype=np.uint8)
        tail[:, 4:8] = starts.astype(np.int32).view(np.uint8).reshape(n, 4)
        views[long_mask, 8:16] = tail[long_mask]
    validity = None
    null_count = int(n - valid.sum())
    if null_count:
        validity = pa.py_buffer(np.packbits(valid, bitorder="little"))
    view_array = pa.Array.from_buffers(
        pa.binary_view(), n, [validity, pa.py_buffer(views), data], null_count=null_count
    )
    return view_array.cast(pa.binary())


def _headers_column(buf: bytes, positions: np.ndarray, counts: np.ndarray) -> pa.Array:
    if not counts.any():
        offsets = pa.py_buffer(np.zeros(len(positions) + 1, dtype=np.int32))
        empty = pa.array([], type=HEADERS_TYPE.value_type)
        return pa.ListArray.from_buffers(HEADERS_TYPE, len(positions), [None, offsets], children=[empty])
    rows: list[list[dict[str, object]]] = []
    for pos, count in zip(positions.tolist(), counts.tolist(), strict=True):
        row: list[dict[str, object]] = []
        p = pos
        for _ in range(count):
            klen, size = _scalar_varint(buf, p)
            p += size
            key = buf[p : p + klen].decode("utf-8")
            p += klen
            vlen, size = _scalar_varint(buf, p)
            p += size
            value = None if vlen < 0 else buf[p : p + vlen]
            p += max(vlen, 0)
            row.append({"key": key, "value": value})
        rows.append(row)
    return pa.array(rows, type=HEADERS_TYPE)


def decode_batches(
    blob: bytes | memoryview,
    batches: Sequence[BatchInfo],
    *,
    topic: str,
    partition: int,
    lo: int,
    hi: int,
    include_headers: bool,
    check_crc: bool = True,
) -> pa.RecordBatch:
    """Decode the records with offsets in ``[lo, hi)`` from already split batches into one Arrow batch."""
    view = memoryview(blob)
    sections: list[bytes] = []
    counts: list[int] = []
    base_offsets: list[int] = []
    base_ts: list[int] = []
    max_ts: list[int] = []
    log_append: list[bool] = []
    for b in batches:
        if b.is_control or b.last_offset < lo or b.base_offset >= hi or b.records == 0:
            continue
        if check_crc:
            verify_crc(view, b)
        sections.append(decompress(b.codec, view[b.start + BATCH_HEADER_LEN : b.start + b.size]))
        counts.append(b.records)
        base_offsets.append(b.base_offset)
        base_ts.append(b.base_timestamp)
        max_ts.append(b.max_timestamp)
        log_append.append(b.log_append_time)
    schema = arrow_schema(include_headers)
    if not sections:
        return pa.RecordBatch.from_pylist([], schema=schema)
    buf = b"".join(sections) + bytes(_PAD)
    arr = np.frombuffer(buf, dtype=np.uint8)
    starts_parts = []
    pos = 0
    for section, count in zip(sections, counts, strict=True):
        starts_parts.append(record_starts(buf, arr, pos, pos + len(section), count))
        pos += len(section)
    starts = np.concatenate(starts_parts)
    counts_arr = np.asarray(counts, dtype=np.int64)

    p = starts
    _, size = _varints(arr, p, 5)
    p = p + size + 1  # length, then the attributes byte
    ts_delta, size = _varints(arr, p, 10)
    p = p + size
    offset_delta, size = _varints(arr, p, 5)
    p = p + size
    key_len, size = _varints(arr, p, 5)
    key_start = p + size
    p = key_start + np.maximum(key_len, 0)
    value_len, size = _varints(arr, p, 5)
    value_start = p + size
    p = value_start + np.maximum(value_len, 0)

    offsets = np.repeat(np.asarray(base_offsets, dtype=np.int64), counts_arr) + offset_delta
    ts_ms = np.where(
        np.repeat(np.asarray(log_append, dtype=bool), counts_arr),
        np.repeat(np.asarray(max_ts, dtype=np.int64), counts_arr),
        np.repeat(np.asarray(base_ts, dtype=np.int64), counts_arr) + ts_delta,
    )
    ts_type = np.repeat(np.asarray(log_append, dtype=np.int32), counts_arr)

    keep = (offsets >= lo) & (offsets < hi)
    if not keep.all():
        offsets, ts_ms, ts_type = offsets[keep], ts_ms[keep], ts_type[keep]
        key_start, key_len, value_start, value_len = (
            key_start[keep],
            key_len[keep],
            value_start[keep],
            value_len[keep],
        )
        p = p[keep]
    n = len(offsets)
    data = pa.py_buffer(buf)
    columns = [
        _binary_column(arr, data, key_start, key_len),
        _binary_column(arr, data, value_start, value_len),
        pa.repeat(pa.scalar(topic, pa.string()), n),
        pa.array(np.full(n, partition, dtype=np.int32)),
        pa.array(offsets),
        pa.array(ts_ms * 1000, type=pa.int64()).view(_TIMESTAMP_TYPE),
        pa.array(ts_type),
    ]
    if include_headers:
        header_count, size = _varints(arr, p, 5)
        columns.append(_headers_column(buf, p + size, header_count))
    return pa.RecordBatch.from_arrays(columns, schema=schema)

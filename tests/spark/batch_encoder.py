"""A small reference RecordBatch v2 writer for decoder tests: per-record timestamps, every codec.

Written plainly, record by record, from the format description, so that the vectorized decoder is
checked against an independent encoding rather than against itself.
"""

from __future__ import annotations

import gzip
import struct
from collections.abc import Sequence
from dataclasses import dataclass, field

import cramjam
import crc32c

_HEADER = struct.Struct(">qiibIhiqqqhii")


@dataclass
class Rec:
    key: bytes | None
    value: bytes | None
    timestamp: int
    headers: list[tuple[str, bytes | None]] = field(default_factory=list)


def _varint(out: bytearray, value: int) -> None:
    raw = (value << 1) ^ (value >> 63)
    while raw >= 0x80:
        out.append((raw & 0x7F) | 0x80)
        raw >>= 7
    out.append(raw)


def _bytes(out: bytearray, data: bytes | None) -> None:
    if data is None:
        _varint(out, -1)
    else:
        _varint(out, len(data))
        out += data


def encode(
    records: Sequence[Rec],
    *,
    base_offset: int,
    codec: int = 0,
    log_append_time: int | None = None,
    control: bool = False,
    offset_step: int = 1,
) -> bytes:
    """One batch; ``offset_step`` > 1 leaves offset gaps as compaction does."""
    base_ts = min(r.timestamp for r in records)
    body = bytearray()
    for i, r in enumerate(records):
        rec = bytearray(b"\x00")
        _varint(rec, r.timestamp - base_ts)
        _varint(rec, i * offset_step)
        _bytes(rec, r.key)
        _bytes(rec, r.value)
        _varint(rec, len(r.headers))
        for k, v in r.headers:
            _bytes(rec, k.encode())
            _bytes(rec, v)
        _varint(body, len(rec))
        body += rec
    payload = bytes(body)
    if codec == 1:
        payload = gzip.compress(payload)
    elif codec == 2:
        payload = bytes(cramjam.snappy.compress_raw(payload))
    elif codec == 3:
        payload = bytes(cramjam.lz4.compress(payload))
    elif codec == 4:
        payload = bytes(cramjam.zstd.compress(payload))
    attributes = codec | (0x08 if log_append_time is not None else 0) | (0x20 if control else 0)
    max_ts = log_append_time if log_append_time is not None else max(r.timestamp for r in records)
    last_delta = (len(records) - 1) * offset_step
    out = bytearray(_HEADER.size)
    _HEADER.pack_into(
        out,
        0,
        base_offset,
        _HEADER.size - 12 + len(payload),
        0,
        2,
        0,
        attributes,
        last_delta,
        base_ts,
        max_ts,
        -1,
        -1,
        -1,
        len(records),
    )
    out += payload
    struct.pack_into(">I", out, 17, crc32c.crc32c(memoryview(out)[21:]))
    return bytes(out)

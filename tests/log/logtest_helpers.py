"""Builders for log tests: real batches from records.encode_batch (uniquely named module: tests have no
packages)."""

from __future__ import annotations

import struct

import cramjam
import crc32c

from odradek.broker.log.partition_log import PartitionLog
from odradek.protocol.records import (
    COMPRESSION_LZ4,
    COMPRESSION_SNAPPY,
    COMPRESSION_ZSTD,
    CRC_START,
    HEADER_SIZE,
    LOG_OVERHEAD,
    BatchHeader,
    decode_batch,
    encode_batch,
    iter_batches,
    read_header,
    validate_produce,
)

T0 = 1_700_000_000_000


def batch(
    n: int = 1,
    *,
    ts: int = T0,
    key: bytes | None = None,
    value: bytes = b"v",
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    values: list[tuple[bytes | None, bytes | None]] | None = None,
    compression: int = 0,
) -> tuple[bytearray, list[BatchHeader]]:
    """One produce-request record set (a single batch) and its validated headers."""
    recs = values if values is not None else [(key, value + str(i).encode()) for i in range(n)]
    buf = encode_batch(
        [(k, v, []) for k, v in recs],
        timestamp_ms=ts,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence, compression=compression,
    )
    return buf, validate_produce(buf)


def append(log: PartitionLog, n: int = 1, *, epoch: int = 0, now: int | None = None, **kw: object) -> object:
    buf, headers = batch(n, **kw)  # type: ignore[arg-type]
    return log.append_as_leader(buf, headers, epoch, now if now is not None else T0)


def read_all(log: PartitionLog, start: int | None = None) -> list[tuple[int, bytes | None, bytes | None]]:
    """Every record from ``start`` to the LEO through the public read path."""
    out: list[tuple[int, bytes | None, bytes | None]] = []
    offset = log.log_start_offset if start is None else start
    while offset < log.log_end_offset:
        result = log.read(offset, 1 << 20)
        assert result.size > 0, f"no progress at offset {offset}"
        data = b"".join(bytes(b) for b in result.buffers)
        for position, header in iter_batches(data):
            _, records = decode_batch(data, position)
            out.extend((r.offset, r.key, r.value) for r in records if r.offset >= offset)
            offset = header.next_offset
    return out




def compressed_batch(
    records: list[tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]]]],
    codec: int,
    *,
    ts: int = T0,
    xerial: bool = False,
) -> tuple[bytearray, list[BatchHeader]]:
    """A produce-request batch in a codec ``encode_batch`` cannot write, compressed the way clients do it: snappy
    raw (librdkafka) or xerial-framed (the Java client), lz4 as a frame of independent blocks, zstd as one frame."""
    plain = encode_batch(records, timestamp_ms=ts)
    body = bytes(plain[HEADER_SIZE:])
    if codec == COMPRESSION_SNAPPY and xerial:
        block = bytes(cramjam.snappy.compress_raw(body))
        payload = b"\x82SNAPPY\x00" + struct.pack(">iii", 1, 1, len(block)) + block
    elif codec == COMPRESSION_SNAPPY:
        payload = bytes(cramjam.snappy.compress_raw(body))
    elif codec == COMPRESSION_LZ4:
        compressor = cramjam.lz4.Compressor(content_checksum=False, block_linked=False)
        compressor.compress(body)
        payload = bytes(compressor.finish())
    elif codec == COMPRESSION_ZSTD:
        payload = bytes(cramjam.zstd.compress(body, level=3))
    else:
        raise ValueError(f"use encode_batch for codec {codec}")
    out = bytearray(plain[:HEADER_SIZE]) + payload
    struct.pack_into(">i", out, 8, len(out) - LOG_OVERHEAD)
    struct.pack_into(">h", out, 21, read_header(plain).attributes | codec)
    struct.pack_into(">I", out, 17, crc32c.crc32c(memoryview(out)[CRC_START:]))
    return out, validate_produce(out)

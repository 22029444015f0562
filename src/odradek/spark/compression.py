"""Decompression of RecordBatch v2 payloads, one codec id (attributes bits 0-2) per batch.

gzip goes through the stdlib's zlib; snappy, lz4 and zstd through cramjam, which wraps the reference Rust
crates and releases the GIL, so two Spark tasks in one worker process can decompress in parallel.
"""

from __future__ import annotations

import struct
import zlib

import cramjam

CODEC_NONE = 0
CODEC_GZIP = 1
CODEC_SNAPPY = 2
CODEC_LZ4 = 3
CODEC_ZSTD = 4

# The Java client writes snappy in snappy-java's stream framing ("xerial"); librdkafka writes raw snappy.
# Every Kafka consumer accepts both, so we do too.
_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER_LEN = 16
_BLOCK_LEN = struct.Struct(">i")


class UnsupportedCodec(ValueError):
    """A batch named a compression codec this reader cannot decode."""


def decompress(codec: int, payload: bytes | memoryview) -> bytes | memoryview:
    """Return the uncompressed records section of one batch (uncompressed input comes back uncopied)."""
    if codec == CODEC_NONE:
        return payload
    if codec == CODEC_GZIP:
        # wbits 47 = accept a zlib or gzip header; Kafka's gzip payload is a single gzip member.
        return zlib.decompress(payload, 47)
    if codec == CODEC_SNAPPY:
        return _snappy(payload)
    if codec == CODEC_LZ4:
        return bytes(cramjam.lz4.decompress(payload))
    if codec == CODEC_ZSTD:
        return bytes(cramjam.zstd.decompress(payload))
    raise UnsupportedCodec(f"unknown compression codec {codec}")


def _snappy(payload: bytes | memoryview) -> bytes:
    view = memoryview(payload)
    if bytes(view[: len(_XERIAL_MAGIC)]) != _XERIAL_MAGIC:
        return bytes(cramjam.snappy.decompress_raw(view))
    parts: list[bytes] = []
    pos = _XERIAL_HEADER_LEN
    while pos < len(view):
        (block_len,) = _BLOCK_LEN.unpack_from(view, pos)
        pos += 4
        parts.append(bytes(cramjam.snappy.decompress_raw(view[pos : pos + block_len])))
        pos += block_len
    return b"".join(parts)

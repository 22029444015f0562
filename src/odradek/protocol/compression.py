"""The RecordBatch v2 codecs, one id per batch (attributes bits 0-2): how a batch body is compressed and inflated.

One module for every reader and writer in odradek: the broker decodes internal topics and compacts logs with it, and
the Spark source decodes fetched batches with it. gzip goes through the stdlib's zlib; snappy, lz4 and zstd through
cramjam, which wraps the reference Rust crates and releases the GIL (two Spark tasks in one worker can inflate in
parallel). What is written is what every Kafka client reads: snappy keeps whichever framing the producer chose (raw
blocks from librdkafka, snappy-java's "xerial" stream framing from the Java client; every consumer accepts both),
lz4 is a frame with independent blocks (the Java client refuses linked ones), zstd a plain frame at Kafka's default
level.
"""

from __future__ import annotations

import gzip
import struct
import zlib

import cramjam

from odradek.errors import ErrorCode, KafkaError

CODEC_NONE = 0
CODEC_GZIP = 1
CODEC_SNAPPY = 2
CODEC_LZ4 = 3
CODEC_ZSTD = 4

XERIAL_MAGIC = b"\x82SNAPPY\x00"
# magic, version 1, minimum compatible version 1, then (length, raw snappy block) pairs of at most 32 KiB of input
# each (SnappyOutputStream's default)
_XERIAL_HEADER = XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_XERIAL_BLOCK = 32 * 1024
_BLOCK_LEN = struct.Struct(">i")
_GZIP_LEVEL = 6
_ZSTD_LEVEL = 3  # Kafka's default compression.zstd.level


class UnsupportedCodec(KafkaError):
    """A batch named a compression codec that does not exist."""

    def __init__(self, codec: int) -> None:
        super().__init__(ErrorCode.unsupported_compression_type, f"unknown compression codec {codec}")


def is_xerial(payload: bytes | bytearray | memoryview) -> bool:
    return bytes(payload[: len(XERIAL_MAGIC)]) == XERIAL_MAGIC


def decompress(codec: int, payload: bytes | memoryview) -> bytes | memoryview:
    """The uncompressed records section of one batch (uncompressed input comes back uncopied)."""
    if codec == CODEC_NONE:
        return payload
    if codec == CODEC_GZIP:
        # wbits 47 = accept a zlib or gzip header; Kafka's gzip payload is a single gzip member.
        return zlib.decompress(payload, 47)
    if codec == CODEC_SNAPPY:
        return _unsnappy(memoryview(payload))
    if codec == CODEC_LZ4:
        return bytes(cramjam.lz4.decompress(payload))
    if codec == CODEC_ZSTD:
        return bytes(cramjam.zstd.decompress(payload))
    raise UnsupportedCodec(codec)


def compress(codec: int, body: bytes | bytearray, xerial: bool = False) -> bytes | bytearray:
    """``body`` in ``codec``; ``xerial`` picks snappy-java's framing for snappy (to keep a batch's own)."""
    if codec == CODEC_NONE:
        return body
    if codec == CODEC_GZIP:
        return gzip.compress(bytes(body), compresslevel=_GZIP_LEVEL)
    if codec == CODEC_SNAPPY:
        if not xerial:
            return bytes(cramjam.snappy.compress_raw(bytes(body)))
        out = bytearray(_XERIAL_HEADER)
        for start in range(0, len(body), _XERIAL_BLOCK):
            block = bytes(cramjam.snappy.compress_raw(bytes(body[start : start + _XERIAL_BLOCK])))
            out += _BLOCK_LEN.pack(len(block)) + block
        return bytes(out)
    if codec == CODEC_LZ4:
        compressor = cramjam.lz4.Compressor(content_checksum=False, block_linked=False)
        compressor.compress(bytes(body))
        return bytes(compressor.finish())
    if codec == CODEC_ZSTD:
        return bytes(cramjam.zstd.compress(bytes(body), level=_ZSTD_LEVEL))
    raise UnsupportedCodec(codec)


def _unsnappy(view: memoryview) -> bytes:
    if not is_xerial(view):
        return bytes(cramjam.snappy.decompress_raw(view))
    parts: list[bytes] = []
    pos = len(_XERIAL_HEADER)
    while pos < len(view):
        (block_len,) = _BLOCK_LEN.unpack_from(view, pos)
        pos += 4
        parts.append(bytes(cramjam.snappy.decompress_raw(view[pos : pos + block_len])))
        pos += block_len
    return b"".join(parts)

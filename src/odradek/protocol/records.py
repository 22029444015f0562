"""RecordBatch (magic 2) parsing, validation, stamping and building.

The broker stores client batches exactly as they arrive (the produce path never decompresses them), so it only needs
the 61-byte header: validate length, magic, CRC-32C and codec, then rewrite baseOffset and partitionLeaderEpoch in
place — both lie outside the CRC's range (it covers bytes 21..end), so stamping costs no checksum. Building and
decoding whole records is for the broker's own internal topics (``__consumer_offsets``), for compaction, and for
tests.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

import crc32c

from odradek.errors import ErrorCode, KafkaError
from odradek.protocol.compression import (
    CODEC_GZIP,
    CODEC_LZ4,
    CODEC_NONE,
    CODEC_SNAPPY,
    CODEC_ZSTD,
    compress,
    decompress,
)

HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = HEADER.size  # 61
LOG_OVERHEAD = 12  # baseOffset + batchLength: batchLength counts the bytes after these two fields
CRC_START = 21
MAGIC_OFFSET = 16
_I64 = struct.Struct(">q")
_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")
_I16 = struct.Struct(">h")

COMPRESSION_NONE, COMPRESSION_GZIP, COMPRESSION_SNAPPY, COMPRESSION_LZ4, COMPRESSION_ZSTD = (
    CODEC_NONE, CODEC_GZIP, CODEC_SNAPPY, CODEC_LZ4, CODEC_ZSTD)
TIMESTAMP_CREATE_TIME, TIMESTAMP_LOG_APPEND_TIME = 0, 1
ATTR_COMPRESSION_MASK = 0x07
ATTR_TIMESTAMP_TYPE = 0x08
ATTR_TRANSACTIONAL = 0x10
ATTR_CONTROL = 0x20
NO_PRODUCER_ID = -1
NO_SEQUENCE = -1
# ControlRecordType: the key of a control record is [version int16 = 0, type int16]; an end-transaction marker's
# value is [version int16 = 0, coordinator epoch int32] (Kafka's EndTransactionMarker).
CONTROL_ABORT = 0
CONTROL_COMMIT = 1
_CONTROL_KEY = struct.Struct(">hh")
_END_TXN_VALUE = struct.Struct(">hi")


class CorruptBatchError(KafkaError):
    """A batch that fails its structural or CRC check; ``position`` is where in the buffer it starts."""

    def __init__(self, message: str, position: int, code: ErrorCode = ErrorCode.corrupt_message) -> None:
        super().__init__(code, f"{message} (at byte {position})")
        self.position = position


class TruncatedBatchError(CorruptBatchError):
    """The buffer ends inside a batch (its header or its body)."""


class BatchHeader(NamedTuple):
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def size(self) -> int:
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> int:
        return self.attributes & ATTR_COMPRESSION_MASK

    @property
    def timestamp_type(self) -> int:
        return (self.attributes & ATTR_TIMESTAMP_TYPE) >> 3

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & ATTR_TRANSACTIONAL)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & ATTR_CONTROL)

    @property
    def last_sequence(self) -> int:
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return (self.base_sequence + self.last_offset_delta) & 0x7FFFFFFF


def read_header(buf: bytes | bytearray | memoryview, position: int = 0) -> BatchHeader:
    return BatchHeader._make(HEADER.unpack_from(buf, position))


def iter_batches(
    buf: bytes | bytearray | memoryview, *, verify_crc: bool = True, start: int = 0, end: int | None = None
) -> Iterator[tuple[int, BatchHeader]]:
    """Yield ``(position, header)`` for each whole batch in ``buf[start:end]``.

    Raises :class:`CorruptBatchError` at the first batch that is truncated, malformed or fails its CRC, carrying the
    position so log recovery can truncate exactly there and nothing before it is lost.
    """
    view = memoryview(buf)
    limit = len(view) if end is None else end
    position = start
    while position < limit:
        if limit - position < HEADER_SIZE:
            raise TruncatedBatchError(f"truncated batch header: {limit - position} bytes", position)
        header = read_header(view, position)
        if header.magic != 2:
            raise CorruptBatchError(f"unsupported magic {header.magic}", position)
        size = header.size
        if header.batch_length < HEADER_SIZE - LOG_OVERHEAD:
            raise CorruptBatchError(f"batch length {header.batch_length} below header size", position)
        if position + size > limit:
            raise TruncatedBatchError(f"truncated batch: needs {size} bytes, {limit - position} left", position)
        if verify_crc and crc32c.crc32c(view[position + CRC_START : position + size]) != header.crc:
            raise CorruptBatchError("CRC-32C mismatch", position)
        yield position, header
        position += size


def whole_batches(buf: bytes | bytearray | memoryview) -> tuple[int, list[tuple[int, BatchHeader]]]:
    """The length of ``buf`` that holds whole batches, and their positions and headers (as :func:`iter_batches`
    yields them), leaving out a partial batch at its end.

    A Kafka leader fills a Fetch response up to the partition's byte limit and may cut the last batch short; Kafka's
    readers stop at it (``ByteBufferLogInputStream``), and the next fetch starts there. A first batch cut short, or
    any other damage, still raises :class:`CorruptBatchError`.
    """
    batches: list[tuple[int, BatchHeader]] = []
    try:
        for batch in iter_batches(buf):
            batches.append(batch)
    except TruncatedBatchError as exc:
        if not batches:
            raise
        return exc.position, batches
    return len(buf), batches


def validate_produce(records: bytes | bytearray | memoryview) -> list[BatchHeader]:
    """Check a Produce request's record set as Kafka's LogValidator does for magic 2, without decompressing."""
    headers: list[BatchHeader] = []
    for position, header in iter_batches(records):
        if header.compression > COMPRESSION_ZSTD:
            raise CorruptBatchError(
                f"unknown compression codec {header.compression}", position, ErrorCode.unsupported_compression_type
            )
        if header.records_count <= 0 or header.last_offset_delta != header.records_count - 1:
            raise CorruptBatchError(
                f"lastOffsetDelta {header.last_offset_delta} disagrees with {header.records_count} records",
                position,
                ErrorCode.invalid_record,
            )
        if header.is_control:
            raise CorruptBatchError("clients may not produce control batches", position, ErrorCode.invalid_record)
        if header.producer_id >= 0 and header.base_sequence < 0:
            raise CorruptBatchError(f"invalid sequence number {header.base_sequence} in a batch of producer "
                                    f"{header.producer_id}", position, ErrorCode.invalid_record)
        if header.is_transactional and header.producer_id < 0:
            raise CorruptBatchError("transactional batch without a producer id", position, ErrorCode.invalid_record)
        headers.append(header)
    if not headers:
        raise CorruptBatchError("empty record set", 0, ErrorCode.invalid_record)
    return headers


def stamp(buf: bytearray | memoryview, position: int, base_offset: int, partition_leader_epoch: int) -> None:
    """Rewrite baseOffset and partitionLeaderEpoch in place; both are outside the CRC, so it stays valid.

    Two separate pack_into calls: a single ``>qxxxxi`` would zero batchLength between them.
    """
    _I64.pack_into(buf, position, base_offset)
    _I32.pack_into(buf, position + 12, partition_leader_epoch)


def set_log_append_time(buf: bytearray | memoryview, position: int, timestamp_ms: int) -> None:
    """Mark the batch LogAppendTime with ``timestamp_ms`` as its max timestamp, recomputing the CRC.

    Kafka leaves the per-record deltas alone: readers of a LogAppendTime batch use maxTimestamp for every record.
    """
    header = read_header(buf, position)
    _I16.pack_into(buf, position + 21, header.attributes | ATTR_TIMESTAMP_TYPE)
    _I64.pack_into(buf, position + 27, timestamp_ms)
    _I64.pack_into(buf, position + 35, timestamp_ms)
    end = position + header.size
    _U32.pack_into(buf, position + 17, crc32c.crc32c(memoryview(buf)[position + CRC_START : end]))


# --- varints ---------------------------------------------------------------------------------------------------


def write_varint(out: bytearray, value: int) -> None:
    """Zig-zag varint as Kafka's ByteUtils.writeVarlong (works for 32- and 64-bit values alike)."""
    v = (value << 1) ^ (value >> 63)
    while v & ~0x7F:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)


def read_varint(buf: bytes | bytearray | memoryview, position: int) -> tuple[int, int]:
    result = 0
    shift = 0
    while True:
        b = buf[position]
        position += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            break
        shift += 7
        if shift > 63:
            raise ValueError("varint too long")
    return (result >> 1) ^ -(result & 1), position


# --- whole records ---------------------------------------------------------------------------------------------

Header = tuple[str, bytes | None]


@dataclass(slots=True)
class Record:
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[Header] = field(default_factory=list)


def _write_bytes(out: bytearray, data: bytes | None) -> None:
    if data is None:
        write_varint(out, -1)
    else:
        write_varint(out, len(data))
        out += data


def append_record(body: bytearray, timestamp_delta: int, offset_delta: int, key: bytes | None,
                  value: bytes | None, headers: Sequence[Header]) -> None:
    """One record of a v2 batch's records section, length-prefixed, as Kafka's DefaultRecord writes it."""
    rec = bytearray(b"\x00")  # attributes
    write_varint(rec, timestamp_delta)
    write_varint(rec, offset_delta)
    _write_bytes(rec, key)
    _write_bytes(rec, value)
    write_varint(rec, len(headers))
    for hkey, hvalue in headers:
        _write_bytes(rec, hkey.encode())
        _write_bytes(rec, hvalue)
    write_varint(body, len(rec))
    body += rec


def encode_batch(
    records: Sequence[tuple[bytes | None, bytes | None, Sequence[Header]]],
    *,
    base_offset: int = 0,
    timestamp_ms: int,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = -1,
    base_sequence: int = NO_SEQUENCE,
    partition_leader_epoch: int = -1,
    compression: int = COMPRESSION_NONE,
    timestamp_type: int = TIMESTAMP_CREATE_TIME,
    control: bool = False,
    transactional: bool = False,
) -> bytearray:
    """Build one RecordBatch; every record shares ``timestamp_ms`` (the broker's own writes need no more)."""
    if not records:
        raise ValueError("a batch holds at least one record")
    body = bytearray()
    for delta, (key, value, headers) in enumerate(records):
        append_record(body, 0, delta, key, value, headers)
    payload = compress(compression, body)
    attributes = (compression | (timestamp_type << 3) | (ATTR_CONTROL if control else 0)
                  | (ATTR_TRANSACTIONAL if transactional else 0))
    count = len(records)
    out = bytearray(HEADER_SIZE)
    HEADER.pack_into(
        out, 0, base_offset, HEADER_SIZE - LOG_OVERHEAD + len(payload), partition_leader_epoch, 2, 0,
        attributes, count - 1, timestamp_ms, timestamp_ms, producer_id, producer_epoch, base_sequence, count,
    )
    out += payload
    _U32.pack_into(out, 17, crc32c.crc32c(memoryview(out)[CRC_START:]))
    return out


def decode_batch(buf: bytes | bytearray | memoryview, position: int = 0) -> tuple[BatchHeader, list[Record]]:
    """Decode every record of one batch (for internal topics, compaction and tests; not the data path)."""
    header = read_header(buf, position)
    view = memoryview(buf)[position + HEADER_SIZE : position + header.size]
    body = decompress(header.compression, view) if header.compression else view
    records: list[Record] = []
    pos = 0
    log_append = header.timestamp_type == TIMESTAMP_LOG_APPEND_TIME
    for _ in range(header.records_count):
        length, pos = read_varint(body, pos)
        end = pos + length
        pos += 1  # record attributes
        ts_delta, pos = read_varint(body, pos)
        off_delta, pos = read_varint(body, pos)
        key, pos = _read_bytes(body, pos)
        value, pos = _read_bytes(body, pos)
        n_headers, pos = read_varint(body, pos)
        headers: list[Header] = []
        for _h in range(n_headers):
            hkey, pos = _read_bytes(body, pos)
            hvalue, pos = _read_bytes(body, pos)
            headers.append(((hkey or b"").decode(), hvalue))
        if pos != end:
            raise CorruptBatchError("record length disagrees with its fields", position)
        ts = header.max_timestamp if log_append else header.base_timestamp + ts_delta
        records.append(Record(header.base_offset + off_delta, ts, key, value, headers))
    return header, records


def _read_bytes(body: bytes | memoryview, pos: int) -> tuple[bytes | None, int]:
    n, pos = read_varint(body, pos)
    if n < 0:
        return None, pos
    return bytes(body[pos : pos + n]), pos + n


# --- control batches (transaction markers) ----------------------------------------------------------------------


def build_control_batch(producer_id: int, producer_epoch: int, coordinator_epoch: int, commit: bool,
                        timestamp_ms: int) -> bytearray:
    """One end-transaction marker as Kafka's MemoryRecords.withEndTransactionMarker writes it: a transactional
    control batch, base offset 0 (stamped on append), no sequence, one uncompressed record whose key is the
    control type and whose value carries the coordinator epoch that wrote it."""
    key = _CONTROL_KEY.pack(0, CONTROL_COMMIT if commit else CONTROL_ABORT)
    value = _END_TXN_VALUE.pack(0, coordinator_epoch)
    return encode_batch([(key, value, ())], timestamp_ms=timestamp_ms, producer_id=producer_id,
                        producer_epoch=producer_epoch, base_sequence=NO_SEQUENCE, control=True,
                        transactional=True)


class EndTxnMarker(NamedTuple):
    control_type: int  # CONTROL_ABORT or CONTROL_COMMIT
    coordinator_epoch: int

    @property
    def is_abort(self) -> bool:
        return self.control_type == CONTROL_ABORT


def control_type(buf: bytes | bytearray | memoryview, position: int = 0) -> int:
    """The control type of the control batch at ``position`` (0 ABORT, 1 COMMIT; other values are Kafka's other
    control records). Raises CorruptBatchError when the batch is not a control batch or its key is malformed."""
    header = read_header(buf, position)
    if not header.is_control:
        raise CorruptBatchError("not a control batch", position, ErrorCode.invalid_record)
    key = _first_record(buf, position)[0]
    if key is None or len(key) < _CONTROL_KEY.size:
        raise CorruptBatchError("control record key shorter than 4 bytes", position, ErrorCode.invalid_record)
    version, ctype = _CONTROL_KEY.unpack_from(key)
    if version < 0:
        raise CorruptBatchError(f"control record key version {version}", position, ErrorCode.invalid_record)
    return int(ctype)


def read_end_txn_marker(buf: bytes | bytearray | memoryview, position: int = 0) -> EndTxnMarker | None:
    """The COMMIT/ABORT marker in the control batch at ``position``; None for an empty control batch (Kafka's
    cleaner leaves those once a transaction's data is gone) or another control type."""
    header = read_header(buf, position)
    if header.records_count == 0:
        return None
    ctype = control_type(buf, position)
    if ctype not in (CONTROL_ABORT, CONTROL_COMMIT):
        return None
    value = _first_record(buf, position)[1]
    if value is None or len(value) < _END_TXN_VALUE.size:
        raise CorruptBatchError("end transaction marker value shorter than 6 bytes", position,
                                ErrorCode.invalid_record)
    version, coordinator_epoch = _END_TXN_VALUE.unpack_from(value)
    if version < 0:
        raise CorruptBatchError(f"end transaction marker version {version}", position, ErrorCode.invalid_record)
    return EndTxnMarker(ctype, coordinator_epoch)


def _first_record(buf: bytes | bytearray | memoryview, position: int) -> tuple[bytes | None, bytes | None]:
    """Key and value of a batch's first record (control batches are never compressed, but decode_batch copes)."""
    try:
        _, records = decode_batch(buf, position)
    except (ValueError, IndexError, KafkaError) as exc:
        raise CorruptBatchError(f"undecodable control batch: {exc}", position, ErrorCode.invalid_record) from exc
    if not records:
        raise CorruptBatchError("control batch without records", position, ErrorCode.invalid_record)
    return records[0].key, records[0].value

"""``odradek dump-log``: Kafka's DumpLogSegments for ``.log``, ``.index`` and ``.timeindex`` files.

odradek's segment files are Kafka's byte for byte, so this prints what ``kafka-dump-log.sh`` prints for the same
file, line for line: one line per batch (its header fields, position, max timestamp, size, codec, CRC and whether
the CRC holds), with ``--deep-iteration`` one ``|`` line per record, and with ``--print-data-log`` the record's key
and payload (as UTF-8). It reads the files directly, so it works on a stopped broker's data and on copies.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from pathlib import Path

import click
import crc32c

from odradek.protocol.compression import CODEC_GZIP, CODEC_NONE, CODEC_SNAPPY, CODEC_ZSTD
from odradek.protocol.records import CRC_START, HEADER_SIZE, LOG_OVERHEAD, decode_batch, read_header

CODEC_NAMES = {CODEC_NONE: "none", CODEC_GZIP: "gzip", CODEC_SNAPPY: "snappy", 3: "lz4", CODEC_ZSTD: "zstd"}
ATTR_DELETE_HORIZON = 0x40  # KIP-534: base timestamp holds the delete horizon of a compacted batch
_INDEX_ENTRY = struct.Struct(">ii")
_TIME_INDEX_ENTRY = struct.Struct(">qi")


def _text(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


def dump_log(data: bytes, base_offset: int, deep: bool, print_data: bool, name: str = "") -> Iterator[str]:
    """The lines DumpLogSegments prints for a ``.log`` file's bytes (after its "Dumping" line)."""
    yield f"Log starting offset: {base_offset}"
    position = 0
    while position + LOG_OVERHEAD <= len(data):
        if position + HEADER_SIZE > len(data):
            break
        header = read_header(data, position)
        size = header.size
        if header.magic != 2 or header.batch_length < HEADER_SIZE - LOG_OVERHEAD or position + size > len(data):
            break
        valid = crc32c.crc32c(data[position + CRC_START : position + size]) == header.crc
        timestamp_type = "LogAppendTime" if header.timestamp_type else "CreateTime"
        horizon = (f"OptionalLong[{header.base_timestamp}]" if header.attributes & ATTR_DELETE_HORIZON
                   else "OptionalLong.empty")
        yield (
            f"baseOffset: {header.base_offset} lastOffset: {header.last_offset} count: {header.records_count} "
            f"baseSequence: {header.base_sequence} lastSequence: {header.last_sequence} "
            f"producerId: {header.producer_id} producerEpoch: {header.producer_epoch} "
            f"partitionLeaderEpoch: {header.partition_leader_epoch} "
            f"isTransactional: {str(header.is_transactional).lower()} isControl: {str(header.is_control).lower()} "
            f"deleteHorizonMs: {horizon} position: {position} {timestamp_type}: {header.max_timestamp} "
            f"size: {size} magic: {header.magic} compresscodec: {CODEC_NAMES.get(header.compression, 'unknown')} "
            f"crc: {header.crc} isvalid: {str(valid).lower()}"
        )
        if deep or print_data:
            _header, records = decode_batch(data, position)
            for record in records:
                sequence = -1 if header.base_sequence < 0 else \
                    (header.base_sequence + record.offset - header.base_offset) & 0x7FFFFFFF
                line = (
                    f"| offset: {record.offset} {timestamp_type}: {record.timestamp} "
                    f"keySize: {-1 if record.key is None else len(record.key)} "
                    f"valueSize: {-1 if record.value is None else len(record.value)} sequence: {sequence} "
                    f"headerKeys: [{','.join(k for k, _v in record.headers)}]"
                )
                if header.is_control:
                    line += _control_marker(record.key, record.value)
                if print_data and not header.is_control:
                    if record.key is not None:
                        line += f" key: {_text(record.key)}"
                    if record.value is not None:
                        line += f" payload: {_text(record.value)}"
                yield line
        position += size
    if position < len(data):
        yield f"Found {len(data) - position} invalid bytes at the end of {name or f'{base_offset:020d}.log'}"


def _control_marker(key: bytes | None, value: bytes | None) -> str:
    """What DumpLogSegments appends for a control record: a transaction marker's type and coordinator epoch (key:
    version and type, int16 each; value: version int16, coordinator epoch int32), else the raw type id."""
    if key is None or len(key) < 4:
        return ""
    control_type = struct.unpack_from(">h", key, 2)[0]
    if control_type in (0, 1) and value is not None and len(value) >= 6:
        epoch = struct.unpack_from(">i", value, 2)[0]
        return f" endTxnMarker: {'ABORT' if control_type == 0 else 'COMMIT'} coordinatorEpoch: {epoch}"
    return f" controlType: UNKNOWN({control_type})"


def dump_index(data: bytes, base_offset: int, name: str) -> Iterator[str]:
    """``offset: N position: P`` per entry of an offset index (absolute offsets)."""
    count = len(data) // _INDEX_ENTRY.size
    if count == 0:
        yield f"{name} is empty."
        return
    for i in range(count):
        relative, position = _INDEX_ENTRY.unpack_from(data, i * _INDEX_ENTRY.size)
        if relative == 0 and i > 0:
            return  # the zero-filled tail of a preallocated index, as Kafka stops there
        yield f"offset: {base_offset + relative} position: {position}"


def dump_time_index(data: bytes, base_offset: int) -> Iterator[str]:
    """``timestamp: T offset: N`` per entry of a time index."""
    for i in range(len(data) // _TIME_INDEX_ENTRY.size):
        timestamp, relative = _TIME_INDEX_ENTRY.unpack_from(data, i * _TIME_INDEX_ENTRY.size)
        if relative == 0 and i > 0:
            return
        yield f"timestamp: {timestamp} offset: {base_offset + relative}"


def dump_file(path: Path, deep: bool, print_data: bool) -> Iterator[str]:
    yield f"Dumping {path}"
    stem, _dot, suffix = path.name.partition(".")
    try:
        base_offset = int(stem)
    except ValueError:
        raise click.ClickException(f"{path.name}: not a segment file name (<base offset>.log)") from None
    data = path.read_bytes()
    if suffix == "log":
        yield from dump_log(data, base_offset, deep, print_data, path.name)
    elif suffix == "index":
        yield from dump_index(data, base_offset, str(path))
    elif suffix == "timeindex":
        yield from dump_time_index(data, base_offset)
    else:
        yield f"Ignoring unknown file {path}"


@click.command("dump-log")
@click.option("--files", required=True, help="comma-separated .log, .index and .timeindex files")
@click.option("--print-data-log", is_flag=True, help="print each record's key and payload (implies deep iteration)")
@click.option("--deep-iteration", is_flag=True, help="print each record, not only each batch")
def dump_log_command(files: str, print_data_log: bool, deep_iteration: bool) -> None:
    """Decode segment files as kafka-dump-log.sh (DumpLogSegments) does."""
    for name in (f for f in files.split(",") if f.strip()):
        path = Path(name.strip())
        if not path.is_file():
            raise click.ClickException(f"{path}: no such file")
        for line in dump_file(path, deep_iteration, print_data_log):
            click.echo(line)

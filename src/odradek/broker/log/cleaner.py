"""Log compaction for ``cleanup.policy=compact``: keep the latest record per key, drop old tombstones.

It is what keeps ``__consumer_offsets`` small. As in Kafka's LogCleaner, only segments that are no longer
active, wholly below the high watermark and older than ``min.compaction.lag.ms`` are cleaned, and only when
the dirty share of them reaches ``min.cleanable.dirty.ratio`` (or a dirty record is older than
``max.compaction.lag.ms``). Records keep their offsets; runs of small segments are merged into one of at most
``segment.bytes``; the result is written as ``.cleaned`` files, renamed to ``.swap`` and then into place, so a
crash at any point leaves either the old segments or the complete new one (log loading finishes an interrupted
swap).

Batches are rewritten in the codec they arrived in, as Kafka's cleaner does, so a compacted topic stays
compressed the way its producers chose (and the retained records keep their keys, values and headers byte for
byte; :mod:`odradek.protocol.compression` writes each codec in the framing Kafka's own consumers accept, and a
snappy batch keeps its framing). A control batch, or one that cannot be decoded, is kept
byte-for-byte. Tombstones (null values) that are the latest for their key are dropped once their segment's newest
timestamp is older than ``delete.retention.ms``, giving consumers that window to observe the deletion.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import crc32c

from odradek.broker.log.partition_log import PartitionLog
from odradek.broker.log.segment import LogSegment
from odradek.clock import Clock
from odradek.errors import KafkaError
from odradek.protocol.compression import compress, is_xerial
from odradek.protocol.records import (
    CRC_START,
    HEADER,
    HEADER_SIZE,
    LOG_OVERHEAD,
    TIMESTAMP_LOG_APPEND_TIME,
    BatchHeader,
    Record,
    append_record,
    decode_batch,
    iter_batches,
)

log = logging.getLogger("odradek.log")

CLEANED_SUFFIX = ".cleaned"


@dataclass(frozen=True, slots=True)
class CleanStats:
    segments_before: int
    segments_after: int
    bytes_before: int
    bytes_after: int
    records_removed: int


class LogCleaner:
    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        # First offset not yet cleaned, per log directory. Unknown after a restart, which makes everything
        # dirty and costs one extra pass rather than a checkpoint file.
        self._first_dirty: dict[Path, int] = {}

    def maybe_clean(self, plog: PartitionLog, now_ms: int) -> CleanStats | None:
        """Clean ``plog`` if its dirty ratio (or max.compaction.lag.ms) calls for it.

        Only the decision holds the log's lock. Reading, filtering and writing the new segment run without it
        (non-active segments are immutable), so appends continue meanwhile; the swap re-checks under the lock.
        """
        with plog.lock:
            if plog.offline:
                return None
            cleanable = self._cleanable_segments(plog, now_ms)
            truncations = plog.truncations
            if not cleanable:
                return None
            first_dirty = max(self._first_dirty.get(plog.directory, 0), plog.log_start_offset)
            dirty = [s for s in cleanable if s.next_offset > first_dirty]
            total = sum(s.size for s in cleanable)
            dirty_bytes = sum(s.size for s in dirty)
            overdue = any(
                s.max_timestamp >= 0 and now_ms - s.max_timestamp > plog.config.max_compaction_lag_ms
                for s in dirty
            )
            if not dirty or total == 0 or (
                dirty_bytes / total < plog.config.min_cleanable_dirty_ratio and not overdue
            ):
                return None
        stats = self.clean(plog, cleanable, now_ms, truncations)
        if stats is not None:
            self._first_dirty[plog.directory] = cleanable[-1].next_offset
        return stats

    def _cleanable_segments(self, plog: PartitionLog, now_ms: int) -> list[LogSegment]:
        lag = plog.config.min_compaction_lag_ms
        out: list[LogSegment] = []
        for segment in plog.segments[:-1]:
            if segment.next_offset > plog.high_watermark:
                break
            if lag > 0 and (segment.max_timestamp < 0 or now_ms - segment.max_timestamp < lag):
                break
            out.append(segment)
        return out

    def clean(
        self, plog: PartitionLog, segments: list[LogSegment], now_ms: int, truncations: int | None = None
    ) -> CleanStats | None:
        """Compact ``segments`` (a run of the log's oldest non-active segments); None if the log changed
        meanwhile and the work was discarded."""
        if truncations is None:
            truncations = plog.truncations
        config = plog.config
        before = sum(s.size for s in segments)
        try:
            latest = _latest_offsets(segments)
        except OSError as exc:  # a segment deleted under us: the swap would be refused anyway
            log.info("partition %s: compaction abandoned: %s", plog.name, exc)
            return None
        horizon = now_ms - config.delete_retention_ms
        removed = 0
        results: list[LogSegment] = []
        for group in _group(segments, config.segment_bytes):
            cleaned = LogSegment(plog.directory, group[0].base_offset, config.index_interval_bytes,
                                 config.segment_index_bytes, now_ms, suffix=CLEANED_SUFFIX, files=plog.files)
            try:
                for segment in group:
                    removed += _copy_retained(segment, cleaned, latest, 0 <= segment.max_timestamp < horizon)
                cleaned.on_become_inactive()
                cleaned.flush()
            except OSError as exc:
                cleaned.delete_files()
                log.warning("partition %s: compaction abandoned: %s", plog.name, exc)
                return None
            if not plog.replace_segments(group, cleaned, CLEANED_SUFFIX, truncations):
                cleaned.delete_files()
                log.info("partition %s: log changed during compaction; output discarded", plog.name)
                return None
            results.append(cleaned)
        stats = CleanStats(len(segments), len(results), before, sum(s.size for s in results), removed)
        log.info("partition %s: compacted %d segments into %d, %d -> %d bytes, %d records removed",
                 plog.name, stats.segments_before, stats.segments_after, stats.bytes_before,
                 stats.bytes_after, stats.records_removed)
        return stats


def _copy_retained(
    segment: LogSegment, cleaned: LogSegment, latest: dict[bytes, int], drop_tombstones: bool
) -> int:
    """Append what survives of ``segment`` to ``cleaned``; returns the number of records removed."""
    out = bytearray()
    stamped: list[tuple[int, BatchHeader]] = []
    removed = 0
    for raw, header in _batches(segment):
        kept, dropped = _filter_batch(raw, header, latest, drop_tombstones)
        removed += dropped
        if kept is not None:
            stamped.append((len(out), kept[1]))
            out += kept[0]
    if out:
        cleaned.append(out, stamped)
    return removed


def _batches(segment: LogSegment) -> Iterator[tuple[bytes, BatchHeader]]:
    data = segment.read(0, segment.size)
    for position, header in iter_batches(data):
        yield data[position : position + header.size], header


def _decode(raw: bytes, header: BatchHeader) -> list[Record] | None:
    if header.is_control:
        return None
    try:
        return decode_batch(raw)[1]
    except (KafkaError, ValueError, EOFError, OSError, IndexError):  # unknown codec or undecodable body
        return None


def _latest_offsets(segments: list[LogSegment]) -> dict[bytes, int]:
    latest: dict[bytes, int] = {}
    for segment in segments:
        for raw, header in _batches(segment):
            for record in _decode(raw, header) or ():
                if record.key is not None:
                    latest[record.key] = record.offset
    return latest


def _group(segments: list[LogSegment], max_bytes: int) -> list[list[LogSegment]]:
    """Consecutive segments merged while their total fits one segment and offsets stay int32-relative."""
    groups: list[list[LogSegment]] = []
    for segment in segments:
        if groups:
            current = groups[-1]
            size = sum(s.size for s in current) + segment.size
            if size <= max_bytes and segment.next_offset - current[0].base_offset <= 2**31 - 1:
                current.append(segment)
                continue
        groups.append([segment])
    return groups


def _filter_batch(
    raw: bytes, header: BatchHeader, latest: dict[bytes, int], drop_tombstones: bool
) -> tuple[tuple[bytes | bytearray, BatchHeader] | None, int]:
    """``((bytes, header) or None, records removed)`` for one batch."""
    records = _decode(raw, header)
    if records is None:
        return (raw, header), 0
    kept = [r for r in records if r.key is None or _survives(r, latest, drop_tombstones)]
    if len(kept) == len(records):
        return (raw, header), 0
    if not kept:
        return None, len(records)
    rebuilt = _encode_retained(header, kept, raw)
    return (rebuilt, BatchHeader._make(HEADER.unpack_from(rebuilt))), len(records) - len(kept)


def _survives(record: Record, latest: dict[bytes, int], drop_tombstones: bool) -> bool:
    assert record.key is not None
    if latest.get(record.key, record.offset) > record.offset:
        return False  # a newer record with this key exists
    return not (drop_tombstones and record.value is None)


def _encode_retained(header: BatchHeader, records: list[Record], original: bytes) -> bytearray:
    """Rebuild a batch around the records that survive, keeping its base offset and lastOffsetDelta (so the
    batch still spans its original offsets, as Kafka's cleaner does), its producer fields and its codec."""
    log_append = header.timestamp_type == TIMESTAMP_LOG_APPEND_TIME
    if log_append:
        base_ts, max_ts = header.base_timestamp, header.max_timestamp
    else:
        base_ts, max_ts = records[0].timestamp, max(r.timestamp for r in records)
    body = bytearray()
    for record in records:
        append_record(body, 0 if log_append else record.timestamp - base_ts, record.offset - header.base_offset,
                      record.key, record.value, record.headers)
    payload = compress(header.compression, body, xerial=is_xerial(memoryview(original)[HEADER_SIZE:]))
    out = bytearray(HEADER_SIZE)
    HEADER.pack_into(
        out, 0, header.base_offset, HEADER_SIZE - LOG_OVERHEAD + len(payload), header.partition_leader_epoch,
        2, 0, header.attributes, header.last_offset_delta, base_ts, max_ts, header.producer_id,
        header.producer_epoch, header.base_sequence, len(records),
    )
    out += payload
    out[17:21] = crc32c.crc32c(memoryview(out)[CRC_START:]).to_bytes(4, "big")
    return out


__all__ = ["CleanStats", "LogCleaner"]

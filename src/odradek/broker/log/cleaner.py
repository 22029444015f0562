"""Log compaction for ``cleanup.policy=compact``: keep the latest record per key, drop old tombstones.

It is what keeps ``__consumer_offsets`` small. As in Kafka's LogCleaner, only segments that are no longer
active, wholly below the last stable offset (so never an undecided transaction) and older than
``min.compaction.lag.ms`` are cleaned, and only when
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

Transactions, as Kafka's CleanedTransactionMetadata: the records of aborted transactions (found through the
``.txnindex`` files) are removed and never count as the latest value of a key. A marker stays while any record of
its transaction does (an ABORT marker keeps its ``.txnindex`` entry in the cleaned segment meanwhile); once none
does, the pass that finds it so stamps the batch with a delete horizon (KIP-534: attribute bit 0x40, the base
timestamp becomes now + ``delete.retention.ms``), and the first pass after that horizon removes it — consumers get
that window to see the marker. The last batch of a producer the log still tracks is kept, emptied of its records,
so its epoch and sequence survive (Kafka's RETAIN_EMPTY).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import crc32c

from odradek.broker.log.partition_log import PartitionLog
from odradek.broker.log.segment import LogSegment
from odradek.broker.log.txn_index import AbortedTxn, TransactionIndex
from odradek.clock import Clock
from odradek.errors import KafkaError
from odradek.protocol.compression import compress, is_xerial
from odradek.protocol.records import (
    ATTR_COMPRESSION_MASK,
    CONTROL_ABORT,
    CONTROL_COMMIT,
    CRC_START,
    HEADER,
    HEADER_SIZE,
    LOG_OVERHEAD,
    TIMESTAMP_LOG_APPEND_TIME,
    BatchHeader,
    CorruptBatchError,
    Record,
    append_record,
    control_type,
    decode_batch,
    iter_batches,
)

log = logging.getLogger("odradek.log")

CLEANED_SUFFIX = ".cleaned"
ATTR_DELETE_HORIZON = 0x40  # Kafka's DefaultRecordBatch.DELETE_HORIZON_FLAG_MASK (KIP-534)


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
        # The earliest delete horizon a marker kept by the last pass carries: a pass is due then, dirty or not.
        self._horizons: dict[Path, int] = {}

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
            horizon = self._horizons.get(plog.directory)
            markers_due = horizon is not None and horizon <= now_ms
            if total == 0 or (not markers_due and (not dirty or (
                dirty_bytes / total < plog.config.min_cleanable_dirty_ratio and not overdue
            ))):
                return None
        stats = self.clean(plog, cleanable, now_ms, truncations)
        if stats is not None:
            self._first_dirty[plog.directory] = cleanable[-1].next_offset
        return stats

    def _cleanable_segments(self, plog: PartitionLog, now_ms: int) -> list[LogSegment]:
        lag = plog.config.min_compaction_lag_ms
        stable = plog.last_stable_offset
        out: list[LogSegment] = []
        for segment in plog.segments[:-1]:
            if segment.next_offset > stable:
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
            with plog.lock:
                aborted = plog.aborted_transactions(segments[0].base_offset, segments[-1].next_offset)
                last_batches = {e.producer_id: (e.last_offset, e.producer_epoch)
                                for e in plog.producer_state.entries()}
            latest = _latest_offsets(segments, aborted)
        except (OSError, KafkaError) as exc:  # a segment deleted under us: the swap would be refused anyway
            log.info("partition %s: compaction abandoned: %s", plog.name, exc)
            return None
        horizon = now_ms - config.delete_retention_ms
        removed = 0
        results: list[LogSegment] = []
        pass_ = _Pass(_TxnTracker(aborted), now_ms, config.delete_retention_ms, last_batches)
        for group in _group(segments, config.segment_bytes):
            cleaned = LogSegment(plog.directory, group[0].base_offset, config.index_interval_bytes,
                                 config.segment_index_bytes, now_ms, suffix=CLEANED_SUFFIX, files=plog.files)
            pass_.txns.cleaned_index = cleaned.txn_index
            try:
                for segment in group:
                    removed += _copy_retained(segment, cleaned, latest, 0 <= segment.max_timestamp < horizon,
                                              pass_)
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
        if pass_.next_horizon is None:
            self._horizons.pop(plog.directory, None)
        else:
            self._horizons[plog.directory] = pass_.next_horizon
        stats = CleanStats(len(segments), len(results), before, sum(s.size for s in results), removed)
        log.info("partition %s: compacted %d segments into %d, %d -> %d bytes, %d records removed",
                 plog.name, stats.segments_before, stats.segments_after, stats.bytes_before,
                 stats.bytes_after, stats.records_removed)
        return stats


class _TxnTracker:
    """Kafka's CleanedTransactionMetadata: which transactions the cleaner is inside of, in offset order, to tell
    aborted records (removed) from committed ones, and markers that must stay from those that may go."""

    def __init__(self, aborted: list[AbortedTxn]) -> None:
        self._pending = sorted(aborted, key=lambda t: t.first_offset)
        self._next = 0
        self._aborted: dict[int, tuple[AbortedTxn, bool]] = {}  # producer -> (its txn, a batch of it seen)
        self._committed: set[int] = set()
        self.cleaned_index: TransactionIndex | None = None

    def _reach(self, offset: int) -> None:
        while self._next < len(self._pending) and self._pending[self._next].first_offset <= offset:
            txn = self._pending[self._next]
            self._next += 1
            self._aborted.setdefault(txn.producer_id, (txn, False))

    def on_batch(self, header: BatchHeader) -> bool:
        """A data batch; True when it belongs to an aborted transaction (it can be discarded)."""
        self._reach(header.last_offset)
        if not header.is_transactional:
            return False
        found = self._aborted.get(header.producer_id)
        if found is not None:
            self._aborted[header.producer_id] = (found[0], True)
            return True
        self._committed.add(header.producer_id)
        return False

    def on_control(self, header: BatchHeader, raw: bytes) -> bool:
        """A control batch; True when no record of its transaction was seen, so it may go (after its horizon).
        A kept ABORT marker keeps its transaction's entry in the cleaned segment's index."""
        self._reach(header.last_offset)
        if header.records_count == 0:
            return True  # emptied by an earlier pass
        try:
            ctype = control_type(raw)
        except CorruptBatchError:
            return False
        if ctype == CONTROL_ABORT:
            found = self._aborted.pop(header.producer_id, None)
            if found is not None and found[1]:
                if self.cleaned_index is not None:
                    self.cleaned_index.append(found[0])
                return False
            return True
        if ctype == CONTROL_COMMIT:
            if header.producer_id in self._committed:
                self._committed.discard(header.producer_id)
                return False
            return True
        return False


@dataclass(slots=True)
class _Pass:
    """What one cleaning pass carries from batch to batch."""

    txns: _TxnTracker
    now_ms: int
    delete_retention_ms: int
    last_batches: dict[int, tuple[int, int]]  # producer -> (last data offset or -1, epoch)
    next_horizon: int | None = None

    def note_horizon(self, horizon: int) -> None:
        if self.next_horizon is None or horizon < self.next_horizon:
            self.next_horizon = horizon

    def producers_last(self, header: BatchHeader) -> bool:
        """The batch that holds a tracked producer's state (Kafka's isBatchLastRecordOfProducer)."""
        found = self.last_batches.get(header.producer_id) if header.producer_id >= 0 else None
        if found is None:
            return False
        last_offset, epoch = found
        if last_offset >= 0:
            return header.last_offset == last_offset
        return header.is_control and header.producer_epoch == epoch

    def discard(self, raw: bytes, header: BatchHeader) -> tuple[tuple[bytes | bytearray, BatchHeader] | None, int]:
        """Remove every record of the batch, keeping it empty when it holds its producer's state."""
        if self.producers_last(header):
            empty = _empty_batch(header)
            return (empty, BatchHeader._make(HEADER.unpack_from(empty))), header.records_count
        return None, header.records_count


def _copy_retained(
    segment: LogSegment, cleaned: LogSegment, latest: dict[bytes, int], drop_tombstones: bool, pass_: _Pass
) -> int:
    """Append what survives of ``segment`` to ``cleaned``; returns the number of records removed."""
    out = bytearray()
    stamped: list[tuple[int, BatchHeader]] = []
    removed = 0
    for raw, header in _batches(segment):
        kept, dropped = _filter_batch(raw, header, latest, drop_tombstones, pass_)
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


def _latest_offsets(segments: list[LogSegment], aborted: list[AbortedTxn]) -> dict[bytes, int]:
    """The offset of each key's latest committed record (aborted records and markers never count)."""
    latest: dict[bytes, int] = {}
    txns = _TxnTracker(aborted)
    for segment in segments:
        for raw, header in _batches(segment):
            if header.is_control or txns.on_batch(header):
                continue
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
    raw: bytes, header: BatchHeader, latest: dict[bytes, int], drop_tombstones: bool, pass_: _Pass
) -> tuple[tuple[bytes | bytearray, BatchHeader] | None, int]:
    """``((bytes, header) or None, records removed)`` for one batch."""
    if header.is_control:
        return _filter_control(raw, header, pass_)
    if pass_.txns.on_batch(header):
        return pass_.discard(raw, header)
    records = _decode(raw, header)
    if records is None:
        return (raw, header), 0
    kept = [r for r in records if r.key is None or _survives(r, latest, drop_tombstones)]
    if len(kept) == len(records):
        return (raw, header), 0
    if not kept:
        return pass_.discard(raw, header)
    rebuilt = _encode_retained(header, kept, raw)
    return (rebuilt, BatchHeader._make(HEADER.unpack_from(rebuilt))), len(records) - len(kept)


def _filter_control(raw: bytes, header: BatchHeader, pass_: _Pass
                    ) -> tuple[tuple[bytes | bytearray, BatchHeader] | None, int]:
    """A marker that may go is first stamped with its delete horizon, then removed by the first pass after it."""
    if not pass_.txns.on_control(header, raw):
        return (raw, header), 0
    if header.attributes & ATTR_DELETE_HORIZON:
        if header.base_timestamp <= pass_.now_ms:
            return pass_.discard(raw, header)
        pass_.note_horizon(header.base_timestamp)
        return (raw, header), 0
    horizon = pass_.now_ms + pass_.delete_retention_ms
    pass_.note_horizon(horizon)
    stamped = bytearray(raw)
    HEADER.pack_into(stamped, 0, *header._replace(attributes=header.attributes | ATTR_DELETE_HORIZON,
                                                  base_timestamp=horizon))
    stamped[17:21] = crc32c.crc32c(memoryview(stamped)[CRC_START:]).to_bytes(4, "big")
    return (stamped, BatchHeader._make(HEADER.unpack_from(stamped))), 0


def _empty_batch(header: BatchHeader) -> bytearray:
    """The header alone, no records, as Kafka's DefaultRecordBatch.writeEmptyHeader: uncompressed, no first
    timestamp, the batch's offsets, producer fields and max timestamp kept."""
    out = bytearray(HEADER_SIZE)
    attributes = header.attributes & ~(ATTR_COMPRESSION_MASK | ATTR_DELETE_HORIZON)
    HEADER.pack_into(
        out, 0, header.base_offset, HEADER_SIZE - LOG_OVERHEAD, header.partition_leader_epoch, 2, 0, attributes,
        header.last_offset_delta, -1, header.max_timestamp, header.producer_id, header.producer_epoch,
        header.base_sequence, 0,
    )
    out[17:21] = crc32c.crc32c(memoryview(out)[CRC_START:]).to_bytes(4, "big")
    return out


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

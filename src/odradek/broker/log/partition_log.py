"""One partition's log: the segments in ``<topic>-<partition>/`` and the state derived from them.

This is the durable heart of the broker. Appends assign offsets by stamping the client's bytes in place and
write them in one call; reads hand back one contiguous byte range of a segment (found through the offset
index, bounded by walking batch headers only) so the fetch path never looks inside a batch. Everything else
here — producer state, the leader-epoch cache, indexes — is derived from the ``.log`` files and rebuilt from
them when in doubt. Opening a log (recovery included) is :mod:`odradek.broker.log.loader`'s; :meth:`PartitionLog.open`
runs it and hands the result to the live log.

Transactions: producer state tracks each producer's open transaction; a COMMIT/ABORT marker
(:meth:`PartitionLog.append_marker`, or replicated from the leader) closes it, and an ABORT adds an entry to the
``.txnindex`` of the segment the marker lands in. The last stable offset is the high watermark held back at the
first unstable offset; READ_COMMITTED reads stop there and carry the aborted transactions of the range they return.
Recovery (in the loader) replays producer state from a snapshot taken at or before the first segment it recovers,
so the ``.txnindex`` of every recovered segment is rebuilt from its markers exactly as it was first written.

Concurrency: the broker drives a log from its event loop, but the replica manager or a flush may call in from
a worker thread, so every public method holds the log's lock (uncontended, it costs well under a microsecond).
"""

from __future__ import annotations

import bisect
import logging
import os
import random
import shutil
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from odradek.broker.log import checkpoint, producer_state
from odradek.broker.log.epoch_cache import FILE_NAME as EPOCH_FILE
from odradek.broker.log.epoch_cache import LeaderEpochCache
from odradek.broker.log.handles import OpenFiles, process_files
from odradek.broker.log.loader import (
    SWAP_SUFFIX,
    UNKNOWN_STOP_STATE,
    LoadedLog,
    LogLoader,
    apply_batch,
    rebuild_producer_state,
)
from odradek.broker.log.producer_state import ProducerStateManager
from odradek.broker.log.segment import LogSegment
from odradek.broker.log.txn_index import AbortedTxn
from odradek.broker.topic_config import LogConfig
from odradek.clock import Clock
from odradek.errors import ErrorCode, KafkaError
from odradek.placement.model import TopicPartition
from odradek.protocol.records import (
    CONTROL_ABORT,
    CONTROL_COMMIT,
    HEADER_SIZE,
    BatchHeader,
    CorruptBatchError,
    EndTxnMarker,
    build_control_batch,
    decode_batch,
    read_end_txn_marker,
    read_header,
    set_log_append_time,
    stamp,
)

log = logging.getLogger("odradek.log")
_Predicate = Callable[[LogSegment], bool]

LIST_LATEST = -1
LIST_EARLIEST = -2
LIST_MAX_TIMESTAMP = -3
INT32_MAX = 2**31 - 1  # offsets in a segment's index are int32 relative to its base offset
PRODUCER_ID_EXPIRATION_MS = 86_400_000  # Kafka's producer.id.expiration.ms default
# Who appends as leader (Kafka's AppendOrigin): clients get every check; the group coordinator's own transactional
# offset batches carry no meaningful sequence, so only their epoch and transaction state are checked.
ORIGIN_CLIENT = "client"
ORIGIN_COORDINATOR = "coordinator"


NOWAIT_TAIL_BYTES = 8 << 20
"""A ``nowait`` read this close to the active segment's end is read plainly: the tail was just written and is in
the page cache, and a plain read skips the zeroed buffer a non-blocking one needs."""


@dataclass(frozen=True, slots=True)
class AppendResult:
    first_offset: int
    last_offset: int
    log_append_time_ms: int
    log_start_offset: int
    duplicate: bool = False


@dataclass(frozen=True, slots=True)
class ReadResult:
    """Whole batches; ``buffers`` are views of bytes the log owns no longer, safe to send after the lock is
    gone."""

    buffers: list[memoryview]
    size: int
    high_watermark: int
    log_start_offset: int
    log_end_offset: int
    last_stable_offset: int = -1
    # READ_COMMITTED reads: the aborted transactions overlapping what was returned (None for other reads)
    aborted_transactions: list[AbortedTxn] | None = None


def partition_dir_name(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


def parse_partition_dir(name: str) -> TopicPartition | None:
    topic, sep, part = name.rpartition("-")
    if not sep or not topic or not part.isdigit():
        return None
    return TopicPartition(topic, int(part))


class PartitionLog:
    """The live log: appends, reads, rolls, truncation, retention and compaction swaps over loaded segments.

    It is built from what :class:`~odradek.broker.log.loader.LogLoader` recovered (Kafka's LocalLog over its
    LogLoader's result); :meth:`open` does both, and is how a log is opened.
    """

    def __init__(self, directory: Path, config: LogConfig, clock: Clock, loaded: LoadedLog, epochs: LeaderEpochCache,
                 files: OpenFiles, *, high_watermark: int = 0) -> None:
        self.directory = directory
        parsed = parse_partition_dir(directory.name)
        self.topic, self.partition = parsed if parsed else (directory.name, 0)
        self.name = directory.name
        self.config = config
        self.clock = clock
        self.files = files
        self._lock = threading.RLock()
        self._offline = False
        self.on_change: Callable[[], None] | None = None
        """Called, on whatever thread made the change, when the log start moves or the log goes offline: readers
        that remember this log's offsets (fetch sessions) must look again."""
        self._segments: list[LogSegment] = loaded.segments
        self._bases: list[int] = [segment.base_offset for segment in loaded.segments]
        self._pending_flush: list[LogSegment] = []
        self._roll_jitter: dict[int, int] = {}
        self._truncations = 0
        self._epochs = epochs
        self._producers = loaded.producers
        # the offset of the newest producer-state snapshot in the directory, None for none (see close)
        self._latest_snapshot = loaded.latest_snapshot
        self._log_start_offset = loaded.log_start_offset
        self._recovery_point = loaded.recovery_point
        self._last_flush_ms = clock.now_ms()
        self._high_watermark = min(max(high_watermark, self._log_start_offset), self.log_end_offset)
        self._producers.on_high_watermark(self._high_watermark)

    @classmethod
    def open(
        cls,
        directory: Path,
        config: LogConfig,
        clock: Clock,
        *,
        recovery_point: int = 0,
        log_start_offset: int = 0,
        high_watermark: int = 0,
        clean_shutdown: bool = False,
        files: OpenFiles | None = None,
        stop_states_read: bool = False,
        state_at_stop: str | None = None,
    ) -> PartitionLog:
        """Open (or create) the log in ``directory``: recover it (:class:`LogLoader`), then build the live log.

        ``recovery_point`` is the offset up to which the data is known to be fsynced (the broker's
        recovery-point checkpoint); every batch from the segment holding it onwards is CRC-checked. After a
        clean shutdown only the unindexed tail of each segment is checked, which still catches a file
        truncated while the broker was down.

        ``stop_states_read``: after a clean shutdown, the directory's producer-state file of the stop was read
        (producer_state.write_stop_states); ``state_at_stop`` is this log's entry in it, None when it had no
        producer state. A disk error while loading is a KAFKA_STORAGE_ERROR, as on the live log.
        """
        files = files if files is not None else process_files()
        directory.mkdir(parents=True, exist_ok=True)
        epochs = LeaderEpochCache(directory / EPOCH_FILE)
        if epochs.corrupt:
            log.warning("partition %s: its leader-epoch-checkpoint does not parse; recovering every segment, which "
                        "assigns the epochs again from the batches", directory.name)
            recovery_point, clean_shutdown = 0, False
        loader = LogLoader(directory, config, clock, files, epochs, directory.name)
        try:
            loaded = loader.load(recovery_point, log_start_offset, clean_shutdown,
                                 state_at_stop if stop_states_read else UNKNOWN_STOP_STATE)
        except OSError as exc:
            raise _disk_error(directory.name, "open", exc) from exc
        return cls(directory, config, clock, loaded, epochs, files, high_watermark=high_watermark)

    # --- segments -------------------------------------------------------------------------------------------

    def _new_segment(self, base_offset: int, now_ms: int) -> LogSegment:
        return LogSegment(self.directory, base_offset, self.config.index_interval_bytes,
                          self.config.segment_index_bytes, now_ms, files=self.files)

    def _add_segment(self, segment: LogSegment) -> None:
        self._segments.append(segment)
        self._bases.append(segment.base_offset)

    def _segment_index_for(self, offset: int) -> int:
        return max(0, bisect.bisect_right(self._bases, offset) - 1)

    def _delete_segment(self, segment: LogSegment) -> None:
        if segment in self._pending_flush:
            self._pending_flush.remove(segment)
        segment.delete_files()
        i = self._segments.index(segment)
        del self._segments[i], self._bases[i]

    @property
    def _active(self) -> LogSegment:
        return self._segments[-1]

    @property
    def segments(self) -> list[LogSegment]:
        """A copy of the segment list (tests, compaction and tooling inspect it)."""
        with self._lock:
            return list(self._segments)

    def _should_roll(self, size: int, max_timestamp: int, last_offset: int, now_ms: int) -> bool:
        """Kafka's LogSegment.shouldRoll: full by bytes or index, offsets beyond int32 of the base, or older
        than segment.ms (minus this segment's jitter) measured from its first batch's timestamp."""
        seg = self._active
        if seg.size == 0:
            return False
        if seg.size + size > self.config.segment_bytes:
            return True
        if seg.offset_index.is_full or seg.time_index.is_full:
            return True
        if last_offset - seg.base_offset > INT32_MAX:
            return True
        jitter = self._roll_jitter.setdefault(
            seg.base_offset,
            random.randrange(self.config.segment_jitter_ms) if self.config.segment_jitter_ms > 0 else 0,
        )
        rolling_ts = seg.first_batch_timestamp
        waited = (max_timestamp - rolling_ts) if rolling_ts is not None and rolling_ts >= 0 \
            else now_ms - seg.created_ms
        return waited > self.config.segment_ms - jitter

    def _roll(self, now_ms: int, base_offset: int | None = None) -> None:
        """Start a new active segment at the LEO (or ``base_offset``, for a replicated batch beyond int32 reach
        of the current base); the old one is fsynced by the next tick (as Kafka does, off the append path) and
        a producer-state snapshot marks where rebuilding can start."""
        old = self._active
        self._roll_jitter.pop(old.base_offset, None)
        if old.size == 0:
            self._delete_segment(old)
        else:
            old.on_become_inactive()
            self._pending_flush.append(old)
        leo = self.log_end_offset if self._segments else old.base_offset
        self._add_segment(self._new_segment(leo if base_offset is None else base_offset, now_ms))
        self._active.offset_index.ensure_file()
        self._active.time_index.ensure_file()
        producer_state.write_snapshot(self.directory, self._producers, leo)
        self._latest_snapshot = leo

    def roll(self) -> None:
        """Force a roll (tests, and retention that must delete the active segment)."""
        with self._lock, self._disk("roll"):
            if self._active.size:
                self._roll(self.clock.now_ms())

    # --- errors ---------------------------------------------------------------------------------------------

    @contextmanager
    def _disk(self, action: str) -> Iterator[None]:
        """Any OSError takes the log offline: no further write can land on top of a failed one."""
        try:
            yield
        except OSError as exc:
            self._offline = True
            error = _disk_error(self.name, action, exc)
            self._changed()
            raise error from exc

    def _changed(self) -> None:
        if self.on_change is not None:
            self.on_change()

    def _check_online(self) -> None:
        if self._offline:
            raise KafkaError(ErrorCode.kafka_storage_error, f"log {self.name} is offline after a disk error")

    @property
    def offline(self) -> bool:
        return self._offline

    # --- offsets --------------------------------------------------------------------------------------------

    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self._segments[-1].next_offset

    @property
    def recovery_point(self) -> int:
        return self._recovery_point

    @property
    def latest_epoch(self) -> int:
        return self._epochs.latest_epoch

    @property
    def high_watermark(self) -> int:
        return self._high_watermark

    @high_watermark.setter
    def high_watermark(self, value: int) -> None:
        with self._lock:
            self._high_watermark = min(max(value, self._log_start_offset), self.log_end_offset)
            self._producers.on_high_watermark(self._high_watermark)

    @property
    def first_unstable_offset(self) -> int | None:
        """The earliest offset of a transaction not yet decided or whose marker is above the high watermark."""
        with self._lock:
            first = self._producers.first_unstable_offset()
            return None if first is None else max(first, self._log_start_offset)

    @property
    def last_stable_offset(self) -> int:
        """What READ_COMMITTED consumers may read up to: the high watermark, or the first unstable offset
        below it (never past the high watermark)."""
        with self._lock:
            first = self.first_unstable_offset
            return first if first is not None and first < self._high_watermark else self._high_watermark

    @property
    def has_rolled_unflushed(self) -> bool:
        return bool(self._pending_flush)

    @property
    def size_in_bytes(self) -> int:
        return sum(s.size for s in self._segments)

    # --- appends --------------------------------------------------------------------------------------------

    def append_as_leader(
        self, records: bytearray, headers: list[BatchHeader], leader_epoch: int, now_ms: int,
        origin: str = ORIGIN_CLIENT,
    ) -> AppendResult:
        """Assign offsets from the LEO and write; a retried idempotent batch returns its original offsets
        instead (for clients: the group coordinator's batches are never retried as such)."""
        with self._lock:
            self._check_online()
            self._check_sizes(records, headers)
            log_append = self.config.log_append_time
            client = origin == ORIGIN_CLIENT
            duplicate = self._producers.find_duplicate(headers) if client else None
            if duplicate is not None:
                # Kafka's UnifiedLog answers a duplicate with the cached batch's timestamp as its log append time,
                # whatever the topic's timestamp type
                return AppendResult(duplicate.first_offset, duplicate.last_offset, duplicate.timestamp,
                                    self._log_start_offset, True)
            self._producers.validate(headers, check_sequence=client)
            if not log_append:
                self._check_timestamps(headers, now_ms)
            first_offset = offset = self.log_end_offset
            stamped: list[tuple[int, BatchHeader]] = []
            position = 0
            for header in headers:
                stamp(records, position, offset, leader_epoch)
                if log_append:
                    set_log_append_time(records, position, now_ms)
                    header = read_header(records, position)
                else:
                    header = header._replace(base_offset=offset, partition_leader_epoch=leader_epoch)
                stamped.append((position, header))
                position += header.size
                offset = header.next_offset
            self._write(records, stamped, now_ms)
            if leader_epoch >= 0:
                self._epochs.assign(leader_epoch, first_offset)
            for _, header in stamped:
                self._producers.update(header, header.max_timestamp)
            self._maybe_flush_by_count()
            append_time = now_ms if log_append else -1
            return AppendResult(first_offset, offset - 1, append_time, self._log_start_offset)

    def append_marker(self, producer_id: int, producer_epoch: int, coordinator_epoch: int, commit: bool,
                      leader_epoch: int, now_ms: int) -> int:
        """Write a COMMIT or ABORT marker for ``producer_id`` as leader and return its offset.

        Fenced as Kafka's appendEndTxnMarker: an older producer epoch is INVALID_PRODUCER_EPOCH, an older
        coordinator epoch TRANSACTION_COORDINATOR_FENCED; nothing is written then.
        """
        with self._lock:
            self._check_online()
            self._producers.check_marker(producer_id, producer_epoch, coordinator_epoch)
            records = build_control_batch(producer_id, producer_epoch, coordinator_epoch, commit, now_ms)
            offset = self.log_end_offset
            stamp(records, 0, offset, leader_epoch)
            if self.config.log_append_time:
                set_log_append_time(records, 0, now_ms)
            header = read_header(records)
            self._write(records, [(0, header)], now_ms)
            if leader_epoch >= 0:
                self._epochs.assign(leader_epoch, offset)
            with self._disk("transaction index"):
                apply_batch(self._producers, self._active, header,
                            EndTxnMarker(CONTROL_COMMIT if commit else CONTROL_ABORT, coordinator_epoch))
            self._maybe_flush_by_count()
            return offset

    def start_txn_verification(self, producer_id: int) -> object:
        """Before asking the coordinator whether a transaction includes this partition (KIP-890): a token that
        a marker written meanwhile invalidates (see :meth:`txn_verification_current`)."""
        with self._lock:
            return self._producers.start_verification(producer_id, self.clock.now_ms())

    def txn_verification_current(self, producer_id: int, token: object) -> bool:
        with self._lock:
            return self._producers.verification_current(producer_id, token)

    def has_ongoing_transaction(self, producer_id: int, producer_epoch: int) -> bool:
        with self._lock:
            return self._producers.has_ongoing_transaction(producer_id, producer_epoch)

    def append_as_follower(self, records: bytes | bytearray | memoryview, headers: list[BatchHeader]) -> None:
        """Write replicated batches with the leader's offsets (gaps allowed: a compacted leader has them)."""
        with self._lock:
            self._check_online()
            expected = self.log_end_offset
            stamped: list[tuple[int, BatchHeader]] = []
            position = 0
            for header in headers:
                if header.base_offset < expected:
                    raise KafkaError(ErrorCode.unknown_server_error,
                                     f"{self.name}: follower append at offset {header.base_offset} "
                                     f"below the log end offset {expected}")
                stamped.append((position, header))
                position += header.size
                expected = header.next_offset
            if position != len(records):
                raise ValueError("headers do not cover the record bytes")
            if not stamped:
                return
            markers = {position: self._marker_in(records, position, header) for position, header in stamped
                       if header.is_control and header.producer_id >= 0}
            self._write(records, stamped, self.clock.now_ms())
            segment = self._active
            with self._disk("transaction index"):
                for position, header in stamped:
                    if header.partition_leader_epoch > self._epochs.latest_epoch:
                        self._epochs.assign(header.partition_leader_epoch, header.base_offset)
                    if header.producer_id >= 0:
                        apply_batch(self._producers, segment, header, markers.get(position))
            self._maybe_flush_by_count()

    def _marker_in(self, records: bytes | bytearray | memoryview, position: int,
                   header: BatchHeader) -> EndTxnMarker | None:
        try:
            return read_end_txn_marker(records, position)
        except CorruptBatchError as exc:
            log.warning("partition %s: replicated control batch at offset %d ignored: %s", self.name,
                        header.base_offset, exc)
            return None

    def _check_sizes(self, records: bytearray, headers: list[BatchHeader]) -> None:
        total = 0
        for header in headers:
            if header.size > self.config.max_message_bytes:
                raise KafkaError(ErrorCode.message_too_large,
                                 f"batch of {header.size} bytes exceeds max.message.bytes "
                                 f"{self.config.max_message_bytes}")
            total += header.size
        if total != len(records):
            raise ValueError("headers do not cover the record bytes")
        if total > self.config.segment_bytes:
            raise KafkaError(ErrorCode.record_list_too_large,
                             f"{total} bytes do not fit in a segment of segment.bytes "
                             f"{self.config.segment_bytes}")

    def _check_timestamps(self, headers: list[BatchHeader], now_ms: int) -> None:
        """message.timestamp.{before,after,difference}.max.ms against what the headers show (the broker does
        not decompress batches, so first and max timestamp stand for the records between them)."""
        cfg = self.config
        before = min(cfg.message_timestamp_before_max_ms, cfg.message_timestamp_difference_max_ms)
        after = min(cfg.message_timestamp_after_max_ms, cfg.message_timestamp_difference_max_ms)
        for header in headers:
            for ts in (header.base_timestamp, header.max_timestamp):
                if ts >= 0 and (now_ms - ts > before or ts - now_ms > after):
                    raise KafkaError(
                        ErrorCode.invalid_timestamp,
                        f"Timestamp {ts} of message with offset {header.base_offset} is out of range. The "
                        f"timestamp should be within [{now_ms - before}, {now_ms + after}]",
                    )

    def _write(self, records: bytes | bytearray | memoryview, stamped: list[tuple[int, BatchHeader]],
               now_ms: int) -> None:
        with self._disk("append"):
            max_ts = max(h.max_timestamp for _, h in stamped)
            first, last = stamped[0][1].base_offset, stamped[-1][1].last_offset
            if last - self._active.base_offset > INT32_MAX:
                self._roll(now_ms, base_offset=first)
            elif self._should_roll(len(records), max_ts, stamped[-1][1].last_offset, now_ms):
                self._roll(now_ms)
            self._active.append(records, stamped)

    def _maybe_flush_by_count(self) -> None:
        if self.log_end_offset - self._recovery_point >= self.config.flush_messages:
            self._flush()

    # --- flushing -------------------------------------------------------------------------------------------

    def flush(self) -> None:
        """fsync everything written so far and move the recovery point to the LEO."""
        with self._lock:
            self._check_online()
            self._flush()

    def _flush(self) -> None:
        with self._disk("flush"):
            self._epochs.flush_if_dirty()  # before the recovery point passes data written in a deferred epoch
            for segment in self._pending_flush:
                segment.flush()
            self._pending_flush.clear()
            if self._active.unflushed:
                self._active.flush()
            self._recovery_point = self.log_end_offset
            self._last_flush_ms = self.clock.now_ms()

    def flush_rolled_segments(self) -> None:
        """fsync the segments rolled since the last call and advance the recovery point past them.

        The fsyncs run without the lock: a rolled 1 GiB segment can take seconds to reach the disk and appends
        to the new active segment must not wait for it (Kafka flushes rolled segments on a scheduler thread for
        the same reason). Rolled segments never change, so only deletion or truncation can race with this.
        """
        with self._lock:
            if self._offline or not self._pending_flush:
                return
            pending = list(self._pending_flush)
            truncations = self._truncations
        failure: OSError | None = None
        try:
            for segment in pending:
                segment.flush()
        except OSError as exc:
            failure = exc
        with self._lock:
            if self._offline or truncations != self._truncations or any(s not in self._segments for s in pending):
                return  # the log changed (or was detached) underneath; what remains is flushed next time
            if failure is not None:
                with self._disk("flush"):
                    raise failure
            for segment in pending:
                if segment in self._pending_flush:
                    self._pending_flush.remove(segment)
            with self._disk("leader epoch checkpoint"):
                self._epochs.flush_if_dirty()
            self._recovery_point = max(self._recovery_point, min(pending[-1].next_offset, self.log_end_offset))

    # --- reads ----------------------------------------------------------------------------------------------

    def read(
        self, offset: int, max_bytes: int, max_offset: int | None = None, min_one: bool = True,
        read_committed: bool = False, nowait: bool = False,
    ) -> ReadResult:
        """Whole batches from the one holding ``offset``: at most ``max_bytes`` (but one batch when
        ``min_one``), none starting at or after ``max_offset`` (the high watermark, for consumers).

        ``read_committed`` (a READ_COMMITTED fetch) also bounds the read by the last stable offset and collects
        the aborted transactions overlapping what is returned, as Kafka's LocalLog.read does: from ``offset`` up
        to the first offset after the returned bytes.

        ``nowait`` (the event loop's reads): a read away from the log's tail is served only from the page cache,
        and raises :class:`~odradek.broker.log.segment.WouldBlock` when the disk would have to be read, so the
        caller reads it again on a thread. The tail, just written, is read as usual.
        """
        with self._lock:
            self._check_online()
            leo = self.log_end_offset
            if offset < self._log_start_offset or offset > leo:
                raise KafkaError(
                    ErrorCode.offset_out_of_range,
                    f"offset {offset} is outside [{self._log_start_offset}, {leo}] of {self.name}",
                )
            limit = leo if max_offset is None else min(max_offset, leo)
            lso = self.last_stable_offset
            if read_committed:
                limit = min(limit, lso)
            aborted: list[AbortedTxn] | None = [] if read_committed else None
            with self._disk("read"):
                buffers, size, index, upper = self._read_locked(offset, max_bytes, limit, min_one, nowait)
                if read_committed and size:
                    aborted = self._collect_aborted(index, offset, upper)
            return ReadResult(buffers, size, self._high_watermark, self._log_start_offset, leo, lso, aborted)

    def _read_locked(
        self, offset: int, max_bytes: int, limit: int, min_one: bool, nowait: bool = False,
    ) -> tuple[list[memoryview], int, int, int]:
        """``(buffers, size, index of the segment read, offset just after the returned batches)``; Kafka's
        fetchUpperBoundOffset: the next batch's base offset, else the next segment's, else the log end."""
        if offset >= limit:
            return [], 0, -1, offset
        first_index = self._segment_index_for(offset)
        for index in range(first_index, len(self._segments)):
            segment = self._segments[index]
            # away from the tail (a rolled segment, or far behind the active one's end) the data may have left
            # the page cache
            cold = nowait and (segment is not self._active
                               or segment.size - segment.offset_index.lookup(offset) > NOWAIT_TAIL_BYTES)
            found = segment.find_batch(offset, nowait=cold)
            if found is None:
                continue  # offset lies past this segment's last batch (compaction removed its tail)
            position, first = found
            if first.base_offset >= limit:
                return [], 0, -1, offset
            read = segment.read_cached if cold else segment.read
            if first.size > max_bytes:
                if not min_one:
                    return [], 0, -1, offset
                data = read(position, first.size)
                return [memoryview(data)], len(data), index, self._offset_after(index, position + len(data))
            want = min(max_bytes, segment.size - position)
            data = read(position, want)
            end = _batch_boundary(data, segment, position, limit)
            return [memoryview(data)[:end]], end, index, self._offset_after(index, position + end)
        return [], 0, -1, offset

    def _offset_after(self, index: int, position: int) -> int:
        segment = self._segments[index]
        if position + HEADER_SIZE <= segment.size:
            return read_header(segment.read(position, HEADER_SIZE)).base_offset
        if index + 1 < len(self._segments):
            return self._segments[index + 1].base_offset
        return self.log_end_offset

    def _collect_aborted(self, index: int, fetch_offset: int, upper_bound: int) -> list[AbortedTxn]:
        """Kafka's collectAbortedTransactions: the segment read and those after it, until an entry's LSO shows
        that no later transaction can start below the upper bound."""
        found: list[AbortedTxn] = []
        for segment in self._segments[index:]:
            entries, complete = segment.txn_index.collect(fetch_offset, upper_bound)
            found.extend(entries)
            if complete:
                break
        return found

    def aborted_transactions(self, fetch_offset: int, upper_bound: int) -> list[AbortedTxn]:
        """Aborted transactions overlapping ``[fetch_offset, upper_bound)`` (tests and tools)."""
        with self._lock, self._disk("read"):
            return self._collect_aborted(self._segment_index_for(fetch_offset), fetch_offset, upper_bound)

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        """ListOffsets: ``(offset, timestamp)`` of the first record at or after ``timestamp``, or None.

        -1 (latest) and -2 (earliest) give the LEO and log start offset with timestamp -1; -3 (KIP-734) the
        record with the largest timestamp.
        """
        with self._lock:
            self._check_online()
            if timestamp == LIST_LATEST:
                return self.log_end_offset, -1
            if timestamp == LIST_EARLIEST:
                return self._log_start_offset, -1
            with self._disk("read"):
                if timestamp == LIST_MAX_TIMESTAMP:
                    return self._max_timestamp_offset()
                return self._offset_for_timestamp(timestamp)

    def _offset_for_timestamp(self, target: int) -> tuple[int, int] | None:
        for segment in self._segments:
            if segment.max_timestamp < target or segment.next_offset <= self._log_start_offset:
                continue
            before = segment.time_index.offset_before(target)
            start = segment.offset_index.lookup(before) if before is not None else 0
            for position, header in segment.iter_headers(start):
                if header.max_timestamp >= target and header.last_offset >= self._log_start_offset:
                    return self._first_record_at_or_after(segment, position, header, target)
        return None

    def _first_record_at_or_after(self, segment: LogSegment, position: int, header: BatchHeader,
                                  target: int) -> tuple[int, int]:
        try:
            _, records = decode_batch(segment.read(position, header.size))
        except KafkaError:  # a codec we cannot inflate here: the batch's own bounds are the best answer
            return max(header.base_offset, self._log_start_offset), header.max_timestamp
        for record in records:
            if record.offset >= self._log_start_offset and record.timestamp >= target:
                return record.offset, record.timestamp
        return max(header.base_offset, self._log_start_offset), header.max_timestamp

    def _max_timestamp_offset(self) -> tuple[int, int] | None:
        """As Kafka 3.8+ (KAFKA-16310): the first record carrying the largest timestamp, not the last offset of
        its batch. The segment keeps which batch holds its maximum; that batch's records say which one."""
        best: LogSegment | None = None
        for segment in self._segments:
            if segment.max_timestamp >= 0 and (best is None or segment.max_timestamp > best.max_timestamp):
                best = segment
        if best is None:
            return None
        target = best.max_timestamp
        for position, header in best.iter_headers(best.offset_index.lookup(best.offset_of_max_timestamp)):
            if header.max_timestamp == target:
                return self._first_record_at_or_after(best, position, header, target)
        return max(best.offset_of_max_timestamp, self._log_start_offset), target

    # --- leader epochs --------------------------------------------------------------------------------------

    def assign_epoch(self, epoch: int, start_offset: int) -> None:
        """A new leadership's epoch; its checkpoint is written with the next flush (see LeaderEpochCache.assign),
        or, for a new log, by the log manager's background work soon after (write_new_epoch_checkpoint)."""
        with self._lock, self._disk("leader epoch checkpoint"):
            self._epochs.assign(epoch, start_offset, flush=False)

    @property
    def new_epoch_checkpoint_pending(self) -> bool:
        """Whether a new log's first leader-epoch checkpoint waits to be written (read without the lock)."""
        return self._epochs.new_file_pending

    def write_new_epoch_checkpoint(self) -> None:
        """Write a new log's first leader-epoch checkpoint, unsynced (LeaderEpochCache.write_if_new): off the
        event loop, so that a clean stop does not create it."""
        with self._lock:
            if self._offline:
                return
            with self._disk("leader epoch checkpoint"):
                self._epochs.write_if_new()

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """OffsetsForLeaderEpoch: ``(largest epoch <= requested, its end offset)`` or (-1, -1)."""
        with self._lock:
            return self._epochs.end_offset_for(epoch, self.log_end_offset)

    @property
    def epoch_entries(self) -> list[tuple[int, int]]:
        return self._epochs.entries

    # --- truncation and deletion ----------------------------------------------------------------------------

    def truncate_to(self, offset: int) -> None:
        """Follower truncation (after an OffsetsForLeaderEpoch answer): drop every offset >= ``offset``."""
        with self._lock:
            self._check_online()
            if offset >= self.log_end_offset:
                return
            if offset < self._segments[0].base_offset:
                self._truncate_fully(offset)
                return
            with self._disk("truncate"):
                for segment in reversed(self._segments[1:]):
                    if segment.base_offset > offset:
                        self._delete_segment(segment)
                removed = self._active.truncate_to(offset)
                log.info("partition %s: truncated to offset %d (%d bytes of the active segment)",
                         self.name, offset, removed)
                self._after_truncation()

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Empty the log and restart it at ``offset`` (a follower far behind a leader's log start)."""
        with self._lock:
            self._check_online()
            self._truncate_fully(offset)

    def _truncate_fully(self, offset: int) -> None:
        with self._disk("truncate"):
            for segment in list(self._segments):
                self._delete_segment(segment)
            self._add_segment(self._new_segment(offset, self.clock.now_ms()))
            self._active.offset_index.ensure_file()
            self._active.time_index.ensure_file()
            self._log_start_offset = offset
            self._epochs.clear()
            for _, path in producer_state.list_snapshots(self.directory):
                path.unlink(missing_ok=True)
            self._latest_snapshot = None
            self._producers = ProducerStateManager()
            self._after_truncation()

    def _after_truncation(self) -> None:
        self._truncations += 1
        leo = self.log_end_offset
        self._log_start_offset = min(self._log_start_offset, leo)  # as Kafka: never beyond the new end
        self._epochs.truncate_from_end(leo)
        self._recovery_point = min(self._recovery_point, leo)
        self._high_watermark = min(max(self._high_watermark, self._log_start_offset), leo)
        self._producers, self._latest_snapshot = rebuild_producer_state(
            self.directory, self._segments, self._log_start_offset, self.name)
        self._producers.on_high_watermark(self._high_watermark)
        self._changed()

    def delete_records_before(self, offset: int, limit: int | None = None) -> int:
        """DeleteRecords: advance the log start offset (-1: to the high watermark) at most to ``limit``; returns
        the new one. A leader passes its high watermark as the limit; a follower, applying the start offset its
        leader reported, may run ahead of its own high watermark for the moment before the same fetch response
        advances that too, so it is bounded by its log end only."""
        with self._lock:
            self._check_online()
            if offset == -1:
                offset = self._high_watermark
            bound = self.log_end_offset if limit is None else min(limit, self.log_end_offset)
            if offset > bound or offset < 0:
                raise KafkaError(
                    ErrorCode.offset_out_of_range,
                    f"Cannot increment the log start offset to {offset} of partition {self.name} since it is "
                    f"larger than the high watermark {bound}",
                )
            with self._disk("delete records"):
                self._advance_log_start(offset)
                self._delete_segments_below_log_start()
            return self._log_start_offset

    def _advance_log_start(self, offset: int) -> None:
        if offset <= self._log_start_offset:
            return
        self._log_start_offset = offset
        self._epochs.truncate_from_start(offset)
        self._producers.truncate_head(offset)
        self._changed()

    def _delete_segments_below_log_start(self) -> int:
        deleted = 0
        while len(self._segments) > 1 and self._segments[1].base_offset <= self._log_start_offset:
            self._delete_segment(self._segments[0])
            deleted += 1
        return deleted

    # --- periodic work --------------------------------------------------------------------------------------

    def update_config(self, config: LogConfig) -> None:
        with self._lock:
            self.config = config
            for segment in self._segments:
                segment.index_interval_bytes = config.index_interval_bytes

    def tick(self, now_ms: int, flush_rolled: bool = True, retention: bool = True) -> None:
        """Flush by flush.ms, (with ``retention``) apply retention and expire idle producers, and (unless the caller
        does it on another thread, as LogManager does) fsync rolled segments."""
        if flush_rolled:
            self.flush_rolled_segments()
            if self._epochs.new_file_pending:
                self.write_new_epoch_checkpoint()
        if not retention and not self._flush_due(now_ms):
            return  # the common case, decided without the lock: a broker sweeps tens of thousands of these
        with self._lock:
            if self._offline:
                return
            if self._flush_due(now_ms):
                self._flush()
            if retention:
                self.apply_retention(now_ms)
                self._producers.remove_expired(now_ms, PRODUCER_ID_EXPIRATION_MS)

    def tick_due(self, now_ms: int, retention: bool) -> bool:
        """Whether :meth:`tick` has work beyond rolled segments (decided without the lock)."""
        return retention or self._flush_due(now_ms)

    def _flush_due(self, now_ms: int) -> bool:
        return now_ms - self._last_flush_ms >= self.config.flush_ms and (
            self._active.unflushed or self._recovery_point < self.log_end_offset
        )

    def apply_retention(self, now_ms: int) -> int:
        """Delete whole segments by retention.ms, retention.bytes and the log start offset; returns how many.

        As in Kafka, only segments wholly below the high watermark go, and the active segment only after a
        roll. Deleted files are unlinked at once rather than after file.delete.delay.ms: reads hand out
        copies, so no reader can be holding a deleted file's bytes.
        """
        with self._lock:
            self._check_online()
            with self._disk("retention"):
                deleted = 0
                if self.config.delete:
                    deleted += self._delete_oldest_while(self._breaches_retention_ms(now_ms))
                    deleted += self._delete_oldest_while(self._breaches_retention_bytes())
                deleted += self._delete_segments_below_log_start()
                return deleted

    def _breaches_retention_ms(self, now_ms: int) -> _Predicate:
        retention = self.config.retention_ms

        def check(segment: LogSegment) -> bool:
            if retention < 0:
                return False
            ts = segment.max_timestamp
            if ts < 0:
                ts = int(os.stat(segment.log_path).st_mtime * 1000)
            return now_ms - ts > retention

        return check

    def _breaches_retention_bytes(self) -> _Predicate:
        limit = self.config.retention_bytes
        excess = self.size_in_bytes - limit

        def check(segment: LogSegment) -> bool:
            nonlocal excess
            if limit < 0 or excess - segment.size < 0:
                return False
            excess -= segment.size
            return True

        return check

    def _delete_oldest_while(self, predicate: _Predicate) -> int:
        deleted = 0
        while self._segments:
            segment = self._segments[0]
            is_active = segment is self._active
            upper = self.log_end_offset if is_active else self._segments[1].base_offset
            if (is_active and segment.size == 0) or upper > self._high_watermark or not predicate(segment):
                break
            if is_active:
                self._roll(self.clock.now_ms())
            self._delete_segment(segment)
            deleted += 1
            self._advance_log_start(self._segments[0].base_offset)
        return deleted

    # --- lifecycle ------------------------------------------------------------------------------------------

    def close(self, states_at_stop: dict[tuple[str, int], str] | None = None) -> None:
        """Flush, snapshot producer state at the LEO and release file descriptors.

        With ``states_at_stop`` (a clean stop of the log manager) a log with producer state adds its snapshot
        there instead of writing a file: the manager writes them all in one file per directory
        (producer_state.write_stop_states).

        Only what is dirty is written, so that a broker with thousands of idle logs stops quickly: the flush
        when anything is unflushed, the snapshot when none exists at the LEO yet (Kafka's takeSnapshot skips
        an offset it already has a snapshot for; producer state changes only with the offset, or by expiry,
        which the next load redoes). A log with no producer state and no snapshot writes none: after the clean
        shutdown the next load takes the missing snapshot for an empty state (see loader.rebuild_producer_state), so
        the logs of plain, non-idempotent producers cost a clean stop no file each.
        """
        with self._lock:
            if not self._offline:
                if self._pending_flush or self._active.unflushed or self._recovery_point < self.log_end_offset:
                    self._flush()
                with self._disk("close"):
                    leo = self.log_end_offset
                    if states_at_stop is not None:
                        if self._producers.producers:
                            states_at_stop[(self.topic, self.partition)] = self._producers.to_json(leo)
                    elif ((self._latest_snapshot is not None or self._producers.producers)
                            and self._latest_snapshot != leo):
                        producer_state.write_snapshot(self.directory, self._producers, leo, keep=None)
                        self._latest_snapshot = leo
            for segment in self._segments:
                segment.close()

    def detach(self) -> None:
        """Close every file and refuse further use (the manager is about to delete the directory)."""
        with self._lock:
            self._offline = True
            self._pending_flush.clear()
            for segment in self._segments:
                segment.close()
        self._changed()

    def delete(self) -> None:
        """Remove the partition's directory and everything in it (the log must not be used afterwards)."""
        with self._lock:
            for segment in self._segments:
                segment.close()
            self._offline = True
            shutil.rmtree(self.directory, ignore_errors=True)
        self._changed()

    def replace_segments(
        self, old: list[LogSegment], cleaned: LogSegment, suffix: str, truncations: int
    ) -> bool:
        """Swap compacted output in for ``old`` (consecutive, non-active): ``<suffix>`` files become ``.swap``,
        the old segments go, the swap files take the first one's name. Loading completes a crash in between.

        The cleaner builds its output without holding the lock, so this refuses (False) when the log changed
        underneath it: a segment deleted by retention, or any truncation since ``truncations`` was read.
        """
        with self._lock:
            if (
                self._offline
                or truncations != self._truncations
                or any(s not in self._segments or s is self._active for s in old)
            ):
                return False
            self._swap_in(old, cleaned, suffix)
            return True

    def _swap_in(self, old: list[LogSegment], cleaned: LogSegment, suffix: str) -> None:
        with self._disk("compaction swap"):
            cleaned.rename_suffix(suffix, SWAP_SUFFIX)
            checkpoint.fsync_dir(self.directory)
            for segment in old:
                self._delete_segment(segment)
            cleaned.rename_suffix(SWAP_SUFFIX, "")
            checkpoint.fsync_dir(self.directory)
            i = bisect.bisect_left(self._bases, cleaned.base_offset)
            self._segments.insert(i, cleaned)
            self._bases.insert(i, cleaned.base_offset)

    @property
    def truncations(self) -> int:
        """How many truncations this log has seen (the cleaner's staleness check)."""
        return self._truncations

    # --- internals exposed to the cleaner -------------------------------------------------------------------

    @property
    def lock(self) -> threading.RLock:
        return self._lock

    @property
    def producer_state(self) -> ProducerStateManager:
        return self._producers


def _disk_error(name: str, action: str, exc: OSError) -> KafkaError:
    """The one log line and the KAFKA_STORAGE_ERROR of a disk error in ``action``."""
    log.error("partition %s: %s failed, log is offline: %s", name, action, exc)
    return KafkaError(ErrorCode.kafka_storage_error, f"{action} failed for {name}: {exc}")


def _batch_boundary(data: bytes | bytearray, segment: LogSegment, position: int, limit: int) -> int:
    """Length of the prefix of ``data`` (read at ``position``) holding whole batches below ``limit``.

    The offset index supplies a batch start near the far end (for the byte bound) and one wholly below
    ``limit`` (for the offset bound), so only a few headers are walked whatever the read size.
    """
    size = len(data)
    jump = segment.offset_index.floor_position(position + size - HEADER_SIZE)
    if limit < segment.next_offset:
        jump = min(jump, segment.offset_index.offset_floor_position(limit))
    rel = max(0, jump - position)
    end = rel
    while rel + HEADER_SIZE <= size:
        header = read_header(data, rel)
        if header.base_offset >= limit or rel + header.size > size:
            break
        rel += header.size
        end = rel
    return end



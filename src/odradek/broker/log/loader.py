"""Opening a partition's log: what is on disk made whole again, before the live log takes it over.

Kafka splits this out of the log itself (LogLoader, beside LocalLog and UnifiedLog); so does odradek. Loading
removes the files a crash left half-made, completes an interrupted compaction swap, finds the segments, recovers
(CRC-checks) every batch from the recovery point on, or after a clean shutdown only the unindexed tail of each
segment, drops what follows a torn or overlapping segment, and rebuilds producer state. The result is a
:class:`LoadedLog`, from which :meth:`PartitionLog.open <odradek.broker.log.partition_log.PartitionLog.open>`
builds the live log; the live log never runs recovery itself.

Producer state is rebuilt by the same replay after a truncation of the live log (:func:`rebuild_producer_state`),
and a live append applies each batch with the same :func:`apply_batch`, so the state a load builds and the state
appends built are made by one piece of code.
"""

from __future__ import annotations

import bisect
import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from odradek.broker.log import producer_state
from odradek.broker.log.epoch_cache import LeaderEpochCache
from odradek.broker.log.handles import OpenFiles
from odradek.broker.log.producer_state import ProducerStateManager
from odradek.broker.log.segment import INDEX_SUFFIX, LOG_SUFFIX, TIMEINDEX_SUFFIX, LogSegment
from odradek.broker.log.txn_index import TXNINDEX_SUFFIX, AbortedTxn
from odradek.broker.topic_config import LogConfig
from odradek.clock import Clock
from odradek.protocol.records import BatchHeader, CorruptBatchError, EndTxnMarker, read_end_txn_marker

log = logging.getLogger("odradek.log")

STRAY_SUFFIXES = (".cleaned", ".deleted", ".tmp")
SWAP_SUFFIX = ".swap"
UNKNOWN_STOP_STATE: str | None = "<no producer-state file of the stop>"  # a sentinel: not a snapshot, not None


@dataclass(slots=True)
class LoadedLog:
    """A recovered log: its segments (oldest first, the last one active) and the offsets and state derived."""

    segments: list[LogSegment]
    log_start_offset: int
    recovery_point: int
    producers: ProducerStateManager
    latest_snapshot: int | None
    """The offset of the newest producer-state snapshot in the directory, None for none."""


class LogLoader:
    """Loads one partition directory; the leader-epoch cache it is given is truncated to the recovered log."""

    def __init__(self, directory: Path, config: LogConfig, clock: Clock, files: OpenFiles,
                 epochs: LeaderEpochCache, name: str) -> None:
        self.directory = directory
        self.config = config
        self.clock = clock
        self.files = files
        self.epochs = epochs
        self.name = name

    def load(self, recovery_point: int, checkpoint_log_start: int, clean_shutdown: bool,
             state_at_stop: str | None = UNKNOWN_STOP_STATE) -> LoadedLog:
        """Recover the directory (see the module docstring); an OSError is the caller's to report."""
        self._remove_stray_files()
        self._complete_swaps()
        bases = sorted(
            int(p.name[: -len(LOG_SUFFIX)])
            for p in self.directory.glob(f"*{LOG_SUFFIX}")
            if p.name[: -len(LOG_SUFFIX)].isdigit()
        )
        now = self.clock.now_ms()
        segments = [self._segment(base, now) for base in bases]
        if not segments:
            segments.append(self._segment(max(0, checkpoint_log_start), now))
        recover_from = 0 if recovery_point <= 0 else max(0, bisect.bisect_right(bases, recovery_point) - 1)
        rebuild: set[LogSegment] = set()  # recovered segments: their .txnindex is rebuilt from their markers
        for i, segment in enumerate(list(segments)):
            needs_recovery = (not clean_shutdown and i >= recover_from) or not segment.load()
            if needs_recovery:
                rebuild.add(segment)
                segment.txn_index.reset()
                outcome = segment.recover(self._on_recovered_batch)
                if outcome.dropped_bytes:
                    log.warning(
                        "partition %s: segment %s truncated at byte %d, %d bytes dropped (%s)",
                        self.name, segment.log_path.name, outcome.valid_bytes, outcome.dropped_bytes,
                        outcome.reason,
                    )
                    self._drop_segments_after(segments, i)
                    break
            if i + 1 < len(segments) and segments[i + 1].base_offset < segment.next_offset:
                log.warning("partition %s: segment %s overlaps the next one; dropping later segments",
                            self.name, segment.log_path.name)
                self._drop_segments_after(segments, i)
                break
        leo = segments[-1].next_offset
        log_start = min(max(checkpoint_log_start, segments[0].base_offset), leo)
        self.epochs.truncate_from_end(leo)
        self.epochs.truncate_from_start(log_start)
        producers, latest_snapshot = rebuild_producer_state(
            self.directory, segments, log_start, self.name, {s for s in rebuild if s in segments},
            clean_shutdown=clean_shutdown, state_at_stop=state_at_stop)
        for segment in segments:
            if segment.unflushed or segment is not segments[-1] or segment.txn_index.unsynced:
                segment.flush()
        return LoadedLog(segments, log_start, leo, producers, latest_snapshot)

    def _segment(self, base_offset: int, now_ms: int) -> LogSegment:
        return LogSegment(self.directory, base_offset, self.config.index_interval_bytes,
                          self.config.segment_index_bytes, now_ms, files=self.files)

    def _on_recovered_batch(self, header: BatchHeader) -> None:
        if header.partition_leader_epoch >= 0 and header.partition_leader_epoch > self.epochs.latest_epoch:
            self.epochs.assign(header.partition_leader_epoch, header.base_offset)

    def _drop_segments_after(self, segments: list[LogSegment], i: int) -> None:
        for later in segments[i + 1 :]:
            log.warning("partition %s: deleting segment %s after the recovered tail",
                        self.name, later.log_path.name)
            later.delete_files()
        del segments[i + 1 :]

    def _remove_stray_files(self) -> None:
        for path in self.directory.iterdir():
            if path.name.endswith(STRAY_SUFFIXES):
                path.unlink(missing_ok=True)

    def _complete_swaps(self) -> None:
        """Finish a compaction interrupted after its ``.swap`` files were complete (Kafka's rule: the swap
        replaces every segment whose base offset falls inside its offset range)."""
        for swap in sorted(self.directory.glob(f"*{LOG_SUFFIX}{SWAP_SUFFIX}")):
            base = int(swap.name.split(".")[0])
            segment = LogSegment(self.directory, base, self.config.index_interval_bytes,
                                 self.config.segment_index_bytes, self.clock.now_ms(), suffix=SWAP_SUFFIX,
                                 files=self.files)
            outcome = segment.recover()
            end = segment.next_offset
            if not outcome.dropped_bytes:
                segment.flush()
            segment.close()
            if outcome.dropped_bytes:
                log.warning("partition %s: discarding incomplete compaction output %s", self.name, swap.name)
                for path in segment.paths():
                    path.unlink(missing_ok=True)
                continue
            for old in self.directory.glob(f"*{LOG_SUFFIX}"):
                stem = old.name[: -len(LOG_SUFFIX)]
                if stem.isdigit() and base <= int(stem) < max(end, base + 1):
                    for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIMEINDEX_SUFFIX, TXNINDEX_SUFFIX):
                        (self.directory / (stem + suffix)).unlink(missing_ok=True)
            for path in segment.paths():
                if path.exists():
                    os.replace(path, path.with_name(path.name[: -len(SWAP_SUFFIX)]))


def rebuild_producer_state(
    directory: Path, segments: list[LogSegment], log_start_offset: int, name: str,
    rebuild_index: set[LogSegment] | None = None, *, clean_shutdown: bool = False,
    state_at_stop: str | None = UNKNOWN_STOP_STATE,
) -> tuple[ProducerStateManager, int | None]:
    """Producer state for ``segments`` and the offset of the newest snapshot left in ``directory``.

    A snapshot at or below the LEO, then the batches after it (headers carry all producer state; markers are read
    for their type and coordinator epoch). With ``rebuild_index`` (segments whose ``.txnindex`` was reset), the
    snapshot must be at or below the first of them, and every ABORT marker in them is written to their index again.

    Without a usable snapshot the whole log is replayed, as Kafka does: a transaction opened many segments ago is
    still open until its marker, and forgetting it would expose its records to READ_COMMITTED.

    After a clean shutdown with no segment recovered, nothing is replayed: the state is the log's entry in the
    stop's producer-state file (``state_at_stop``), or empty when the file has none for it (the log had no producer
    state). A directory last stopped by an older odradek has no such file; then a log with no snapshot at all had an
    empty state, Kafka's own rule in LogLoader (``reloadFromCleanShutdown`` with no snapshot).
    """
    leo = segments[-1].next_offset
    upto = min([leo, *(s.base_offset for s in rebuild_index or ())])
    loaded, latest_snapshot = producer_state.load_snapshots(directory, upto, delete_above=leo)
    if clean_shutdown and not rebuild_index:
        if state_at_stop is UNKNOWN_STOP_STATE:
            if latest_snapshot is None:
                return ProducerStateManager(), latest_snapshot
        elif state_at_stop is None:
            return ProducerStateManager(), latest_snapshot
        else:
            try:
                at_stop, offset = ProducerStateManager.from_json(state_at_stop)
            except (ValueError, KeyError, TypeError) as exc:
                log.warning("partition %s: its producer state of the last stop does not parse (%s); replaying "
                            "the log", name, exc)
            else:
                if offset == leo:
                    at_stop.truncate_head(log_start_offset)
                    return at_stop, latest_snapshot
    if loaded is not None and loaded[1] >= segments[0].base_offset:
        producers, start = loaded
    else:
        producers = ProducerStateManager()
        start = segments[0].base_offset
    for segment, position, header in _headers_from(segments, start):
        if header.producer_id < 0:
            continue
        marker = _read_marker(segment, position, header, name) if header.is_control else None
        apply_batch(producers, segment, header, marker, rebuild_index is not None and segment in rebuild_index)
    producers.truncate_head(log_start_offset)
    return producers, latest_snapshot


def apply_batch(producers: ProducerStateManager, segment: LogSegment, header: BatchHeader,
                marker: EndTxnMarker | None, write_index: bool = True) -> None:
    """One batch now in ``segment``: a data batch updates its producer, a marker closes the producer's transaction
    and, for an ABORT, records it in the segment's ``.txnindex`` (Kafka's order: the LSO is computed while the
    transaction still counts as open, then it is completed)."""
    if header.is_control:
        if marker is None:
            return
        completed = producers.apply_marker(header.producer_id, header.producer_epoch, marker.coordinator_epoch,
                                           marker.is_abort, header.base_offset, header.max_timestamp)
        if completed is None:
            return
        if completed.is_aborted and write_index:
            lso = producers.last_stable_offset(completed)
            segment.txn_index.append(AbortedTxn(completed.producer_id, completed.first_offset,
                                                completed.last_offset, lso))
        producers.complete_txn(completed)
    else:
        producers.update(header, header.max_timestamp)


def _read_marker(segment: LogSegment, position: int, header: BatchHeader, name: str) -> EndTxnMarker | None:
    try:
        return read_end_txn_marker(segment.read(position, header.size))
    except CorruptBatchError as exc:
        log.warning("partition %s: control batch at offset %d ignored: %s", name, header.base_offset, exc)
        return None


def _headers_from(segments: list[LogSegment], offset: int) -> Iterator[tuple[LogSegment, int, BatchHeader]]:
    """Segment, position and header of every batch holding an offset >= ``offset``."""
    first = max(0, bisect.bisect_right([s.base_offset for s in segments], offset) - 1)
    for segment in segments[first:]:
        start = 0
        if segment.base_offset <= offset:
            found = segment.find_batch(offset)
            if found is None:
                continue
            start = found[0]
        for position, header in segment.iter_headers(start):
            yield segment, position, header

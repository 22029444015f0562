"""Moving a replica between log directories while it serves (Kafka's ReplicaAlterLogDirsThread).

A *future* log is created in the destination as ``<topic>-<partition>.<uuid>-future`` and catches up from the
current log the way a follower catches up from a leader: whole batches read from its log end offset, appended with
their original offsets. When it is close behind, the move takes the current log's lock (no append, read or
truncation can interleave), copies the rest, renames the future directory to its real name, reopens it and swaps it
in for every holder of the partition; only then is the old directory renamed ``-delete`` and removed. A crash
before the rename leaves the current log untouched and a ``-future`` directory the next start removes (the move
is not resumed: it is asked for again); a crash between the rename and the old copy's removal leaves the partition
in both directories, which the next start refuses with a "duplicate log directories" error naming both (Kafka
resumes such moves instead).
"""

from __future__ import annotations

import logging
import shutil
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from odradek.broker.log import checkpoint
from odradek.broker.log.partition_log import PartitionLog, partition_dir_name
from odradek.errors import ErrorCode, KafkaError
from odradek.placement.model import TopicPartition
from odradek.protocol.records import iter_batches

log = logging.getLogger("odradek.log")

FUTURE_SUFFIX = "-future"
COPY_CHUNK_BYTES = 1 << 20
# the lock is taken for the last stretch only when at most this much is left, so producers wait milliseconds
SWAP_THRESHOLD_BYTES = 4 * COPY_CHUNK_BYTES


@dataclass
class Move:
    """One replica on its way to ``destination``; ``future`` is None until the copy has started."""

    tp: TopicPartition
    destination: Path
    future: PartitionLog | None = None
    cancelled: threading.Event = field(default_factory=threading.Event)
    done: threading.Event = field(default_factory=threading.Event)
    error: BaseException | None = None
    # the current log's truncation count the copy so far agrees with; a truncation since restarts the copy
    truncations: int | None = None


def future_dir(destination: Path, tp: TopicPartition) -> Path:
    return destination / f"{partition_dir_name(*tp)}.{uuid.uuid4().hex}{FUTURE_SUFFIX}"


def lag_of(current: PartitionLog, future: PartitionLog) -> int:
    return max(0, current.log_end_offset - future.log_end_offset)


def _copy_some(move: Move, current: PartitionLog, future: PartitionLog) -> int:
    """Copy up to one chunk of whole batches from ``current`` to ``future``; the bytes copied. A truncation of the
    current log (a follower's, after a leader change) may have replaced what was copied: the copy starts over."""
    if move.truncations != current.truncations:
        move.truncations = current.truncations
        future.truncate_fully_and_start_at(current.log_start_offset)
    if future.log_end_offset < current.log_start_offset or future.log_end_offset > current.log_end_offset:
        future.truncate_fully_and_start_at(current.log_start_offset)  # retention or truncation overtook us
    if future.log_end_offset >= current.log_end_offset:
        return 0
    try:
        result = current.read(future.log_end_offset, COPY_CHUNK_BYTES)
    except KafkaError as exc:
        if exc.code != ErrorCode.offset_out_of_range:
            raise
        future.truncate_fully_and_start_at(current.log_start_offset)
        return 0
    data = b"".join(bytes(b) for b in result.buffers)
    headers = [h for _, h in iter_batches(data, verify_crc=False)]
    if headers:
        future.append_as_follower(bytearray(data), headers)
    return len(data)


def run_move(move: Move, current_of: Callable[[], PartitionLog | None],
             swap: Callable[[PartitionLog, PartitionLog], None]) -> None:
    """The move's whole life on its worker thread: copy, then swap under the current log's lock.

    ``current_of`` gives the partition's log now (None once deleted); ``swap(old, new)`` installs the reopened
    log in the manager and in the replica manager, called with the old log's lock held.
    """
    try:
        assert move.future is not None
        future = move.future
        while not move.cancelled.is_set():
            current = current_of()
            if current is None or current.offline:
                raise KafkaError(ErrorCode.kafka_storage_error, "the current log went away during the move")
            copied = _copy_some(move, current, future)
            remaining = current.size_in_bytes - future.size_in_bytes
            if copied == 0 or remaining <= SWAP_THRESHOLD_BYTES:
                with current.lock:
                    if current_of() is not current or current.offline:
                        continue
                    while _copy_some(move, current, future):
                        pass
                    _finish(move, current, future, swap)
                    return
    except BaseException as exc:  # reported on the move; the current log keeps serving
        move.error = exc
        log.error("moving %s-%d to %s failed: %s", move.tp[0], move.tp[1], move.destination, exc)
        if move.future is not None:
            move.future.detach()
            shutil.rmtree(move.future.directory, ignore_errors=True)
    finally:
        move.done.set()


def _finish(move: Move, current: PartitionLog, future: PartitionLog,
            swap: Callable[[PartitionLog, PartitionLog], None]) -> None:
    """With the current log's lock held and the future caught up: make the future the log."""
    for epoch, start in current.epoch_entries:
        if epoch > future.latest_epoch:
            future.assign_epoch(epoch, start)
    future.close()
    final = move.destination / partition_dir_name(*move.tp)
    future.directory.rename(final)
    checkpoint.fsync_dir(move.destination)
    replacement = PartitionLog.open(
        final, current.config, current.clock, recovery_point=future.log_end_offset,
        log_start_offset=current.log_start_offset, high_watermark=current.high_watermark, clean_shutdown=True,
    )
    old_dir = current.directory
    swap(current, replacement)
    current.detach()
    doomed = old_dir.with_name(f"{old_dir.name}.{uuid.uuid4().hex}-delete")
    try:
        old_dir.rename(doomed)
        checkpoint.fsync_dir(old_dir.parent)
    except OSError as exc:
        log.error("removing the old copy %s after a move failed: %s", old_dir, exc)
        return
    shutil.rmtree(doomed, ignore_errors=True)
    log.info("moved %s-%d to %s", move.tp[0], move.tp[1], move.destination)

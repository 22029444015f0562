"""The leader-epoch cache of KIP-101: which leader epoch began at which offset.

Followers ask the leader for the end offset of their latest epoch and truncate to it, instead of truncating to
the high watermark (which loses acknowledged data or lets replicas diverge). Semantics follow Kafka's
LeaderEpochFileCache: assignments are kept monotonic in both epoch and start offset, and ``end_offset_for``
answers an OffsetsForLeaderEpoch request.
"""

from __future__ import annotations

import bisect
from pathlib import Path

from odradek.broker.log import checkpoint

UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1
FILE_NAME = "leader-epoch-checkpoint"


class LeaderEpochCache:
    def __init__(self, path: Path | None) -> None:
        """``path`` None keeps the cache in memory only (pure logic tests).

        A checkpoint that does not parse (a crash tore a file written without an fsync, see
        :meth:`write_if_new`) leaves the cache empty and ``corrupt`` set: the log then recovers every segment,
        which assigns the epochs again from its batches."""
        self._path = path
        self.corrupt = False
        self._on_disk = path is not None and path.exists()
        entries: list[tuple[int, int]] = []
        if self._on_disk:
            assert path is not None
            try:
                entries = checkpoint.read_epochs(path)
            except ValueError:
                self.corrupt = True
        self._epochs: list[int] = [e for e, _ in entries]
        self._starts: list[int] = [s for _, s in entries]
        self._dirty = self.corrupt
        self._unsynced = False  # the file was written without fsync (write_if_new); flush_if_dirty syncs it

    @property
    def entries(self) -> list[tuple[int, int]]:
        return list(zip(self._epochs, self._starts, strict=True))

    @property
    def latest_epoch(self) -> int:
        return self._epochs[-1] if self._epochs else UNDEFINED_EPOCH

    def assign(self, epoch: int, start_offset: int, flush: bool = True) -> None:
        """Record that ``epoch`` starts at ``start_offset``, dropping entries that would break
        monotonicity.

        ``flush=False`` leaves the checkpoint to :meth:`flush_if_dirty`, which the log calls before its recovery
        point moves: until then any batch written in the epoch lies after the recovery point, and recovery
        re-assigns the epoch from the batches' partitionLeaderEpoch. A broker taking over thousands of
        leaderships thus writes no checkpoint per partition on its event loop.
        """
        if epoch < 0 or start_offset < 0:
            raise ValueError(f"epoch {epoch} / start offset {start_offset} must be non-negative")
        if self._epochs and epoch == self._epochs[-1] and start_offset >= self._starts[-1]:
            return
        while self._epochs and (self._epochs[-1] >= epoch or self._starts[-1] >= start_offset):
            self._epochs.pop()
            self._starts.pop()
        self._epochs.append(epoch)
        self._starts.append(start_offset)
        if flush:
            self._flush()
        else:
            self._dirty = True

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """``(epoch, end offset)`` as LeaderEpochFileCache.endOffsetFor.

        The latest epoch ends at the LEO; an older one ends where the next higher epoch starts, reported with
        the largest known epoch <= the requested one; an epoch above every known one, or UNDEFINED, is
        undefined.
        """
        if requested_epoch == UNDEFINED_EPOCH or not self._epochs:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if requested_epoch == self._epochs[-1]:
            return requested_epoch, log_end_offset
        higher = bisect.bisect_right(self._epochs, requested_epoch)
        if higher == len(self._epochs):
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if higher == 0:
            return requested_epoch, self._starts[0]
        return self._epochs[higher - 1], self._starts[higher]

    def epoch_for_offset(self, offset: int) -> int:
        """Epoch of the leader that wrote ``offset`` (UNDEFINED before the first entry)."""
        i = bisect.bisect_right(self._starts, offset)
        return self._epochs[i - 1] if i else UNDEFINED_EPOCH

    def truncate_from_end(self, end_offset: int) -> None:
        """Forget epochs that start at or after ``end_offset`` (the log was truncated there)."""
        if end_offset < 0 or not self._starts or self._starts[-1] < end_offset:
            return
        keep = bisect.bisect_left(self._starts, end_offset)
        del self._epochs[keep:], self._starts[keep:]
        self._dirty = True  # written with the log's next flush: loading a log truncates the same way again

    def truncate_from_start(self, start_offset: int) -> None:
        """The log now starts at ``start_offset``: the epoch covering it is moved up to start there."""
        if not self._starts or self._starts[0] >= start_offset:
            return
        covering = bisect.bisect_right(self._starts, start_offset) - 1
        epoch = self._epochs[covering]
        del self._epochs[: covering + 1], self._starts[: covering + 1]
        self._epochs.insert(0, epoch)
        self._starts.insert(0, start_offset)
        self._dirty = True  # as truncate_from_end: loading applies the log start offset again

    def clear(self) -> None:
        self._epochs.clear()
        self._starts.clear()
        self._flush()

    @property
    def new_file_pending(self) -> bool:
        """Whether :meth:`write_if_new` has a first checkpoint to write."""
        return self._dirty and not self._on_disk and self._path is not None

    def write_if_new(self) -> None:
        """Write a deferred checkpoint now, without an fsync, if no checkpoint file exists yet: a new log's.

        A broker that takes over thousands of new leaderships writes their first checkpoints this way, in the
        background soon after, instead of all of them at its clean stop (one file creation each, the bulk of
        that stop's time). Skipping the fsync is safe only for a first file: until :meth:`flush_if_dirty` syncs
        it the recovery point does not pass its epochs' data, so a crash that loses or tears it loses nothing
        that recovering the log's batches does not assign again. A file that exists is only ever replaced with
        an fsync."""
        if not self.new_file_pending:
            return
        assert self._path is not None
        checkpoint.write_epochs(self._path, self.entries, sync=False)
        self._on_disk = True
        self._dirty = False
        self._unsynced = True

    def flush_if_dirty(self) -> None:
        """Make the checkpoint durable: written if it is behind, synced if it was written without an fsync."""
        if self._dirty:
            self._flush()
        elif self._unsynced and self._path is not None:
            checkpoint.sync_file(self._path)
            self._unsynced = False

    def _flush(self) -> None:
        if self._path is not None:
            checkpoint.write_epochs(self._path, self.entries)
            self._on_disk = True
        self._dirty = False
        self._unsynced = False

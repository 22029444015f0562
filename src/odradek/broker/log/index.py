"""Kafka's sparse segment indexes: ``.index`` (relative offset → file position) and ``.timeindex``.

Entries are kept in memory as two arrays for bisecting (the hot read path never touches the file) holding
exactly what the file holds, so memory per entry equals Kafka's on-disk size: ``.index`` entries are 8 bytes
(int32 offset - baseOffset, int32 position), ``.timeindex`` entries 12 bytes (int64 timestamp, int32 offset -
baseOffset), big-endian. Kafka preallocates and mmaps index files; these are exactly as long as their entries,
which Kafka also leaves after a clean shutdown. Indexes are derived data: any doubt about one (bad size,
non-monotonic entries, pointing past the log) and the segment rebuilds it from the log.
"""

from __future__ import annotations

import bisect
import os
import struct
from array import array
from pathlib import Path

from odradek.broker.log import durability


class _SparseIndex:
    """Two parallel arrays (``keys`` sorted, ``values`` sorted) mirrored, lazily, into a file of entries."""

    entry: struct.Struct
    key_type: str
    value_type: str

    def __init__(self, path: Path, base_offset: int, max_entries: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self.max_entries = max(1, max_entries)
        self.keys = array(self.key_type)
        self.values = array(self.value_type)
        self._written = 0  # entries already in the file; the rest are written by flush/close
        self._unsynced = False  # entries written but not yet fsynced

    def __len__(self) -> int:
        return len(self.keys)

    @property
    def is_full(self) -> bool:
        return len(self.keys) >= self.max_entries

    def _write(self, raw: bytes, position: int, *, sync: bool = False) -> None:
        """One open-write-close: an index holds no descriptor between flushes, so idle logs cost none."""
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            if raw:
                os.pwrite(fd, raw, position)
            if sync:
                durability.fsync(fd)
        finally:
            os.close(fd)

    def _truncate_file(self, size: int) -> None:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            os.ftruncate(fd, size)
        finally:
            os.close(fd)

    def _add(self, key: int, value: int) -> None:
        self.keys.append(key)
        self.values.append(value)

    def _pending(self) -> bytes:
        pack = self.entry.pack
        return b"".join(pack(self.keys[i], self.values[i]) for i in range(self._written, len(self.keys)))

    def write_pending(self) -> None:
        """Append the entries not yet in the file with one write. Entries are buffered because an index is
        derived data: after a crash, every segment past the recovery point has its indexes rebuilt anyway."""
        if self._written == len(self.keys):
            return
        self._write(self._pending(), self._written * self.entry.size)
        self._written = len(self.keys)
        self._unsynced = True

    def ensure_file(self) -> None:
        self._write(b"", 0)

    def load(self) -> bool:
        """Read the file; False when it is missing or cannot be trusted (the caller then rebuilds)."""
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return False
        if len(raw) % self.entry.size:
            return False
        keys, values = array(self.key_type), array(self.value_type)
        for key, value in self.entry.iter_unpack(raw):
            if (keys and (key < keys[-1] or value < values[-1])) or value < 0:
                return False
            keys.append(key)
            values.append(value)
        self.keys, self.values = keys, values
        self._written = len(keys)
        return True

    def reset(self) -> None:
        """Forget every entry. A missing file stays missing (a new segment's index is created with its first
        entry), so creating thousands of empty logs costs no index-file system calls."""
        self.keys, self.values = array(self.key_type), array(self.value_type)
        try:
            os.truncate(self.path, 0)
        except FileNotFoundError:
            pass
        self._written = 0

    def truncate_entries(self, count: int) -> None:
        if count >= len(self.keys):
            return
        del self.keys[count:], self.values[count:]
        if count < self._written:
            self._truncate_file(count * self.entry.size)
            self._written = count

    def flush(self) -> None:
        """Write what is pending and fsync, when there is anything to make durable."""
        if self._written == len(self.keys) and not self._unsynced:
            return
        self._write(self._pending(), self._written * self.entry.size, sync=True)
        self._written = len(self.keys)
        self._unsynced = False

    def rename(self, path: Path) -> None:
        os.replace(self.path, path)
        self.path = path


class OffsetIndex(_SparseIndex):
    """keys: last offset of the indexed batch, relative to the base; values: the batch's byte position."""

    entry = struct.Struct(">ii")
    key_type = "i"
    value_type = "i"

    def append(self, offset: int, position: int) -> None:
        relative = offset - self.base_offset
        if self.keys and relative <= self.keys[-1]:
            return
        self._add(relative, position)

    def lookup(self, offset: int) -> int:
        """Position to start scanning for ``offset``: the batch holding it lies at or after this point."""
        i = bisect.bisect_right(self.keys, offset - self.base_offset) - 1
        return self.values[i] if i >= 0 else 0

    def floor_position(self, position: int) -> int:
        """Largest indexed batch start <= ``position`` (0 if none): where a header walk towards it can
        begin."""
        i = bisect.bisect_right(self.values, position) - 1
        return self.values[i] if i >= 0 else 0

    def offset_floor_position(self, offset: int) -> int:
        """Start of an indexed batch wholly below ``offset`` (its last offset < offset), else 0."""
        i = bisect.bisect_left(self.keys, offset - self.base_offset) - 1
        return self.values[i] if i >= 0 else 0

    def truncate_to_position(self, position: int) -> None:
        self.truncate_entries(bisect.bisect_left(self.values, position))

    @property
    def last_position(self) -> int:
        return self.values[-1] if self.values else 0

    def valid_for(self, log_size: int) -> bool:
        return not self.values or self.values[-1] < log_size


class TimeIndex(_SparseIndex):
    """keys: the segment's max timestamp so far; values: the offset where it was seen, relative to the base."""

    entry = struct.Struct(">qi")
    key_type = "q"
    value_type = "i"

    def maybe_append(self, timestamp: int, offset: int) -> None:
        """Only strictly growing timestamps are indexed, as Kafka's TimeIndex.maybeAppend."""
        relative = offset - self.base_offset
        if self.keys and (timestamp <= self.keys[-1] or relative < self.values[-1]):
            return
        self._add(timestamp, relative)

    def offset_before(self, timestamp: int) -> int | None:
        """Offset of the last entry whose timestamp is < ``timestamp``: every batch up to there is older."""
        i = bisect.bisect_left(self.keys, timestamp) - 1
        return self.base_offset + self.values[i] if i >= 0 else None

    def truncate_to_offset(self, offset: int) -> None:
        self.truncate_entries(bisect.bisect_left(self.values, offset - self.base_offset))

    @property
    def last_timestamp(self) -> int:
        return self.keys[-1] if self.keys else -1

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.values[-1] if self.values else self.base_offset

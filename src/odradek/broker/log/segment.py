"""One log segment: a ``.log`` file of RecordBatches plus its offset, time and aborted-transaction indexes.

The data file is byte-for-byte what Kafka writes, so offsets, CRCs and the client's compressed payloads are
stored as received. The segment keeps its own end position (``size``) rather than trusting the file length:
anything past ``size`` is a torn write that recovery will cut off, never data to serve.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from odradek.broker.log import durability
from odradek.broker.log.handles import OpenFiles, process_files
from odradek.broker.log.index import OffsetIndex, TimeIndex
from odradek.broker.log.txn_index import TXNINDEX_SUFFIX, TransactionIndex
from odradek.protocol.records import (
    HEADER_SIZE,
    LOG_OVERHEAD,
    BatchHeader,
    CorruptBatchError,
    iter_batches,
    read_header,
)

READ_CHUNK = 1 << 20
RECOVERY_CHUNK = 8 << 20
FIND_CHUNK = 32 << 10  # locating one batch from an index entry rarely walks more than index.interval.bytes
MAX_TAIL_CRC_BYTES = 64 << 20  # a clean open still CRC-checks the unindexed tail when it is at most this big
LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIMEINDEX_SUFFIX = ".timeindex"
MIN_BATCH_LENGTH = HEADER_SIZE - LOG_OVERHEAD


def file_name(base_offset: int, suffix: str) -> str:
    return f"{base_offset:020d}{suffix}"


_RWF_NOWAIT: int | None = getattr(os, "RWF_NOWAIT", None)
"""Linux's preadv2 flag: read only what the page cache holds (None where the platform lacks it: reads block)."""


class WouldBlock(Exception):
    """A non-blocking read the page cache could not serve: the disk must be read, which the caller does off its
    event loop."""


@dataclass(frozen=True, slots=True)
class RecoveryOutcome:
    valid_bytes: int
    dropped_bytes: int
    reason: str | None


class LogSegment:
    def __init__(self, directory: Path, base_offset: int, index_interval_bytes: int, index_max_bytes: int,
                 created_ms: int, suffix: str = "", files: OpenFiles | None = None) -> None:
        """Open (creating if absent) the segment; call :meth:`load` or :meth:`recover` before use."""
        self.directory = directory
        self.base_offset = base_offset
        self.index_interval_bytes = index_interval_bytes
        self.log_path = directory / (file_name(base_offset, LOG_SUFFIX) + suffix)
        self.files = files if files is not None else process_files()
        with self.files.use(self):
            pass  # creates the file now, so a new segment exists on disk before anything is written
        self.offset_index = OffsetIndex(
            directory / (file_name(base_offset, INDEX_SUFFIX) + suffix), base_offset, index_max_bytes // 8
        )
        self.time_index = TimeIndex(
            directory / (file_name(base_offset, TIMEINDEX_SUFFIX) + suffix),
            base_offset,
            index_max_bytes // 12,
        )
        self.txn_index = TransactionIndex(directory / (file_name(base_offset, TXNINDEX_SUFFIX) + suffix), base_offset)
        self.size = 0
        self.next_offset = base_offset
        self.max_timestamp = -1
        self.offset_of_max_timestamp = base_offset
        self.first_batch_timestamp: int | None = None
        self.created_ms = created_ms
        self._bytes_since_index = 0
        self.unflushed = False

    # --- the data file, through the process's bounded set of open files ----------------------------------------

    def _pread(self, length: int, position: int) -> bytes:
        files = self.files
        fd = files.acquire(self)
        try:
            return os.pread(fd, length, position)
        finally:
            files.release(self)

    def _file_size(self) -> int:
        with self.files.use(self) as fd:
            return os.fstat(fd).st_size

    def _truncate_file(self, size: int) -> None:
        with self.files.use(self) as fd:
            os.ftruncate(fd, size)

    # --- state rebuilt from the file ------------------------------------------------------------------------

    def _reset_state(self) -> None:
        self.size = 0
        self.next_offset = self.base_offset
        self.max_timestamp = -1
        self.offset_of_max_timestamp = self.base_offset
        self.first_batch_timestamp = None
        self._bytes_since_index = 0

    def _track(self, position: int, header: BatchHeader) -> None:
        """Bookkeeping for a batch now at ``position``: max timestamp and (every index.interval.bytes)
        indexes."""
        if self.first_batch_timestamp is None:
            self.first_batch_timestamp = header.max_timestamp
        if header.max_timestamp > self.max_timestamp:
            self.max_timestamp = header.max_timestamp
            self.offset_of_max_timestamp = header.last_offset
        if self._bytes_since_index > self.index_interval_bytes:
            self.offset_index.append(header.last_offset, position)
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
            self._bytes_since_index = 0
        self._bytes_since_index += header.size
        self.next_offset = header.next_offset

    def load(self) -> bool:
        """Trust the indexes (a segment before the recovery point) and learn the end by walking headers after
        the last indexed batch. False when the indexes or the tail do not add up; the caller then recovers."""
        file_size = self._file_size()
        if not (self.offset_index.load() and self.time_index.load()):
            return False
        if not self.offset_index.valid_for(file_size) and file_size:
            return False
        self._reset_state()
        start = self.offset_index.last_position
        if len(self.time_index):
            self.max_timestamp = self.time_index.last_timestamp
            self.offset_of_max_timestamp = self.time_index.last_offset
        try:
            for position, header in self.iter_headers(start, file_size):
                self._track(position, header)
            if file_size - start <= MAX_TAIL_CRC_BYTES:
                for _ in iter_batches(self._pread(file_size - start, start)):
                    pass
        except CorruptBatchError:
            return False
        if len(self.time_index) and self.time_index.last_offset >= self.next_offset:
            return False
        self.size = file_size
        if file_size and self.first_batch_timestamp is not None and start:
            first = next(self.iter_headers(0, file_size))[1]
            self.first_batch_timestamp = first.max_timestamp
        return True

    def recover(self, on_batch: Callable[[BatchHeader], None] | None = None) -> RecoveryOutcome:
        """Validate every batch (structure and CRC-32C), rebuild both indexes, cut the file at the first bad
        batch."""
        file_size = self._file_size()
        self.offset_index.reset()
        self.time_index.reset()
        self._reset_state()
        position = 0
        reason: str | None = None
        while position < file_size and reason is None:
            chunk = self._pread(min(RECOVERY_CHUNK, file_size - position), position)
            consumed, reason = self._recover_chunk(chunk, position, file_size, on_batch)
            if consumed == 0 and reason is None:
                # one batch larger than the chunk: read exactly that batch and check it alone
                size = read_header(chunk).size
                chunk = self._pread(size, position)
                consumed, reason = self._recover_chunk(chunk, position, file_size, on_batch)
                if consumed == 0 and reason is None:
                    reason = "batch larger than the file"
            position += consumed
        self.size = position
        dropped = file_size - position
        if dropped:
            self._truncate_file(position)
        return RecoveryOutcome(position, dropped, reason)

    def _recover_chunk(
        self, chunk: bytes, chunk_start: int, file_size: int, on_batch: Callable[[BatchHeader], None] | None
    ) -> tuple[int, str | None]:
        """Check the whole batches in ``chunk``: ``(bytes consumed, reason it stopped early or None)``.

        A batch cut by the chunk's end is not an error when the file goes on: the caller reads on from there.
        """
        consumed = 0
        chunk_is_file_tail = chunk_start + len(chunk) >= file_size
        try:
            for rel, header in iter_batches(chunk):
                if header.base_offset < self.next_offset or header.last_offset_delta < 0:
                    return rel, f"offset {header.base_offset} goes backwards (expected >= {self.next_offset})"
                self._track(chunk_start + rel, header)
                if on_batch is not None:
                    on_batch(header)
                consumed = rel + header.size
        except CorruptBatchError as exc:
            rel = exc.position
            if not chunk_is_file_tail and _cut_by_chunk_end(chunk, rel, chunk_start, file_size):
                return rel, None
            return rel, str(exc).rsplit(" (at byte", 1)[0]
        return consumed, None

    # --- writes ---------------------------------------------------------------------------------------------

    def append(self, buf: bytes | bytearray | memoryview, batches: list[tuple[int, BatchHeader]]) -> None:
        """Write stamped batches (``batches`` = their positions within ``buf`` and headers) at the end."""
        view = memoryview(buf)
        written = 0
        files = self.files
        fd = files.acquire(self)
        try:
            while written < len(view):
                written += os.pwrite(fd, view[written:], self.size + written)
        finally:
            files.release(self)
        base = self.size
        for rel, header in batches:
            self._track(base + rel, header)
        self.size += len(view)
        self.unflushed = True

    def on_become_inactive(self) -> None:
        """A rolled segment's time index ends with its true maximum, so retention and lookups need no scan."""
        if self.max_timestamp >= 0:
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)

    def flush(self) -> None:
        """fsync the data and indexes."""
        if not durability.is_deferred():  # a clean stop's barrier covers the data: no descriptor to (re)open
            with self.files.use(self) as fd:
                durability.fsync(fd)
        self.offset_index.flush()
        self.time_index.flush()
        self.txn_index.flush()
        self.unflushed = False

    def truncate_to(self, offset: int) -> int:
        """Drop the batch holding ``offset`` and everything after it (Kafka's LogSegment.truncateTo); returns
        bytes removed. Followers truncate at batch boundaries, where this removes exactly the offsets >=
        ``offset``."""
        found = self.find_batch(offset)
        if found is None:
            return 0
        position = found[0]
        removed = self.size - position
        self._truncate_file(position)
        self.offset_index.truncate_to_position(position)
        self.time_index.truncate_to_offset(offset)
        self.txn_index.truncate_to(offset)
        # Re-derive end-state from what remains: a walk from the last index entry is enough.
        self.size = position
        self._reset_state()
        self.size = 0
        start = self.offset_index.last_position
        if len(self.time_index):
            self.max_timestamp = self.time_index.last_timestamp
            self.offset_of_max_timestamp = self.time_index.last_offset
        for pos, hdr in self.iter_headers(start, position):
            self._track(pos, hdr)
        if position:
            self.first_batch_timestamp = next(self.iter_headers(0, position))[1].max_timestamp
        self.size = position
        self.unflushed = True
        return removed

    # --- reads ----------------------------------------------------------------------------------------------

    def iter_headers(self, start: int = 0, end: int | None = None, chunk: int = READ_CHUNK, nowait: bool = False,
                     ) -> Iterator[tuple[int, BatchHeader]]:
        """Walk batch headers only (no CRC), reading the file ``chunk`` bytes at a time (with ``nowait``, from the
        page cache only: see :meth:`read_cached`)."""
        end = self.size if end is None else end
        position = start
        buf: bytes | bytearray = b""
        buf_start = position
        while position < end:
            rel = position - buf_start
            if rel < 0 or rel + HEADER_SIZE > len(buf):
                length = min(chunk, end - position)
                buf = self.read_cached(position, length) if nowait else self._pread(length, position)
                buf_start, rel = position, 0
                if len(buf) < HEADER_SIZE:
                    raise CorruptBatchError(f"truncated batch header: {end - position} bytes", position)
            header = read_header(buf, rel)
            if header.batch_length < MIN_BATCH_LENGTH or header.magic != 2 or position + header.size > end:
                raise CorruptBatchError("malformed or truncated batch", position)
            yield position, header
            position += header.size

    def find_batch(self, offset: int, start: int = 0, nowait: bool = False) -> tuple[int, BatchHeader] | None:
        """First batch (position, header) whose last offset is >= ``offset``, via the index then a header
        walk (with ``nowait``, from the page cache only)."""
        start = max(start, self.offset_index.lookup(offset))
        for position, header in self.iter_headers(start, chunk=FIND_CHUNK, nowait=nowait):
            if header.last_offset >= offset:
                return position, header
        return None

    def read(self, position: int, length: int) -> bytes:
        return self._pread(length, position)

    def read_cached(self, position: int, length: int) -> bytes | bytearray:
        """As :meth:`read`, but only what the page cache holds now (``RWF_NOWAIT``): raises :class:`WouldBlock`
        when the disk would have to be read (a plain read where the platform has no such flag)."""
        if _RWF_NOWAIT is None:
            return self._pread(length, position)
        expected = max(0, min(length, self.size - position))
        buf = bytearray(length)
        fd = self.files.acquire(self)
        try:
            read = os.preadv(fd, [buf], position, _RWF_NOWAIT)
        except BlockingIOError:
            raise WouldBlock(self.log_path.name) from None
        finally:
            self.files.release(self)
        if read < expected:  # part of it is cached, the rest is not
            raise WouldBlock(self.log_path.name)
        del buf[read:]
        return buf

    def close(self) -> None:
        """Release the data file's descriptor; index entries not yet written stay unwritten (flush first)."""
        self.files.close(self)

    def paths(self) -> list[Path]:
        """Every file of the segment; the ``.txnindex`` exists only once it has an entry."""
        return [self.log_path, self.offset_index.path, self.time_index.path, self.txn_index.path]

    def rename_suffix(self, old: str, new: str) -> None:
        """Move every file from ``...<old>`` to ``...<new>`` (e.g. ``.swap`` → ``""``)."""
        self.offset_index.ensure_file()
        self.time_index.ensure_file()
        self.log_path = _renamed(self.log_path, old, new)
        for index in (self.offset_index, self.time_index):
            index.rename(index.path.with_name(index.path.name[: len(index.path.name) - len(old)] + new))
            index.write_pending()
        path = self.txn_index.path
        self.txn_index.rename(path.with_name(path.name[: len(path.name) - len(old)] + new))

    def delete_files(self) -> None:
        self.close()
        for path in self.paths():
            try:
                path.unlink()
            except FileNotFoundError:
                pass


def _renamed(path: Path, old: str, new: str) -> Path:
    if old and not path.name.endswith(old):
        raise ValueError(f"{path.name} does not end with {old}")
    target = path.with_name(path.name[: len(path.name) - len(old)] + new)
    os.replace(path, target)
    return target


def _cut_by_chunk_end(chunk: bytes, rel: int, chunk_start: int, file_size: int) -> bool:
    """Whether the batch at ``rel`` failed only because the chunk ends inside it (the file has the rest)."""
    if len(chunk) - rel < HEADER_SIZE:
        return True
    size = read_header(chunk, rel).size
    return size >= HEADER_SIZE and rel + size > len(chunk) and chunk_start + rel + size <= file_size

"""Kafka's aborted-transactions index: ``<base>.txnindex``, one per segment.

Each entry describes a transaction whose ABORT marker lies in this segment: version int16 (0), producer id int64,
first offset int64, last offset int64 (the marker's offset), last stable offset int64 (the LSO when the marker was
written), big-endian, 34 bytes — the bytes Kafka's AbortedTxn writes, so Kafka's tools read these files. A
READ_COMMITTED fetch returns the entries overlapping what it read, and the consumer drops those producers' records
between each first offset and its marker. Entries are few (only aborted transactions), so they are held in memory
after the first use; the file is created with the first entry and holds no descriptor between writes.
"""

from __future__ import annotations

import logging
import os
import struct
from dataclasses import dataclass
from pathlib import Path

from odradek.broker.log import durability

log = logging.getLogger("odradek.log")

TXNINDEX_SUFFIX = ".txnindex"
ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = ENTRY.size  # 34
CURRENT_VERSION = 0


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int

    def to_bytes(self) -> bytes:
        return ENTRY.pack(CURRENT_VERSION, self.producer_id, self.first_offset, self.last_offset,
                          self.last_stable_offset)


class TransactionIndex:
    def __init__(self, path: Path, base_offset: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self._entries: list[AbortedTxn] | None = None  # read on first use
        self.unsynced = False

    @property
    def entries(self) -> list[AbortedTxn]:
        if self._entries is None:
            self._entries = self._read()
        return self._entries

    def _read(self) -> list[AbortedTxn]:
        """Entries up to the first one that cannot be trusted (an unknown version or a torn tail): the file is
        cut there, as everything in it is derived from the log and recovery rebuilds what a crash lost."""
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return []
        out: list[AbortedTxn] = []
        for i in range(len(raw) // ENTRY_SIZE):
            version, pid, first, last, lso = ENTRY.unpack_from(raw, i * ENTRY_SIZE)
            if version != CURRENT_VERSION or (out and last <= out[-1].last_offset):
                log.warning("%s: entry %d is not a version-0 entry in order; the index is cut there", self.path, i)
                break
            out.append(AbortedTxn(pid, first, last, lso))
        if len(out) * ENTRY_SIZE != len(raw):
            self._truncate_file(len(out) * ENTRY_SIZE)
        return out

    def append(self, txn: AbortedTxn) -> None:
        entries = self.entries
        if entries and txn.last_offset <= entries[-1].last_offset:
            raise ValueError(f"aborted transaction ending at {txn.last_offset} does not follow "
                             f"{entries[-1].last_offset} in {self.path}")
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            os.pwrite(fd, txn.to_bytes(), len(entries) * ENTRY_SIZE)
        finally:
            os.close(fd)
        entries.append(txn)
        self.unsynced = True

    def reset(self) -> None:
        """Forget every entry (recovery rebuilds them from the markers in the segment)."""
        self._entries = []
        if self.path.exists():
            self._truncate_file(0)

    def truncate_to(self, offset: int) -> None:
        """Drop the entries of transactions whose marker is at or after ``offset`` (Kafka's truncateTo)."""
        entries = self.entries
        keep = len(entries)
        while keep and entries[keep - 1].last_offset >= offset:
            keep -= 1
        if keep < len(entries):
            del entries[keep:]
            self._truncate_file(keep * ENTRY_SIZE)

    def collect(self, fetch_offset: int, upper_bound: int) -> tuple[list[AbortedTxn], bool]:
        """Aborted transactions overlapping ``[fetch_offset, upper_bound)`` and whether the search is complete: an
        entry whose LSO reaches the upper bound proves no later segment holds a transaction starting below it."""
        found: list[AbortedTxn] = []
        for txn in self.entries:
            if txn.last_offset >= fetch_offset and txn.first_offset < upper_bound:
                found.append(txn)
            if txn.last_stable_offset >= upper_bound:
                return found, True
        return found, False

    def flush(self) -> None:
        if not self.unsynced:
            return
        if self.path.exists():
            fd = os.open(self.path, os.O_RDWR)
            try:
                durability.fsync(fd)
            finally:
                os.close(fd)
        self.unsynced = False

    def rename(self, path: Path) -> None:
        if self.path.exists():
            os.replace(self.path, path)
        self.path = path

    def _truncate_file(self, size: int) -> None:
        try:
            os.truncate(self.path, size)
        except FileNotFoundError:
            return
        self.unsynced = True

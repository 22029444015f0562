"""The open data files of every log in this process, bounded so a broker can host more partitions than descriptors.

Kafka keeps every segment of every partition open and asks operators for a huge ``ulimit -n``. A Python cluster
often runs several brokers in one process under one descriptor limit, and a container may not raise it, so segment
files here are opened on use and the least recently used are closed once more than :attr:`OpenFiles.capacity` are
open. Reopening is a cheap ``open(2)``: the page cache, not the descriptor, holds the data. Index files need no
descriptor at all (their entries live in memory and are written with one open-write-close per flush).

Each use pins the descriptor for the length of one system call, under a lock, because logs are also touched from
worker threads (log loading at start-up, the flusher, the cleaner): a descriptor is never closed while another
thread is about to use it, and a closed number is never read through after the kernel has handed it to another file.
"""

from __future__ import annotations

import os
import resource
import threading
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Protocol

# Sockets (clients, peers, the coordination store), checkpoints being written, Spark and test harnesses share the
# process limit with the logs; half of it for segment files leaves them all room.
SHARE_OF_LIMIT = 0.5
MIN_CAPACITY = 64


class FileOwner(Protocol):
    """What is opened: the owner's path may change (segments are renamed) while it is closed."""

    log_path: Path


def default_capacity() -> int:
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return 1 << 20
    return max(MIN_CAPACITY, int(soft * SHARE_OF_LIMIT))


class OpenFiles:
    """A least-recently-used set of open files keyed by their owner object."""

    def __init__(self, capacity: int | None = None) -> None:
        self.capacity = capacity if capacity is not None else default_capacity()
        self._lock = threading.Lock()
        self._open: OrderedDict[FileOwner, int] = OrderedDict()
        self._pins: dict[FileOwner, int] = {}
        self.opens = 0  # every open(2), for tests and benchmarks to see reopening happen

    def __len__(self) -> int:
        return len(self._open)

    def is_open(self, owner: FileOwner) -> bool:
        return owner in self._open

    def acquire(self, owner: FileOwner) -> int:
        """The owner's descriptor, opened (created if missing) when it is not open, pinned until :meth:`release`.

        A method pair as well as :meth:`use`: this is on the produce and fetch paths, once per system call, where a
        generator-based ``with`` adds its own overhead to the lock's."""
        with self._lock:
            fd = self._open.get(owner)
            if fd is None:
                fd = os.open(owner.log_path, os.O_RDWR | os.O_CREAT, 0o644)
                self.opens += 1
                self._open[owner] = fd
                self._pins[owner] = 1
                self._evict()
            else:
                self._open.move_to_end(owner)
                self._pins[owner] = self._pins.get(owner, 0) + 1
            return fd

    def release(self, owner: FileOwner) -> None:
        with self._lock:
            left = self._pins.get(owner, 0) - 1
            if left > 0:
                self._pins[owner] = left
            else:
                self._pins.pop(owner, None)

    @contextmanager
    def use(self, owner: FileOwner) -> Iterator[int]:
        """:meth:`acquire` and :meth:`release` around a block, for the paths that are not hot."""
        fd = self.acquire(owner)
        try:
            yield fd
        finally:
            self.release(owner)

    def close(self, owner: FileOwner) -> None:
        """Close the owner's descriptor if it is open (the owner is going away or being abandoned)."""
        with self._lock:
            fd = self._open.pop(owner, None)
            self._pins.pop(owner, None)
        if fd is not None:
            os.close(fd)

    def _evict(self) -> None:
        """Close least recently used, unpinned descriptors down to the capacity (called with the lock held)."""
        excess = len(self._open) - self.capacity
        if excess <= 0:
            return
        victims = []
        for owner in self._open:
            if owner not in self._pins:
                victims.append(owner)
                if len(victims) == excess:
                    break
        for owner in victims:
            os.close(self._open.pop(owner))


_process_files: OpenFiles | None = None
_process_files_lock = threading.Lock()


def process_files() -> OpenFiles:
    """The one set every log of this process shares: the descriptor limit is per process, not per broker.

    Created on first use, so a program that raises its own limit first gets a capacity to match."""
    global _process_files
    with _process_files_lock:
        if _process_files is None:
            _process_files = OpenFiles()
        return _process_files

"""When the log's writes reach the disk: at once (an fsync per file), or at one barrier for many files.

Every fsync in the log package goes through :func:`fsync`. A clean stop closes thousands of logs, each wanting an
fsync of its segment and indexes and a producer-state snapshot (file fsync, rename, directory fsync): tens of
thousands of fsyncs, seconds of a disk's time. What a clean stop promises is weaker than each of those: only that
everything written before the clean-shutdown marker is durable when the marker is. So the closes run under
:func:`deferred`, which skips the per-file fsyncs on that thread, and the manager then calls
:func:`sync_filesystem` once per log directory (Linux ``syncfs(2)``: every dirty page and the journal of that
filesystem, renames included) before it writes the checkpoints and the marker. If the barrier fails, no marker is
written and the next start recovers the logs, as after a crash.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

_local = threading.local()


def fsync(fd: int) -> None:
    """fsync ``fd`` unless this thread defers to a later :func:`sync_filesystem`."""
    if not getattr(_local, "deferred", False):
        os.fsync(fd)


def is_deferred() -> bool:
    """Whether this thread's fsyncs wait for a barrier (callers may skip the work of preparing one)."""
    return bool(getattr(_local, "deferred", False))


@contextmanager
def deferred() -> Iterator[None]:
    """Skip this thread's fsyncs inside the block; the caller owes a :func:`sync_filesystem` afterwards."""
    previous = getattr(_local, "deferred", False)
    _local.deferred = True
    try:
        yield
    finally:
        _local.deferred = previous


def _load_syncfs() -> ctypes._CFuncPtr | None:  # type: ignore[name-defined]
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name, use_errno=True)
        return libc.syncfs
    except (OSError, AttributeError, TypeError):
        return None


_syncfs = _load_syncfs()


def sync_filesystem(directory: Path) -> None:
    """Make everything written to ``directory``'s filesystem durable, or raise OSError.

    ``syncfs(2)`` reports writeback errors of that filesystem since Linux 5.8; where it is missing, ``os.sync()``
    (all filesystems, no error report) followed by an fsync of the directory is the fallback.
    """
    fd = os.open(directory, os.O_RDONLY)
    try:
        if _syncfs is not None:
            if _syncfs(fd) != 0:
                err = ctypes.get_errno()
                raise OSError(err, f"syncfs of {directory}: {os.strerror(err)}")
        else:
            os.sync()
            os.fsync(fd)
    finally:
        os.close(fd)

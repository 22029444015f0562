"""Kafka's text checkpoint files, written so that a crash leaves the old file or the new one, never half.

Format (CheckpointFile in Kafka): a version line (0), a count line, then one entry per line. The broker-level
files (``recovery-point-offset-checkpoint``, ``log-start-offset-checkpoint``,
``replication-offset-checkpoint``) hold ``topic partition offset``; a partition's ``leader-epoch-checkpoint``
holds ``epoch startOffset``.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path

from odradek.broker.log import durability
from odradek.placement.model import TopicPartition

VERSION = 0



def write_atomically(path: Path, text: str, sync: bool = True) -> None:
    """tmp file + fsync + rename + directory fsync: readers and crashes see a whole file or the previous
    one. ``sync`` False skips both fsyncs: readers still see a whole file, but after a crash the file may be
    missing or empty until :func:`sync_file` has run (callers must be able to rebuild what it holds)."""
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, text.encode())
        if sync:
            durability.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    if sync:
        fsync_dir(path.parent)


def sync_file(path: Path) -> None:
    """Make a file written with ``sync=False`` durable, with its directory entry (nothing when deferred: the
    barrier covers it)."""
    if durability.is_deferred():
        return
    fd = os.open(path, os.O_RDONLY)
    try:
        durability.fsync(fd)
    finally:
        os.close(fd)
    fsync_dir(path.parent)


def fsync_dir(directory: Path) -> None:
    if durability.is_deferred():
        return  # not even the open: a clean stop's barrier covers the directory
    fd = os.open(directory, os.O_RDONLY)
    try:
        durability.fsync(fd)
    finally:
        os.close(fd)


def _format(entries: Iterable[str]) -> str:
    lines = list(entries)
    return "".join(f"{line}\n" for line in [str(VERSION), str(len(lines)), *lines])


def _parse(path: Path, fields: int) -> list[list[str]]:
    lines = path.read_text().splitlines()
    if len(lines) < 2 or lines[0].strip() != str(VERSION):
        raise ValueError(f"{path}: unrecognised checkpoint version")
    count = int(lines[1])
    rows = [line.split() for line in lines[2 : 2 + count]]
    if len(rows) != count or any(len(r) != fields for r in rows):
        raise ValueError(f"{path}: expected {count} entries of {fields} fields")
    return rows


def write_offsets(path: Path, offsets: Mapping[TopicPartition, int]) -> None:
    write_atomically(path, _format(f"{t} {p} {o}" for (t, p), o in sorted(offsets.items())))


def read_offsets(path: Path) -> dict[TopicPartition, int]:
    """Missing file → empty (a fresh broker); a malformed one raises so the caller can decide to recover
    fully."""
    if not path.exists():
        return {}
    return {TopicPartition(t, int(p)): int(o) for t, p, o in _parse(path, 3)}


def write_epochs(path: Path, entries: Iterable[tuple[int, int]], sync: bool = True) -> None:
    write_atomically(path, _format(f"{epoch} {start}" for epoch, start in entries), sync)


def read_epochs(path: Path) -> list[tuple[int, int]]:
    if not path.exists():
        return []
    return [(int(e), int(s)) for e, s in _parse(path, 2)]

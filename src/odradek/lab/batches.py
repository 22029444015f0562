"""Which producer session wrote each offset: the batch headers of a partition read from a broker's segment files.

The checker needs this to tell a broker that failed to deduplicate a retry (two copies under one producer id and
epoch: the broker's fault) from a client that sent a record again under a new producer id or epoch (idempotence
holds only within one producer session, KIP-98; librdkafka does this to records whose response it lost when it
bumps its epoch, confluentinc/librdkafka#4953). A consumer cannot see either, so the files are read directly, as
``odradek dump-log`` does, once the cluster is whole again (every replica in the ISR, so any broker holding the
partition has the same batches up to the high watermark; the one with the longest log is used).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from odradek.protocol.records import CorruptBatchError, iter_batches

__all__ = ["Batch", "read_batches"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Batch:
    """The producer session and sequences of the batch holding an offset."""

    producer_id: int
    producer_epoch: int
    base_sequence: int
    base_offset: int
    last_offset: int

    def sequence_of(self, offset: int) -> int:
        return -1 if self.base_sequence < 0 else (self.base_sequence + offset - self.base_offset) & 0x7FFFFFFF

    def describe(self, offset: int) -> str:
        return (f"producer {self.producer_id} epoch {self.producer_epoch} sequence {self.sequence_of(offset)} "
                f"(batch {self.base_offset}-{self.last_offset})")


def _read_dir(directory: Path) -> dict[int, Batch]:
    out: dict[int, Batch] = {}
    for segment in sorted(directory.glob("*.log")):
        data = segment.read_bytes()
        try:
            for _position, h in iter_batches(data, verify_crc=False):
                if h.is_control:
                    continue
                batch = Batch(h.producer_id, h.producer_epoch, h.base_sequence, h.base_offset, h.last_offset)
                for offset in range(h.base_offset, h.last_offset + 1):
                    out[offset] = batch
        except CorruptBatchError as exc:  # the active segment's tail while the broker writes: what came before
            log.debug("%s: stopped at %s", segment, exc)
    return out


def read_batches(data_dirs: list[Path], topic: str, partition: int) -> dict[int, Batch]:
    """offset -> its batch, from whichever of ``data_dirs`` holds the longest log of ``topic``-``partition``."""
    best: dict[int, Batch] = {}
    for d in data_dirs:
        directory = d / f"{topic}-{partition}"
        if directory.is_dir():
            found = _read_dir(directory)
            if max(found, default=-1) > max(best, default=-1):
                best = found
    return best

"""Idempotent-producer state: per producer id, its epoch and the metadata of its last five batches.

This is what makes a retried Produce safe: the broker recognises a batch it already wrote and answers with the
original offsets, rejects a sequence gap with OUT_OF_ORDER_SEQUENCE_NUMBER and an older epoch with
INVALID_PRODUCER_EPOCH. Rules follow Kafka's ProducerStateManager/ProducerAppendInfo (2.5+, KIP-360): a
producer the log has no state for may start at any sequence; a known producer starting a new epoch must start
at sequence 0.

The checks are pure (:meth:`ProducerStateManager.prepare` computes the updates without applying them); the log
applies them only after the write succeeded, so a failed write leaves the state untouched.
"""

from __future__ import annotations

import json
import os
import zlib
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

from odradek.broker.log.checkpoint import write_atomically
from odradek.errors import ErrorCode, KafkaError
from odradek.protocol.records import NO_PRODUCER_ID, BatchHeader

# Kafka's ProducerStateEntry.NUM_BATCHES_TO_RETAIN: clients keep at most 5 requests in flight per partition.
BATCHES_TO_RETAIN = 5
NO_EPOCH = -1
SNAPSHOT_SUFFIX = ".producer-state.json"
SEQUENCE_MAX = 2**31 - 1


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp: int


@dataclass(slots=True)
class ProducerEntry:
    producer_id: int
    epoch: int
    batches: deque[BatchMetadata] = field(default_factory=lambda: deque(maxlen=BATCHES_TO_RETAIN))
    last_timestamp: int = -1

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else -1

    @property
    def last_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else -1

    def find_duplicate(self, header: BatchHeader) -> BatchMetadata | None:
        if header.producer_epoch != self.epoch:
            return None
        for meta in self.batches:
            if meta.first_seq == header.base_sequence and meta.last_seq == header.last_sequence:
                return meta
        return None

    def copy(self) -> ProducerEntry:
        return ProducerEntry(self.producer_id, self.epoch, deque(self.batches, maxlen=BATCHES_TO_RETAIN),
                             self.last_timestamp)


def in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == SEQUENCE_MAX)


class ProducerStateManager:
    def __init__(self) -> None:
        self.producers: dict[int, ProducerEntry] = {}

    def find_duplicate(self, headers: list[BatchHeader]) -> BatchMetadata | None:
        """A batch of this append that the log already holds (Kafka answers the whole request with its
        offsets)."""
        for header in headers:
            if header.producer_id == NO_PRODUCER_ID:
                continue
            entry = self.producers.get(header.producer_id)
            if entry is not None:
                meta = entry.find_duplicate(header)
                if meta is not None:
                    return meta
        return None

    def validate(self, headers: list[BatchHeader]) -> None:
        """Check epochs and sequences of a leader append (headers in order, before offsets are assigned)."""
        # producer id -> (epoch, last sequence) after the earlier batches of this same append
        pending: dict[int, tuple[int, int]] = {}
        for header in headers:
            pid = header.producer_id
            if pid == NO_PRODUCER_ID:
                continue
            entry = self.producers.get(pid)
            known_epoch, last_seq = pending.get(pid) or (
                (entry.epoch, entry.last_seq) if entry is not None else (NO_EPOCH, -1)
            )
            epoch, first_seq = header.producer_epoch, header.base_sequence
            if known_epoch != NO_EPOCH and epoch < known_epoch:
                raise KafkaError(
                    ErrorCode.invalid_producer_epoch,
                    f"Epoch of producer {pid} is {epoch}, which is smaller than the last seen epoch "
                    f"{known_epoch}",
                )
            if epoch != known_epoch:
                if first_seq != 0 and known_epoch != NO_EPOCH:
                    raise KafkaError(
                        ErrorCode.out_of_order_sequence_number,
                        f"Invalid sequence number for new epoch of producer {pid}: {epoch} (request epoch), "
                        f"{first_seq} (seq. number), {known_epoch} (current producer epoch)",
                    )
            elif known_epoch != NO_EPOCH and not in_sequence(last_seq, first_seq):
                raise KafkaError(
                    ErrorCode.out_of_order_sequence_number,
                    f"Out of order sequence number for producer {pid}: {first_seq} (incoming seq. number), "
                    f"{last_seq} (current end sequence number)",
                )
            pending[pid] = (epoch, header.last_sequence)

    def update(self, header: BatchHeader, timestamp: int) -> None:
        """Record a batch now in the log (its header carries its final offsets)."""
        pid = header.producer_id
        if pid == NO_PRODUCER_ID:
            return
        entry = self.producers.get(pid)
        if entry is None or entry.epoch != header.producer_epoch:
            entry = ProducerEntry(pid, header.producer_epoch)
            self.producers[pid] = entry
        entry.batches.append(
            BatchMetadata(header.base_sequence, header.last_sequence, header.base_offset, header.last_offset,
                          timestamp)
        )
        entry.last_timestamp = max(entry.last_timestamp, header.max_timestamp)

    def remove_expired(self, now_ms: int, expiration_ms: int) -> None:
        """Forget producers idle longer than producer.id.expiration.ms (Kafka's default: one day)."""
        for pid in [p for p, e in self.producers.items() if now_ms - e.last_timestamp >= expiration_ms]:
            del self.producers[pid]

    def truncate_head(self, log_start_offset: int) -> None:
        """Producers whose last batch was deleted have no state left in the log; neither do we."""
        for pid in [p for p, e in self.producers.items() if e.last_offset < log_start_offset]:
            del self.producers[pid]

    # --- snapshots ------------------------------------------------------------------------------------------

    def to_json(self, offset: int) -> str:
        body = {
            "version": 1,
            "offset": offset,
            "producers": [
                {"id": e.producer_id, "epoch": e.epoch, "last_timestamp": e.last_timestamp,
                 "batches": [[b.first_seq, b.last_seq, b.first_offset, b.last_offset, b.timestamp]
                             for b in e.batches]}
                for e in self.producers.values()
            ],
        }
        text = json.dumps(body, separators=(",", ":"))
        return json.dumps({"crc": zlib.crc32(text.encode()), "body": text})

    @classmethod
    def from_json(cls, text: str) -> tuple[ProducerStateManager, int]:
        outer = json.loads(text)
        if zlib.crc32(outer["body"].encode()) != outer["crc"]:
            raise ValueError("producer snapshot checksum mismatch")
        body = json.loads(outer["body"])
        state = cls()
        for p in body["producers"]:
            entry = ProducerEntry(p["id"], p["epoch"], last_timestamp=p["last_timestamp"])
            entry.batches.extend(BatchMetadata(*b) for b in p["batches"])
            state.producers[entry.producer_id] = entry
        return state, int(body["offset"])


def snapshot_path(directory: Path, offset: int) -> Path:
    return directory / f"{offset:020d}{SNAPSHOT_SUFFIX}"


def list_snapshots(directory: Path) -> list[tuple[int, Path]]:
    found = []
    for path in directory.glob(f"*{SNAPSHOT_SUFFIX}"):
        stem = path.name[: -len(SNAPSHOT_SUFFIX)]
        if stem.isdigit():
            found.append((int(stem), path))
    return sorted(found)


def write_snapshot(directory: Path, state: ProducerStateManager, offset: int, keep: int = 2) -> None:
    """Write a snapshot at ``offset`` and keep only the newest ``keep``: enough to rebuild after a tail
    truncation."""
    write_atomically(snapshot_path(directory, offset), state.to_json(offset))
    for _, path in list_snapshots(directory)[:-keep]:
        path.unlink(missing_ok=True)


def load_latest_snapshot(directory: Path, max_offset: int) -> tuple[ProducerStateManager, int] | None:
    """Newest readable snapshot at or below ``max_offset``; newer ones describe truncated data and are
    removed."""
    for offset, path in reversed(list_snapshots(directory)):
        if offset > max_offset:
            path.unlink(missing_ok=True)
            continue
        try:
            return ProducerStateManager.from_json(path.read_text())
        except (ValueError, KeyError, TypeError, OSError):
            os.unlink(path)
    return None

"""Producer state: per producer id, its epoch, the metadata of its last five batches and its open transaction.

This is what makes a retried Produce safe: the broker recognises a batch it already wrote and answers with the
original offsets, rejects a sequence gap with OUT_OF_ORDER_SEQUENCE_NUMBER and an older epoch with
INVALID_PRODUCER_EPOCH. Rules follow Kafka's ProducerStateManager/ProducerAppendInfo (2.5+, KIP-360): a
producer the log has no state for may start at any sequence; a known producer starting a new epoch must start
at sequence 0.

Transactions (KIP-98): a producer's first transactional batch opens a transaction at its base offset; its COMMIT or
ABORT marker closes it. The earliest open transaction, or a closed one whose marker the ISR has not all got yet
(Kafka's "unreplicated" transactions), is the log's first unstable offset, which bounds the last stable offset that
READ_COMMITTED consumers read to. Markers are fenced by producer epoch and by the epoch of the coordinator that
wrote them. Appends replicated from a leader, and batches replayed on recovery, are applied without these checks
(Kafka's REPLICATION origin): the leader already made them.

The checks are pure (:meth:`ProducerStateManager.validate` and :meth:`check_marker` raise without changing
anything); the log applies the updates only after the write succeeded, so a failed write leaves the state untouched.
"""

from __future__ import annotations

import json
import os
import zlib
from collections import deque
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from odradek.broker.log import durability
from odradek.broker.log.checkpoint import fsync_dir, write_atomically
from odradek.errors import ErrorCode, KafkaError
from odradek.protocol.records import NO_PRODUCER_ID, NO_SEQUENCE, BatchHeader

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


@dataclass(frozen=True, slots=True)
class CompletedTxn:
    """A transaction closed by a marker at ``last_offset``."""

    producer_id: int
    first_offset: int
    last_offset: int
    is_aborted: bool


@dataclass(slots=True)
class ProducerEntry:
    producer_id: int
    producer_epoch: int
    batches: deque[BatchMetadata] = field(default_factory=lambda: deque(maxlen=BATCHES_TO_RETAIN))
    last_timestamp: int = -1
    coordinator_epoch: int = -1
    current_txn_first_offset: int = -1  # -1 when no transaction is open on this partition

    @property
    def last_sequence(self) -> int:
        return self.batches[-1].last_seq if self.batches else -1

    @property
    def last_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else -1

    def set_epoch(self, epoch: int) -> None:
        """A new epoch forgets the old epoch's batches (their sequences mean nothing in the new one)."""
        if epoch != self.producer_epoch:
            self.batches.clear()
            self.producer_epoch = epoch

    def find_duplicate(self, header: BatchHeader) -> BatchMetadata | None:
        if header.producer_epoch != self.producer_epoch:
            return None
        for meta in self.batches:
            if meta.first_seq == header.base_sequence and meta.last_seq == header.last_sequence:
                return meta
        return None


def in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == SEQUENCE_MAX)


class ProducerStateManager:
    def __init__(self) -> None:
        self.producers: dict[int, ProducerEntry] = {}
        self._ongoing: dict[int, int] = {}  # first offset -> producer id, transactions without a marker
        self._unreplicated: dict[int, tuple[int, int]] = {}  # first offset -> (producer id, marker offset)
        self._verifications: dict[int, tuple[object, int]] = {}  # producer -> (token, when it was made)

    # --- what others read -----------------------------------------------------------------------------------

    def entries(self) -> Iterator[ProducerEntry]:
        """Every producer the log knows (DescribeProducers)."""
        return iter(list(self.producers.values()))

    def ongoing_transaction(self, producer_id: int) -> int | None:
        """First offset of the producer's open transaction on this partition, or None."""
        entry = self.producers.get(producer_id)
        if entry is None or entry.current_txn_first_offset < 0:
            return None
        return entry.current_txn_first_offset

    def has_ongoing_transaction(self, producer_id: int, producer_epoch: int) -> bool:
        """Kafka's hasOngoingTransaction: open, and in this epoch (a bumped epoch must verify again)."""
        entry = self.producers.get(producer_id)
        return entry is not None and entry.current_txn_first_offset >= 0 and entry.producer_epoch == producer_epoch

    def first_undecided_offset(self) -> int | None:
        """Earliest transaction without a marker (what the cleaner must not pass)."""
        return min(self._ongoing) if self._ongoing else None

    def first_unstable_offset(self) -> int | None:
        """Earliest transaction that is open or whose marker is not yet below the high watermark."""
        candidates = [*self._ongoing, *self._unreplicated]
        return min(candidates) if candidates else None

    # --- KIP-890 verification ---------------------------------------------------------------------------------

    def start_verification(self, producer_id: int, now_ms: int) -> object:
        """A token for a transaction about to be verified with the coordinator; a marker written meanwhile
        invalidates it, so a late first batch cannot reopen a transaction that was just ended."""
        return self._verifications.setdefault(producer_id, (object(), now_ms))[0]

    def verification_current(self, producer_id: int, token: object) -> bool:
        found = self._verifications.get(producer_id)
        return found is not None and found[0] is token

    # --- checks (pure) ------------------------------------------------------------------------------------------

    def find_duplicate(self, headers: list[BatchHeader]) -> BatchMetadata | None:
        """A batch of this append that the log already holds (Kafka answers the whole request with its
        offsets)."""
        for header in headers:
            if header.producer_id == NO_PRODUCER_ID or header.base_sequence == NO_SEQUENCE:
                continue
            entry = self.producers.get(header.producer_id)
            if entry is not None:
                meta = entry.find_duplicate(header)
                if meta is not None:
                    return meta
        return None

    def validate(self, headers: list[BatchHeader], check_sequence: bool = True) -> None:
        """Check epochs, sequences and transaction state of a leader append (headers in order, before offsets
        are assigned). Sequences are not checked for the group coordinator's batches (Kafka's COORDINATOR
        origin), nor for any batch without one: clients cannot send those (validate_produce refuses them), the
        broker's own transactional offset commits carry none."""
        # producer id -> (epoch, last sequence, transaction open) after the earlier batches of this same append
        pending: dict[int, tuple[int, int, bool]] = {}
        for header in headers:
            pid = header.producer_id
            if pid == NO_PRODUCER_ID:
                continue
            entry = self.producers.get(pid)
            known_epoch, last_seq, in_txn = pending.get(pid) or (
                (entry.producer_epoch, entry.last_sequence, entry.current_txn_first_offset >= 0)
                if entry is not None else (NO_EPOCH, -1, False)
            )
            epoch, first_seq = header.producer_epoch, header.base_sequence
            if known_epoch != NO_EPOCH and epoch < known_epoch:
                raise KafkaError(
                    ErrorCode.invalid_producer_epoch,
                    f"Epoch of producer {pid} is {epoch}, which is smaller than the last seen epoch "
                    f"{known_epoch}",
                )
            if not check_sequence or first_seq == NO_SEQUENCE:
                pass
            elif epoch != known_epoch:
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
            if in_txn and not header.is_transactional:
                raise KafkaError(ErrorCode.invalid_txn_state,
                                 f"Expected transactional write from producer {pid}")
            pending[pid] = (epoch, header.last_sequence, in_txn or header.is_transactional)

    def check_marker(self, producer_id: int, producer_epoch: int, coordinator_epoch: int) -> None:
        """A marker from the coordinator: an older producer epoch is INVALID_PRODUCER_EPOCH, an older coordinator
        epoch (a coordinator that lost its partition of __transaction_state) TRANSACTION_COORDINATOR_FENCED."""
        entry = self.producers.get(producer_id)
        if entry is None:
            return
        if producer_epoch < entry.producer_epoch:
            raise KafkaError(
                ErrorCode.invalid_producer_epoch,
                f"Epoch of producer {producer_id} is {producer_epoch}, which is smaller than the last seen epoch "
                f"{entry.producer_epoch}",
            )
        if coordinator_epoch < entry.coordinator_epoch:
            raise KafkaError(
                ErrorCode.transaction_coordinator_fenced,
                f"Invalid coordinator epoch for producerId {producer_id}: {coordinator_epoch} (zombie), "
                f"{entry.coordinator_epoch} (current)",
            )

    # --- updates (after the write) ------------------------------------------------------------------------------

    def update(self, header: BatchHeader, timestamp: int) -> None:
        """Record a data batch now in the log (its header carries its final offsets)."""
        pid = header.producer_id
        if pid == NO_PRODUCER_ID:
            return
        entry = self.producers.get(pid)
        if entry is None:
            entry = ProducerEntry(pid, header.producer_epoch)
            self.producers[pid] = entry
        entry.set_epoch(header.producer_epoch)
        entry.batches.append(
            BatchMetadata(header.base_sequence, header.last_sequence, header.base_offset, header.last_offset,
                          timestamp)
        )
        entry.last_timestamp = max(entry.last_timestamp, header.max_timestamp)
        if header.is_transactional and entry.current_txn_first_offset < 0:
            entry.current_txn_first_offset = header.base_offset
            self._ongoing[header.base_offset] = pid
            self._verifications.pop(pid, None)

    def apply_marker(self, producer_id: int, producer_epoch: int, coordinator_epoch: int, is_abort: bool,
                     offset: int, timestamp: int) -> CompletedTxn | None:
        """Record a marker now at ``offset``; the transaction it closes, if one was open here (a marker for a
        partition the producer wrote nothing to closes nothing and leaves no index entry)."""
        entry = self.producers.get(producer_id)
        if entry is None:
            entry = ProducerEntry(producer_id, producer_epoch)
            self.producers[producer_id] = entry
        completed = None
        if entry.current_txn_first_offset >= 0:
            completed = CompletedTxn(producer_id, entry.current_txn_first_offset, offset, is_abort)
        entry.set_epoch(producer_epoch)
        entry.coordinator_epoch = coordinator_epoch
        entry.current_txn_first_offset = -1
        entry.last_timestamp = timestamp
        self._verifications.pop(producer_id, None)
        return completed

    def last_stable_offset(self, completed: CompletedTxn) -> int:
        """The LSO an index entry records for ``completed``: the first offset of the earliest other open
        transaction, else just past the marker (Kafka's ProducerStateManager.lastStableOffset)."""
        others = [first for first, pid in self._ongoing.items() if pid != completed.producer_id]
        return min(others) if others else completed.last_offset + 1

    def complete_txn(self, completed: CompletedTxn) -> None:
        """Decided, but unstable until the high watermark passes its marker."""
        self._ongoing.pop(completed.first_offset, None)
        self._unreplicated[completed.first_offset] = (completed.producer_id, completed.last_offset)

    def on_high_watermark(self, high_watermark: int) -> None:
        for first in [f for f, (_pid, last) in self._unreplicated.items() if last < high_watermark]:
            del self._unreplicated[first]

    def remove_expired(self, now_ms: int, expiration_ms: int) -> None:
        """Forget producers idle longer than producer.id.expiration.ms (Kafka's default: one day), except those
        with an open transaction."""
        for pid in [p for p, e in self.producers.items()
                    if e.current_txn_first_offset < 0 and now_ms - e.last_timestamp >= expiration_ms]:
            del self.producers[pid]
        for pid in [p for p, (_t, since) in self._verifications.items() if now_ms - since >= expiration_ms]:
            del self._verifications[pid]  # asked about, then never written (Kafka expires these alike)

    def truncate_head(self, log_start_offset: int) -> None:
        """Producers whose last batch was deleted have no state left in the log; neither do we (unless a
        transaction of theirs is still open: its marker is yet to come)."""
        for pid in [p for p, e in self.producers.items()
                    if e.batches and e.last_offset < log_start_offset and e.current_txn_first_offset < 0]:
            del self.producers[pid]
        for first in [f for f, (_pid, last) in self._unreplicated.items() if last < log_start_offset]:
            del self._unreplicated[first]

    # --- snapshots ------------------------------------------------------------------------------------------

    def to_json(self, offset: int) -> str:
        body = {
            "version": 2,
            "offset": offset,
            "producers": [
                {"id": e.producer_id, "epoch": e.producer_epoch, "last_timestamp": e.last_timestamp,
                 "coordinator_epoch": e.coordinator_epoch, "txn_first_offset": e.current_txn_first_offset,
                 "batches": [[b.first_seq, b.last_seq, b.first_offset, b.last_offset, b.timestamp]
                             for b in e.batches]}
                for e in self.producers.values()
            ],
        }
        text = json.dumps(body, separators=(",", ":"))
        return json.dumps({"crc": zlib.crc32(text.encode()), "body": text})

    @classmethod
    def from_json(cls, text: str) -> tuple[ProducerStateManager, int]:
        """Version 1 snapshots (before transactions) load with no coordinator epoch and no open transaction."""
        outer = json.loads(text)
        if zlib.crc32(outer["body"].encode()) != outer["crc"]:
            raise ValueError("producer snapshot checksum mismatch")
        body = json.loads(outer["body"])
        state = cls()
        for p in body["producers"]:
            entry = ProducerEntry(p["id"], p["epoch"], last_timestamp=p["last_timestamp"],
                                  coordinator_epoch=int(p.get("coordinator_epoch", -1)),
                                  current_txn_first_offset=int(p.get("txn_first_offset", -1)))
            entry.batches.extend(BatchMetadata(*b) for b in p["batches"])
            state.producers[entry.producer_id] = entry
            if entry.current_txn_first_offset >= 0:
                state._ongoing[entry.current_txn_first_offset] = entry.producer_id
        return state, int(body["offset"])


KEEP_SNAPSHOTS = 2  # the newest snapshots kept: enough to rebuild after a tail truncation


def snapshot_path(directory: Path, offset: int) -> Path:
    return directory / f"{offset:020d}{SNAPSHOT_SUFFIX}"


def list_snapshots(directory: Path) -> list[tuple[int, Path]]:
    """The directory's snapshots by offset (a plain scan: ``Path.glob`` cost a fifth of a clean stop's time)."""
    found = []
    try:
        entries = list(os.scandir(directory))
    except FileNotFoundError:
        return []
    for entry in entries:
        name = entry.name
        if name.endswith(SNAPSHOT_SUFFIX):
            stem = name[: -len(SNAPSHOT_SUFFIX)]
            if stem.isdigit():
                found.append((int(stem), directory / name))
    return sorted(found)


def write_snapshot(directory: Path, state: ProducerStateManager, offset: int, keep: int | None = KEEP_SNAPSHOTS
                   ) -> None:
    """Write a snapshot at ``offset`` and keep only the newest ``keep`` (None: leave the others to the next load,
    which prunes; a clean stop saves a directory scan per log that way): enough to rebuild after a tail truncation.

    Written in place, as Kafka writes its snapshots, not through a temporary file and a rename: a torn snapshot
    does not parse, and loading deletes it and falls back to the one before (or a rebuild from the log), so the
    rename would buy nothing but one more metadata operation per log on a clean stop."""
    fd = os.open(snapshot_path(directory, offset), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, state.to_json(offset).encode())
        durability.fsync(fd)
    finally:
        os.close(fd)
    fsync_dir(directory)
    if keep is not None:
        for _, old in list_snapshots(directory)[:-keep]:
            old.unlink(missing_ok=True)


def load_snapshots(directory: Path, max_offset: int, delete_above: int | None = None
                   ) -> tuple[tuple[ProducerStateManager, int] | None, int | None]:
    """The newest readable snapshot at or below ``max_offset``, and the offset of the newest snapshot the directory
    keeps afterwards, None for none (the log remembers it instead of listing or statting the directory again).
    Snapshots above ``delete_above`` (default ``max_offset``) describe truncated data and are removed, and of the
    rest only the newest :data:`KEEP_SNAPSHOTS` stay (a clean stop may have written one without pruning)."""
    limit = max_offset if delete_above is None else delete_above
    kept: list[tuple[int, Path]] = []
    loaded: tuple[ProducerStateManager, int] | None = None
    for offset, path in reversed(list_snapshots(directory)):
        if offset > limit:
            path.unlink(missing_ok=True)
            continue
        if len(kept) >= KEEP_SNAPSHOTS and loaded is not None:
            path.unlink(missing_ok=True)
            continue
        if offset <= max_offset and loaded is None:
            try:
                loaded = ProducerStateManager.from_json(path.read_text())
            except (ValueError, KeyError, TypeError, OSError):
                os.unlink(path)
                continue
        kept.append((offset, path))
    return loaded, kept[0][0] if kept else None


# --- the producer state of every log at a clean stop, in one file per log directory ------------------------------

STOP_STATES_FILE = "producer-state-checkpoint"
STOP_STATES_VERSION = 1


def write_stop_states(directory: Path, states: Mapping[tuple[str, int], str]) -> None:
    """The producer state of every log of ``directory`` that has any, as a clean stop leaves it: one line per log,
    ``<topic> <partition> <snapshot>`` (each snapshot the JSON a snapshot file holds, at the log's end offset).

    Kafka writes a snapshot file per log at a clean stop. Creating ten thousand files was most of a clean stop's
    time on this machine's disk (a file creation costs 0.1-0.4 ms here), so odradek writes this one file instead;
    a log missing from it had no producer state. Loading trusts it only after a clean shutdown (the marker), and
    removes it, so a later crash recovers from the logs' own snapshots, as before. Written atomically; the clean
    stop's barrier makes it durable before the marker."""
    lines = [str(STOP_STATES_VERSION), str(len(states))]
    lines += [f"{topic} {partition} {text}" for (topic, partition), text in sorted(states.items())]
    write_atomically(directory / STOP_STATES_FILE, "".join(f"{line}\n" for line in lines))


def read_stop_states(directory: Path) -> dict[tuple[str, int], str] | None:
    """What :func:`write_stop_states` wrote, each log's snapshot text unparsed (a log parses its own when it loads);
    None when there is no such file (a directory last stopped by an older odradek). A file that does not parse
    raises ValueError."""
    try:
        text = (directory / STOP_STATES_FILE).read_text()
    except FileNotFoundError:
        return None
    lines = text.splitlines()
    if len(lines) < 2 or lines[0] != str(STOP_STATES_VERSION) or not lines[1].isdigit():
        raise ValueError(f"{directory / STOP_STATES_FILE}: unrecognised header")
    if len(lines) != 2 + int(lines[1]):
        raise ValueError(f"{directory / STOP_STATES_FILE}: expected {lines[1]} entries, found {len(lines) - 2}")
    out: dict[tuple[str, int], str] = {}
    for line in lines[2:]:
        topic, partition, snapshot = line.split(" ", 2)
        out[(topic, int(partition))] = snapshot
    return out

"""Transactions in the log: Kafka's control-batch and ``.txnindex`` bytes, producer state, the last stable offset,
READ_COMMITTED reads, recovery, truncation, replication and retention."""

from __future__ import annotations

import struct
from pathlib import Path

import crc32c
import pytest
from logtest_helpers import T0, batch

from odradek.broker.log import producer_state
from odradek.broker.log.partition_log import ORIGIN_COORDINATOR, PartitionLog
from odradek.broker.log.txn_index import AbortedTxn
from odradek.broker.topic_config import LogConfig
from odradek.errors import ErrorCode, KafkaError
from odradek.protocol.records import (
    CONTROL_ABORT,
    CONTROL_COMMIT,
    CorruptBatchError,
    build_control_batch,
    control_type,
    decode_batch,
    encode_batch,
    iter_batches,
    read_end_txn_marker,
    read_header,
    validate_produce,
)

A, B = 1000, 2000  # producer ids


class Txn:
    """One producer's sequence numbers, so tests read as the producer's actions."""

    def __init__(self, log: PartitionLog, pid: int, epoch: int = 0) -> None:
        self.log, self.pid, self.epoch, self.seq = log, pid, epoch, 0

    def send(self, n: int = 1, *, transactional: bool = True) -> int:
        buf = encode_batch([(None, b"%d-%d" % (self.pid, self.seq + i), []) for i in range(n)], timestamp_ms=T0,
                           producer_id=self.pid, producer_epoch=self.epoch, base_sequence=self.seq,
                           transactional=transactional)
        result = self.log.append_as_leader(buf, validate_produce(buf), 0, T0)
        self.seq += n
        return result.first_offset

    def end(self, commit: bool, coordinator_epoch: int = 0, epoch: int | None = None) -> int:
        return self.log.append_marker(self.pid, self.epoch if epoch is None else epoch, coordinator_epoch, commit,
                                      0, T0)


def settle(log: PartitionLog) -> None:
    """As if every replica had everything: the high watermark at the log end."""
    log.high_watermark = log.log_end_offset


def txnindex_bytes(log: PartitionLog, base: int = 0) -> bytes:
    path = log.directory / f"{base:020d}.txnindex"
    return path.read_bytes() if path.exists() else b""


def kafka_entry(pid: int, first: int, last: int, lso: int) -> bytes:
    """AbortedTxn as Kafka's storage module writes it: version int16 0, then four int64, big-endian."""
    return struct.pack(">hqqqq", 0, pid, first, last, lso)


def visible(log: PartitionLog, start: int = 0) -> tuple[list[bytes | None], list[AbortedTxn], int]:
    """What a READ_COMMITTED fetch from ``start`` returns: record values, aborted transactions, LSO."""
    result = log.read(start, 1 << 20, log.high_watermark, read_committed=True)
    data = b"".join(bytes(b) for b in result.buffers)
    values = [r.value for pos, _ in iter_batches(data) for r in decode_batch(data, pos)[1]]
    return values, result.aborted_transactions or [], result.last_stable_offset


# --- the bytes ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("commit", [False, True])
def test_control_batch_is_kafkas_end_transaction_marker_byte_for_byte(commit: bool) -> None:
    pid, epoch, coordinator_epoch, ts = 0x0102030405060708, 7, 0x01020304, T0
    ctype = 1 if commit else 0
    key = struct.pack(">hh", 0, ctype)  # ControlRecordType key: version 0, type
    value = struct.pack(">hi", 0, coordinator_epoch)  # EndTransactionMarker value: version 0, coordinator epoch
    # One DefaultRecord: attributes 0, timestampDelta 0, offsetDelta 0, key, value, no headers; lengths are
    # zig-zag varints (4 -> 0x08, 6 -> 0x0c), the record length (16) too (0x20).
    record = b"\x00" + b"\x00" + b"\x00" + b"\x08" + key + b"\x0c" + value + b"\x00"
    assert len(record) == 16
    records = b"\x20" + record
    after_crc = struct.pack(">hiqqqhii", 0x30, 0, ts, ts, pid, epoch, -1, 1) + records  # transactional|control
    crc = crc32c.crc32c(after_crc)
    expected = struct.pack(">qiibI", 0, 49 + len(records), -1, 2, crc) + after_crc

    built = build_control_batch(pid, epoch, coordinator_epoch, commit, ts)

    assert bytes(built) == expected
    assert control_type(built) == ctype
    marker = read_end_txn_marker(built)
    assert marker is not None and marker.coordinator_epoch == coordinator_epoch
    assert marker.control_type == (CONTROL_COMMIT if commit else CONTROL_ABORT)


def test_control_type_refuses_data_batches_and_malformed_keys() -> None:
    with pytest.raises(CorruptBatchError):
        control_type(encode_batch([(b"k", b"v", [])], timestamp_ms=T0))
    short_key = encode_batch([(b"\x00", b"", [])], timestamp_ms=T0, producer_id=1, producer_epoch=0, control=True,
                             transactional=True)
    with pytest.raises(CorruptBatchError):
        control_type(short_key)


def test_clients_may_not_produce_control_batches() -> None:
    with pytest.raises(KafkaError) as info:
        validate_produce(build_control_batch(A, 0, 0, True, T0))
    assert info.value.code == ErrorCode.invalid_record


def test_abort_writes_kafkas_txnindex_entry_with_the_lso_of_that_moment(open_log) -> None:
    log = open_log()
    a, b = Txn(log, A), Txn(log, B)
    a.send(2)  # 0-1
    b.send(1)  # 2: B's transaction is open when A aborts
    assert a.end(commit=False) == 3
    assert txnindex_bytes(log) == kafka_entry(A, 0, 3, 2)
    b.end(commit=True)  # 4: commits leave no entry
    assert txnindex_bytes(log) == kafka_entry(A, 0, 3, 2)
    b.send(1)  # 5
    assert b.end(commit=False) == 6  # nothing else open: the LSO recorded is just past the marker
    assert txnindex_bytes(log) == kafka_entry(A, 0, 3, 2) + kafka_entry(B, 5, 6, 7)
    # A marker for a transaction that wrote nothing here (an empty abort) closes nothing and indexes nothing.
    Txn(log, 3000).end(commit=False)
    assert len(txnindex_bytes(log)) == 2 * 34


def test_marker_after_a_roll_is_indexed_in_the_segment_it_lands_in(open_log) -> None:
    log = open_log()
    a = Txn(log, A)
    a.send(3)
    log.roll()
    Txn(log, B).send(1)
    assert a.end(commit=False) == 4
    assert txnindex_bytes(log, 0) == b""
    assert txnindex_bytes(log, 3) == kafka_entry(A, 0, 4, 3)


# --- producer state and the last stable offset -----------------------------------------------------------------


def test_lso_with_two_interleaved_producers(open_log) -> None:
    log = open_log()
    a, b = Txn(log, A), Txn(log, B)
    log.append_as_leader(*batch(1), 0, T0)  # 0: outside any transaction
    a.send(2)  # 1-2
    b.send(1)  # 3
    a.send(1)  # 4
    settle(log)
    assert log.first_unstable_offset == 1
    assert log.last_stable_offset == 1
    marker = a.end(commit=True)  # 5
    assert log.last_stable_offset == 1, "A is decided, but its marker is not replicated yet"
    log.high_watermark = marker  # the ISR has everything before the marker only
    assert log.last_stable_offset == 1
    log.high_watermark = marker + 1
    assert log.last_stable_offset == 3, "B's transaction holds the LSO now"
    b.end(commit=False)  # 6
    settle(log)
    assert log.first_unstable_offset is None
    assert log.last_stable_offset == log.high_watermark == 7


def test_lso_never_passes_the_high_watermark(open_log) -> None:
    log = open_log()
    log.append_as_leader(*batch(3), 0, T0)
    Txn(log, A).send(1)  # 3
    log.high_watermark = 2
    assert log.last_stable_offset == 2
    settle(log)
    assert log.last_stable_offset == 3


def test_read_committed_stops_at_the_lso_and_returns_the_aborted_transactions(open_log) -> None:
    log = open_log()
    a, b = Txn(log, A), Txn(log, B)
    a.send(2)  # 0-1
    b.send(1)  # 2
    a.end(commit=False)  # 3
    b.send(1)  # 4
    settle(log)
    values, aborted, lso = visible(log)
    assert lso == 2 and len(values) == 2, "only what lies before B's open transaction"
    assert aborted == [AbortedTxn(A, 0, 3, 2)]
    b.end(commit=True)  # 5
    settle(log)
    values, aborted, lso = visible(log)
    assert lso == 6 and len(values) == 6  # data and markers alike; the consumer drops A's records and markers
    assert [(t.producer_id, t.first_offset) for t in aborted] == [(A, 0)]
    # From past A's marker the range no longer overlaps A's transaction.
    assert visible(log, 4)[1] == []
    # READ_UNCOMMITTED reads to the high watermark and carries no aborted list.
    plain = log.read(0, 1 << 20, log.high_watermark)
    assert plain.aborted_transactions is None


def test_aborted_transactions_are_collected_across_segments(open_log) -> None:
    log = open_log()
    a, b = Txn(log, A), Txn(log, B)
    a.send(1)  # 0
    log.roll()
    b.send(1)  # 1
    log.roll()
    a.end(commit=False)  # 2, in segment 2; LSO recorded 1 (B open)
    log.roll()
    b.end(commit=False)  # 3, in segment 3
    settle(log)
    assert log.aborted_transactions(0, 4) == [AbortedTxn(A, 0, 2, 1), AbortedTxn(B, 1, 3, 4)]
    # A read of segment 0 alone (upper bound 1) needs A's entry, which lives two segments later.
    result = log.read(0, 1, log.high_watermark, read_committed=True)
    assert result.aborted_transactions == [AbortedTxn(A, 0, 2, 1)]


def test_producer_epochs_and_transaction_state_are_checked(open_log) -> None:
    log = open_log()
    a = Txn(log, A, epoch=3)
    a.send(1)
    stale = Txn(log, A, epoch=2)
    with pytest.raises(KafkaError) as info:
        stale.send(1)
    assert info.value.code == ErrorCode.invalid_producer_epoch
    with pytest.raises(KafkaError) as info:
        a.send(1, transactional=False)
    assert info.value.code == ErrorCode.invalid_txn_state, "an open transaction takes only transactional batches"
    with pytest.raises(KafkaError) as info:
        a.end(commit=True, epoch=2)
    assert info.value.code == ErrorCode.invalid_producer_epoch
    a.end(commit=False, coordinator_epoch=5)
    with pytest.raises(KafkaError) as info:
        a.end(commit=False, coordinator_epoch=4)
    assert info.value.code == ErrorCode.transaction_coordinator_fenced
    assert log.log_end_offset == 2, "nothing refused was written"
    assert a.end(commit=False, coordinator_epoch=5) == 2  # the same coordinator epoch may retry


def test_marker_with_a_bumped_epoch_closes_the_transaction(open_log) -> None:
    """The coordinator aborts a timed-out transaction with the epoch bumped: the producer's old epoch is fenced."""
    log = open_log()
    a = Txn(log, A, epoch=0)
    a.send(1)
    a.end(commit=False, epoch=1)
    settle(log)
    assert log.last_stable_offset == 2
    with pytest.raises(KafkaError) as info:
        a.send(1)
    assert info.value.code == ErrorCode.invalid_producer_epoch


def test_coordinator_origin_skips_sequences_but_not_transactions(open_log) -> None:
    """The group coordinator's transactional offset commits carry sequence 0 every time (Kafka's COORDINATOR
    origin): neither duplicates nor out of order, still part of the producer's transaction."""
    log = open_log()
    for _ in range(2):
        buf = encode_batch([(b"k", b"v", [])], timestamp_ms=T0, producer_id=A, producer_epoch=0, base_sequence=0,
                           transactional=True)
        log.append_as_leader(buf, validate_produce(buf), 0, T0, ORIGIN_COORDINATOR)
    assert log.log_end_offset == 2
    assert log.producer_state.ongoing_transaction(A) == 0


def test_entries_describe_each_producer(open_log) -> None:
    log = open_log()
    a = Txn(log, A, epoch=2)
    a.send(3)
    entry = {e.producer_id: e for e in log.producer_state.entries()}[A]
    assert (entry.producer_epoch, entry.last_sequence, entry.current_txn_first_offset) == (2, 2, 0)
    a.end(commit=True, coordinator_epoch=9)
    entry = {e.producer_id: e for e in log.producer_state.entries()}[A]
    assert (entry.coordinator_epoch, entry.current_txn_first_offset) == (9, -1)
    assert log.producer_state.ongoing_transaction(A) is None


# --- restart, recovery, truncation, replication, retention ----------------------------------------------------


def _abandon(log: PartitionLog) -> None:
    """Like a killed process: file descriptors go away, nothing is flushed, snapshotted or checkpointed."""
    for segment in log.segments:
        segment.close()


def _reopen(tmp_path: Path, clock, **kwargs: object) -> PartitionLog:
    return PartitionLog.open(tmp_path / "topic-0", LogConfig(), clock, **kwargs)  # type: ignore[arg-type]


def test_clean_restart_keeps_the_open_transaction_and_the_coordinator_epoch(open_log, tmp_path, clock) -> None:
    log = open_log()
    a, b = Txn(log, A), Txn(log, B)
    b.send(1)
    b.end(commit=True, coordinator_epoch=4)
    a.send(2)  # 2-3, open across the restart
    log.close()
    log = _reopen(tmp_path, clock, recovery_point=log.log_end_offset, clean_shutdown=True, high_watermark=4)
    assert log.producer_state.ongoing_transaction(A) == 2
    assert log.last_stable_offset == 2
    with pytest.raises(KafkaError) as info:
        log.append_marker(B, 0, 3, True, 0, T0)
    assert info.value.code == ErrorCode.transaction_coordinator_fenced
    log.append_marker(A, 0, 0, False, 0, T0)
    assert txnindex_bytes(log) == kafka_entry(A, 2, 4, 5)
    log.close()


def test_recovery_rebuilds_the_txnindex_and_the_open_transaction(open_log, tmp_path, clock) -> None:
    log = open_log()
    a, b = Txn(log, A), Txn(log, B)
    a.send(2)  # 0-1
    log.roll()  # a snapshot here (offset 2) holds A's open transaction
    b.send(1)  # 2
    log.roll()
    a.end(commit=False)  # 3: indexed in segment 3 with LSO 2
    b.send(1)  # 4: B stays open
    expected = txnindex_bytes(log, 3)
    assert expected == kafka_entry(A, 0, 3, 2)
    _abandon(log)
    (tmp_path / "topic-0" / f"{3:020d}.txnindex").write_bytes(b"\x00" * 10)  # torn, as a crash may leave it

    log = _reopen(tmp_path, clock, recovery_point=2, high_watermark=5)
    assert txnindex_bytes(log, 3) == expected
    assert log.producer_state.ongoing_transaction(B) == 2
    assert log.producer_state.ongoing_transaction(A) is None
    assert log.last_stable_offset == 2
    assert visible(log)[1] == [AbortedTxn(A, 0, 3, 2)]
    log.close()


def test_recovery_without_any_snapshot_replays_the_whole_log(open_log, tmp_path, clock) -> None:
    """A transaction opened three segments before its marker is still found when no snapshot survives."""
    log = open_log()
    a = Txn(log, A)
    a.send(1)
    for _ in range(3):
        log.roll()
        log.append_as_leader(*batch(1), 0, T0)
    a.end(commit=False)  # offset 4
    _abandon(log)
    for snapshot in (tmp_path / "topic-0").glob("*.producer-state.json"):
        snapshot.unlink()
    (tmp_path / "topic-0" / f"{3:020d}.txnindex").unlink()
    log = _reopen(tmp_path, clock, recovery_point=0, high_watermark=5)
    assert txnindex_bytes(log, 3) == kafka_entry(A, 0, 4, 5)
    log.close()


def test_a_torn_snapshot_is_deleted_and_the_one_before_used(open_log, tmp_path) -> None:
    """Snapshots are written in place, as Kafka writes them: one torn by a crash mid-write does not parse, so
    loading deletes it and falls back to the one before."""
    log = open_log()
    a = Txn(log, A)
    a.send(1)  # 0
    directory = tmp_path / "topic-0"
    producer_state.write_snapshot(directory, log.producer_state, 1)
    log.append_as_leader(*batch(1), 0, T0)  # 1
    producer_state.write_snapshot(directory, log.producer_state, 2)
    newest = producer_state.snapshot_path(directory, 2)
    text = newest.read_text()
    newest.write_text(text[: len(text) // 2])
    loaded = producer_state.load_snapshots(directory, 2)[0]
    assert loaded is not None
    state, offset = loaded
    assert offset == 1 and state.ongoing_transaction(A) == 0
    assert not newest.exists()
    assert [o for o, _ in producer_state.list_snapshots(directory)] == [1]


def test_snapshots_a_clean_stop_left_unpruned_are_pruned_at_the_next_load(open_log, tmp_path) -> None:
    log = open_log()
    Txn(log, A).send(1)
    directory = tmp_path / "topic-0"
    for offset in (1, 2, 3, 4):
        producer_state.write_snapshot(directory, log.producer_state, offset, keep=None)  # as a clean stop does
    assert len(producer_state.list_snapshots(directory)) == 4
    loaded = producer_state.load_snapshots(directory, 4)[0]
    assert loaded is not None and loaded[1] == 4
    assert [o for o, _ in producer_state.list_snapshots(directory)] == [3, 4]


def test_truncation_removes_index_entries_and_reopens_the_transaction(open_log) -> None:
    log = open_log()
    a = Txn(log, A)
    a.send(2)  # 0-1
    a.end(commit=False)  # 2
    log.append_as_leader(*batch(1), 0, T0)  # 3
    assert txnindex_bytes(log) == kafka_entry(A, 0, 2, 3)
    log.truncate_to(2)  # a follower dropping what a new leader never had: the marker goes
    assert txnindex_bytes(log) == b""
    assert log.producer_state.ongoing_transaction(A) == 0
    settle(log)
    assert log.last_stable_offset == 0


def test_follower_rebuilds_the_same_state_from_replicated_batches(open_log, tmp_path, clock) -> None:
    leader = open_log()
    a, b = Txn(leader, A), Txn(leader, B)
    a.send(2)
    b.send(1)
    a.end(commit=False)
    b.send(1)
    data = leader.read(0, 1 << 20).buffers[0].tobytes()
    follower = PartitionLog.open(tmp_path / "topic-1", LogConfig(), clock)
    follower.append_as_follower(bytearray(data), [h for _, h in iter_batches(data)])
    assert (follower.directory / f"{0:020d}.txnindex").read_bytes() == txnindex_bytes(leader)
    assert follower.producer_state.ongoing_transaction(B) == 2
    follower.high_watermark = follower.log_end_offset
    assert follower.last_stable_offset == 2
    follower.close()


def test_retention_deletes_a_segment_with_its_txnindex(open_log, clock) -> None:
    log = open_log(LogConfig(retention_ms=1000))
    a = Txn(log, A)
    a.send(1)
    a.end(commit=False)
    log.roll()
    log.append_as_leader(*batch(1, ts=T0 + 10_000), 0, T0 + 10_000)
    settle(log)
    assert txnindex_bytes(log) != b""
    assert log.apply_retention(T0 + 5_000) == 1
    assert not (log.directory / f"{0:020d}.txnindex").exists()


def test_control_batches_keep_their_header_fields_in_the_log(open_log) -> None:
    log = open_log()
    Txn(log, A, epoch=5).send(1)
    offset = log.append_marker(A, 5, 2, True, 0, T0)
    data = log.read(offset, 1 << 20).buffers[0].tobytes()
    header = read_header(data)
    assert header.is_control and header.is_transactional
    assert (header.base_offset, header.producer_id, header.producer_epoch, header.base_sequence) == (offset, A, 5, -1)
    assert control_type(data) == CONTROL_COMMIT


def test_a_segment_recovered_after_a_clean_shutdown_rebuilds_only_its_own_index(open_log, tmp_path, clock) -> None:
    log = open_log()
    a, b = Txn(log, A), Txn(log, B)
    a.send(1)
    a.end(commit=False)  # 1, indexed in segment 0
    log.roll()
    b.send(1)
    b.end(commit=False)  # 3, indexed in segment 2
    log.roll()
    log.append_as_leader(*batch(1), 0, T0)
    log.close()
    (tmp_path / "topic-0" / f"{0:020d}.index").write_bytes(b"\x01\x02\x03")  # untrustworthy: segment 0 is recovered
    (tmp_path / "topic-0" / f"{0:020d}.txnindex").unlink()
    log = _reopen(tmp_path, clock, recovery_point=5, clean_shutdown=True, high_watermark=5)
    assert txnindex_bytes(log, 0) == kafka_entry(A, 0, 1, 2)
    assert txnindex_bytes(log, 2) == kafka_entry(B, 2, 3, 4), "the loaded segment's index is left as it was"
    log.close()


def test_a_marker_written_during_verification_invalidates_it(open_log) -> None:
    """KIP-890: the produce path asks the coordinator before a transaction's first batch; if the transaction ends
    meanwhile, the answer is stale and the batch must not open a new transaction."""
    log = open_log()
    token = log.start_txn_verification(A)
    assert log.txn_verification_current(A, token)
    log.append_marker(A, 0, 0, False, 0, T0)
    assert not log.txn_verification_current(A, token)
    token = log.start_txn_verification(A)
    Txn(log, A).send(1)  # the transaction opens: verification is over
    assert log.has_ongoing_transaction(A, 0) and not log.has_ongoing_transaction(A, 1)
    assert not log.txn_verification_current(A, token)


def test_batches_without_a_sequence_are_neither_duplicates_nor_out_of_order(open_log) -> None:
    """The group coordinator writes a producer's TxnOffsetCommits with no sequence (-1), one batch per commit:
    each is appended, none taken for a retry of the previous one."""
    log = open_log()
    for _ in range(3):
        buf = encode_batch([(b"k", b"v", [])], timestamp_ms=T0, producer_id=A, producer_epoch=0, transactional=True)
        result = log.append_as_leader(buf, [read_header(buf)], 0, T0)
        assert not result.duplicate
    assert log.log_end_offset == 3
    assert log.producer_state.ongoing_transaction(A) == 0

"""Compaction of transactional data as Kafka's LogCleaner does it: aborted records go and never shadow a committed
key, markers stay while their transaction has records and then for delete.retention.ms after the cleaner found them
alone, the cleaned segment keeps the .txnindex entries of the aborted transactions it still holds, and nothing at or
past the last stable offset is cleaned."""

from __future__ import annotations

import struct

from logtest_helpers import T0, batch

from odradek.broker.log.cleaner import LogCleaner
from odradek.broker.log.partition_log import PartitionLog
from odradek.broker.topic_config import LogConfig
from odradek.protocol.records import decode_batch, encode_batch, iter_batches, validate_produce

CONFIG = LogConfig(cleanup_policy=("compact",), min_cleanable_dirty_ratio=0.01)
DAY = 86_400_000  # delete.retention.ms default
A, B, C = 11, 22, 33


class Producer:
    def __init__(self, log: PartitionLog, pid: int) -> None:
        self.log, self.pid, self.seq = log, pid, 0

    def send(self, *pairs: tuple[bytes, bytes]) -> None:
        buf = encode_batch([(k, v, []) for k, v in pairs], timestamp_ms=T0, producer_id=self.pid, producer_epoch=0,
                           base_sequence=self.seq, transactional=True)
        self.log.append_as_leader(buf, validate_produce(buf), 0, T0)
        self.seq += len(pairs)

    def end(self, commit: bool) -> int:
        return self.log.append_marker(self.pid, 0, 0, commit, 0, T0)


def plain(log: PartitionLog, key: bytes, value: bytes) -> None:
    log.append_as_leader(*batch(values=[(key, value)]), 0, T0)


def batches(log: PartitionLog) -> list[tuple[int, int, bool, list[tuple[bytes | None, bytes | None]]]]:
    """(base offset, producer id, control, records) of every batch in the log."""
    out = []
    for segment in log.segments:
        data = segment.read(0, segment.size)
        for pos, header in iter_batches(data):
            records = decode_batch(data, pos)[1]
            out.append((header.base_offset, header.producer_id, header.is_control,
                        [(r.key, r.value) for r in records]))
    return out


def txnindex(log: PartitionLog, base: int = 0) -> bytes:
    path = log.directory / f"{base:020d}.txnindex"
    return path.read_bytes() if path.exists() else b""


def test_aborted_records_go_and_markers_follow_after_delete_retention(open_log, clock) -> None:
    log = open_log(CONFIG)
    a, b = Producer(log, A), Producer(log, B)
    plain(log, b"a", b"committed")  # 0
    a.send((b"a", b"aborted"), (b"b", b"aborted"))  # 1-2
    a.end(commit=False)  # 3
    b.send((b"c", b"c1"))  # 4
    b.end(commit=True)  # 5
    a.send((b"d", b"d1"))  # 6: A's last batch is a later, committed one
    a.end(commit=True)  # 7
    log.roll()
    plain(log, b"z", b"active")  # 8
    log.high_watermark = log.log_end_offset
    assert txnindex(log) == struct.pack(">hqqqq", 0, A, 1, 3, 4)
    cleaner = LogCleaner(clock)

    cleaner.clean(log, log.segments[:-1], T0)
    assert [(o, pid, ctl) for o, pid, ctl, _ in batches(log)] == [
        (0, -1, False), (3, A, True), (4, B, False), (5, B, True), (6, A, False), (7, A, True), (8, -1, False)]
    assert batches(log)[0][3] == [(b"a", b"committed")], "an aborted record never shadows a committed key"
    assert txnindex(log) == struct.pack(">hqqqq", 0, A, 1, 3, 4), "the ABORT marker is kept, and its entry"

    # A's aborted records are gone: its marker may go, later. (The cleaner has not recorded how far it cleaned,
    # so everything counts as dirty and this pass runs.)
    assert cleaner.maybe_clean(log, T0 + 1) is not None
    assert [o for o, *_ in batches(log)] == [0, 3, 4, 5, 6, 7, 8]
    assert txnindex(log) == b""
    stamped = next(h for _, h in iter_batches(log.segments[0].read(0, log.segments[0].size)) if h.base_offset == 3)
    assert stamped.attributes & 0x40 and stamped.base_timestamp == T0 + 1 + DAY  # KIP-534 delete horizon

    assert cleaner.maybe_clean(log, T0 + DAY) is None, "nothing dirty and no horizon passed yet"
    assert cleaner.maybe_clean(log, T0 + 2 + DAY) is not None, "the passed horizon alone calls for a pass"
    assert [o for o, *_ in batches(log)] == [0, 4, 5, 6, 7, 8], "B's and A's COMMIT markers still have data"


def test_nothing_at_or_past_the_last_stable_offset_is_cleaned(open_log, clock) -> None:
    log = open_log(CONFIG)
    plain(log, b"k", b"old")  # 0
    plain(log, b"k", b"new")  # 1
    c = Producer(log, C)
    c.send((b"x", b"1"))  # 2: open
    log.roll()
    plain(log, b"y", b"1")
    log.high_watermark = log.log_end_offset
    assert log.last_stable_offset == 2
    cleaner = LogCleaner(clock)
    assert cleaner.maybe_clean(log, T0) is None, "the only non-active segment holds an undecided transaction"
    assert [o for o, *_ in batches(log)] == [0, 1, 2, 3]
    c.end(commit=True)
    log.high_watermark = log.log_end_offset
    log.roll()
    plain(log, b"w", b"1")
    log.high_watermark = log.log_end_offset
    assert cleaner.maybe_clean(log, T0) is not None
    assert [o for o, *_ in batches(log)] == [1, 2, 3, 4, 5]


def test_a_producers_last_batch_is_kept_empty_to_keep_its_state(open_log, clock, tmp_path) -> None:
    log = open_log(CONFIG)
    a = Producer(log, A)
    a.send((b"k", b"aborted"))  # 0: A's last data batch
    a.end(commit=False)  # 1
    log.roll()
    plain(log, b"z", b"1")
    log.high_watermark = log.log_end_offset
    LogCleaner(clock).clean(log, log.segments[:-1], T0)
    assert batches(log)[:2] == [(0, A, False, []), (1, A, True, [(b"\x00\x00\x00\x00", b"\x00\x00\x00\x00\x00\x00")])]
    log.close()
    reopened = PartitionLog.open(log.directory, CONFIG, clock, recovery_point=0)
    entry = {e.producer_id: e for e in reopened.producer_state.entries()}[A]
    assert (entry.producer_epoch, entry.last_sequence, entry.current_txn_first_offset) == (0, 0, -1)
    reopened.close()

"""Rolling by segment.bytes / segment.ms / full index, retention by time and size, DeleteRecords, flushing."""

from __future__ import annotations

import pytest
from logtest_helpers import T0, append, batch, read_all

from odradek.broker.topic_config import LogConfig
from odradek.errors import ErrorCode, KafkaError


def test_rolls_when_the_next_append_would_exceed_segment_bytes(open_log):
    log = open_log(LogConfig(segment_bytes=500))
    for _ in range(20):
        append(log, 1, value=b"x" * 50)
    sizes = [s.size for s in log.segments]
    assert len(sizes) > 3 and all(size <= 500 for size in sizes)
    bases = [s.base_offset for s in log.segments]
    assert bases == sorted(bases) and bases[0] == 0
    assert [s.next_offset for s in log.segments[:-1]] == bases[1:]


def test_rolls_by_segment_ms_measured_from_the_first_batch_timestamp(open_log, clock):
    log = open_log(LogConfig(segment_ms=1000))
    append(log, 1, ts=clock.now_ms(), now=clock.now_ms())
    clock.advance(999)
    append(log, 1, ts=clock.now_ms(), now=clock.now_ms())
    assert len(log.segments) == 1
    clock.advance(2)
    append(log, 1, ts=clock.now_ms(), now=clock.now_ms())
    assert [s.base_offset for s in log.segments] == [0, 2]


def test_rolls_when_the_offset_index_is_full(open_log):
    log = open_log(LogConfig(segment_index_bytes=24, index_interval_bytes=0))
    for _ in range(12):
        append(log, 1)
    assert len(log.segments) >= 3
    assert all(len(s.offset_index) <= 3 for s in log.segments)
    assert [o for o, _, _ in read_all(log)] == list(range(12))


def test_retention_ms_deletes_old_segments_below_the_high_watermark(open_log, clock):
    log = open_log(LogConfig(segment_bytes=300, retention_ms=10_000))
    for i in range(12):
        append(log, 1, ts=T0 + i * 1000, value=b"y" * 60)
    assert len(log.segments) > 3
    clock.advance(15_000)  # now = T0 + 15 s: batches with ts < T0 + 5 s are expired
    assert log.apply_retention(clock.now_ms()) == 0  # high watermark still 0: nothing may go
    log.high_watermark = log.log_end_offset
    deleted = log.apply_retention(clock.now_ms())
    assert deleted > 0
    assert all(s.max_timestamp >= T0 + 5000 for s in log.segments[:-1])
    assert log.log_start_offset == log.segments[0].base_offset > 0
    with pytest.raises(KafkaError) as info:
        log.read(0, 100)
    assert info.value.code == ErrorCode.offset_out_of_range
    assert read_all(log)[-1][0] == 11


def test_retention_ms_can_empty_the_log_by_rolling_the_active_segment(open_log, clock):
    log = open_log(LogConfig(retention_ms=1000))
    append(log, 3, ts=T0)
    log.high_watermark = 3
    clock.advance(5000)
    assert log.apply_retention(clock.now_ms()) == 1
    assert (log.log_start_offset, log.log_end_offset) == (3, 3)
    assert append(log, 1, now=clock.now_ms()).first_offset == 3


def test_retention_bytes_keeps_the_newest_segments_within_the_limit(open_log):
    log = open_log(LogConfig(segment_bytes=400, retention_bytes=1000))
    for _ in range(30):
        append(log, 1, value=b"z" * 60)
    log.high_watermark = log.log_end_offset
    assert log.apply_retention(T0) > 0
    total = sum(s.size for s in log.segments)
    assert total - log.segments[0].size < 1000  # deleting one more would go below the limit
    assert log.log_start_offset == log.segments[0].base_offset > 0
    assert log.log_end_offset == 30


def test_compact_only_topics_are_not_deleted_by_retention(open_log, clock):
    log = open_log(LogConfig(segment_bytes=300, retention_ms=1, cleanup_policy=("compact",)))
    for _ in range(10):
        append(log, 1, key=b"k", value=b"y" * 60)
    log.high_watermark = log.log_end_offset
    clock.advance(10_000)
    assert log.apply_retention(clock.now_ms()) == 0


def test_delete_records_advances_log_start_and_drops_whole_segments(open_log):
    log = open_log(LogConfig(segment_bytes=300))
    for _ in range(20):
        append(log, 1, value=b"y" * 60)
    log.high_watermark = 15
    with pytest.raises(KafkaError) as info:
        log.delete_records_before(16, log.high_watermark)
    assert info.value.code == ErrorCode.offset_out_of_range
    second_base = log.segments[1].base_offset
    assert log.delete_records_before(second_base + 1) == second_base + 1
    assert log.segments[0].base_offset == second_base
    assert read_all(log)[0][0] == second_base + 1
    assert log.delete_records_before(-1) == 15


def test_flush_messages_moves_the_recovery_point(open_log):
    log = open_log(LogConfig(flush_messages=3))
    append(log, 1)
    append(log, 1)
    assert log.recovery_point == 0
    append(log, 1)
    assert log.recovery_point == 3


def test_flush_ms_is_applied_by_tick(open_log, clock):
    log = open_log(LogConfig(flush_ms=1000))
    append(log, 2)
    log.tick(clock.now_ms())
    assert log.recovery_point == 0
    clock.advance(1000)
    log.tick(clock.now_ms())
    assert log.recovery_point == 2


def test_rolled_segments_are_flushed_by_tick(open_log, clock):
    log = open_log(LogConfig(segment_bytes=300))
    for _ in range(10):
        append(log, 1, value=b"y" * 60)
    assert log.recovery_point == 0
    log.tick(clock.now_ms())
    assert log.recovery_point == log.segments[-1].base_offset


def test_high_watermark_is_clamped_to_the_log(open_log):
    log = open_log()
    append(log, 4)
    log.high_watermark = 100
    assert log.high_watermark == 4
    log.high_watermark = -5
    assert log.high_watermark == 0


def test_batches_with_out_of_range_timestamps_are_rejected(open_log):
    log = open_log(LogConfig(message_timestamp_before_max_ms=1000))
    buf, headers = batch(1, ts=T0 - 5000)
    with pytest.raises(KafkaError) as info:
        log.append_as_leader(buf, headers, 0, T0)
    assert info.value.code == ErrorCode.invalid_timestamp

"""Idempotent-producer checks in the log: duplicates keep their original offsets, gaps and stale epochs fail,
and the state survives a restart."""

from __future__ import annotations

import pytest
from logtest_helpers import T0, batch

from odradek.broker.topic_config import LogConfig
from odradek.errors import ErrorCode, KafkaError

PID = 4242


def produce(log, seq, n=1, epoch=0, pid=PID, **kw):
    buf, headers = batch(n, producer_id=pid, producer_epoch=epoch, base_sequence=seq, **kw)
    return log.append_as_leader(buf, headers, 0, T0)


def test_retried_batch_returns_original_offsets_and_writes_nothing(open_log):
    log = open_log()
    first = produce(log, 0, n=3)
    produce(log, 3, n=2)
    leo = log.log_end_offset
    again = produce(log, 0, n=3)
    assert again.duplicate
    assert (again.first_offset, again.last_offset) == (first.first_offset, first.last_offset)
    assert log.log_end_offset == leo


def test_only_the_last_five_batches_are_deduplicated(open_log):
    log = open_log()
    for seq in range(7):
        produce(log, seq)
    assert produce(log, 2).duplicate  # within the last five
    with pytest.raises(KafkaError) as info:
        produce(log, 1)  # fell out of the window: now it is out of order
    assert info.value.code == ErrorCode.out_of_order_sequence_number


def test_sequence_gap_is_out_of_order(open_log):
    log = open_log()
    produce(log, 0, n=2)
    with pytest.raises(KafkaError) as info:
        produce(log, 3)
    assert info.value.code == ErrorCode.out_of_order_sequence_number
    assert log.log_end_offset == 2
    assert produce(log, 2).first_offset == 2


def test_older_epoch_is_fenced_and_new_epoch_must_start_at_zero(open_log):
    log = open_log()
    produce(log, 0, epoch=1)
    with pytest.raises(KafkaError) as info:
        produce(log, 1, epoch=0)
    assert info.value.code == ErrorCode.invalid_producer_epoch
    with pytest.raises(KafkaError) as info:
        produce(log, 5, epoch=2)
    assert info.value.code == ErrorCode.out_of_order_sequence_number
    assert produce(log, 0, epoch=2).first_offset == 1
    assert not produce(log, 1, epoch=2).duplicate


def test_unknown_producer_may_start_at_any_sequence(open_log):
    log = open_log()
    assert produce(log, 17, pid=9).first_offset == 0
    assert produce(log, 18, pid=9).first_offset == 1


def test_sequence_wraps_after_int_max(open_log):
    log = open_log()
    produce(log, 2**31 - 2, n=2)
    assert produce(log, 0).first_offset == 2


def test_non_idempotent_batches_are_not_checked(open_log):
    log = open_log()
    buf, headers = batch(1)
    log.append_as_leader(buf, headers, 0, T0)
    buf, headers = batch(1)
    assert not log.append_as_leader(buf, headers, 0, T0).duplicate


def test_duplicate_detection_survives_clean_restart(open_log):
    log = open_log()
    first = produce(log, 0, n=2)
    log.close()
    reopened = open_log(recovery_point=2, clean_shutdown=True)
    again = produce(reopened, 0, n=2)
    assert again.duplicate and again.first_offset == first.first_offset


def test_duplicate_detection_survives_unclean_restart_across_segments(open_log):
    config = LogConfig(segment_bytes=400)
    log = open_log(config)
    for seq in range(20):
        produce(log, seq)
    for segment in log.segments:
        segment.close()
    reopened = open_log(config)
    assert produce(reopened, 19).duplicate
    with pytest.raises(KafkaError):
        produce(reopened, 21)
    assert produce(reopened, 20).first_offset == 20


def test_log_append_time_duplicate_reports_the_original_append_time(open_log):
    log = open_log(LogConfig(message_timestamp_type="LogAppendTime"))
    buf, headers = batch(1, producer_id=PID, producer_epoch=0, base_sequence=0)
    first = log.append_as_leader(buf, headers, 0, T0 + 5)
    buf, headers = batch(1, producer_id=PID, producer_epoch=0, base_sequence=0)
    again = log.append_as_leader(buf, headers, 0, T0 + 99)
    assert again.duplicate and again.log_append_time_ms == first.log_append_time_ms == T0 + 5


def test_a_follower_that_becomes_leader_deduplicates_the_last_five_batches(tmp_path, clock):
    """Issue 15's open anomaly asked whether a new leader keeps the producer's window: the follower builds it from
    the replicated batches, so a client retrying any of its last five in-flight batches at the new leader gets the
    original offsets, and one older than that is OUT_OF_ORDER_SEQUENCE_NUMBER, as on Kafka (a ProducerStateEntry
    keeps five batches, whatever the append's origin)."""
    from odradek.broker.log.partition_log import PartitionLog
    from odradek.protocol.records import iter_batches

    leader = PartitionLog.open(tmp_path / "leader" / "topic-0", LogConfig(), clock)
    offsets = [produce(leader, seq, n=2).first_offset for seq in range(0, 14, 2)]  # 7 batches of 2
    leader.flush()
    data = b"".join(p.read_bytes() for p in sorted((tmp_path / "leader" / "topic-0").glob("*.log")))
    follower = PartitionLog.open(tmp_path / "follower" / "topic-0", LogConfig(), clock)
    follower.append_as_follower(data, [h for _pos, h in iter_batches(data)])
    for seq in range(4, 14, 2):  # the last five batches
        buf, headers = batch(2, producer_id=PID, producer_epoch=0, base_sequence=seq)
        again = follower.append_as_leader(buf, headers, 1, T0)
        assert again.duplicate and again.first_offset == offsets[seq // 2]
    with pytest.raises(KafkaError) as info:
        buf, headers = batch(2, producer_id=PID, producer_epoch=0, base_sequence=2)
        follower.append_as_leader(buf, headers, 1, T0)
    assert info.value.code == ErrorCode.out_of_order_sequence_number
    buf, headers = batch(1, producer_id=PID, producer_epoch=0, base_sequence=14)
    assert follower.append_as_leader(buf, headers, 1, T0).first_offset == 14
    for log in (leader, follower):
        for segment in log.segments:
            segment.close()

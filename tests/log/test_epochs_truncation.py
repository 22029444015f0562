"""Leader-epoch cache (KIP-101) vectors, its checkpoint file, and follower truncation."""

from __future__ import annotations

import pytest
from logtest_helpers import T0, append, batch, read_all

from odradek.broker.log.epoch_cache import LeaderEpochCache
from odradek.broker.topic_config import LogConfig
from odradek.errors import KafkaError
from odradek.protocol.records import encode_batch, validate_produce


def _cache(*entries):
    cache = LeaderEpochCache(None)
    for epoch, start in entries:
        cache.assign(epoch, start)
    return cache


@pytest.mark.parametrize(
    ("requested", "expected"),
    [
        (-1, (-1, -1)),  # UNDEFINED_EPOCH
        (5, (5, 100)),  # latest epoch ends at the LEO
        (3, (3, 50)),  # older epoch ends where the next starts
        (4, (3, 50)),  # unknown epoch between two known: the floor epoch, with the next start
        (1, (1, 10)),  # below every known epoch: the requested epoch, ending at the first start
        (0, (0, 10)),
        (6, (-1, -1)),  # above every known epoch
    ],
)
def test_end_offset_for_epoch_vectors(requested, expected):
    cache = _cache((2, 10), (3, 20), (5, 50))
    assert cache.end_offset_for(requested, 100) == expected


def test_end_offset_for_epoch_on_an_empty_cache_is_undefined():
    assert _cache().end_offset_for(0, 10) == (-1, -1)


def test_assign_keeps_epochs_and_offsets_monotonic():
    cache = _cache((1, 0), (2, 10), (3, 20))
    cache.assign(3, 25)  # same epoch, later offset: ignored
    assert cache.entries == [(1, 0), (2, 10), (3, 20)]
    cache.assign(2, 30)  # lower epoch: entries with epoch >= 2 go
    assert cache.entries == [(1, 0), (2, 30)]
    cache.assign(4, 5)  # earlier start offset: entries starting at/after 5 go
    assert cache.entries == [(1, 0), (4, 5)]


def test_truncate_from_end_and_start():
    cache = _cache((1, 0), (2, 10), (3, 20))
    cache.truncate_from_end(15)
    assert cache.entries == [(1, 0), (2, 10)]
    cache.truncate_from_start(12)
    assert cache.entries == [(2, 12)]


def test_epoch_checkpoint_is_kafka_text_and_survives_reopen(open_log, tmp_path):
    log = open_log()
    append(log, 2, epoch=0)
    append(log, 3, epoch=4)
    text = (tmp_path / "topic-0" / "leader-epoch-checkpoint").read_text()
    assert text == "0\n2\n0 0\n4 2\n"
    log.close()
    reopened = open_log(recovery_point=5, clean_shutdown=True)
    assert reopened.epoch_entries == [(0, 0), (4, 2)]
    assert reopened.end_offset_for_epoch(0) == (0, 2)
    assert reopened.end_offset_for_epoch(4) == (4, 5)


def test_epoch_cache_is_rebuilt_from_batches_when_the_file_is_lost(open_log, tmp_path):
    log = open_log()
    append(log, 2, epoch=1)
    append(log, 1, epoch=3)
    log.close()
    (tmp_path / "topic-0" / "leader-epoch-checkpoint").unlink()
    reopened = open_log()
    assert reopened.epoch_entries == [(1, 0), (3, 2)]


def _leader_batches(spec):
    """Batches as a leader would ship them: (base offset, count, epoch) each."""
    out = bytearray()
    for base, count, epoch in spec:
        out += encode_batch([(None, b"r", [])] * count, base_offset=base, timestamp_ms=T0,
                            partition_leader_epoch=epoch)
    return out, validate_produce(out)


def test_follower_append_keeps_offsets_and_learns_epochs(open_log):
    log = open_log()
    buf, headers = _leader_batches([(0, 2, 1), (2, 3, 1), (5, 1, 2)])
    log.append_as_follower(buf, headers)
    assert log.log_end_offset == 6
    assert log.epoch_entries == [(1, 0), (2, 5)]
    with pytest.raises(KafkaError):
        buf, headers = _leader_batches([(3, 1, 2)])
        log.append_as_follower(buf, headers)


def test_truncate_to_drops_offsets_epochs_and_lowers_high_watermark(open_log):
    log = open_log(LogConfig(segment_bytes=300))
    for i in range(20):
        append(log, 1, epoch=i // 10, value=b"y" * 50)
    log.high_watermark = 20
    assert len(log.segments) > 2
    log.truncate_to(8)
    assert log.log_end_offset == 8
    assert [o for o, _, _ in read_all(log)] == list(range(8))
    assert log.epoch_entries == [(0, 0)]
    assert log.high_watermark == 8
    assert append(log, 1, epoch=2).first_offset == 8
    assert log.epoch_entries == [(0, 0), (2, 8)]


def test_truncate_is_durable_across_reopen(open_log):
    log = open_log()
    for _ in range(5):
        append(log, 2)
    log.truncate_to(6)
    log.close()
    reopened = open_log(recovery_point=6, clean_shutdown=True)
    assert reopened.log_end_offset == 6


def test_truncate_fully_and_start_at(open_log):
    log = open_log()
    append(log, 5, epoch=1)
    log.truncate_fully_and_start_at(100)
    assert (log.log_start_offset, log.log_end_offset, log.high_watermark) == (100, 100, 100)
    assert log.epoch_entries == []
    buf, headers = _leader_batches([(100, 2, 3)])
    log.append_as_follower(buf, headers)
    assert [o for o, _, _ in read_all(log)] == [100, 101]


def test_truncation_rebuilds_producer_state(open_log):
    log = open_log()
    for seq in range(4):
        buf, headers = batch(1, producer_id=7, producer_epoch=0, base_sequence=seq)
        log.append_as_leader(buf, headers, 0, T0)
    log.truncate_to(2)
    buf, headers = batch(1, producer_id=7, producer_epoch=0, base_sequence=2)
    result = log.append_as_leader(buf, headers, 0, T0)
    assert not result.duplicate and result.first_offset == 2


def test_truncation_below_the_log_start_offset_lowers_it(open_log):
    log = open_log()
    for _ in range(5):
        append(log, 2)
    log.high_watermark = 10
    log.delete_records_before(7)
    log.truncate_to(6)
    assert (log.log_start_offset, log.log_end_offset, log.high_watermark) == (6, 6, 6)
    assert append(log, 1).first_offset == 6


def test_follower_gap_beyond_int32_starts_a_new_segment(open_log):
    log = open_log()
    buf, headers = _leader_batches([(0, 2, 1)])
    log.append_as_follower(buf, headers)
    far = 3 * 2**31
    buf, headers = _leader_batches([(far, 2, 1)])
    log.append_as_follower(buf, headers)
    assert [s.base_offset for s in log.segments] == [0, far]
    assert log.log_end_offset == far + 2
    assert [o for o, _, _ in read_all(log)] == [0, 1, far, far + 1]


def test_follower_gap_from_an_empty_log_replaces_the_empty_segment(open_log, tmp_path):
    log = open_log()
    far = 2**32
    buf, headers = _leader_batches([(far, 3, 0)])
    log.append_as_follower(buf, headers)
    assert [s.base_offset for s in log.segments] == [far]
    assert not (tmp_path / "topic-0" / f"{0:020d}.log").exists()
    log.high_watermark = far + 3
    assert [o for o, _, _ in read_all(log, far)] == [far, far + 1, far + 2]


def test_a_new_leaderships_epoch_is_checkpointed_with_the_next_flush(open_log, tmp_path):
    """assign_epoch defers its checkpoint (no fsync per partition when thousands of leaderships move)."""
    checkpoint = tmp_path / "topic-0" / "leader-epoch-checkpoint"
    log = open_log()
    append(log, 2, epoch=1)
    log.flush()
    before = checkpoint.read_text()
    log.assign_epoch(7, log.log_end_offset)
    assert checkpoint.read_text() == before, "deferred until the next flush"
    assert log.latest_epoch == 7
    log.flush()
    assert checkpoint.read_text().endswith("7 2\n")


def test_a_crash_before_the_deferred_checkpoint_recovers_the_epoch_from_its_batches(open_log, tmp_path):
    log = open_log()
    append(log, 2, epoch=1)
    log.flush()
    log.assign_epoch(7, log.log_end_offset)
    append(log, 3, epoch=7)  # written in epoch 7, never flushed: the recovery point is still 2
    # a crash: nothing closed or flushed; the process's page cache survives, as it does a SIGKILL
    reopened = open_log()
    assert reopened.latest_epoch == 7
    assert reopened.end_offset_for_epoch(7) == (7, 5)
    assert reopened.end_offset_for_epoch(1) == (1, 2)

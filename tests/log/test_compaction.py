"""Compaction: latest value per key, offsets kept, tombstones dropped after delete.retention.ms, atomic swap."""

from __future__ import annotations

import os

from logtest_helpers import T0, batch, read_all

from odradek.broker.log.cleaner import LogCleaner
from odradek.broker.topic_config import LogConfig
from odradek.protocol.records import COMPRESSION_GZIP, iter_batches

CONFIG = LogConfig(cleanup_policy=("compact",), segment_bytes=600, min_cleanable_dirty_ratio=0.1)


def _produce(log, pairs, ts=T0, compression=0):
    buf, headers = batch(values=pairs, ts=ts, compression=compression)
    return log.append_as_leader(buf, headers, 0, T0)


def _fill(log, rounds=6, keys=4, compression=0):
    for r in range(rounds):
        for k in range(keys):
            _produce(log, [(f"k{k}".encode(), f"v{r}".encode() * 10)], compression=compression)
    log.high_watermark = log.log_end_offset


def _latest_by_key(records):
    out = {}
    for offset, key, value in records:
        out[key] = (offset, value)
    return out


def test_compaction_keeps_the_latest_value_per_key_at_its_offset(open_log, clock):
    log = open_log(CONFIG)
    _fill(log)
    before = read_all(log)
    segments_before = len(log.segments)
    stats = LogCleaner(clock).maybe_clean(log, clock.now_ms())
    assert stats is not None and stats.records_removed > 0
    after = read_all(log)
    assert len(after) < len(before)
    assert _latest_by_key(after) == _latest_by_key(before)
    kept = {o for o, _, _ in after}
    assert kept <= {o for o, _, _ in before}  # offsets never change
    assert len(log.segments) <= segments_before
    LogCleaner(clock).clean(log, log.segments[:-1], clock.now_ms())  # a second pass merges the now-small ones
    assert len(log.segments) < segments_before
    assert _latest_by_key(read_all(log)) == _latest_by_key(before)
    assert not any(p.name.endswith((".cleaned", ".swap")) for p in log.directory.iterdir())


def test_compaction_rewrites_batches_keeping_their_offset_span(open_log, clock):
    log = open_log(CONFIG)
    _produce(log, [(b"a", b"1"), (b"b", b"1"), (b"a", b"2")])
    _produce(log, [(b"c", b"x" * 500)])  # forces a roll
    _produce(log, [(b"d", b"1")])
    log.high_watermark = log.log_end_offset
    LogCleaner(clock).maybe_clean(log, clock.now_ms())
    data = log.segments[0].read(0, log.segments[0].size)
    headers = [h for _, h in iter_batches(data)]  # CRC-valid after the rewrite
    assert (headers[0].base_offset, headers[0].last_offset, headers[0].records_count) == (0, 2, 2)
    assert [(o, k) for o, k, _ in read_all(log)] == [(1, b"b"), (2, b"a"), (3, b"c"), (4, b"d")]


def test_gzip_batches_are_compacted_and_stay_gzip(open_log, clock):
    log = open_log(CONFIG)
    _fill(log, compression=COMPRESSION_GZIP)
    before = read_all(log)
    LogCleaner(clock).maybe_clean(log, clock.now_ms())
    after = read_all(log)
    assert _latest_by_key(after) == _latest_by_key(before) and len(after) < len(before)
    data = log.segments[0].read(0, log.segments[0].size)
    assert all(h.compression == COMPRESSION_GZIP for _, h in iter_batches(data))


def test_tombstones_survive_delete_retention_then_go(open_log, clock):
    config = LogConfig(cleanup_policy=("compact",), segment_bytes=300, min_cleanable_dirty_ratio=0.0,
                       delete_retention_ms=10_000)
    log = open_log(config)
    _produce(log, [(b"gone", b"value" * 20)])
    _produce(log, [(b"gone", None)])
    _produce(log, [(b"other", b"x" * 200)])
    _produce(log, [(b"last", b"y")])
    log.high_watermark = log.log_end_offset
    cleaner = LogCleaner(clock)
    cleaner.clean(log, log.segments[:-1], clock.now_ms())
    assert [(o, k, v) for o, k, v in read_all(log) if k == b"gone"] == [(1, b"gone", None)]
    clock.advance(20_000)
    cleaner.clean(log, log.segments[:-1], clock.now_ms())
    assert [k for _, k, _ in read_all(log)] == [b"other", b"last"]


def test_dirty_ratio_and_active_segment_are_respected(open_log, clock):
    config = LogConfig(cleanup_policy=("compact",), segment_bytes=10_000, min_cleanable_dirty_ratio=0.5)
    log = open_log(config)
    _fill(log, rounds=2)
    cleaner = LogCleaner(clock)
    assert cleaner.maybe_clean(log, clock.now_ms()) is None  # everything is in the active segment
    log.roll()
    log.high_watermark = log.log_end_offset
    assert cleaner.maybe_clean(log, clock.now_ms()) is not None
    assert cleaner.maybe_clean(log, clock.now_ms()) is None  # nothing dirty any more


def test_compacted_log_reopens_and_reads_across_gaps(open_log, clock):
    log = open_log(CONFIG)
    _fill(log)
    LogCleaner(clock).maybe_clean(log, clock.now_ms())
    after = read_all(log)
    for segment in log.segments:
        segment.close()
    reopened = open_log(CONFIG)
    assert read_all(reopened) == after
    for offset in range(reopened.log_start_offset, reopened.log_end_offset):
        assert reopened.read(offset, 1).size > 0


def test_interrupted_swap_is_completed_on_open(open_log, clock, tmp_path):
    log = open_log(CONFIG)
    _fill(log)
    expected = _latest_by_key(read_all(log))
    cleaner = LogCleaner(clock)
    original_replace = log.replace_segments

    def crash_after_swap(old, cleaned, suffix, truncations):
        cleaned.rename_suffix(suffix, ".swap")
        raise RuntimeError("simulated crash")

    log.replace_segments = crash_after_swap
    try:
        cleaner.maybe_clean(log, clock.now_ms())
    except RuntimeError:
        pass
    log.replace_segments = original_replace
    assert any(p.name.endswith(".swap") for p in log.directory.iterdir())
    for segment in log.segments:
        segment.close()
    reopened = open_log(CONFIG)
    assert not any(p.name.endswith(".swap") for p in reopened.directory.iterdir())
    assert _latest_by_key(read_all(reopened)) == expected
    offsets = [o for o, _, _ in read_all(reopened)]
    assert offsets == sorted(set(offsets))
    assert os.listdir(tmp_path)  # directory intact

"""Append/read round trips, offsets, index lookups across segments, LogAppendTime."""

from __future__ import annotations

import struct

import pytest
from logtest_helpers import T0, append, batch, read_all

from odradek.broker.log.segment import LOG_SUFFIX
from odradek.broker.topic_config import LogConfig
from odradek.errors import ErrorCode, KafkaError
from odradek.protocol.records import CorruptBatchError, decode_batch, iter_batches, whole_batches


def test_offsets_are_assigned_from_the_log_end(open_log):
    log = open_log()
    first = append(log, 3)
    second = append(log, 2)
    assert (first.first_offset, first.last_offset) == (0, 2)
    assert (second.first_offset, second.last_offset) == (3, 4)
    assert log.log_end_offset == 5
    assert [o for o, _, _ in read_all(log)] == [0, 1, 2, 3, 4]


def test_segment_bytes_are_kafka_record_batches_with_stamped_offsets(open_log, tmp_path):
    log = open_log()
    append(log, 2, epoch=7)
    append(log, 1, epoch=7)
    log.flush()
    raw = (tmp_path / "topic-0" / f"{0:020d}{LOG_SUFFIX}").read_bytes()
    headers = [h for _, h in iter_batches(raw)]  # CRC-checked
    assert [(h.base_offset, h.partition_leader_epoch) for h in headers] == [(0, 7), (2, 7)]


def test_reads_span_many_segments_and_every_offset_is_found(open_log):
    log = open_log(LogConfig(segment_bytes=2_000, index_interval_bytes=200))
    for i in range(300):
        append(log, 1 + i % 3)
    assert len(log.segments) > 10
    expected = list(range(log.log_end_offset))
    assert [o for o, _, _ in read_all(log)] == expected
    for offset in range(0, log.log_end_offset, 7):
        result = log.read(offset, 10_000)
        header, _ = decode_batch(bytes(result.buffers[0]))
        assert header.base_offset <= offset <= header.last_offset


def test_read_respects_max_bytes_min_one_and_max_offset(open_log):
    log = open_log()
    for _ in range(10):
        append(log, 1, value=b"x" * 100)
    one = log.read(0, 1)
    assert len(list(iter_batches(bytes(one.buffers[0])))) == 1
    assert log.read(0, 1, min_one=False).size == 0
    size = one.size
    three = log.read(0, size * 3 + size // 2)
    assert three.size == size * 3
    capped = log.read(0, 1 << 20, max_offset=4)
    assert [h.base_offset for _, h in iter_batches(bytes(capped.buffers[0]))] == [0, 1, 2, 3]
    assert log.read(10, 1000).size == 0


def test_out_of_range_offsets_raise(open_log):
    log = open_log()
    append(log, 2)
    with pytest.raises(KafkaError) as info:
        log.read(3, 100)
    assert info.value.code == ErrorCode.offset_out_of_range
    with pytest.raises(KafkaError):
        log.read(-1, 100)


def test_read_from_middle_of_a_batch_returns_the_whole_batch(open_log):
    log = open_log()
    append(log, 5)
    result = log.read(3, 1000)
    header, _ = decode_batch(bytes(result.buffers[0]))
    assert (header.base_offset, header.last_offset) == (0, 4)


def test_log_append_time_overrides_timestamps(open_log):
    log = open_log(LogConfig(message_timestamp_type="LogAppendTime"))
    result = append(log, 2, ts=5, now=T0 + 123)
    assert result.log_append_time_ms == T0 + 123
    header, records = decode_batch(bytes(log.read(0, 1000).buffers[0]))
    assert header.timestamp_type == 1
    assert [r.timestamp for r in records] == [T0 + 123, T0 + 123]
    assert append(log, 1).log_append_time_ms == T0


def test_create_time_keeps_producer_timestamps(open_log):
    log = open_log()
    result = append(log, 1, ts=T0 - 5)
    assert result.log_append_time_ms == -1
    _, records = decode_batch(bytes(log.read(0, 1000).buffers[0]))
    assert records[0].timestamp == T0 - 5


def test_offset_for_timestamp_uses_the_time_index_then_records(open_log):
    log = open_log(LogConfig(segment_bytes=1_500, index_interval_bytes=100))
    for i in range(100):
        buf, headers = batch(2, ts=T0 + i * 10)
        log.append_as_leader(buf, headers, 0, T0)
    assert len(log.segments) > 5
    assert log.offset_for_timestamp(T0) == (0, T0)
    assert log.offset_for_timestamp(T0 + 505) == (102, T0 + 510)
    assert log.offset_for_timestamp(T0 + 990) == (198, T0 + 990)
    assert log.offset_for_timestamp(T0 + 991) is None
    assert log.offset_for_timestamp(-1) == (200, -1)
    assert log.offset_for_timestamp(-2) == (0, -1)
    assert log.offset_for_timestamp(-3) == (198, T0 + 990)


def test_batches_larger_than_max_message_bytes_are_rejected(open_log):
    log = open_log(LogConfig(max_message_bytes=200))
    with pytest.raises(KafkaError) as info:
        append(log, 1, value=b"x" * 500)
    assert info.value.code == ErrorCode.message_too_large
    assert log.log_end_offset == 0


def test_index_files_hold_kafka_layout(open_log, tmp_path):
    log = open_log(LogConfig(index_interval_bytes=100))
    for _ in range(20):
        append(log, 1, value=b"y" * 150)
    log.flush()
    raw = (tmp_path / "topic-0" / f"{0:020d}.index").read_bytes()
    entries = [struct.unpack_from(">ii", raw, i) for i in range(0, len(raw), 8)]
    assert entries and all(rel > 0 for rel, _ in entries)
    data = (tmp_path / "topic-0" / f"{0:020d}{LOG_SUFFIX}").read_bytes()
    for rel, position in entries:
        header = next(iter_batches(data, start=position))[1]
        assert header.last_offset == rel
    traw = (tmp_path / "topic-0" / f"{0:020d}.timeindex").read_bytes()
    assert len(traw) % 12 == 0 and len(traw) > 0


def test_random_reads_match_a_model_of_the_log(open_log):
    """Every read returns whole batches, starts at the batch holding the offset, stops exactly where max_bytes,
    max_offset or the segment end says, and includes one batch regardless of max_bytes when min_one."""
    import random

    rng = random.Random(7)
    log = open_log(LogConfig(segment_bytes=3_000, index_interval_bytes=300))
    for _ in range(150):
        buf, headers = batch(rng.randint(1, 4), value=b"v" * rng.randint(1, 200))
        log.append_as_leader(buf, headers, 0, T0)
    model = []  # (base offset, last offset, size, segment base) per batch, in log order
    for segment in log.segments:
        data = segment.read(0, segment.size)
        model.extend((h.base_offset, h.last_offset, h.size, segment.base_offset) for _, h in iter_batches(data))
    leo = log.log_end_offset
    for _ in range(400):
        offset = rng.randrange(leo)
        max_bytes = rng.choice([1, rng.randint(1, 4000), 1 << 20])
        max_offset = rng.choice([None, rng.randint(offset, leo)])
        min_one = rng.random() < 0.7
        result = log.read(offset, max_bytes, max_offset, min_one)
        got = [(h.base_offset, h.last_offset, h.size) for _, h in iter_batches(bytes(result.buffers[0]))] \
            if result.size else []
        start = next(i for i, b in enumerate(model) if b[1] >= offset)
        limit = leo if max_offset is None else max_offset
        expected = []
        total = 0
        for base, last, size, seg in model[start:] if offset < limit else []:
            if seg != model[start][3] or base >= limit:
                break
            if total + size > max_bytes and not (min_one and not expected):
                break
            expected.append((base, last, size))
            total += size
        assert got == expected, (offset, max_bytes, max_offset, min_one)
        assert result.size == sum(b[2] for b in got)


def test_a_fetch_response_cut_inside_its_last_batch_yields_the_whole_batches_before_it(open_log, tmp_path):
    """A Kafka leader fills a Fetch response to the byte limit and may cut the last batch short; a follower keeps
    the whole batches and fetches the rest next time. A first batch cut short is still corrupt."""
    log = open_log()
    for _ in range(3):
        append(log, 4)
    log.flush()
    raw = (tmp_path / "topic-0" / f"{0:020d}{LOG_SUFFIX}").read_bytes()
    sizes = [h.size for _, h in iter_batches(raw)]
    cut = raw[:sizes[0] + sizes[1] + 10]
    assert whole_batches(cut)[0] == sizes[0] + sizes[1]
    assert [h.base_offset for _position, h in whole_batches(cut)[1]] == [0, 4]
    assert whole_batches(raw) == (len(raw), list(iter_batches(raw)))
    with pytest.raises(CorruptBatchError):
        whole_batches(raw[:sizes[0] - 1])
    damaged = bytearray(raw)
    damaged[sizes[0] + 30] ^= 0xFF  # inside the second batch's CRC-covered bytes
    with pytest.raises(CorruptBatchError):
        whole_batches(damaged)

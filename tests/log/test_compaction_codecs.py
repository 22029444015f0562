"""Compaction of snappy, lz4 and zstd batches: superseded records go, the rest come back in the batch's own codec
and framing, byte-identical, under a valid CRC, readable by a real consumer."""

from __future__ import annotations

import random
import time
from pathlib import Path

import cramjam
import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from logtest_helpers import T0, compressed_batch

from brokers import BrokerProcess
from kafka_clients import opened
from odradek.broker.log.cleaner import LogCleaner
from odradek.broker.log.partition_log import PartitionLog
from odradek.broker.topic_config import LogConfig
from odradek.clock import ManualClock
from odradek.protocol.records import (
    COMPRESSION_LZ4,
    COMPRESSION_SNAPPY,
    COMPRESSION_ZSTD,
    HEADER_SIZE,
    Record,
    decode_batch,
    iter_batches,
)

CONFIG = LogConfig(cleanup_policy=("compact",), segment_bytes=700, min_cleanable_dirty_ratio=0.1)
XERIAL_MAGIC = b"\x82SNAPPY\x00"

CODECS = [
    pytest.param(COMPRESSION_SNAPPY, False, id="snappy-raw"),
    pytest.param(COMPRESSION_SNAPPY, True, id="snappy-xerial"),
    pytest.param(COMPRESSION_LZ4, False, id="lz4"),
    pytest.param(COMPRESSION_ZSTD, False, id="zstd"),
]


def _log_batches(log: PartitionLog) -> list[tuple[bytes, list[Record]]]:
    """Every batch on disk as (raw bytes, records); iter_batches checks each CRC on the way."""
    out = []
    for segment in log.segments:
        data = segment.read(0, segment.size)
        for position, header in iter_batches(data):
            out.append((bytes(data[position : position + header.size]), decode_batch(data, position)[1]))
    return out


def _records(log: PartitionLog) -> dict[int, tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]]]]:
    return {r.offset: (r.key, r.value, r.headers) for _, records in _log_batches(log) for r in records}


@pytest.mark.parametrize(("codec", "xerial"), CODECS)
def test_compressed_batches_are_compacted_in_their_own_codec(open_log, clock, codec, xerial):
    log = open_log(CONFIG)
    for r in range(6):
        # Each batch updates two keys and repeats one of them, so records go both within and across batches.
        batch = [
            (f"k{r % 3}".encode(), f"old{r}".encode() * 8, [("h", b"x"), ("n", None)]),
            (f"k{(r + 1) % 3}".encode(), f"v{r}".encode() * 8, [("trace", bytes([r, 0, 255]))]),
            (f"k{r % 3}".encode(), f"new{r}".encode() * 8, []),
        ]
        buf, headers = compressed_batch(batch, codec, xerial=xerial)
        log.append_as_leader(buf, headers, 0, T0)
    log.high_watermark = log.log_end_offset
    before = _records(log)
    cleanable = log.segments[:-1]
    cleaned_through = cleanable[-1].next_offset
    # The cleaned segments keep each key's last record among them; the active segment is left alone.
    latest = {key: offset for offset, (key, _, _) in sorted(before.items()) if offset < cleaned_through}

    stats = LogCleaner(clock).clean(log, cleanable, clock.now_ms())

    assert stats is not None and stats.records_removed > 0
    after = _records(log)  # CRCs validated while reading
    expected = {o: rec for o, rec in before.items() if o >= cleaned_through or latest[rec[0]] == o}
    assert after == expected  # superseded keys gone; keys, values and headers of the rest unchanged
    for raw, records in _log_batches(log):
        payload = raw[HEADER_SIZE:]
        assert raw[22] & 0x07 == codec
        assert payload.startswith(XERIAL_MAGIC) == xerial
        if codec == COMPRESSION_LZ4:
            flg, bd = payload[4], payload[5]
            assert flg & 0xC0 == 0x40 and flg & 0x20, "version 01 with independent blocks (the Java client's rule)"
            assert 4 <= bd >> 4 <= 7
        assert records


def test_snappy_xerial_rewrite_splits_large_bodies_into_blocks(open_log, clock):
    """snappy-java reads a framed stream block by block; a rewritten batch keeps blocks of at most 32 KiB input."""
    log = open_log(LogConfig(cleanup_policy=("compact",), segment_bytes=200_000, min_cleanable_dirty_ratio=0.1))
    rng = random.Random(7)
    values = [rng.randbytes(20_000) for _ in range(4)]
    buf, headers = compressed_batch([(b"dup", b"first", []), *[(f"big{i}".encode(), v, []) for i, v in
                                     enumerate(values)], (b"dup", b"second", [])], COMPRESSION_SNAPPY, xerial=True)
    log.append_as_leader(buf, headers, 0, T0)
    log.roll()
    log.high_watermark = log.log_end_offset
    LogCleaner(clock).clean(log, log.segments[:-1], clock.now_ms())
    [(raw, records)] = _log_batches(log)
    assert [r.key for r in records] == [b"big0", b"big1", b"big2", b"big3", b"dup"]
    assert [r.value for r in records] == [*values, b"second"]
    payload, pos, blocks = raw[HEADER_SIZE:], 16, 0
    while pos < len(payload):
        n = int.from_bytes(payload[pos : pos + 4], "big")
        assert len(cramjam.snappy.decompress_raw(payload[pos + 4 : pos + 4 + n])) <= 32 * 1024
        pos, blocks = pos + 4 + n, blocks + 1
    assert pos == len(payload) and blocks > 1


# --- a real client on both ends ----------------------------------------------------------------------------

CLIENT_CODECS = {"snappy": COMPRESSION_SNAPPY, "lz4": COMPRESSION_LZ4, "zstd": COMPRESSION_ZSTD}
KEYS, ROUNDS = 5, 40


def _consume_all(bootstrap: str, topic: str) -> list[tuple[int, bytes, bytes, list[tuple[str, bytes]]]]:
    consumer = opened(Consumer({"bootstrap.servers": bootstrap, "group.id": f"read-{topic}",
                                "enable.auto.commit": False}))
    try:
        _, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=20)
        consumer.assign([TopicPartition(topic, 0, 0)])
        out = []
        deadline = time.monotonic() + 30
        while (not out or out[-1][0] < high - 1) and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            out.append((msg.offset(), msg.key(), msg.value(), msg.headers() or []))
        return out
    finally:
        consumer.close()


def test_client_compressed_topics_compact_and_stay_readable(broker: BrokerProcess):
    """librdkafka compresses; the cleaner compacts the stopped broker's logs; librdkafka reads them back."""
    admin = opened(AdminClient({"bootstrap.servers": broker.bootstrap}))
    # A day of min.compaction.lag keeps the broker's own cleaner away, so this test decides when compaction runs.
    topic_config = {"cleanup.policy": "compact", "segment.bytes": "400", "min.compaction.lag.ms": "86400000"}
    futures = admin.create_topics([NewTopic(f"cz-{name}", 1, 1, config=topic_config) for name in CLIENT_CODECS])
    for future in futures.values():
        future.result(20)
    produced: dict[str, list[tuple[bytes, bytes, list[tuple[str, bytes]]]]] = {}
    for name in CLIENT_CODECS:
        producer = opened(Producer({"bootstrap.servers": broker.bootstrap, "compression.type": name, "linger.ms": 50,
                                    "batch.num.messages": 4}))
        sent = []
        for r in range(ROUNDS):
            key, value = f"key-{r % KEYS}".encode(), f"{name}-round-{r}-".encode() * 6
            headers = [("round", str(r).encode()), ("codec", name.encode())]
            producer.produce(f"cz-{name}", value, key, headers=headers)
            sent.append((key, value, headers))
        assert producer.flush(20) == 0
        produced[name] = sent
    broker.stop()

    clock = ManualClock(int(time.time() * 1000))
    cleaned_through: dict[str, int] = {}
    for name, codec in CLIENT_CODECS.items():
        [directory] = [p for p in Path(broker.data_dir).rglob(f"cz-{name}-0") if p.is_dir()]
        log = PartitionLog.open(directory, LogConfig(cleanup_policy=("compact",), segment_bytes=2000), clock)
        try:
            batches = _log_batches(log)
            assert {raw[22] & 0x07 for raw, _ in batches} == {codec}
            assert any(len(records) > 1 for _, records in batches), "librdkafka batched several records"
            assert len(log.segments) > 2
            cleaned_through[name] = log.segments[-2].next_offset
            stats = LogCleaner(clock).clean(log, log.segments[:-1], clock.now_ms())
            assert stats is not None and stats.records_removed > 0
            assert {raw[22] & 0x07 for raw, _ in _log_batches(log)} == {codec}  # CRCs checked too
        finally:
            for segment in log.segments:
                segment.close()

    broker.start()
    for name in CLIENT_CODECS:
        consumed = _consume_all(broker.bootstrap, f"cz-{name}")
        sent = produced[name]
        # The cleaned segments keep only each key's last record among them; the active segment is untouched.
        last_cleaned = {key: o for o, (key, _, _) in enumerate(sent[: cleaned_through[name]])}
        expected = sorted(set(last_cleaned.values()) | set(range(cleaned_through[name], len(sent))))
        assert [o for o, _, _, _ in consumed] == expected, f"{name}: superseded keys survived or records went"
        for offset, key, value, headers in consumed:
            assert (key, value, headers) == sent[offset], f"{name}: record at {offset} changed"

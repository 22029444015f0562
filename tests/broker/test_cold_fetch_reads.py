"""A fetch whose data has left the page cache reads the disk on a worker thread, so the event loop keeps serving.

The log's reads on the event loop ask the page cache only (``RWF_NOWAIT``); data away from the log's tail that is
not cached is read again on a thread. The test writes a topic whose first segment rolls, pushes that segment's pages
out of the page cache (fsync, then ``POSIX_FADV_DONTNEED``), and makes reads of that segment block until the test
lets them go: a disk that does not answer. A consumer fetching from offset 0 then waits on that read, and while it
does, the broker's event loop must still run other work; once the disk answers, the consumer gets its records.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as ClientPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kafka_clients import opened
from odradek.broker.log.partition_log import PartitionLog
from odradek.broker.log.segment import LogSegment, WouldBlock
from odradek.broker.topic_config import LogConfig
from odradek.clock import ManualClock
from odradek.protocol.records import encode_batch, validate_produce
from odradek.testing import FAST_TEST_OVERRIDES, ThreadedCluster

pytestmark = pytest.mark.skipif(not hasattr(os, "RWF_NOWAIT") or not hasattr(os, "posix_fadvise"),
                                reason="needs Linux's RWF_NOWAIT and posix_fadvise")


def _evict(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def test_a_fetch_waiting_for_the_disk_leaves_the_event_loop_free(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    cluster = ThreadedCluster(1, tmp_path / "data", overrides=dict(FAST_TEST_OVERRIDES)).start()
    try:
        topic = f"cold-{uuid.uuid4().hex[:8]}"
        admin = opened(AdminClient({"bootstrap.servers": cluster.bootstrap}))
        admin.create_topics([NewTopic(topic, 1, 1, config={"segment.bytes": "65536"})])[topic].result(60)
        # batches well under segment.bytes, so the first segment rolls
        producer = opened(Producer({"bootstrap.servers": cluster.bootstrap, "linger.ms": 0, "batch.size": 8192}))
        failed: list[object] = []
        for i in range(200):
            producer.produce(topic, b"%03d" % i + b"x" * 1021, on_delivery=lambda err, _m: err and failed.append(err))
        assert producer.flush(60) == 0 and not failed

        broker = cluster.cluster.brokers[0]
        plog: PartitionLog = cluster.run(lambda: broker.replicas.partition(topic, 0).log)
        cluster.run(plog.flush)
        first = plog.segments[0]
        assert len(plog.segments) > 1, "the first segment rolled"
        _evict(first.log_path)

        disk_answers = threading.Event()
        read_started = threading.Event()
        readers: list[str] = []
        plain_read = LogSegment.read

        def slow_disk(self: LogSegment, position: int, length: int) -> bytes:
            if self is first:
                readers.append(threading.current_thread().name)
                read_started.set()
                disk_answers.wait(60)  # bounded: without the worker thread the test must fail, not hang
            return plain_read(self, position, length)

        monkeypatch.setattr(LogSegment, "read", slow_disk)
        consumer = opened(Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": f"g-{topic}",
                                    "enable.auto.commit": False}))
        consumer.assign([ClientPartition(topic, 0, 0)])
        got: list[bytes] = []

        def consume() -> None:
            deadline = time.monotonic() + 120
            while len(got) < 200 and time.monotonic() < deadline:
                m = consumer.poll(0.1)
                if m is not None and not m.error():
                    got.append(m.value())

        reader = threading.Thread(target=consume, daemon=True)
        reader.start()
        try:
            assert read_started.wait(60), "the consumer's fetch reached the evicted segment"

            async def serving() -> bool:
                await asyncio.sleep(0)
                return True

            # the loop runs other work while the fetch waits for the disk (a deadline, not a timing)
            assert asyncio.run_coroutine_threadsafe(serving(), cluster.loop).result(30)
            assert broker.replicas.partition(topic, 0).log is plog
        finally:
            disk_answers.set()
        reader.join(60)
        assert not reader.is_alive()
        assert [v[:3] for v in got[:3]] == [b"000", b"001", b"002"] and len(got) == 200
        assert readers and "odradek-cluster-loop" not in readers
    finally:
        cluster.close()


def test_a_read_of_an_evicted_segment_asks_for_a_thread_and_a_cached_one_does_not(tmp_path: Path) -> None:
    """The log's non-blocking read: WouldBlock only for data the page cache does not hold."""
    plog = PartitionLog.open(tmp_path / "t-0", LogConfig(segment_bytes=4096), ManualClock())
    try:
        for _ in range(8):
            buf = encode_batch([(None, b"v" * 1000, [])], timestamp_ms=0)
            plog.append_as_leader(buf, validate_produce(buf), 0, 0)
        plog.flush()
        plog.flush_rolled_segments()
        assert len(plog.segments) > 1
        assert plog.read(0, 1 << 20, nowait=True).size > 0, "just written: cached"
        _evict(plog.segments[0].log_path)
        with pytest.raises(WouldBlock):
            plog.read(0, 1 << 20, nowait=True)
        assert plog.read(0, 1 << 20).size > 0, "a plain read reads the disk"
        assert plog.read(0, 1 << 20, nowait=True).size > 0, "and the data is cached again"
    finally:
        for segment in plog.segments:
            segment.close()

"""READ_COMMITTED through the wire: raw Fetch and ListOffsets requests against an in-process broker whose partition
holds transactional data and markers (written as the produce path and the coordinator's marker writer write them).

The broker runs on its own event-loop thread (tests/cluster/harness.py); the log is driven on that loop, the requests
go over a socket as a consumer's would.
"""

from __future__ import annotations

import datetime
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from kio.index import load_request_schema

from brokers import wait_for
from cluster.harness import ThreadedCluster
from kafka_clients import opened
from odradek.client import KafkaConnection
from odradek.errors import ErrorCode
from odradek.placement.model import TopicPartition
from odradek.protocol.records import encode_batch, iter_batches, validate_produce

TOPIC = "rc"
A, B = 7001, 7002


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[ThreadedCluster]:
    c = ThreadedCluster(1, tmp_path / "cluster", overrides={"zookeeper.session.timeout.ms": "2000"}).start()
    try:
        admin = opened(AdminClient({"bootstrap.servers": c.bootstrap}))
        admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(30)
        wait_for(lambda: _partition(c) is not None and _partition(c).is_leader, what="a leader for the topic")
        yield c
    finally:
        c.close()


def _partition(c: ThreadedCluster) -> Any:
    return c.run(lambda: next((b.replicas.partitions.get(TopicPartition(TOPIC, 0))
                               for b in c.cluster.brokers.values()), None))


class Writer:
    """Appends on the broker's loop as Produce (after its checks) and WriteTxnMarkers do."""

    def __init__(self, c: ThreadedCluster) -> None:
        self.c, self.part, self.seq = c, _partition(c), {A: 0, B: 0}

    def send(self, pid: int, n: int = 1, later_ms: int = 0) -> int:
        buf = encode_batch([(None, b"%d-%d" % (pid, self.seq[pid] + i), []) for i in range(n)],
                           timestamp_ms=int(time.time() * 1000) + later_ms, producer_id=pid, producer_epoch=0,
                           base_sequence=self.seq[pid], transactional=True)
        self.seq[pid] += n
        return self.c.run(lambda: self.part.append_as_leader(buf, validate_produce(buf),
                                                             self.part.clock.now_ms()).first_offset)

    def end(self, pid: int, commit: bool) -> int:
        return self.c.run(lambda: self.part.write_txn_marker(pid, 0, 0, commit))


def _make(cls: Any, **fields: Any) -> Any:
    """A kio entity of whatever version ``cls`` is, from the fields that version has."""
    return cls(**{k: v for k, v in fields.items() if k in cls.__dataclass_fields__})


def _fetch(conn: KafkaConnection, version: int, isolation: int, offset: int = 0, max_wait_ms: int = 0) -> Any:
    cls = load_request_schema(1, version)
    mod = sys.modules[cls.__module__]
    partition = _make(mod.FetchPartition, partition=0, current_leader_epoch=-1, fetch_offset=offset,
                      log_start_offset=-1, partition_max_bytes=1 << 20)
    request = _make(
        cls, replica_id=-1, max_wait=datetime.timedelta(milliseconds=max_wait_ms), min_bytes=1, max_bytes=1 << 20,
        isolation_level=isolation, session_id=0, session_epoch=-1,
        topics=(mod.FetchTopic(topic=TOPIC, partitions=(partition,)),), forgotten_topics_data=(), rack_id="",
    )
    return conn.request(1, request, version).responses[0].partitions[0]


def _offsets(records: bytes | None) -> list[tuple[int, bool]]:
    data = bytes(records or b"")
    return [(h.base_offset, h.is_control) for _, h in iter_batches(data)]


@pytest.mark.parametrize("version", [4, 11, 12])
def test_read_committed_fetch_stops_at_the_lso_and_lists_aborted_transactions(cluster, version) -> None:
    w = Writer(cluster)
    w.send(A, 2)  # 0-1
    w.send(B)  # 2
    w.end(A, commit=False)  # 3
    w.send(B)  # 4: B still open
    with KafkaConnection(cluster.bootstrap) as conn:
        wait_for(lambda: _fetch(conn, version, 0).high_watermark == 5, what="the high watermark")
        committed = _fetch(conn, version, 1)
        assert committed.error_code == ErrorCode.none
        assert (committed.high_watermark, committed.last_stable_offset) == (5, 2)
        assert _offsets(committed.records) == [(0, False)], "only what lies before B's open transaction"
        assert [(t.producer_id, t.first_offset) for t in committed.aborted_transactions] == [(A, 0)]

        uncommitted = _fetch(conn, version, 0)
        assert uncommitted.last_stable_offset == 2
        assert uncommitted.aborted_transactions is None
        assert _offsets(uncommitted.records) == [(0, False), (2, False), (3, True), (4, False)]

        w.end(B, commit=True)  # 5
        wait_for(lambda: _fetch(conn, version, 1).last_stable_offset == 6, what="the LSO past B's commit")
        after = _fetch(conn, version, 1, offset=4)
        assert _offsets(after.records) == [(4, False), (5, True)]
        assert after.aborted_transactions == (), "nothing aborted overlaps offsets 4-5"


def test_list_offsets_latest_is_the_lso_under_read_committed(cluster) -> None:
    w = Writer(cluster)
    w.send(A)
    w.send(B, 2, later_ms=60_000)  # the largest timestamp of the partition
    w.end(A, commit=True)
    cls = load_request_schema(2, 7)
    mod = sys.modules[cls.__module__]

    def latest(isolation: int, timestamp: int = -1) -> int:
        request = cls(replica_id=-1, isolation_level=isolation, topics=(mod.ListOffsetsTopic(
            name=TOPIC, partitions=(mod.ListOffsetsPartition(partition_index=0, current_leader_epoch=-1,
                                                              timestamp=timestamp),)),))
        with KafkaConnection(cluster.bootstrap) as conn:
            part = conn.request(2, request, 7).topics[0].partitions[0]
        assert part.error_code == ErrorCode.none
        return int(part.offset)

    wait_for(lambda: latest(0) == 4, what="the high watermark")
    assert latest(1) == 1, "B's transaction, open from offset 1, holds read_committed back"
    assert latest(0, -3) == 1, "the first record with the largest timestamp (B sent two with one timestamp)"
    assert latest(1, -3) == -1, "under read_committed that record is past the LSO"
    w.end(B, commit=False)
    wait_for(lambda: latest(1) == 5, what="the LSO after B's abort")


def test_a_long_polling_read_committed_fetch_wakes_when_the_lso_moves(cluster) -> None:
    w = Writer(cluster)
    w.send(A, 3)
    part = w.part
    result: dict[str, Any] = {}
    with KafkaConnection(cluster.bootstrap, timeout=60) as conn:
        wait_for(lambda: _fetch(conn, 12, 0).high_watermark == 3, what="the high watermark")

        def poll() -> None:
            # Far longer than the test waits: only a wake-up answers it in time.
            result["response"] = _fetch(conn, 12, 1, max_wait_ms=600_000)

        thread = threading.Thread(target=poll, daemon=True)
        thread.start()
        wait_for(lambda: cluster.run(lambda: len(part._stable_waiters)) == 1, what="the fetch to park")
        w.end(A, commit=True)
        thread.join(30)
    assert not thread.is_alive(), "the fetch was not woken by the commit marker"
    response = result["response"]
    assert response.last_stable_offset == 4
    assert _offsets(response.records) == [(0, False), (3, True)]


def test_transactional_produce_needs_a_transactional_id_and_an_added_partition(cluster) -> None:
    cls = load_request_schema(0, 9)
    mod = sys.modules[cls.__module__]
    batch = bytes(encode_batch([(None, b"x", [])], timestamp_ms=0, producer_id=A, producer_epoch=0,
                               base_sequence=0, transactional=True))

    def produce(transactional_id: str | None, records: bytes = batch) -> Any:
        request = cls(transactional_id=transactional_id, acks=-1, timeout=datetime.timedelta(seconds=5),
                      topic_data=(mod.TopicProduceData(name=TOPIC, partition_data=(
                          mod.PartitionProduceData(index=0, records=records),)),))
        with KafkaConnection(cluster.bootstrap) as conn:
            return conn.request(0, request, 9).responses[0].partition_responses[0]

    assert produce(None).error_code == ErrorCode.transactional_id_authorization_failed
    # A client may not write a control record, marker-shaped or not.
    control = bytes(encode_batch([(b"\x00\x00\x00\x01", b"\x00\x00\x00\x00\x00\x00", [])], timestamp_ms=0,
                                 producer_id=A, producer_epoch=0, base_sequence=0, control=True))
    assert produce(None, control).error_code == ErrorCode.invalid_record
    # The coordinator of "nobody" (FindCoordinator creates __transaction_state, as a transactional client's first
    # request does) has no such transaction: the partition was never added, and nothing is written.
    find = load_request_schema(10, 4)

    def coordinator_ready() -> bool:
        with KafkaConnection(cluster.bootstrap) as conn:
            return bool(conn.request(10, find(key_type=1, coordinator_keys=("nobody",)), 4)
                        .coordinators[0].error_code == ErrorCode.none)

    wait_for(coordinator_ready, what="a transaction coordinator")
    code = wait_for(lambda: (c := produce("nobody").error_code) != ErrorCode.not_enough_replicas and c,
                    what="the coordinator's answer (NOT_ENOUGH_REPLICAS while it loads)")
    assert code in (ErrorCode.invalid_txn_state, ErrorCode.invalid_producer_id_mapping)
    part = _partition(cluster)
    assert cluster.run(lambda: part.log.log_end_offset) == 0


def test_follower_replicates_the_markers_and_serves_the_same_aborted_list_after_failover(tmp_path: Path) -> None:
    """RF 2: the follower's fetcher applies the leader's markers (its .txnindex is the leader's, byte for byte);
    when the leader stops, the new leader answers READ_COMMITTED exactly as the old one did."""
    c = ThreadedCluster(2, tmp_path / "two", overrides={"zookeeper.session.timeout.ms": "2000",
                                                        "replica.lag.time.max.ms": "3000"}).start()
    try:
        admin = opened(AdminClient({"bootstrap.servers": c.bootstrap}))
        admin.create_topics([NewTopic(TOPIC, 1, 2)])[TOPIC].result(30)
        wait_for(lambda: c.full_isr(TOPIC, 1), what="both replicas in the ISR")
        leader_id = c.leader_of(TOPIC, 0)
        follower_id = next(b for b in c.cluster.brokers if b != leader_id)
        leader = c.run(lambda: c.broker(leader_id).replicas.partitions[TopicPartition(TOPIC, 0)])
        follower = c.run(lambda: c.broker(follower_id).replicas.partitions[TopicPartition(TOPIC, 0)])
        w = Writer(c)
        w.part = leader
        w.send(A, 2)  # 0-1
        w.send(B)  # 2
        w.end(A, commit=False)  # 3
        w.send(B)  # 4: open
        wait_for(lambda: c.run(lambda: follower.log.log_end_offset) == 5, what="the follower to catch up")
        wait_for(lambda: c.run(lambda: leader.high_watermark) == 5, what="the high watermark")
        index = f"{0:020d}.txnindex"
        assert (follower.log.directory / index).read_bytes() == (leader.log.directory / index).read_bytes() != b""
        def address(broker_id: int) -> str:
            return c.run(lambda: f"{c.broker(broker_id).host}:{c.broker(broker_id).port}")

        with KafkaConnection(address(leader_id)) as conn:
            before = _fetch(conn, 12, 1)
        assert (before.last_stable_offset, [(t.producer_id, t.first_offset) for t in before.aborted_transactions]) \
            == (2, [(A, 0)])

        c.stop_broker(leader_id)
        wait_for(lambda: c.run(lambda: follower.is_leader), what="the follower to take over")

        def answer() -> Any:
            with KafkaConnection(address(follower_id)) as conn:
                part = _fetch(conn, 12, 1)
            return part.error_code == ErrorCode.none and part.high_watermark == 5 and part

        after = wait_for(answer, what="the new leader's answer")
        assert after.last_stable_offset == 2, "B's transaction is still open on the new leader"
        assert [(t.producer_id, t.first_offset) for t in after.aborted_transactions] == [(A, 0)]
        assert _offsets(after.records) == _offsets(before.records)
    finally:
        c.close()

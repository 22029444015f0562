"""Incremental fetch sessions (KIP-227) on the wire: raw Fetch requests against an in-process broker, whose session
cache the tests read, with records produced by confluent-kafka."""

from __future__ import annotations

import datetime
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kio.index import load_request_schema

from brokers import wait_for
from cluster.harness import ThreadedCluster
from kafka_clients import opened
from odradek.client import KafkaConnection
from odradek.errors import ErrorCode

TOPIC = "sessions"
PARTITIONS = 3


def _start(tmp_path: Path, **overrides: str) -> ThreadedCluster:
    c = ThreadedCluster(1, tmp_path / "cluster", overrides={"zookeeper.session.timeout.ms": "2000", **overrides})
    c.start()
    admin = opened(AdminClient({"bootstrap.servers": c.bootstrap}))
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(30)
    wait_for(lambda: c.leader_of(TOPIC, PARTITIONS - 1) == 0, what="leaders for the topic")
    return c


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[ThreadedCluster]:
    c = _start(tmp_path)
    try:
        yield c
    finally:
        c.close()


def _produce(c: ThreadedCluster, partition: int, n: int = 1) -> None:
    p = opened(Producer({"bootstrap.servers": c.bootstrap, "linger.ms": 0}))
    for i in range(n):
        p.produce(TOPIC, b"v%d" % i, partition=partition)
    assert p.flush(30) == 0


class Fetcher:
    """A consumer speaking Fetch by hand at one version: full or incremental requests, session id and epoch."""

    def __init__(self, c: ThreadedCluster, version: int, replica_id: int = -1) -> None:
        self.c = c
        self.replica_id = replica_id
        self.conn = KafkaConnection(c.bootstrap)
        self.version = version
        self.cls = load_request_schema(1, version)
        self.mod = sys.modules[self.cls.__module__]
        self.topic_id = c.run(lambda: c.cluster.brokers[0].metadata.topics[TOPIC].topic_id)

    def _topic(self, **fields: Any) -> dict[str, Any]:
        return {"topic_id": self.topic_id} if self.version >= 13 else {"topic": TOPIC} | fields

    def fetch(self, session_id: int, epoch: int, offsets: dict[int, int], forget: tuple[int, ...] = (),
              max_wait_s: float = 0) -> Any:
        mod = self.mod
        parts = tuple(
            _make(mod.FetchPartition, partition=p, current_leader_epoch=-1, fetch_offset=o, log_start_offset=-1,
                  last_fetched_epoch=-1, partition_max_bytes=1 << 20)
            for p, o in offsets.items()
        )
        topics = (mod.FetchTopic(**self._topic(), partitions=parts),) if parts else ()
        forgotten = (mod.ForgottenTopic(**self._topic(), partitions=forget),) if forget else ()
        request = _make(
            self.cls, replica_id=self.replica_id, max_wait=datetime.timedelta(seconds=max_wait_s), min_bytes=1,
            max_bytes=1 << 20,
            isolation_level=0, session_id=session_id, session_epoch=epoch, topics=topics,
            forgotten_topics_data=forgotten, rack_id="", cluster_id=None,
        )
        return self.conn.request(1, request, self.version)

    def close(self) -> None:
        self.conn.close()


def _make(cls: Any, **fields: Any) -> Any:
    return cls(**{k: v for k, v in fields.items() if k in cls.__dataclass_fields__})


def _answered(response: Any) -> dict[int, Any]:
    return {p.partition_index: p for t in response.responses for p in t.partitions}


def _session(c: ThreadedCluster, session_id: int) -> Any:
    return c.run(lambda: c.cluster.brokers[0].services.fetch_sessions.get(session_id))


@pytest.mark.parametrize("version", [12, 13])
def test_an_incremental_fetch_answers_only_what_changed(cluster, version) -> None:
    f = Fetcher(cluster, version)
    try:
        full = f.fetch(0, 0, {0: 0, 1: 0, 2: 0})
        sid = full.session_id
        assert full.error_code == ErrorCode.none and sid != 0
        assert sorted(_answered(full)) == [0, 1, 2]
        assert _session(cluster, sid).size == 3

        quiet = f.fetch(sid, 1, {})
        assert (quiet.error_code, quiet.session_id, _answered(quiet)) == (ErrorCode.none, sid, {})

        _produce(cluster, 1, 3)
        changed = _answered(f.fetch(sid, 2, {}))  # the session remembers offset 0 for partition 1
        assert list(changed) == [1] and changed[1].high_watermark == 3 and changed[1].records

        # the fetcher moves on; nothing new, so nothing is answered
        assert _answered(f.fetch(sid, 3, {1: 3})) == {}
        _produce(cluster, 0)
        assert list(_answered(f.fetch(sid, 4, {}))) == [0]

        # forgotten partitions leave the session; the last one gone closes it
        f.fetch(sid, 5, {}, forget=(0, 1))
        assert _session(cluster, sid).size == 1
        last = f.fetch(sid, 6, {}, forget=(2,))
        assert last.session_id == 0 and _session(cluster, sid) is None
    finally:
        f.close()


def _dirty(c: ThreadedCluster, session_id: int) -> list[int]:
    return c.run(lambda: [e.partition for e in c.cluster.brokers[0].services.fetch_sessions.get(session_id).dirty])


def test_an_idle_incremental_fetch_reads_no_partition_and_a_produce_dirties_only_its_own(cluster) -> None:
    f = Fetcher(cluster, 12)
    try:
        sid = f.fetch(0, 0, {0: 0, 1: 0, 2: 0}).session_id
        assert _dirty(cluster, sid) == [0, 1, 2]  # a new session's first incremental fetch reads everything once
        assert _answered(f.fetch(sid, 1, {})) == {}
        assert _dirty(cluster, sid) == []
        _produce(cluster, 2, 2)
        wait_for(lambda: _dirty(cluster, sid) == [2], what="the high watermark move reaching the session")
        assert list(_answered(f.fetch(sid, 2, {}))) == [2]
        assert _dirty(cluster, sid) == [2], "records still ahead of the consumer's offset: read again next time"
        assert _answered(f.fetch(sid, 3, {2: 2})) == {}
        assert _dirty(cluster, sid) == []
    finally:
        f.close()


def test_a_parked_incremental_fetch_wakes_when_a_partition_it_reads_nothing_of_gets_records(cluster) -> None:
    f = Fetcher(cluster, 12)
    try:
        sid = f.fetch(0, 0, {0: 0, 1: 0, 2: 0}).session_id
        f.fetch(sid, 1, {})
        answer: list[Any] = []
        # an hour's wait: only the wake-up through the session's watch can answer it within the test's deadline
        parked = threading.Thread(target=lambda: answer.append(f.fetch(sid, 2, {}, max_wait_s=3600)))
        parked.start()
        wait_for(lambda: cluster.run(lambda: _held(cluster, sid).waiter is not None), what="the fetch parked")
        _produce(cluster, 1)
        parked.join(30)
        assert answer, "the parked fetch was not woken"
        assert list(_answered(answer[0])) == [1]
    finally:
        f.close()


def _held(c: ThreadedCluster, session_id: int) -> Any:
    return c.cluster.brokers[0].services.fetch_sessions.get(session_id)


def test_session_errors_answer_at_the_top_with_no_partitions(cluster) -> None:
    f = Fetcher(cluster, 12)
    try:
        sid = f.fetch(0, 0, {0: 0}).session_id
        wrong_epoch = f.fetch(sid, 7, {0: 0})
        assert (wrong_epoch.error_code, wrong_epoch.session_id) == (ErrorCode.invalid_fetch_session_epoch, 0)
        assert wrong_epoch.responses == ()
        unknown = f.fetch(sid + 1, 1, {0: 0})
        assert (unknown.error_code, unknown.responses) == (ErrorCode.fetch_session_id_not_found, ())
        assert f.fetch(sid, 1, {}).error_code == ErrorCode.none
        replayed = f.fetch(sid, 1, {})  # the same request again: the epoch has moved on
        assert replayed.error_code == ErrorCode.invalid_fetch_session_epoch
        # a full fetch naming the session closes it; FINAL (-1) creates none
        closed = f.fetch(sid, -1, {0: 0})
        assert (closed.error_code, closed.session_id) == (ErrorCode.none, 0) and _session(cluster, sid) is None
        assert f.fetch(sid, 2, {}).error_code == ErrorCode.fetch_session_id_not_found
    finally:
        f.close()


def test_a_session_of_topic_ids_cannot_go_on_by_names(cluster) -> None:
    by_id, by_name = Fetcher(cluster, 13), Fetcher(cluster, 12)
    try:
        sid = by_id.fetch(0, 0, {0: 0}).session_id
        assert by_name.fetch(sid, 1, {}).error_code == ErrorCode.fetch_session_topic_id_error
        assert by_id.fetch(sid, 1, {}).error_code == ErrorCode.none
    finally:
        by_id.close()
        by_name.close()


def test_a_full_cache_gives_a_newcomer_no_session_until_a_slot_frees(tmp_path: Path) -> None:
    c = _start(tmp_path, **{"max.incremental.fetch.session.cache.slots": "1"})
    first, second = Fetcher(c, 12), Fetcher(c, 12)
    try:
        sid = first.fetch(0, 0, {0: 0}).session_id
        assert sid != 0
        # a young consumer session is not evictable by another consumer, even a bigger one
        refused = second.fetch(0, 0, {0: 0, 1: 0, 2: 0})
        assert (refused.error_code, refused.session_id) == (ErrorCode.none, 0)
        assert sorted(_answered(refused)) == [0, 1, 2]  # still a full answer
        assert first.fetch(sid, 1, {}).error_code == ErrorCode.none
        first.fetch(sid, -1, {})  # closes it
        assert second.fetch(0, 0, {0: 0}).session_id != 0
    finally:
        first.close()
        second.close()
        c.close()


def test_a_follower_session_evicts_a_consumer_session_from_a_full_cache(tmp_path: Path) -> None:
    c = _start(tmp_path, **{"max.incremental.fetch.session.cache.slots": "1"})
    consumer, follower = Fetcher(c, 12), Fetcher(c, 12, replica_id=7)  # a replica id marks a follower's fetch
    try:
        sid = consumer.fetch(0, 0, {0: 0}).session_id
        privileged = follower.fetch(0, 0, {0: 0}).session_id
        assert privileged != 0 and _session(c, privileged).privileged
        assert consumer.fetch(sid, 1, {}).error_code == ErrorCode.fetch_session_id_not_found
        assert c.run(lambda: c.cluster.brokers[0].fetch_sessions.evictions) == 1
        # the consumer falls back to a full fetch, which gets no session now (a young follower's is not evictable)
        again = consumer.fetch(0, 0, {0: 0})
        assert (again.error_code, again.session_id) == (ErrorCode.none, 0)
    finally:
        consumer.close()
        follower.close()
        c.close()


def test_no_slots_turns_sessions_off(tmp_path: Path) -> None:
    c = _start(tmp_path, **{"max.incremental.fetch.session.cache.slots": "0"})
    f = Fetcher(c, 12)
    try:
        full = f.fetch(0, 0, {0: 0, 1: 0})
        assert (full.error_code, full.session_id, sorted(_answered(full))) == (ErrorCode.none, 0, [0, 1])
    finally:
        f.close()
        c.close()

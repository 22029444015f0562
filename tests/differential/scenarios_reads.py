"""Fetch (1), ListOffsets (2), OffsetForLeaderEpoch (23) and DeleteRecords (21) on a partition holding three
records: every version, out-of-range offsets, unknown partitions, fenced and unknown leader epochs."""

from __future__ import annotations

from typing import Any

from differential_corpus import Batch, Call, Scenario, Topic, produce

_THREE = (produce(Batch(values=(b"a", b"b", b"c"))),)


def _fetch(version: int, offset: int = 0, *, partition: int = 0, epoch: int = -1, topic: str = "{topic}",
           isolation: int = 0, max_bytes: int = 1 << 20) -> Call:
    part: dict[str, Any] = {"partition": partition, "fetch_offset": offset, "partition_max_bytes": max_bytes,
                            "current_leader_epoch": epoch, "log_start_offset": -1, "last_fetched_epoch": -1}
    return Call(1, version, {"replica_id": -1, "max_wait": 0, "min_bytes": 0, "max_bytes": 1 << 20,
                             "isolation_level": isolation, "session_id": 0, "session_epoch": -1,
                             "topics": [{"topic": topic, "partitions": [part]}]})


def _list_offsets(version: int, timestamp: int, *, partition: int = 0, epoch: int = -1) -> Call:
    return Call(2, version, {"replica_id": -1, "topics": [{"name": "{topic}", "partitions": [
        {"partition_index": partition, "timestamp": timestamp, "current_leader_epoch": epoch}]}]})


def _epoch(version: int, leader_epoch: int, *, current: int = -1, partition: int = 0) -> Call:
    return Call(23, version, {"replica_id": -1, "topics": [{"topic": "{topic}", "partitions": [
        {"partition": partition, "current_leader_epoch": current, "leader_epoch": leader_epoch}]}]})


def _delete(version: int, offset: int, partition: int = 0) -> Call:
    return Call(21, version, {"topics": [{"name": "{topic}", "partitions": [
        {"partition_index": partition, "offset": offset}]}], "timeout": 10000})


def _s(name: str, request: Call, topic: bool = True) -> Scenario:
    return Scenario(name, request, topics=(Topic(),) if topic else (), setup=_THREE if topic else ())


SCENARIOS = [
    Scenario("fetch.v13.unknown-topic-id", Call(1, 13, {
        "replica_id": -1, "max_wait": 0, "min_bytes": 0, "max_bytes": 1 << 20, "isolation_level": 0, "session_id": 0,
        "session_epoch": -1, "topics": [{"topic_id": "00000000-0000-0000-0000-00000000abcd", "partitions": [{
            "partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20, "current_leader_epoch": -1,
            "log_start_offset": -1, "last_fetched_epoch": -1}]}], "forgotten_topics_data": [], "rack_id": ""})),
    *(_s(f"fetch.v{v}.from-start", _fetch(v)) for v in range(4, 13)),
    *(_s(f"fetch.v{v}.from-middle", _fetch(v, 1)) for v in (4, 11, 12)),
    *(_s(f"fetch.v{v}.at-end", _fetch(v, 3)) for v in (4, 12)),
    *(_s(f"fetch.v{v}.offset-out-of-range", _fetch(v, 99)) for v in (4, 9, 12)),
    *(_s(f"fetch.v{v}.unknown-partition", _fetch(v, partition=5)) for v in (4, 12)),
    *(_s(f"fetch.v{v}.unknown-topic", _fetch(v), topic=False) for v in (4, 12)),
    _s("fetch.v12.fenced-leader-epoch", _fetch(12, epoch=7)),
    _s("fetch.v12.read-committed", _fetch(12, isolation=1)),
    _s("fetch.v12.small-partition-max-bytes", _fetch(12, max_bytes=10)),
    _s("fetch.v12.negative-offset", _fetch(12, -5)),
    *(_s(f"list-offsets.v{v}.latest", _list_offsets(v, -1)) for v in range(1, 10)),
    *(_s(f"list-offsets.v{v}.earliest", _list_offsets(v, -2)) for v in (1, 5, 9)),
    *(_s(f"list-offsets.v{v}.by-timestamp", _list_offsets(v, 1_600_000_000_000)) for v in (1, 7, 9)),
    _s("list-offsets.v9.after-last-timestamp", _list_offsets(9, 1_800_000_000_000)),
    _s("list-offsets.v7.max-timestamp", _list_offsets(7, -3)),
    _s("list-offsets.v9.unknown-partition", _list_offsets(9, -1, partition=4)),
    _s("list-offsets.v9.fenced-epoch", _list_offsets(9, -1, epoch=9)),
    _s("list-offsets.v9.unknown-topic", _list_offsets(9, -1), topic=False),
    *(_s(f"offset-for-leader-epoch.v{v}.epoch-0", _epoch(v, 0)) for v in range(2, 5)),
    _s("offset-for-leader-epoch.v4.future-epoch", _epoch(4, 5)),
    _s("offset-for-leader-epoch.v4.fenced-current", _epoch(4, 0, current=9)),
    _s("offset-for-leader-epoch.v4.unknown-partition", _epoch(4, 0, partition=3)),
    _s("offset-for-leader-epoch.v4.unknown-topic", _epoch(4, 0), topic=False),
    *(_s(f"delete-records.v{v}.to-offset-1", _delete(v, 1)) for v in range(3)),
    _s("delete-records.v2.to-high-watermark", _delete(2, -1)),
    _s("delete-records.v2.beyond-high-watermark", _delete(2, 10)),
    _s("delete-records.v2.unknown-partition", _delete(2, 0, partition=2)),
    _s("delete-records.v2.unknown-topic", _delete(2, 0), topic=False),
]

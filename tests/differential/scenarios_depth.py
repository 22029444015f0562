"""Flows across APIs: what a consumer reads around transactions (the last stable offset, aborted ranges), static
group members, oversize offset metadata, protocol mismatches, and describes with authorized operations."""

from __future__ import annotations

from typing import Any

from differential_corpus import Batch, Call, Ref, Scenario, Topic, coordinator, init_producer, produce

_T = (Topic(),)
_TXN = (coordinator("{txn}", 1), init_producer("{txn}"))


def _txn_batch(seq: int = 0) -> Call:
    return produce(Batch(producer_id=Ref("pid"), producer_epoch=Ref("epoch"), base_sequence=seq,
                         transactional=True), transactional_id="{txn}")


_ADD = Call(24, 3, {"v3_and_below_transactional_id": "{txn}", "v3_and_below_producer_id": Ref("pid"),
                    "v3_and_below_producer_epoch": Ref("epoch"),
                    "v3_and_below_topics": [{"name": "{topic}", "partitions": [0]}]})
_OPEN = (produce(Batch(values=(b"before",))), *_TXN, _ADD, _txn_batch())


def _end(commit: bool) -> Call:
    # the marker is written asynchronously: the next step waits for the partition's last stable offset to pass it
    return Call(26, 3, {"transactional_id": "{txn}", "producer_id": Ref("pid"), "producer_epoch": Ref("epoch"),
                        "committed": commit})


def _stable(end: int) -> Call:
    return Call(2, 7, {"replica_id": -1, "isolation_level": 1, "topics": [
        {"name": "{topic}", "partitions": [{"partition_index": 0, "timestamp": -1, "current_leader_epoch": -1}]}]},
        until=lambda r: r["topics"][0]["partitions"][0]["offset"] >= end)


def _fetch(isolation: int, version: int = 12) -> Call:
    return Call(1, version, {"replica_id": -1, "max_wait": 0, "min_bytes": 0, "max_bytes": 1 << 20,
                             "isolation_level": isolation, "session_id": 0, "session_epoch": -1,
                             "topics": [{"topic": "{topic}", "partitions": [{
                                 "partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20,
                                 "current_leader_epoch": -1, "log_start_offset": -1, "last_fetched_epoch": -1}]}]})


def _list_offsets(isolation: int) -> Call:
    return Call(2, 7, {"replica_id": -1, "isolation_level": isolation, "topics": [
        {"name": "{topic}", "partitions": [{"partition_index": 0, "timestamp": -1, "current_leader_epoch": -1}]}]})


_SUBSCRIPTION = b"\x00\x00" + b"\x00\x00\x00\x01" + b"\x00\x01t" + b"\xff\xff\xff\xff"


def _join(member: Any = "", instance: str | None = None, protocol: str = "range", ptype: str = "consumer") -> Call:
    return Call(11, 9, {"group_id": "{group}", "session_timeout": 30000, "rebalance_timeout": 30000,
                        "member_id": member, "group_instance_id": instance, "protocol_type": ptype,
                        "protocols": [{"name": protocol, "metadata": _SUBSCRIPTION}], "reason": None})


def _commit(metadata: str) -> Call:
    return Call(8, 9, {"group_id": "{group}", "generation_id_or_member_epoch": -1, "member_id": "",
                       "topics": [{"name": "{topic}", "partitions": [{"partition_index": 0, "committed_offset": 1,
                                                                     "committed_leader_epoch": -1,
                                                                     "committed_metadata": metadata}]}]})


_GROUP = (coordinator("{group}"),)

SCENARIOS = [
    Scenario("txn-flow.fetch-read-uncommitted-open", _fetch(0), topics=_T, setup=_OPEN),
    Scenario("txn-flow.fetch-read-committed-open", _fetch(1), topics=_T, setup=_OPEN),
    Scenario("txn-flow.list-offsets-read-committed-open", _list_offsets(1), topics=_T, setup=_OPEN),
    Scenario("txn-flow.list-offsets-read-uncommitted-open", _list_offsets(0), topics=_T, setup=_OPEN),
    Scenario("txn-flow.fetch-read-committed-aborted", _fetch(1), topics=_T,
             setup=(*_OPEN, _end(False), _stable(3))),
    Scenario("txn-flow.fetch-read-committed-committed", _fetch(1), topics=_T,
             setup=(*_OPEN, _end(True), _stable(3))),
    Scenario("txn-flow.fetch-v4-read-committed-aborted", _fetch(1, 4), topics=_T,
             setup=(*_OPEN, _end(False), _stable(3))),
    Scenario("txn-flow.describe-producers-open", Call(61, 0, {"topics": [{"name": "{topic}",
                                                                          "partition_indexes": [0]}]}),
             topics=_T, setup=_OPEN),
    Scenario("txn-flow.second-init-bumps-epoch", Call(22, 4, {"transactional_id": "{txn}",
                                                             "transaction_timeout": 60000, "producer_id": -1,
                                                             "producer_epoch": -1}),
             topics=_T, setup=(*_OPEN, _end(True), _stable(3))),
    Scenario("groups.static-member-first-join", _join(instance="static-1"), setup=_GROUP),
    Scenario("groups.protocol-type-mismatch", _join(ptype="connect"),
             setup=(*_GROUP, Call(11, 9, {**_join().body}, capture={"member": "member_id"}),
                    Call(11, 9, {**_join(Ref("member")).body}))),
    Scenario("groups.no-common-protocol", _join(protocol="roundrobin"),
             setup=(*_GROUP, Call(11, 9, {**_join().body}, capture={"member": "member_id"}),
                    Call(11, 9, {**_join(Ref("member")).body}))),
    Scenario("groups.commit-metadata-too-large", _commit("m" * 5000), topics=_T, setup=_GROUP),
    Scenario("groups.commit-metadata-at-limit", _commit("m" * 4096), topics=_T, setup=_GROUP),
    Scenario("groups.offset-fetch-unknown-group-all", Call(9, 8, {"groups": [{"group_id": "{group}",
                                                                              "topics": None}]}), setup=_GROUP),
    Scenario("groups.describe-with-authorized-operations", Call(15, 5, {"groups": ["{group}"],
                                                                        "include_authorized_operations": True}),
             setup=(*_GROUP, Call(11, 9, {**_join().body}, capture={"member": "member_id"}),
                    Call(11, 9, {**_join(Ref("member")).body}))),
]

"""The classic group coordinator: FindCoordinator (10), JoinGroup (11), SyncGroup (14), Heartbeat (12),
LeaveGroup (13), OffsetCommit (8), OffsetFetch (9), ListGroups (16), DescribeGroups (15), DeleteGroups (42) and
OffsetDelete (47): first joins, a one-member generation, unknown members and groups, rebalances in progress."""

from __future__ import annotations

from typing import Any

from differential_corpus import Call, Ref, Scenario, Topic, coordinator

# ConsumerProtocolSubscription v0 for topic "t", no user data: what a Java consumer sends
_SUBSCRIPTION = b"\x00\x00" + b"\x00\x00\x00\x01" + b"\x00\x01t" + b"\xff\xff\xff\xff"
_ASSIGNMENT = b"\x00\x00" + b"\x00\x00\x00\x00" + b"\xff\xff\xff\xff"
_READY = coordinator("{group}")


def _join(version: int, member: Any = "", capture: bool = False) -> Call:
    return Call(11, version, {"group_id": "{group}", "session_timeout": 30000, "rebalance_timeout": 30000,
                              "member_id": member, "group_instance_id": None, "protocol_type": "consumer",
                              "protocols": [{"name": "range", "metadata": _SUBSCRIPTION}], "reason": None},
                capture={"member": "member_id"} if capture else {})


_MEMBER = (_READY, _join(9, capture=True))
_JOINED = (*_MEMBER, Call(11, 9, {**_join(9).body, "member_id": Ref("member")},
                          capture={"generation": "generation_id"}))


def _sync(version: int) -> Call:
    return Call(14, version, {"group_id": "{group}", "generation_id": Ref("generation"), "member_id": Ref("member"),
                              "protocol_type": "consumer", "protocol_name": "range",
                              "assignments": [{"member_id": Ref("member"), "assignment": _ASSIGNMENT}]})


_STABLE = (*_JOINED, _sync(5))


def _heartbeat(version: int, member: Any = "nobody", generation: Any = 1) -> Call:
    return Call(12, version, {"group_id": "{group}", "generation_id": generation, "member_id": member})


def _leave(version: int, member: Any = "nobody") -> Call:
    return Call(13, version, {"group_id": "{group}", "member_id": member,
                              "members": [{"member_id": member, "group_instance_id": None}]})


def _commit(version: int, *, partition: int = 0, generation: Any = -1, member: Any = "",
            topic: str = "{topic}") -> Call:
    return Call(8, version, {"group_id": "{group}", "generation_id_or_member_epoch": generation, "member_id": member,
                             "retention_time_ms": -1, "topics": [{"name": topic, "partitions": [
                                 {"partition_index": partition, "committed_offset": 1, "committed_leader_epoch": -1,
                                  "committed_metadata": "m"}]}]})


def _fetch_offsets(version: int, partitions: tuple[int, ...] = (0,)) -> Call:
    topics = [{"name": "{topic}", "partition_indexes": list(partitions)}]
    return Call(9, version, {"group_id": "{group}", "topics": topics, "require_stable": False,
                             "groups": [{"group_id": "{group}", "topics": topics}]})


def _describe(version: int) -> Call:
    return Call(15, version, {"groups": ["{group}"], "include_authorized_operations": False})


def _list_groups(version: int, states: tuple[str, ...] = ()) -> Call:
    return Call(16, version, {"states_filter": list(states)})


_T = (Topic(),)
_COMMITTED = (_READY, _commit(9))

SCENARIOS = [
    *(Scenario(f"find-coordinator.v{v}.group", Call(10, v, {"key": "{group}", "key_type": 0,
                                                           "coordinator_keys": ["{group}"]}), setup=(_READY,))
      for v in range(5)),
    Scenario("find-coordinator.v3.invalid-key-type", Call(10, 3, {"key": "{group}", "key_type": 7})),
    Scenario("find-coordinator.v4.two-groups", Call(10, 4, {"key_type": 0, "coordinator_keys": ["{group}",
                                                                                                "{group}-2"]}),
             setup=(_READY,)),
    *(Scenario(f"join-group.v{v}.first-join", _join(v), setup=(_READY,)) for v in range(10)),
    Scenario("join-group.v9.second-join", Call(11, 9, {**_join(9).body, "member_id": Ref("member")}),
             setup=_MEMBER),
    Scenario("join-group.v9.unknown-member", _join(9, "nobody"), setup=(_READY,)),
    Scenario("join-group.v9.empty-protocol-type", Call(11, 9, {**_join(9).body, "protocol_type": ""}),
             setup=(_READY,)),
    Scenario("join-group.v9.session-timeout-too-small", Call(11, 9, {**_join(9).body, "session_timeout": 10}),
             setup=(_READY,)),
    Scenario("join-group.v9.invalid-group-id", Call(11, 9, {**_join(9).body, "group_id": ""})),
    *(Scenario(f"sync-group.v{v}.leader", _sync(v), setup=_JOINED) for v in range(6)),
    Scenario("sync-group.v5.unknown-member", Call(14, 5, {**_sync(5).body, "member_id": "nobody"}), setup=_JOINED),
    Scenario("sync-group.v5.wrong-generation", Call(14, 5, {**_sync(5).body, "generation_id": 7}), setup=_JOINED),
    *(Scenario(f"heartbeat.v{v}.unknown-group", _heartbeat(v), setup=(_READY,)) for v in range(5)),
    Scenario("heartbeat.v4.stable", _heartbeat(4, Ref("member"), Ref("generation")), setup=_STABLE),
    Scenario("heartbeat.v4.rebalance-in-progress", _heartbeat(4, Ref("member"), Ref("generation")),
             setup=_JOINED),
    Scenario("heartbeat.v4.unknown-member", _heartbeat(4, "nobody", Ref("generation")), setup=_STABLE),
    Scenario("heartbeat.v4.illegal-generation", _heartbeat(4, Ref("member"), 9), setup=_STABLE),
    *(Scenario(f"leave-group.v{v}.unknown-group", _leave(v), setup=(_READY,)) for v in range(6)),
    Scenario("leave-group.v5.member", _leave(5, Ref("member")), setup=_STABLE),
    Scenario("leave-group.v5.unknown-member", _leave(5), setup=_STABLE),
    *(Scenario(f"offset-commit.v{v}.simple", _commit(v), topics=_T, setup=(_READY,)) for v in range(2, 10)),
    Scenario("offset-commit.v9.unknown-topic", _commit(9), setup=(_READY,)),
    Scenario("offset-commit.v9.unknown-partition", _commit(9, partition=4), topics=_T, setup=(_READY,)),
    Scenario("offset-commit.v9.member-of-stable-group", _commit(9, generation=Ref("generation"),
                                                                member=Ref("member")), topics=_T, setup=_STABLE),
    Scenario("offset-commit.v9.illegal-generation", _commit(9, generation=5, member=Ref("member")), topics=_T,
             setup=_STABLE),
    Scenario("offset-commit.v9.unknown-member", _commit(9, generation=Ref("generation"), member="nobody"),
             topics=_T, setup=_STABLE),
    *(Scenario(f"offset-fetch.v{v}.committed", _fetch_offsets(v), topics=_T, setup=_COMMITTED)
      for v in range(1, 10)),
    Scenario("offset-fetch.v9.nothing-committed", _fetch_offsets(9, (0, 1)), topics=(Topic(2),),
             setup=(_READY,)),
    Scenario("offset-fetch.v7.unknown-partition", _fetch_offsets(7, (3,)), topics=_T, setup=_COMMITTED),
    *(Scenario(f"list-groups.v{v}.stable", _list_groups(v), setup=_STABLE, own="groups") for v in range(5)),
    Scenario("list-groups.v4.state-filter-excludes", _list_groups(4, ("Empty",)), setup=_STABLE, own="groups"),
    *(Scenario(f"describe-groups.v{v}.unknown", _describe(v), setup=(_READY,)) for v in range(6)),
    Scenario("describe-groups.v5.stable", _describe(5), setup=_STABLE),
    Scenario("describe-groups.v5.completing-rebalance", _describe(5), setup=_JOINED),
    Scenario("describe-groups.v5.empty-with-offsets", _describe(5), topics=_T, setup=_COMMITTED),
    *(Scenario(f"delete-groups.v{v}.unknown", Call(42, v, {"groups_names": ["{group}"]}), setup=(_READY,))
      for v in range(3)),
    Scenario("delete-groups.v2.empty", Call(42, 2, {"groups_names": ["{group}"]}), topics=_T, setup=_COMMITTED),
    Scenario("delete-groups.v2.non-empty", Call(42, 2, {"groups_names": ["{group}"]}), setup=_STABLE),
    Scenario("offset-delete.v0.committed", Call(47, 0, {"group_id": "{group}", "topics": [
        {"name": "{topic}", "partitions": [{"partition_index": 0}]}]}), topics=_T, setup=_COMMITTED),
    Scenario("offset-delete.v0.unknown-group", Call(47, 0, {"group_id": "{group}", "topics": [
        {"name": "{topic}", "partitions": [{"partition_index": 0}]}]}), topics=_T, setup=(_READY,)),
]

"""The pure parts of KIP-848's online migration: the embedded consumer protocol codec (checked against
kafka-python's own encoder), the classic group ↔ consumer group conversions, a classic member's reconciliation
inside a consumer group, and its records in ``__consumer_offsets`` (the tagged ClassicMemberMetadata)."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment, ConsumerProtocolSubscription

from odradek.broker.group.config import GroupConfig
from odradek.broker.group.consumer_group import (
    LEAVE_EPOCH,
    ClassicMetadata,
    ConsumerGroupLogic,
    HeartbeatRequest,
)
from odradek.broker.group.consumer_records import group_records, load_groups
from odradek.broker.group.coordinator import GroupCoordinator
from odradek.broker.group.metadata import Group, GroupState, Member
from odradek.broker.group.migration import MigrationPolicy, can_upgrade, to_classic_members, to_consumer_group
from odradek.broker.group.requests import JoinRequest
from odradek.clock import ManualClock
from odradek.errors import ErrorCode as E
from odradek.protocol.consumer_protocol import (
    ConsumerProtocolError,
    decode_assignment,
    decode_subscription,
    encode_assignment,
)

from .memlog import MemoryOffsetsLog

TOPIC = "t"
TOPICS = {TOPIC: (uuid.uuid4(), 4)}


def subscription(version: int, topics: list[str], owned: dict[str, list[int]] | None = None) -> bytes:
    tps = [ConsumerProtocolSubscription.TopicPartition(topic=t, partitions=ps) for t, ps in (owned or {}).items()]
    return bytes(ConsumerProtocolSubscription(
        version=version, topics=topics, user_data=None, owned_partitions=tps, generation_id=-1, rack_id=None,
    ).encode())


def assignment(parts: dict[str, list[int]], version: int = 1) -> bytes:
    tps = [ConsumerProtocolAssignment.TopicPartition(topic=t, partitions=ps) for t, ps in parts.items()]
    return bytes(ConsumerProtocolAssignment(version=version, assigned_partitions=tps, user_data=None).encode())


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_subscription_versions_decode(version: int) -> None:
    sub = decode_subscription(subscription(version, ["a", "b"], {"a": [0, 2]}))
    assert sub.version == version and sub.topics == ("a", "b")
    assert sub.owned == ({"a": frozenset({0, 2})} if version >= 1 else {})


def test_assignment_round_trips_through_kafka_python() -> None:
    raw = encode_assignment({"a": frozenset({1, 3}), "b": frozenset({0}), "c": frozenset()}, 1)
    decoded = ConsumerProtocolAssignment.decode(raw)
    assert {(tp.topic, tuple(tp.partitions)) for tp in decoded.assigned_partitions} == {("a", (1, 3)), ("b", (0,))}
    assert decode_assignment(assignment({"a": [2]})) == {"a": frozenset({2})}
    assert decode_assignment(b"") == {}
    with pytest.raises(ConsumerProtocolError):
        decode_subscription(b"\x00\x01\x00\x00\x00\x05")


def _classic_group(members: dict[str, list[int]], generation: int = 3) -> Group:
    group = Group("g", generation_id=generation, protocol_type="consumer", protocol_name="range")
    for mid, parts in members.items():
        group.add(Member(mid, None, "client", "/127.0.0.1", 30_000, 10_000, "consumer",
                         [("range", subscription(1, [TOPIC])), ("roundrobin", subscription(1, [TOPIC]))],
                         assignment=assignment({TOPIC: parts})))
    group.state = GroupState.STABLE
    return group


def test_upgrade_keeps_assignments_and_a_new_member_makes_classic_members_rejoin() -> None:
    classic = _classic_group({"c1": [0, 1], "c2": [2, 3]})
    assert can_upgrade(classic, MigrationPolicy.BIDIRECTIONAL, 10)
    assert not can_upgrade(classic, MigrationPolicy.DOWNGRADE, 10)
    assert not can_upgrade(classic, MigrationPolicy.UPGRADE, 1)
    group = to_consumer_group(classic, TOPICS)
    assert (group.group_epoch, group.assignment_epoch) == (3, 3)
    assert group.target == {"c1": {TOPIC: frozenset({0, 1})}, "c2": {TOPIC: frozenset({2, 3})}}
    assert all(m.member_epoch == 3 and m.classic is not None for m in group.members.values())

    logic = ConsumerGroupLogic()
    logic.groups["g"] = group
    assert not logic.classic_must_rejoin(group, group.members["c1"])
    result = logic.heartbeat(
        HeartbeatRequest("g", "", 0, rebalance_timeout_ms=30_000, subscribed_names=(TOPIC,), owned={}),
        TOPICS, lambda: "new",
    )
    assert result.member_epoch == 4 and group.group_epoch == 4
    assert result.assignment == {}  # every partition it gets is still held by a classic member
    c1 = group.members["c1"]
    assert logic.classic_must_rejoin(group, c1)
    # An eager member revokes everything before it rejoins: its join reports nothing owned.
    meta = ClassicMetadata(10_000, list(classic_protocols := [("range", subscription(1, [TOPIC]))]))
    joined = logic.classic_join(group, "c1", None, 30_000, meta, decode_subscription(classic_protocols[0][1]),
                                TOPICS)
    assert joined.member_epoch == 4 and joined.state == "stable"
    assert set(joined.assigned[TOPIC]) == set(group.target["c1"][TOPIC])
    assert len(group.target["new"][TOPIC]) == 1  # uniform: 4 partitions over 3 members, sticky


def test_downgrade_gives_each_classic_member_its_target() -> None:
    group = to_consumer_group(_classic_group({"c1": [0, 1], "c2": [2, 3]}), TOPICS)
    logic = ConsumerGroupLogic()
    logic.groups["g"] = group
    logic.heartbeat(HeartbeatRequest("g", "", 0, rebalance_timeout_ms=30_000, subscribed_names=(TOPIC,), owned={}),
                    TOPICS, lambda: "new")
    assert logic.only_classic_left(group, "new") and not logic.only_classic_left(group, "c1")
    members = to_classic_members(group, "new")
    assert [m.member_id for m in members] == ["c1", "c2"]
    owned = {m.member_id: decode_assignment(m.assignment).get(TOPIC, frozenset()) for m in members}
    assert owned == {mid: group.target[mid].get(TOPIC, frozenset()) for mid in ("c1", "c2")}
    classic = Group("g")
    classic.adopt_members(group.group_epoch, members, 0)
    assert classic.state is GroupState.STABLE and classic.generation_id == group.group_epoch
    assert classic.protocol_name == "range" and classic.leader_id == "c1"


def test_classic_member_metadata_survives_the_records() -> None:
    group = to_consumer_group(_classic_group({"c1": [0, 1, 2, 3]}), TOPICS)
    records = group_records(group, {TOPIC: TOPICS[TOPIC][0]})
    loaded = load_groups(records)["g"]
    member = loaded.members["c1"]
    assert member.classic == group.members["c1"].classic
    assert member.assigned == {TOPIC: frozenset({0, 1, 2, 3})}
    assert loaded.group_epoch == 3


# --- the coordinator: conversion records, the join timeout, reload -----------------------------------------

UNDELAYED = GroupConfig(offsets_topic_num_partitions=1, initial_rebalance_delay_ms=0)


async def loaded_coordinator() -> tuple[ManualClock, MemoryOffsetsLog, GroupCoordinator]:
    """Broker 0's coordinator on a fresh in-memory log of one partition (joins not delayed), loaded."""
    clock, log = ManualClock(), MemoryOffsetsLog()
    coord = GroupCoordinator(broker_id=0, clock=clock, offsets_log=log, config=UNDELAYED)
    coord.topics_source = lambda: TOPICS
    await coord.load_partition(0)
    return clock, log, coord


async def test_coordinator_upgrades_times_out_a_silent_classic_member_and_reloads() -> None:
    clock, log, coord = await loaded_coordinator()
    protocols = [("range", subscription(1, [TOPIC]))]

    def join(member_id: str) -> Any:
        return coord.join_group(JoinRequest(
            "g", member_id, None, require_known_member_id=False, client_id="c", client_host="/h",
            rebalance_timeout_ms=20_000, session_timeout_ms=10_000, protocol_type="consumer",
            protocols=protocols,
        ))

    joined = await join("")
    synced = await coord.sync_group("g", joined.generation_id, joined.member_id, None,
                                    assignments={joined.member_id: assignment({TOPIC: [0, 1, 2, 3]})})
    assert synced.error is E.none
    c1 = joined.member_id

    new = await coord.consumer_heartbeat(
        HeartbeatRequest("g", "m", 0, rebalance_timeout_ms=20_000, subscribed_names=(TOPIC,), owned={}), TOPICS
    )
    assert new.error is E.none and new.member_epoch == 2
    assert "g" in coord.consumer_groups.groups and not coord.ctx.groups["g"].members
    # The classic member learns through its heartbeat and rejoins. As Kafka's reconciliation does, its first
    # join only revokes (it stays at epoch 1 keeping half); the next one, owning nothing, moves it to epoch 2.
    assert coord.heartbeat("g", 1, c1, None) is E.rebalance_in_progress
    rejoined = await join(c1)
    assert rejoined.error is E.none and rejoined.generation_id == 1 and rejoined.leader_id == ""
    synced = await coord.sync_group("g", 1, c1, None, protocol_type="consumer", protocol_name="range")
    assert len(decode_assignment(synced.assignment)[TOPIC]) == 2
    assert coord.heartbeat("g", 1, c1, None) is E.rebalance_in_progress
    rejoined = await join(c1)
    assert rejoined.error is E.none and rejoined.generation_id == 2
    synced = await coord.sync_group("g", 2, c1, None, protocol_type="consumer", protocol_name="range")
    got = decode_assignment(synced.assignment)[TOPIC]
    assert synced.error is E.none and len(got) == 2
    assert coord.heartbeat("g", 2, c1, None) is E.none

    # A second coordinator reading the log sees a consumer group with a classic member.
    other = GroupCoordinator(broker_id=1, clock=clock, offsets_log=log, config=UNDELAYED)
    await other.load_partition(0)
    reloaded = other.consumer_groups.groups["g"]
    assert reloaded.members[c1].classic is not None and reloaded.members[c1].assigned == {TOPIC: got}
    assert not other.ctx.groups["g"].members

    # The consumer member's subscription changes, the classic member is told to rejoin but stays silent:
    # after its rebalance timeout it is removed (its heartbeats alone do not keep it in).
    await coord.consumer_heartbeat(
        HeartbeatRequest("g", "m", 2, subscribed_names=(TOPIC, "u"), owned=new.assignment), TOPICS
    )
    assert coord.heartbeat("g", 2, c1, None) is E.rebalance_in_progress
    for _ in range(2):
        clock.advance(9_000)  # within the 10 s session each time
        assert coord.heartbeat("g", 2, c1, None) is E.rebalance_in_progress
        await coord.tick()
    assert c1 in coord.consumer_groups.groups["g"].members
    clock.advance(2_001)
    await coord.tick()
    await asyncio.sleep(0.01)
    assert list(coord.consumer_groups.groups["g"].members) == ["m"]


async def test_coordinator_downgrades_when_the_last_consumer_member_leaves() -> None:
    clock, log, coord = await loaded_coordinator()
    new = await coord.consumer_heartbeat(
        HeartbeatRequest("g", "m", 0, rebalance_timeout_ms=20_000, subscribed_names=(TOPIC,), owned={}), TOPICS
    )
    assert new.member_epoch == 1
    joined = await coord.join_group(JoinRequest(
        "g", "", None, require_known_member_id=False, client_id="c", client_host="/h",
        rebalance_timeout_ms=20_000, session_timeout_ms=10_000, protocol_type="consumer",
        protocols=[("range", subscription(1, [TOPIC]))],
    ))
    assert joined.error is E.none and joined.generation_id == 2
    left = await coord.consumer_heartbeat(HeartbeatRequest("g", "m", LEAVE_EPOCH), TOPICS)
    assert left.error is E.none
    assert "g" not in coord.consumer_groups.groups
    classic = coord.ctx.groups["g"]
    assert list(classic.members) == [joined.member_id]
    assert classic.state is GroupState.PREPARING_REBALANCE and classic.generation_id == 2
    # The classic member finds the rebalance on its next heartbeat and completes it alone.
    assert coord.heartbeat("g", 2, joined.member_id, None) is E.rebalance_in_progress
    again = await coord.join_group(JoinRequest(
        "g", joined.member_id, None, require_known_member_id=False, client_id="c", client_host="/h",
        rebalance_timeout_ms=20_000, session_timeout_ms=10_000, protocol_type="consumer",
        protocols=[("range", subscription(1, [TOPIC]))],
    ))
    assert again.error is E.none and again.generation_id == 3 and again.leader_id == joined.member_id
    # Reloaded: a classic group, the consumer group's records gone.
    other = GroupCoordinator(broker_id=1, clock=clock, offsets_log=log, config=UNDELAYED)
    await other.load_partition(0)
    assert "g" not in other.consumer_groups.groups
    assert list(other.ctx.groups["g"].members) == [joined.member_id]


def test_static_classic_member_restarting_takes_over_its_predecessor() -> None:
    classic = _classic_group({"c1": [0, 1], "c2": [2, 3]})
    classic.members["c1"].group_instance_id = "i-1"
    group = to_consumer_group(classic, TOPICS)
    logic = ConsumerGroupLogic()
    logic.groups["g"] = group
    meta = ClassicMetadata(10_000, [("range", subscription(1, [TOPIC]))])
    epoch = group.group_epoch
    member = logic.classic_join(group, "c1-new", "i-1", 30_000, meta, decode_subscription(meta.protocols[0][1]),
                                TOPICS)
    assert sorted(group.members) == ["c1-new", "c2"] and group.group_epoch == epoch
    assert member.assigned == {TOPIC: frozenset({0, 1})} and group.target["c1-new"] == {TOPIC: frozenset({0, 1})}


async def test_invalid_heartbeat_or_disabled_policy_leaves_the_classic_group_alone() -> None:
    for policy, assignor, expected in (
        ("bidirectional", "nope", E.unsupported_assignor),
        ("downgrade", None, E.group_id_not_found),
    ):
        clock, log = ManualClock(), MemoryOffsetsLog()
        config = GroupConfig(offsets_topic_num_partitions=1, initial_rebalance_delay_ms=0,
                             consumer_migration_policy=policy)
        coord = GroupCoordinator(broker_id=0, clock=clock, offsets_log=log, config=config)
        await coord.load_partition(0)
        joined = await coord.join_group(JoinRequest(
            "g", "", None, require_known_member_id=False, client_id="c", client_host="/h",
            rebalance_timeout_ms=20_000, session_timeout_ms=10_000, protocol_type="consumer",
            protocols=[("range", subscription(1, [TOPIC]))],
        ))
        await coord.sync_group("g", 1, joined.member_id, None, assignments={joined.member_id: b""})
        result = await coord.consumer_heartbeat(
            HeartbeatRequest("g", "m", 0, rebalance_timeout_ms=1, subscribed_names=(TOPIC,), owned={},
                             server_assignor=assignor),
            TOPICS,
        )
        assert result.error is expected
        assert "g" not in coord.consumer_groups.groups and list(coord.ctx.groups["g"].members) == [joined.member_id]


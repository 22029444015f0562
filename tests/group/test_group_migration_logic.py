"""The pure parts of KIP-848's online migration: the embedded consumer protocol codec (checked against
kafka-python's own encoder), the classic group ↔ consumer group conversions, a classic member's reconciliation
inside a consumer group, and its records in ``__consumer_offsets`` (the tagged ClassicMemberMetadata)."""

from __future__ import annotations

import uuid

import pytest
from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment, ConsumerProtocolSubscription

from odradek.broker.group.consumer_group import (
    ClassicMetadata,
    ConsumerGroupLogic,
    HeartbeatRequest,
)
from odradek.broker.group.consumer_protocol import (
    ConsumerProtocolError,
    decode_assignment,
    decode_subscription,
    encode_assignment,
)
from odradek.broker.group.consumer_records import group_records, load_groups
from odradek.broker.group.metadata import Group, GroupState, Member
from odradek.broker.group.migration import MigrationPolicy, can_upgrade, to_classic_members, to_consumer_group

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

"""KIP-848 reconciliation and the server-side assignors as pure logic, and the coordinator's session expiry and
reload with a ManualClock and an in-memory ``__consumer_offsets``."""

from __future__ import annotations

import asyncio
import uuid

from odradek.broker.group import GroupConfig, GroupCoordinator
from odradek.broker.group.consumer_group import ConsumerGroupLogic, HeartbeatRequest, HeartbeatResult, Partitions
from odradek.broker.group.server_assignors import AssignmentSpec, range_, uniform
from odradek.clock import ManualClock
from odradek.errors import ErrorCode

from .memlog import MemoryOffsetsLog

E = ErrorCode
T_ID = uuid.UUID(int=1)
U_ID = uuid.UUID(int=2)
TOPICS = {"t": (T_ID, 4), "u": (U_ID, 3)}


def sizes(assignment: dict[str, dict[str, frozenset[int]]]) -> list[int]:
    return sorted(sum(len(ps) for ps in a.values()) for a in assignment.values())


def flat(assignment: dict[str, dict[str, frozenset[int]]]) -> list[tuple[str, int]]:
    return sorted((t, p) for a in assignment.values() for t, ps in a.items() for p in ps)


# --- assignors ----------------------------------------------------------------------------------------------


def test_uniform_balances_and_is_sticky() -> None:
    subs = {m: frozenset({"t", "u"}) for m in ("a", "b", "c")}
    first = uniform(AssignmentSpec(subs, {"t": 4, "u": 3}, {}))
    assert sizes(first) == [2, 2, 3]
    assert flat(first) == [("t", p) for p in range(4)] + [("u", p) for p in range(3)]
    # A fourth member takes partitions only from the overloaded ones; nobody else loses any.
    subs["d"] = frozenset({"t", "u"})
    second = uniform(AssignmentSpec(subs, {"t": 4, "u": 3}, first))
    assert sizes(second) == [1, 2, 2, 2]
    moved = sum(len(set(flat({m: first[m]})) - set(flat({m: second[m]}))) for m in first)
    assert moved == 1
    # The assignment is a fixed point: given itself as the previous one, nothing moves.
    assert uniform(AssignmentSpec(subs, {"t": 4, "u": 3}, second)) == second


def test_uniform_heterogeneous_respects_subscriptions() -> None:
    subs = {"a": frozenset({"t"}), "b": frozenset({"t", "u"})}
    result = uniform(AssignmentSpec(subs, {"t": 4, "u": 3}, {}))
    assert "u" not in result["a"]
    assert flat(result) == [("t", p) for p in range(4)] + [("u", p) for p in range(3)]
    assert abs(sizes(result)[0] - sizes(result)[1]) <= 1


def test_range_gives_contiguous_ranges_in_member_order() -> None:
    subs = {"b": frozenset({"t"}), "a": frozenset({"t", "u"})}
    result = range_(AssignmentSpec(subs, {"t": 5, "u": 3}, {}))
    assert result["a"] == {"t": frozenset({0, 1, 2}), "u": frozenset({0, 1, 2})}
    assert result["b"] == {"t": frozenset({3, 4})}


# --- reconciliation -----------------------------------------------------------------------------------------


def hb(
    logic: ConsumerGroupLogic, member: str, epoch: int, owned: Partitions | None = None, **kw: object
) -> HeartbeatResult:
    if epoch == 0:
        kw.setdefault("subscribed_names", ("t",))
        kw.setdefault("rebalance_timeout_ms", 30_000)
        owned = owned if owned is not None else {}
    req = HeartbeatRequest(group_id="g", member_id=member, member_epoch=epoch, owned=owned, **kw)  # type: ignore[arg-type]
    return logic.heartbeat(req, TOPICS, lambda: "generated")


def test_revocation_before_assignment() -> None:
    logic = ConsumerGroupLogic()
    a = hb(logic, "a", 0)
    assert (a.error, a.member_epoch, a.assignment) == (E.none, 1, {"t": frozenset(range(4))})
    b = hb(logic, "b", 0)
    assert b.member_epoch == 2 and b.assignment == {}
    group = logic.groups["g"]
    # a must revoke two partitions first; it keeps epoch 1 and b cannot have them yet.
    a = hb(logic, "a", 1, {"t": frozenset(range(4))})
    assert a.member_epoch == 1 and a.assignment is not None and len(a.assignment["t"]) == 2
    assert group.members["a"].state == "unrevoked_partitions" and group.state == "Reconciling"
    assert hb(logic, "b", 2, {}).assignment is None
    assert group.members["b"].state == "unreleased_partitions"
    kept = a.assignment
    assert kept is not None
    a = hb(logic, "a", 1, kept)
    assert a.member_epoch == 2 and a.assignment is None
    b = hb(logic, "b", 2, {})
    assert b.assignment == {"t": frozenset(range(4)) - kept["t"]}
    assert group.state == "Stable"


def test_fencing_lost_response_and_leave() -> None:
    logic = ConsumerGroupLogic()
    hb(logic, "a", 0)
    assert hb(logic, "a", 5).error is E.fenced_member_epoch
    assert hb(logic, "x", 1).error is E.unknown_member_id
    assert hb(logic, "a", 0, server_assignor="sticky").error is E.unsupported_assignor
    assert hb(logic, "b", 0, rebalance_timeout_ms=-1).error is E.invalid_request
    hb(logic, "b", 0)
    hb(logic, "a", 1, {"t": frozenset(range(4))})
    a = hb(logic, "a", 1, logic.groups["g"].members["a"].assigned)
    assert a.member_epoch == 2
    # The answer was lost: a heartbeat at the previous epoch owning a subset of the assignment is accepted.
    assert hb(logic, "a", 1, logic.groups["g"].members["a"].assigned).error is E.none
    left = hb(logic, "b", -1)
    assert left.member_epoch == -1
    a = hb(logic, "a", 2, logic.groups["g"].members["a"].assigned)
    assert a.member_epoch == 3 and a.assignment == {"t": frozenset(range(4))}


def test_regex_and_new_topic_bump_the_epoch() -> None:
    logic = ConsumerGroupLogic()
    first = logic.heartbeat(
        HeartbeatRequest("g", "a", 0, rebalance_timeout_ms=1, subscribed_regex="t|v", owned={}), TOPICS, str
    )
    assert first.assignment == {"t": frozenset(range(4))}
    grown = {**TOPICS, "v": (uuid.UUID(int=3), 2)}
    again = logic.heartbeat(HeartbeatRequest("g", "a", 1, owned=first.assignment), grown, str)
    assert again.member_epoch == 2 and again.assignment == {"t": frozenset(range(4)), "v": frozenset({0, 1})}


# --- the coordinator: session expiry, persistence and reload ------------------------------------------------


async def test_session_expiry_and_reload() -> None:
    clock, log = ManualClock(), MemoryOffsetsLog()
    config = GroupConfig(offsets_topic_num_partitions=1)
    coord = GroupCoordinator(broker_id=0, clock=clock, offsets_log=log, config=config)
    await coord.load_partition(0)
    join = HeartbeatRequest("g", "a", 0, rebalance_timeout_ms=1, subscribed_names=("t", "u"), owned={})
    assert (await coord.consumer_heartbeat(join, TOPICS)).member_epoch == 1
    b = await coord.consumer_heartbeat(
        HeartbeatRequest("g", "b", 0, rebalance_timeout_ms=1, subscribed_names=("t",), owned={}), TOPICS
    )
    assert b.member_epoch == 2
    # A second coordinator reading the same log resumes the group exactly.
    other = GroupCoordinator(broker_id=1, clock=clock, offsets_log=log, config=config)
    await other.load_partition(0)
    before, after = coord.consumer_groups.groups["g"], other.consumer_groups.groups["g"]
    assert (after.group_epoch, after.assignment_epoch, after.target) == (2, 2, before.target)
    assert {m: (x.member_epoch, x.assigned, x.subscribed_names) for m, x in after.members.items()} == {
        m: (x.member_epoch, x.assigned, x.subscribed_names) for m, x in before.members.items()
    }
    # Only a heartbeats; b's session (45 s) runs out and its partitions go back to a.
    clock.advance(30_000)
    await coord.consumer_heartbeat(HeartbeatRequest("g", "a", 1, owned=None), TOPICS)
    clock.advance(20_000)
    await coord.tick()
    await asyncio.sleep(0.01)
    group = coord.consumer_groups.groups["g"]
    assert list(group.members) == ["a"] and group.group_epoch == 3
    third = GroupCoordinator(broker_id=2, clock=clock, offsets_log=log, config=config)
    await third.load_partition(0)
    assert list(third.consumer_groups.groups["g"].members) == ["a"]
    assert third.consumer_groups.groups["g"].group_epoch == 3


async def test_member_that_does_not_revoke_in_time_is_removed() -> None:
    clock, log = ManualClock(), MemoryOffsetsLog()
    coord = GroupCoordinator(
        broker_id=0, clock=clock, offsets_log=log, config=GroupConfig(offsets_topic_num_partitions=1)
    )
    await coord.load_partition(0)

    def join(member: str) -> HeartbeatRequest:
        return HeartbeatRequest("g", member, 0, rebalance_timeout_ms=10_000, subscribed_names=("t",), owned={})

    first = await coord.consumer_heartbeat(join("a"), TOPICS)
    await coord.consumer_heartbeat(join("b"), TOPICS)
    # a is told to revoke half its partitions but keeps reporting all of them.
    assert first.assignment is not None
    await coord.consumer_heartbeat(HeartbeatRequest("g", "a", 1, owned=first.assignment), TOPICS)
    clock.advance(5_000)
    await coord.consumer_heartbeat(HeartbeatRequest("g", "a", 1, owned=first.assignment), TOPICS)
    group = coord.consumer_groups.groups["g"]
    assert "a" in group.members
    clock.advance(5_001)
    await coord.tick()
    for _ in range(100):  # the fencing is a write: the member goes once its records are committed
        if list(group.members) == ["b"]:
            break
        await asyncio.sleep(0)
    assert list(group.members) == ["b"] and group.group_epoch == 3


def test_static_member_leaves_and_comes_back_with_its_partitions() -> None:
    logic = ConsumerGroupLogic()
    hb(logic, "a", 0, instance_id="i-a")
    hb(logic, "b", 0, instance_id="i-b")
    hb(logic, "a", 1, {"t": frozenset(range(4))})
    done = hb(logic, "a", 1, logic.groups["g"].members["a"].assigned)
    assert done.member_epoch == 2
    mine = logic.groups["g"].members["a"].assigned
    # A second process with the same instance id while the first is active is refused.
    assert hb(logic, "a2", 0, instance_id="i-a").error is E.unreleased_instance_id
    assert hb(logic, "a", -2, instance_id="i-a").member_epoch == -2
    assert logic.groups["g"].group_epoch == 2 and "a" in logic.groups["g"].members
    back = hb(logic, "a2", 0, instance_id="i-a")
    assert (back.error, back.member_epoch, back.assignment) == (E.none, 2, mine)
    assert "a" not in logic.groups["g"].members and logic.groups["g"].group_epoch == 2

"""The classic group coordinator's state machine, driven by a ManualClock and an in-memory
``__consumer_offsets``.

Each test is one scenario run on a fresh event loop; time only moves when the test advances the clock and
ticks.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Coroutine
from typing import Any

import pytest

from odradek.broker.group import GroupConfig, GroupCoordinator, GroupState, JoinResult, OffsetCommit
from odradek.broker.group.requests import JoinRequest
from odradek.broker.group.schema import GroupKey, GroupValue, OffsetKey, OffsetValue
from odradek.clock import ManualClock
from odradek.errors import ErrorCode

from .memlog import MemoryOffsetsLog

E = ErrorCode
SESSION = 10_000
REBALANCE = 30_000


class Harness:
    def __init__(self, log: MemoryOffsetsLog | None = None, clock: ManualClock | None = None, **config: Any):
        settings: dict[str, Any] = {"initial_rebalance_delay_ms": 100, "offsets_topic_num_partitions": 1}
        settings.update(config)
        self.config = GroupConfig(**settings)
        self.clock = clock or ManualClock()
        self.log = log or MemoryOffsetsLog()
        self.coord = GroupCoordinator(broker_id=0, clock=self.clock, offsets_log=self.log, config=self.config)

    async def load(self, *partitions: int) -> None:
        for p in partitions or range(self.config.offsets_topic_num_partitions):
            await self.coord.load_partition(p)

    async def advance(self, ms: int) -> None:
        self.clock.advance(ms)
        await self.coord.tick()
        await settle()

    def join(self, member_id: str = "", **kwargs: Any) -> asyncio.Task[JoinResult]:
        return asyncio.ensure_future(self.join_coro(member_id, **kwargs))

    def join_coro(
        self,
        member_id: str = "",
        *,
        group: str = "g",
        instance: str | None = None,
        protocols: tuple[tuple[str, bytes], ...] = (("range", b"meta"),),
        protocol_type: str = "consumer",
        session: int = SESSION,
        rebalance: int = REBALANCE,
        client_id: str = "client",
        require_known: bool = True,
    ) -> Coroutine[Any, Any, JoinResult]:
        return self.coord.join_group(JoinRequest(
            group,
            member_id,
            instance,
            require_known_member_id=require_known,
            client_id=client_id,
            client_host="/127.0.0.1",
            rebalance_timeout_ms=rebalance,
            session_timeout_ms=session,
            protocol_type=protocol_type,
            protocols=protocols,
        ))

    async def complete(self, *tasks: asyncio.Task[JoinResult]) -> list[JoinResult]:
        """Let the initial rebalance delay pass (in clock steps) until every join is answered."""
        for _ in range(20):
            if all(t.done() for t in tasks):
                break
            await self.advance(max(self.config.initial_rebalance_delay_ms, 1))
        return [await t for t in tasks]

    async def new_member(self, **kwargs: Any) -> asyncio.Task[JoinResult]:
        """KIP-394: the first JoinGroup hands out the id, the second one joins with it (and waits)."""
        first = await self.join(**kwargs)
        assert first.error is E.member_id_required
        task = self.join(first.member_id, **kwargs)
        await settle()
        return task

    async def stable_group(self, n: int, **kwargs: Any) -> list[JoinResult]:
        """n members through one rebalance and SyncGroup (the leader assigns b"<member_id>")."""
        results = await self.complete(*[await self.new_member(**kwargs) for _ in range(n)])
        await self.sync_all(results, group=kwargs.get("group", "g"))
        return results

    async def sync_all(self, results: list[JoinResult], group: str = "g") -> list[Any]:
        leader = next(r for r in results if r.member_id == r.leader_id)
        followers = [
            asyncio.ensure_future(self.coord.sync_group(group, r.generation_id, r.member_id, None))
            for r in results
            if r is not leader
        ]
        assignment = {m: m.encode() for m, _, _ in leader.members}
        lead = await self.coord.sync_group(group, leader.generation_id, leader.member_id, None, assignments=assignment)
        return [lead, *[await f for f in followers]]

    def group(self, group_id: str = "g") -> Any:
        return self.coord.ctx.groups.get(group_id)


async def settle() -> None:
    for _ in range(10):
        await asyncio.sleep(0)


# --- joining ------------------------------------------------------------------------------------------------


async def test_member_id_required_then_join_completes_as_leader(h: Harness) -> None:
    first = await h.join(client_id="my-client")
    assert first.error is E.member_id_required
    uuid = r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[0-9a-f]{4}-[0-9a-f]{12}"
    assert re.fullmatch(f"my-client-{uuid}", first.member_id)
    (result,) = await h.complete(h.join(first.member_id, client_id="my-client"))
    assert result.error is E.none
    assert (result.member_id, result.leader_id, result.generation_id) == (first.member_id, first.member_id, 1)
    assert result.protocol_name == "range" and result.protocol_type == "consumer"
    assert result.members == ((first.member_id, None, b"meta"),)
    assert h.group().state is GroupState.COMPLETING_REBALANCE


async def test_join_before_v4_needs_no_member_id_round_trip(h: Harness) -> None:
    (result,) = await h.complete(h.join(require_known=False))
    assert result.error is E.none and result.generation_id == 1


async def test_join_with_unknown_member_id_and_bad_session_timeouts(h: Harness) -> None:
    assert (await h.join("nobody")).error is E.unknown_member_id
    assert (await h.join(session=5_999)).error is E.invalid_session_timeout
    assert (await h.join(session=1_800_001)).error is E.invalid_session_timeout
    assert (await h.join(group="")).error is E.invalid_group_id


async def test_initial_delayed_join_waits_and_extends_for_new_members() -> None:
    h = Harness(initial_rebalance_delay_ms=3_000)
    await h.load()
    a = await h.new_member(rebalance=10_000)
    await h.advance(2_000)
    b = await h.new_member(rebalance=10_000)
    await h.advance(1_000)  # t=3000: B arrived during the delay, so the delay runs once more
    assert not a.done() and not b.done()
    await h.advance(2_999)
    assert not a.done()
    await h.advance(1)  # t=6000
    ra, rb = await a, await b
    assert ra.generation_id == rb.generation_id == 1
    assert ra.leader_id == rb.leader_id == ra.member_id  # the first member to join leads
    assert len(ra.members) == 2 and rb.members == ()


async def test_initial_delay_is_bounded_by_the_rebalance_timeout() -> None:
    h = Harness(initial_rebalance_delay_ms=3_000)
    await h.load()
    first = await h.new_member(rebalance=5_000)
    await h.advance(2_500)
    second = await h.new_member(rebalance=5_000)  # arrives during the delay: extend, within 5 s in all
    await h.advance(2_499)
    assert not first.done()
    third = await h.new_member(rebalance=5_000)
    await h.advance(1)  # t=5000: the rebalance timeout caps the delay although members keep coming
    results = [await t for t in (first, second, third)]
    assert [r.generation_id for r in results] == [1, 1, 1]


async def test_sync_hands_out_the_leaders_assignment_and_stores_it(h: Harness) -> None:
    results = await h.stable_group(2)
    leader, follower = results
    syncs = await h.sync_all(results)
    assert [s.error for s in syncs] == [E.none, E.none]
    assert h.group().state is GroupState.STABLE
    follower_sync = await h.coord.sync_group("g", 1, follower.member_id, None)
    assert follower_sync.assignment == follower.member_id.encode()
    stored = [v for k, v in h.log.records(0) if isinstance(k, GroupKey)]
    assert isinstance(stored[-1], GroupValue)
    assert stored[-1].generation == 1 and stored[-1].leader == leader.member_id
    assert {m.member_id: m.assignment for m in stored[-1].members} == {
        r.member_id: r.member_id.encode() for r in results
    }


async def test_follower_sync_waits_for_the_leader(h: Harness) -> None:
    ra, rb = await h.complete(await h.new_member(), await h.new_member())
    leader, follower = (ra, rb) if ra.member_id == ra.leader_id else (rb, ra)
    waiting = asyncio.ensure_future(h.coord.sync_group("g", 1, follower.member_id, None))
    await settle()
    assert not waiting.done()
    await h.coord.sync_group("g", 1, leader.member_id, None, assignments={follower.member_id: b"yours"})
    assert (await waiting).assignment == b"yours"


async def test_sync_errors(h: Harness) -> None:
    (r,) = await h.stable_group(1)
    assert (await h.coord.sync_group("g", 2, r.member_id, None)).error is E.illegal_generation
    assert (await h.coord.sync_group("g", 1, "ghost", None)).error is E.unknown_member_id
    assert (await h.coord.sync_group("nogroup", 1, "ghost", None)).error is E.unknown_member_id
    bad = await h.coord.sync_group("g", 1, r.member_id, None, protocol_name="roundrobin")
    assert bad.error is E.inconsistent_group_protocol


# --- protocol selection -------------------------------------------------------------------------------------


async def test_protocol_selected_by_votes_among_commonly_supported(h: Harness) -> None:
    prefs = [
        (("range", b"a"), ("roundrobin", b"a")),
        (("roundrobin", b"b"), ("range", b"b"), ("sticky", b"b")),
        (("sticky", b"c"), ("roundrobin", b"c"), ("range", b"c")),
    ]
    results = await h.complete(*[await h.new_member(protocols=p) for p in prefs])
    # sticky is not supported by the first member; votes: range 1, roundrobin 2.
    assert {r.protocol_name for r in results} == {"roundrobin"}
    leader = next(r for r in results if r.members)
    assert [m[2] for m in leader.members] == [b"a", b"b", b"c"]


async def test_inconsistent_protocols_are_rejected(h: Harness) -> None:
    await h.stable_group(1)
    assert (await h.join(protocols=(("sticky", b""),))).error is E.inconsistent_group_protocol
    assert (await h.join(protocol_type="connect")).error is E.inconsistent_group_protocol
    assert (await h.join(group="other", protocols=())).error is E.inconsistent_group_protocol


async def test_protocol_tie_goes_to_the_first_vote_in_join_order(h: Harness) -> None:
    both = (("a", b""), ("b", b""))
    t1 = await h.new_member(protocols=both)
    t2 = await h.new_member(protocols=(("b", b""), ("a", b"")))
    r1, r2 = await h.complete(t1, t2)
    assert r1.protocol_name == r2.protocol_name == "a"


# --- heartbeats, session and rebalance timeouts -------------------------------------------------------------


async def test_heartbeat_answers(h: Harness) -> None:
    (r,) = await h.stable_group(1)
    assert h.coord.heartbeat("g", 1, r.member_id, None) is E.none
    assert h.coord.heartbeat("g", 0, r.member_id, None) is E.illegal_generation
    assert h.coord.heartbeat("g", 1, "ghost", None) is E.unknown_member_id
    assert h.coord.heartbeat("nogroup", 1, "ghost", None) is E.unknown_member_id
    other = await h.new_member()  # a new member puts the group into PreparingRebalance
    assert h.coord.heartbeat("g", 1, r.member_id, None) is E.rebalance_in_progress
    other.cancel()


async def test_session_expiry_removes_member_and_rebalances(h: Harness) -> None:
    a, b = await h.stable_group(2)
    for _ in range(3):
        await h.advance(SESSION // 2)
        assert h.coord.heartbeat("g", 1, a.member_id, None) in (E.none, E.rebalance_in_progress)
    group = h.group()
    assert not group.has(b.member_id) and group.has(a.member_id)
    assert group.state is GroupState.PREPARING_REBALANCE
    assert h.coord.heartbeat("g", 1, b.member_id, None) is E.unknown_member_id
    again = await h.join(a.member_id)
    assert again.generation_id == 2 and again.leader_id == a.member_id
    assert [m[0] for m in again.members] == [a.member_id]


async def test_rebalance_timeout_drops_members_that_do_not_rejoin(h: Harness) -> None:
    a, b = await h.stable_group(2)
    leader, follower = (a, b) if a.member_id == a.leader_id else (b, a)
    rejoin = h.join(leader.member_id)  # the leader rejoining forces a rebalance
    await settle()
    for _ in range(REBALANCE // 5_000):
        assert not rejoin.done()
        await h.advance(5_000)
        h.coord.heartbeat("g", 1, follower.member_id, None)  # alive, but never rejoins
    result = await rejoin
    assert result.generation_id == 2 and [m[0] for m in result.members] == [leader.member_id]
    assert h.coord.heartbeat("g", 2, follower.member_id, None) is E.unknown_member_id


async def test_member_that_never_syncs_is_removed_after_the_rebalance_timeout(h: Harness) -> None:
    ra, rb = await h.complete(await h.new_member(), await h.new_member())
    leader, follower = (ra, rb) if ra.member_id == ra.leader_id else (rb, ra)
    await h.coord.sync_group("g", 1, leader.member_id, None, assignments={})
    assert h.group().state is GroupState.STABLE
    for _ in range(REBALANCE // 5_000):
        await h.advance(5_000)
        h.coord.heartbeat("g", 1, leader.member_id, None)
        h.coord.heartbeat("g", 1, follower.member_id, None)
    assert not h.group().has(follower.member_id)
    assert h.group().state is GroupState.PREPARING_REBALANCE


async def test_new_member_id_expires_if_second_join_never_comes(h: Harness) -> None:
    first = await h.join()
    assert first.member_id in h.group().pending_members
    await h.advance(SESSION)
    assert not h.group().pending_members
    assert (await h.join(first.member_id)).error is E.unknown_member_id


# --- leaving ------------------------------------------------------------------------------------------------


async def test_leaving_leader_is_replaced_by_first_remaining_member(h: Harness) -> None:
    results = await h.stable_group(3)
    order = [m[0] for m in next(r for r in results if r.members).members]
    error, per_member = await h.coord.leave_group("g", [(order[0], None)])
    assert (error, per_member) == (E.none, [E.none])
    assert h.group().leader_id == order[1]
    t1, t2 = h.join(order[1]), h.join(order[2])
    r1, r2 = await t1, await t2
    assert r1.leader_id == r2.leader_id == order[1] and r1.generation_id == 2
    assert await h.coord.leave_group("g", [("ghost", None)]) == (E.none, [E.unknown_member_id])


async def test_last_member_leaving_empties_the_group_and_stores_it(h: Harness) -> None:
    (r,) = await h.stable_group(1)
    await h.coord.leave_group("g", [(r.member_id, None)])
    await settle()
    group = h.group()
    assert group.state is GroupState.EMPTY and group.generation_id == 2
    last = [v for k, v in h.log.records(0) if isinstance(k, GroupKey)][-1]
    assert isinstance(last, GroupValue)
    assert (last.members, last.generation, last.protocol, last.protocol_type) == ([], 2, None, "consumer")


# --- static membership --------------------------------------------------------------------------------------


async def test_static_member_rejoin_takes_its_place_without_rebalance(h: Harness) -> None:
    (r1,) = await h.complete(h.join(instance="i-1"))  # static members skip MEMBER_ID_REQUIRED
    assert r1.member_id.startswith("i-1-")
    await h.sync_all([r1])
    other = await h.new_member()
    r1, r2 = await h.complete(h.join(r1.member_id, instance="i-1"), other)
    assert r1.generation_id == r2.generation_id == 2 and r1.leader_id == r1.member_id
    await h.sync_all([r1, r2])
    rejoined = await h.join(instance="i-1")
    assert rejoined.error is E.none and rejoined.member_id != r1.member_id
    assert rejoined.generation_id == 2 and h.group().state is GroupState.STABLE
    assert rejoined.leader_id == r1.member_id  # the old id: the rejoined member must not assign
    assert h.group().leader_id == rejoined.member_id
    assert h.coord.heartbeat("g", 2, r1.member_id, "i-1") is E.fenced_instance_id
    assert h.coord.heartbeat("g", 2, rejoined.member_id, "i-1") is E.none
    sync = await h.coord.sync_group("g", 2, rejoined.member_id, "i-1")
    assert sync.assignment == r1.member_id.encode()
    stored = [v for k, v in h.log.records(0) if isinstance(k, GroupKey)][-1]
    assert isinstance(stored, GroupValue)
    assert [m.member_id for m in stored.members] == [rejoined.member_id, r2.member_id]


async def test_static_member_survives_rebalance_without_rejoining(h: Harness) -> None:
    (rs,) = await h.complete(h.join(instance="i-1"))
    await h.sync_all([rs])
    newcomer = await h.new_member()
    for _ in range(REBALANCE // 5_000 - 1):  # the static member heartbeats but never rejoins
        await h.advance(5_000)
        assert h.coord.heartbeat("g", 1, rs.member_id, "i-1") is E.rebalance_in_progress
    assert not newcomer.done()
    await h.advance(5_000)
    result = await newcomer  # completed at the rebalance timeout, keeping the static member
    assert result.generation_id == 2 and result.leader_id == result.member_id
    assert [m[0] for m in result.members] == [rs.member_id, result.member_id]
    assert h.coord.heartbeat("g", 2, rs.member_id, "i-1") is E.none


async def test_static_member_leaves_by_instance_id(h: Harness) -> None:
    (rs,) = await h.complete(h.join(instance="i-1"))
    await h.sync_all([rs])
    assert await h.coord.leave_group("g", [("", "i-1")]) == (E.none, [E.none])
    assert await h.coord.leave_group("g", [("wrong", "i-9")]) == (E.none, [E.unknown_member_id])


async def test_fenced_static_member_cannot_join_or_commit(h: Harness) -> None:
    (rs,) = await h.complete(h.join(instance="i-1"))
    await h.sync_all([rs])
    assert (await h.join("stale-id", instance="i-1")).error is E.fenced_instance_id
    result = await h.coord.commit_offsets("g", "stale-id", "i-1", 1, {("t", 0): OffsetCommit(5)})
    assert result == {("t", 0): E.fenced_instance_id}


# --- offsets ------------------------------------------------------------------------------------------------


async def test_commit_and_fetch_offsets(h: Harness) -> None:
    (r,) = await h.stable_group(1)
    result = await h.coord.commit_offsets(
        "g", r.member_id, None, 1, {("t", 0): OffsetCommit(10, 2, "m"), ("t", 1): OffsetCommit(20)}
    )
    assert result == {("t", 0): E.none, ("t", 1): E.none}
    error, offsets = h.coord.fetch_offsets("g", [("t", 0), ("t", 2)])
    assert error is E.none
    assert offsets[("t", 0)] == OffsetValue(10, 2, "m", h.clock.now_ms())
    assert offsets[("t", 2)] is None
    assert set(h.coord.fetch_offsets("g", None)[1]) == {("t", 0), ("t", 1)}
    assert h.coord.fetch_offsets("unknown", [("t", 0)]) == (E.none, {("t", 0): None})


async def test_commit_checks_membership_and_generation(h: Harness) -> None:
    tp = {("t", 0): OffsetCommit(1)}
    assert await h.coord.commit_offsets("g", "m", None, 3, tp) == {("t", 0): E.illegal_generation}
    ra, _ = await h.complete(await h.new_member(), await h.new_member())
    assert await h.coord.commit_offsets("g", ra.member_id, None, 1, tp) == {("t", 0): E.rebalance_in_progress}
    assert await h.coord.commit_offsets("g", ra.member_id, None, 0, tp) == {("t", 0): E.illegal_generation}
    assert await h.coord.commit_offsets("g", "ghost", None, 1, tp) == {("t", 0): E.unknown_member_id}
    assert await h.coord.commit_offsets("g", "", None, -1, tp) == {("t", 0): E.unknown_member_id}
    too_big = {("t", 0): OffsetCommit(1, -1, "x" * 5000)}
    standalone = await h.coord.commit_offsets("solo", "", None, -1, too_big | {("t", 1): OffsetCommit(7)})
    assert standalone == {("t", 0): E.offset_metadata_too_large, ("t", 1): E.none}


async def test_failed_appends_map_to_group_errors(h: Harness) -> None:
    h.log.fail_with = E.not_leader_or_follower
    result = await h.coord.commit_offsets("solo", "", None, -1, {("t", 0): OffsetCommit(1)})
    assert result == {("t", 0): E.not_coordinator}
    assert h.coord.fetch_offsets("solo", [("t", 0)])[1] == {("t", 0): None}
    h.log.fail_with = E.not_enough_replicas
    results = await h.complete(await h.new_member(), await h.new_member())
    syncs = await h.sync_all(results)
    assert [s.error for s in syncs] == [E.coordinator_not_available] * 2
    assert h.group().state is GroupState.PREPARING_REBALANCE


async def test_offsets_wait_until_the_append_is_committed(h: Harness) -> None:
    h.log.gate = asyncio.Event()
    commit = asyncio.ensure_future(h.coord.commit_offsets("solo", "", None, -1, {("t", 0): OffsetCommit(3)}))
    await settle()
    assert not commit.done()
    assert h.coord.fetch_offsets("solo", [("t", 0)])[1] == {("t", 0): None}
    h.log.gate.set()
    assert await commit == {("t", 0): E.none}
    assert h.coord.fetch_offsets("solo", [("t", 0)])[1][("t", 0)] is not None


async def test_persistence_round_trip_into_a_new_coordinator() -> None:
    h = Harness()
    await h.load()
    results = await h.stable_group(2)
    member = results[0]
    await h.coord.commit_offsets("g", member.member_id, None, 1, {("t", 0): OffsetCommit(42, 5, "meta")})
    await h.coord.commit_offsets("g", member.member_id, None, 1, {("t", 0): OffsetCommit(43, 5, "meta")})
    await h.coord.commit_offsets("solo", "", None, -1, {("u", 3): OffsetCommit(7)})
    keys = [k for k, _ in h.log.records(0)]
    assert OffsetKey("g", "t", 0) in keys and GroupKey("g") in keys

    h2 = Harness(log=h.log, clock=h.clock)
    await h2.load()
    group = h2.group()
    assert group.state is GroupState.STABLE and group.generation_id == 1
    assert group.protocol_name == "range" and group.leader_id == h.group().leader_id
    assert list(group.members) == list(h.group().members)
    assert h2.coord.fetch_offsets("g", None)[1] == {("t", 0): OffsetValue(43, 5, "meta", h.clock.now_ms())}
    assert h2.coord.fetch_offsets("solo", None)[1] == {("u", 3): OffsetValue(7, -1, "", h.clock.now_ms())}
    # Loaded members keep their generation and assignment and must keep heartbeating.
    assert h2.coord.heartbeat("g", 1, member.member_id, None) is E.none
    sync = await h2.coord.sync_group("g", 1, member.member_id, None)
    assert sync.assignment == member.member_id.encode()
    await h2.advance(SESSION + 1)  # nobody heartbeats any more: both expire and the group empties
    assert h2.group().state is GroupState.EMPTY and h2.group().generation_id == 2


# --- coordinator ownership ----------------------------------------------------------------------------------


async def test_not_coordinator_loading_and_unloading() -> None:
    h = Harness(offsets_topic_num_partitions=50)
    mine, other = "my-group", "hello"  # partitions 12 and 22, as Kafka places them
    assert (h.coord.partition_for(mine), h.coord.partition_for(other)) == (12, 22)
    loading = h.coord.load_partition(12)
    # Awaiting the coroutines directly runs them before the loading task gets a turn.
    assert (await h.join_coro(group=mine)).error is E.coordinator_load_in_progress
    assert h.coord.heartbeat(mine, 1, "m", None) is E.none  # answered blindly while loading, as Kafka does
    assert (await h.coord.sync_group(mine, 1, "m", None)).error is E.rebalance_in_progress
    await loading
    assert (await h.join(group=other)).error is E.not_coordinator
    assert h.coord.fetch_offsets(other, None)[0] is E.not_coordinator
    (result,) = await h.complete(await h.new_member(group=mine))
    await h.sync_all([result], group=mine)
    newcomer = await h.new_member(group=mine)  # a rebalance in progress when the partition moves away
    h.coord.unload_partition(12)
    assert (await newcomer).error is E.not_coordinator
    assert h.coord.heartbeat(mine, 1, result.member_id, None) is E.not_coordinator
    assert (await h.join(group=mine)).error is E.not_coordinator


# --- listing, describing, deleting --------------------------------------------------------------------------


async def test_list_and_describe(h: Harness) -> None:
    (r,) = await h.stable_group(1)
    await h.coord.commit_offsets("solo", "", None, -1, {("t", 0): OffsetCommit(1)})
    error, groups = h.coord.list_groups()
    assert error is E.none
    assert {(g.group_id, g.protocol_type, g.state) for g in groups} == {
        ("g", "consumer", "Stable"),
        ("solo", "", "Empty"),
    }
    assert [g.group_id for g in h.coord.list_groups(states=["stable"])[1]] == ["g"]
    assert h.coord.list_groups(types=["consumer"])[1] == []
    error, summary = h.coord.describe_group("g")
    assert summary is not None and summary.state == "Stable" and summary.protocol == "range"
    (m,) = summary.members
    assert (m.member_id, m.client_id, m.metadata, m.assignment) == (
        r.member_id,
        "client",
        b"meta",
        r.member_id.encode(),
    )
    assert h.coord.describe_group("nope") == (E.none, None)


async def test_delete_groups(h: Harness) -> None:
    (r,) = await h.stable_group(1)
    await h.coord.commit_offsets("g", r.member_id, None, 1, {("t", 0): OffsetCommit(9)})
    expected = {"g": E.non_empty_group, "nope": E.group_id_not_found}
    assert await h.coord.delete_groups(["g", "nope"]) == expected
    await h.coord.leave_group("g", [(r.member_id, None)])
    await settle()
    assert await h.coord.delete_groups(["g"]) == {"g": E.none}
    assert h.group() is None and h.coord.fetch_offsets("g", None) == (E.none, {})
    records = h.log.records(0)
    assert (OffsetKey("g", "t", 0), None) in records and records[-1] == (GroupKey("g"), None)
    h2 = Harness(log=h.log, clock=h.clock)
    await h2.load()
    assert h2.group() is None
    assert await h.coord.delete_groups(["g"]) == {"g": E.group_id_not_found}


# --- offset retention ---------------------------------------------------------------------------------------


async def test_offsets_expire_after_retention() -> None:
    hour = 3_600_000
    h = Harness(
        offsets_retention_minutes=60, offsets_retention_check_interval_ms=60_000, max_session_timeout_ms=10 * hour
    )
    await h.load()
    await h.coord.commit_offsets("solo", "", None, -1, {("t", 0): OffsetCommit(1)})
    (r,) = await h.stable_group(1, session=5 * hour)
    await h.coord.commit_offsets("g", r.member_id, None, 1, {("t", 0): OffsetCommit(2)})
    await h.advance(hour - 60_000)
    assert h.coord.fetch_offsets("solo", [("t", 0)])[1][("t", 0)] is not None
    await h.advance(30_000)
    await h.advance(30_000)
    assert h.coord.ctx.groups.get("solo") is None  # standalone: a retention period after its commit
    assert h.coord.fetch_offsets("g", [("t", 0)])[1][("t", 0)] is not None  # members keep theirs
    await h.coord.leave_group("g", [(r.member_id, None)])
    await settle()
    await h.advance(hour - 60_000)
    assert h.coord.fetch_offsets("g", [("t", 0)])[1][("t", 0)] is not None
    await h.advance(60_000)  # a retention period after the group became Empty
    assert h.group() is None
    tombstones = [k for k, v in h.log.records(0) if v is None]
    assert OffsetKey("solo", "t", 0) in tombstones and OffsetKey("g", "t", 0) in tombstones
    assert GroupKey("g") in tombstones


@pytest.mark.parametrize("max_size", [1, 2])
async def test_group_max_size(max_size: int) -> None:
    h = Harness(max_size=max_size)
    await h.load()
    await h.stable_group(max_size)
    refused = await h.join()
    assert refused.error is E.group_max_size_reached and refused.member_id == ""


# --- rejoins that do not change the group ----------------------------------------------------------------------


async def test_rejoins_with_unchanged_metadata_do_not_rebalance(h: Harness) -> None:
    a, b = await h.complete(await h.new_member(), await h.new_member())
    leader, follower = (a, b) if a.member_id == a.leader_id else (b, a)
    retry = await h.join(follower.member_id)  # a lost JoinGroup answer, asked for again while awaiting sync
    assert (retry.generation_id, retry.leader_id, retry.members) == (1, leader.member_id, ())
    assert h.group().state is GroupState.COMPLETING_REBALANCE
    await h.sync_all([leader, follower])
    again = await h.join(follower.member_id)  # a follower with the same metadata in Stable: nothing to do
    assert again.generation_id == 1 and h.group().state is GroupState.STABLE
    changed = h.join(follower.member_id, protocols=(("range", b"new topics"),))
    await settle()
    assert h.group().state is GroupState.PREPARING_REBALANCE
    assert (await h.coord.sync_group("g", 1, leader.member_id, None)).error is E.rebalance_in_progress
    first, second = await h.join(leader.member_id), await changed
    assert first.generation_id == second.generation_id == 2


async def test_a_second_join_supersedes_the_first(h: Harness) -> None:
    a, b = await h.stable_group(2)
    stale = h.join(a.member_id)  # the group now waits for b to rejoin
    await settle()
    fresh = h.join(a.member_id)
    assert (await stale).error is E.rebalance_in_progress
    rb = await h.join(b.member_id)
    assert (await fresh).generation_id == rb.generation_id == 2


async def test_static_rejoin_with_new_protocols_or_while_awaiting_sync_rebalances(h: Harness) -> None:
    (r,) = await h.complete(h.join(instance="i-1"))
    # Still CompletingRebalance: the old id may already be in the leader's plan, so a new generation starts.
    r2 = await h.join(instance="i-1")
    assert r2.generation_id == 2 and r2.member_id != r.member_id
    await h.sync_all([r2])
    r3 = await h.join(instance="i-1", protocols=(("roundrobin", b""), ("range", b"")))  # the choice would change
    assert r3.generation_id == 3 and r3.protocol_name == "roundrobin"


async def test_static_leader_rejoin_may_skip_assignment_and_store_failure_reverts(h: Harness) -> None:
    (r,) = await h.complete(h.join(instance="i-1"))
    await h.sync_all([r])
    rejoined = await h.coord.join_group(JoinRequest(
        "g",
        "",
        "i-1",
        require_known_member_id=True,
        client_id="c",
        client_host="h",
        rebalance_timeout_ms=REBALANCE,
        session_timeout_ms=SESSION,
        protocol_type="consumer",
        protocols=[("range", b"meta")],
        supports_skip_assignment=True,
    ))
    assert rejoined.skip_assignment and rejoined.leader_id == rejoined.member_id
    assert [m[0] for m in rejoined.members] == [rejoined.member_id]
    h.log.fail_with = E.not_leader_or_follower
    failed = await h.join(instance="i-1")
    assert (failed.error, failed.member_id) == (E.not_coordinator, "")
    assert h.group().static_members == {"i-1": rejoined.member_id}  # the last stored id still holds
    assert h.coord.heartbeat("g", 1, rejoined.member_id, "i-1") is E.none


# --- loading -------------------------------------------------------------------------------------------------


async def test_load_skips_foreign_records_and_unload_wins_over_a_running_load() -> None:
    from odradek.protocol.records import encode_batch

    h = Harness()
    await h.load()
    await h.coord.commit_offsets("solo", "", None, -1, {("t", 0): OffsetCommit(5)})
    junk = encode_batch([(b"\x00\x07junk", b"x", ()), (None, b"no key", ())], timestamp_ms=0)
    await h.log.append(0, junk)
    for i in range(200):  # enough batches for the loader to yield to the event loop in between
        await h.coord.commit_offsets("solo", "", None, -1, {("t", 1): OffsetCommit(i)})

    h2 = Harness(log=h.log, clock=h.clock)
    await h2.load()
    assert h2.coord.fetch_offsets("solo", None)[1][("t", 1)].offset == 199  # type: ignore[union-attr]

    h3 = Harness(log=h.log, clock=h.clock)
    loading = h3.coord.load_partition(0)
    await asyncio.sleep(0)
    h3.coord.unload_partition(0)
    await loading
    assert not h3.coord.owns(0) and not h3.coord.is_loading(0) and h3.group("solo") is None


async def test_offsets_of_deleted_topics_are_removed(h: Harness) -> None:
    await h.coord.commit_offsets("solo", "", None, -1, {("gone", 0): OffsetCommit(1), ("kept", 0): OffsetCommit(2)})
    await h.coord.commit_offsets("only-gone", "", None, -1, {("gone", 1): OffsetCommit(3)})
    assert await h.coord.remove_offsets_for_topics(["gone"]) == 2
    assert set(h.coord.fetch_offsets("solo", None)[1]) == {("kept", 0)}
    assert h.group("only-gone") is None
    assert (OffsetKey("solo", "gone", 0), None) in h.log.records(0)


async def test_frequent_heartbeats_keep_one_timer_per_member(h: Harness) -> None:
    (r,) = await h.stable_group(1)
    timers = len(h.coord.ctx.timers)
    for _ in range(1_000):
        await h.advance(10)
        assert h.coord.heartbeat("g", 1, r.member_id, None) is E.none
    assert len(h.coord.ctx.timers) <= timers + 1
    await h.advance(SESSION)
    assert not h.group().has(r.member_id)


async def test_load_keeps_the_last_record_of_a_key_whatever_its_key_version() -> None:
    import struct

    from odradek.broker.group.schema import encode_key, encode_offset_value
    from odradek.protocol.records import encode_batch

    def v0_key(group: str, topic: str, partition: int) -> bytes:
        return struct.pack(
            f">hh{len(group)}sh{len(topic)}si", 0, len(group), group.encode(), len(topic), topic.encode(), partition
        )

    log = MemoryOffsetsLog()
    later_v1 = [
        (v0_key("g", "t", 0), encode_offset_value(OffsetValue(1, -1, "", 0))),
        (encode_key(OffsetKey("g", "t", 0)), encode_offset_value(OffsetValue(2, -1, "", 0))),
    ]
    later_v0 = [
        (encode_key(OffsetKey("g", "t", 1)), encode_offset_value(OffsetValue(3, -1, "", 0))),
        (v0_key("g", "t", 1), encode_offset_value(OffsetValue(4, -1, "", 0))),
    ]
    for key, value in later_v1 + later_v0:
        await log.append(0, encode_batch([(key, value, ())], timestamp_ms=0))
    h = Harness(log=log)
    await h.load()
    offsets = h.coord.fetch_offsets("g", None)[1]
    assert {tp: v.offset for tp, v in offsets.items() if v is not None} == {("t", 0): 2, ("t", 1): 4}


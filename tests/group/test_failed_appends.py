"""A failed append to ``__consumer_offsets`` leaves the coordinator's memory as it was, on every path that writes
(classic SyncGroup, KIP-848 heartbeats and their migrations, offset commits, transactional offset commits), and
the next successful request writes the records that bring the log up to memory.

Each scenario compares the live coordinator with one loaded from the same in-memory log: the state a failover
would serve.
"""

from __future__ import annotations

import copy
import uuid
from typing import Any

from odradek.broker.group import GroupCoordinator, GroupState, OffsetCommit
from odradek.broker.group.consumer_group import ConsumerGroupState, HeartbeatRequest
from odradek.broker.group.schema import GroupKey, OffsetKey

from .test_coordinator import E, Harness, settle
from .test_group_migration_logic import assignment, subscription
from .test_txn_offsets import EPOCH, marker

TOPICS = {"t": (uuid.UUID(int=1), 4)}


def consumer_view(group: ConsumerGroupState | None) -> Any:
    """What a consumer group's records hold, copied."""
    if group is None:
        return None
    members = {
        m.member_id: (m.member_epoch, m.previous_member_epoch, m.state, m.assigned, m.revoking, m.subscribed_names)
        for m in group.members.values()
    }
    return copy.deepcopy((group.group_epoch, group.assignment_epoch, group.target, members))


async def reloaded(h: Harness) -> GroupCoordinator:
    other = GroupCoordinator(broker_id=1, clock=h.clock, offsets_log=h.log, config=h.config)
    await other.load_partition(0)
    return other


def join(member: str, epoch: int = 0) -> HeartbeatRequest:
    return HeartbeatRequest("c", member, epoch, rebalance_timeout_ms=10_000, subscribed_names=("t",), owned={})


async def test_failed_sync_stores_nothing_and_the_next_generation_is_stored(h: Harness) -> None:
    (a,) = await h.stable_group(1)
    written = len(h.log.batches[0])
    rejoin = h.join(a.member_id)
    (second,) = await h.complete(rejoin)
    assert second.generation_id == 2
    h.log.fail_with = E.not_enough_replicas
    sync = await h.coord.sync_group("g", 2, a.member_id, None, assignments={a.member_id: b"new"})
    assert sync.error is E.coordinator_not_available
    assert len(h.log.batches[0]) == written
    group = h.group()
    # Kafka's classic rule: a failed store resets the assignment and rebalances; nothing of generation 2 stays.
    assert group.state is GroupState.PREPARING_REBALANCE and group.members[a.member_id].assignment == b""
    loaded = (await reloaded(h)).ctx.groups["g"]
    assert loaded.generation_id == 1 and loaded.members[a.member_id].assignment == a.member_id.encode()
    h.log.fail_with = None
    (third,) = await h.complete(h.join(a.member_id))
    sync = await h.coord.sync_group("g", third.generation_id, a.member_id, None, assignments={a.member_id: b"new"})
    assert sync.error is E.none and sync.assignment == b"new"
    loaded = (await reloaded(h)).ctx.groups["g"]
    assert (loaded.generation_id, loaded.members[a.member_id].assignment) == (third.generation_id, b"new")


async def test_failed_offset_commit_changes_nothing(h: Harness) -> None:
    (a,) = await h.stable_group(1)
    ok = await h.coord.commit_offsets("g", a.member_id, None, 1, {("t", 0): OffsetCommit(5)})
    assert ok == {("t", 0): E.none}
    h.log.fail_with = E.kafka_storage_error
    failed = await h.coord.commit_offsets("g", a.member_id, None, 1, {("t", 0): OffsetCommit(9)})
    assert failed == {("t", 0): E.not_coordinator}
    # A standalone committer's group does not come into being from a commit that was never stored.
    solo = await h.coord.commit_offsets("solo", "", None, -1, {("t", 1): OffsetCommit(3)})
    assert solo == {("t", 1): E.not_coordinator}
    assert "solo" not in h.coord.ctx.groups
    assert h.coord.fetch_offsets("g", None)[1][("t", 0)].offset == 5
    assert h.coord.unstable_offsets("g", [("t", 0)]) == set()
    h.log.fail_with = None
    assert await h.coord.commit_offsets("g", a.member_id, None, 1, {("t", 0): OffsetCommit(11)}) == {("t", 0): E.none}
    assert await h.coord.commit_offsets("solo", "", None, -1, {("t", 1): OffsetCommit(3)}) == {("t", 1): E.none}
    other = await reloaded(h)
    for group_id in ("g", "solo"):
        assert other.fetch_offsets(group_id, None) == h.coord.fetch_offsets(group_id, None)
    assert h.coord.fetch_offsets("g", None)[1][("t", 0)].offset == 11


async def test_failed_offset_deletes_and_group_deletes_keep_everything(h: Harness) -> None:
    await h.coord.commit_offsets("solo", "", None, -1, {("t", 0): OffsetCommit(1), ("t", 1): OffsetCommit(2)})
    h.log.fail_with = E.not_enough_replicas
    error, _ = await h.coord.delete_offsets("solo", [("t", 0)])
    assert error is E.coordinator_not_available
    assert await h.coord.delete_groups(["solo"]) == {"solo": E.coordinator_not_available}
    assert set(h.coord.fetch_offsets("solo", None)[1]) == {("t", 0), ("t", 1)}
    assert h.coord.ctx.groups["solo"].state is GroupState.EMPTY
    h.log.fail_with = None
    assert (await h.coord.delete_offsets("solo", [("t", 0)]))[0] is E.none
    assert set((await reloaded(h)).fetch_offsets("solo", None)[1]) == {("t", 1)}
    assert await h.coord.delete_groups(["solo"]) == {"solo": E.none}
    assert "solo" not in (await reloaded(h)).ctx.groups


async def test_failed_txn_offset_commit_keeps_the_pending_offsets(h: Harness) -> None:
    pid, epoch = 7, EPOCH
    first = await h.coord.commit_txn_offsets("g", pid, epoch, "", None, -1, {("t", 0): OffsetCommit(10)})
    assert first == {("t", 0): E.none}
    h.log.fail_with = E.not_enough_replicas
    failed = await h.coord.commit_txn_offsets("g", pid, epoch, "", None, -1, {("t", 0): OffsetCommit(20)})
    assert failed == {("t", 0): E.coordinator_not_available}
    pending = h.coord.ctx.groups["g"].pending_txn_offsets[pid][("t", 0)]
    assert pending.value.offset == 10
    h.log.fail_with = None
    await h.log.append(0, marker(pid, True))
    await h.coord.complete_transaction(0, pid, True)
    assert h.coord.fetch_offsets("g", None)[1][("t", 0)].offset == 10
    second = await h.coord.commit_txn_offsets("g", pid, epoch, "", None, -1, {("t", 0): OffsetCommit(30)})
    assert second == {("t", 0): E.none}
    other = await reloaded(h)
    assert other.ctx.groups["g"].pending_txn_offsets[pid][("t", 0)].value.offset == 30
    assert other.fetch_offsets("g", None) == h.coord.fetch_offsets("g", None)


async def test_failed_consumer_heartbeat_reverts_the_group_and_the_next_one_writes_it_all(h: Harness) -> None:
    a = await h.coord.consumer_heartbeat(join("a"), TOPICS)
    assert a.error is E.none and a.member_epoch == 1
    before = consumer_view(h.coord.consumer_groups.groups["c"])
    h.log.fail_with = E.not_enough_replicas
    b = await h.coord.consumer_heartbeat(join("b"), TOPICS)
    assert b.error is E.coordinator_not_available
    assert consumer_view(h.coord.consumer_groups.groups["c"]) == before
    assert consumer_view((await reloaded(h)).consumer_groups.groups["c"]) == before
    # A brand-new group that was never stored is not there either.
    assert (await h.coord.consumer_heartbeat(
        HeartbeatRequest("d", "x", 0, rebalance_timeout_ms=10_000, subscribed_names=("t",), owned={}), TOPICS
    )).error is E.coordinator_not_available
    assert "d" not in h.coord.consumer_groups.groups
    h.log.fail_with = None
    b = await h.coord.consumer_heartbeat(join("b"), TOPICS)
    assert b.error is E.none and b.member_epoch == 2
    other = await reloaded(h)
    assert consumer_view(other.consumer_groups.groups["c"]) == consumer_view(h.coord.consumer_groups.groups["c"])
    assert other.ctx.consumer_committed == h.coord.ctx.consumer_committed


async def test_failed_consumer_leave_and_session_expiry_keep_the_member(h: Harness) -> None:
    await h.coord.consumer_heartbeat(join("a"), TOPICS)
    await h.coord.consumer_heartbeat(join("b"), TOPICS)
    before = consumer_view(h.coord.consumer_groups.groups["c"])
    h.log.fail_with = E.not_enough_replicas
    left = await h.coord.consumer_heartbeat(HeartbeatRequest("c", "a", -1), TOPICS)
    assert left.error is E.coordinator_not_available
    assert consumer_view(h.coord.consumer_groups.groups["c"]) == before
    await h.advance(h.config.consumer_session_timeout_ms + 1)  # both sessions run out; fencing fails to store
    await settle()
    assert consumer_view(h.coord.consumer_groups.groups["c"]) == before
    h.log.fail_with = None
    await h.advance(h.config.consumer_session_timeout_ms + 1)  # the revert gave fresh sessions; now they go
    await settle()
    assert "c" not in h.coord.consumer_groups.groups or not h.coord.consumer_groups.groups["c"].members
    other = await reloaded(h)
    live = h.coord.consumer_groups.groups.get("c")
    assert consumer_view(other.consumer_groups.groups.get("c")) == consumer_view(live)


async def test_failed_upgrade_leaves_the_classic_group_and_the_next_one_converts(h: Harness) -> None:
    (a,) = await h.complete(await h.new_member(protocols=(("range", subscription(1, ["t"])),)))
    synced = await h.coord.sync_group("g", a.generation_id, a.member_id, None,
                                      assignments={a.member_id: assignment({"t": [0, 1, 2, 3]})})
    assert synced.error is E.none
    h.log.fail_with = E.not_enough_replicas
    result = await h.coord.consumer_heartbeat(
        HeartbeatRequest("g", "", 0, rebalance_timeout_ms=10_000, subscribed_names=("t",), owned={}), TOPICS
    )
    assert result.error is E.coordinator_not_available
    assert "g" not in h.coord.consumer_groups.groups
    group = h.group()
    assert group.state is GroupState.STABLE and list(group.members) == [a.member_id]
    assert GroupKey("g") not in [k for k, v in h.log.records(0) if v is None]
    h.log.fail_with = None
    result = await h.coord.consumer_heartbeat(
        HeartbeatRequest("g", "", 0, rebalance_timeout_ms=10_000, subscribed_names=("t",), owned={}), TOPICS
    )
    assert result.error is E.none
    assert not h.group().members and "g" in h.coord.consumer_groups.groups
    other = await reloaded(h)
    assert consumer_view(other.consumer_groups.groups["g"]) == consumer_view(h.coord.consumer_groups.groups["g"])
    assert not other.ctx.groups["g"].members


async def test_background_tombstones_that_fail_leave_the_offsets() -> None:
    h = Harness(offsets_retention_minutes=1, offsets_retention_check_interval_ms=1_000)
    await h.load()
    await h.coord.commit_offsets("solo", "", None, -1, {("t", 0): OffsetCommit(1)})
    h.log.fail_with = E.not_enough_replicas
    await h.advance(61_000)
    assert h.coord.fetch_offsets("solo", None)[1][("t", 0)].offset == 1
    assert await h.coord.remove_offsets_for_topics(["t"]) == 1
    assert h.coord.fetch_offsets("solo", None)[1][("t", 0)].offset == 1
    h.log.fail_with = None
    await h.advance(1_000)
    assert "solo" not in h.coord.ctx.groups
    keys = [k for k, v in h.log.records(0) if v is None]
    assert OffsetKey("solo", "t", 0) in keys and GroupKey("solo") in keys
    assert "solo" not in (await reloaded(h)).ctx.groups



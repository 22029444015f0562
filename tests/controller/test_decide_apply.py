"""Decide, then apply: a write the store refuses (or fences) leaves the controller's context equal to the store and
tells no broker about the change; and the controller's timers run on its injected clock."""

from __future__ import annotations

import asyncio

import pytest
from controller_support import SimCluster, StoreFaults, wait_for

from odradek.clock import ManualClock
from odradek.controller import LEADER_AND_ISR, ControllerContext, LeaderIsr, ReplicaAssignment
from odradek.controller.applier import Applier
from odradek.controller.config import ControllerConfig
from odradek.controller.plan import LeaderChange, Plan
from odradek.controller.shared import Shared
from odradek.coordination import BadVersionError, CoordinationError, EmbeddedBackend
from odradek.coordination.znodes import (
    BrokerRegistration,
    Endpoint,
    PartitionState,
    TopicPartition,
    encode_controller_epoch,
    partition_state_path,
    topic_path,
)
from odradek.errors import ErrorCode, KafkaError

T0 = TopicPartition("t", 0)


def faulty_cluster(faults: StoreFaults, **config: object) -> SimCluster:
    return SimCluster(EmbeddedBackend(ManualClock()), {"auto.leader.rebalance.enable": False, **config},
                      faults=faults)


def told_about(c: SimCluster, tp: TopicPartition) -> int:
    """How many LeaderAndIsr requests so far carried ``tp``."""
    return sum(1 for r in c.transport.requests(LEADER_AND_ISR)
               if any((s.topic, s.partition) == tp for s in r.partition_states))


async def assert_context_matches_store(c: SimCluster, ctx: ControllerContext, tp: TopicPartition) -> None:
    found = await c.state(tp.topic, tp.partition)
    assert found is not None
    state, version = found
    assert ctx.leadership[tp] == LeaderIsr(state.leader, state.leader_epoch, tuple(state.isr),
                                           state.controller_epoch, version)
    doc = await c.assignment(tp.topic)
    assert doc is not None
    stored = ReplicaAssignment(tuple(doc.partitions[tp.partition]),
                               tuple(doc.adding_replicas.get(tp.partition, ())),
                               tuple(doc.removing_replicas.get(tp.partition, ())))
    assert ctx.assignments[tp] == stored
    assert (tp in ctx.being_reassigned) == stored.is_reassigning


async def test_an_election_whose_state_write_fails_changes_neither_the_context_nor_the_brokers() -> None:
    faults = StoreFaults()
    c = await faulty_cluster(faults).start(3)
    try:
        controller = await c.wait_controller()
        assert controller.broker_id == 0
        await c.create_topic("t", {0: [1, 2]})
        await wait_for(lambda: c.state("t", 0))
        await c.idle()
        before = await c.state("t", 0)
        assert before is not None and before[0].leader == 1
        told = told_about(c, T0)
        faults.fail(partition_state_path("t", 0))
        await c.brokers[1].kill()  # t-0 needs a new leader, and broker 1 must leave its ISR: both writes fail
        await wait_for(lambda: 1 not in controller.ctx.live_brokers, what="the controller sees broker 1 go")
        await c.idle()
        assert faults.refused, "the controller did try to write t-0's state"
        assert await c.state("t", 0) == before
        await assert_context_matches_store(c, controller.ctx, T0)
        assert controller.ctx.leadership[T0].leader == 1
        assert told_about(c, T0) == told
        # Once the store takes writes again, the next election goes through from what the store holds.
        faults.clear()
        result = await controller.elect_leaders([("t", 0)], 1)
        assert result[T0].error is ErrorCode.none
        after = await c.state("t", 0)
        assert after is not None and after[0].leader == 2 and after[0].leader_epoch == before[0].leader_epoch + 1
        await assert_context_matches_store(c, controller.ctx, T0)
    finally:
        await c.stop()


async def test_a_reassignment_whose_assignment_write_fails_leaves_no_reassignment_behind() -> None:
    faults = StoreFaults()
    c = await faulty_cluster(faults).start(4)
    try:
        controller = await c.wait_controller()
        await c.create_topic("t", {0: [0, 1]})
        await wait_for(lambda: c.state("t", 0))
        await c.idle()
        state_before = await c.state("t", 0)
        told = told_about(c, T0)
        faults.fail(topic_path("t"))
        with pytest.raises(KafkaError):
            await controller.alter_partition_reassignments({("t", 0): [2, 3]})
        await c.idle()
        assert topic_path("t") in faults.refused
        assert controller.ctx.being_reassigned == {}
        assert controller.ctx.assignments[T0] == ReplicaAssignment((0, 1))
        await assert_context_matches_store(c, controller.ctx, T0)
        assert await c.state("t", 0) == state_before  # no leader epoch bump for a reassignment that never began
        assert await controller.list_partition_reassignments() == {}
        assert told_about(c, T0) == told
        # The same request succeeds once the store accepts the write.
        faults.clear()
        result = await controller.alter_partition_reassignments({("t", 0): [2, 3]})
        assert result[T0].error is ErrorCode.none
        assert set(await controller.list_partition_reassignments()) == {T0}
        await assert_context_matches_store(c, controller.ctx, T0)
        assert told_about(c, T0) > told
    finally:
        await c.stop()


async def test_a_fenced_write_makes_the_controller_resign_with_nothing_applied() -> None:
    c = await faulty_cluster(StoreFaults()).start(3)
    try:
        zombie = await c.wait_controller()
        await c.create_topic("t", {0: [1, 2]})
        await wait_for(lambda: c.state("t", 0))
        await c.idle()
        state_before = await c.state("t", 0)
        assignment_before = await c.assignment("t")
        old_epoch = zombie.epoch
        sent_at_old_epoch = len(c.transport.requests(LEADER_AND_ISR, epoch=old_epoch))
        assert c.admin is not None
        data, stat = await c.admin.get("/controller_epoch")  # another controller won an election meanwhile
        await c.admin.set("/controller_epoch", encode_controller_epoch(int(data) + 1), stat.version)
        with pytest.raises(KafkaError) as refused:
            await zombie.alter_partition_reassignments({("t", 0): [0, 2]})
        assert refused.value.code is ErrorCode.not_controller
        # It resigned and the election ran again above the epoch it was fenced by.
        again = await c.wait_controller()
        await wait_for(lambda: again.epoch == old_epoch + 2, what="a controller elected after the fencing")
        await c.idle()
        assert await c.state("t", 0) == state_before
        assert await c.assignment("t") == assignment_before
        assert len(c.transport.requests(LEADER_AND_ISR, epoch=old_epoch)) == sent_at_old_epoch
        await assert_context_matches_store(c, again.ctx, T0)
        assert await again.list_partition_reassignments() == {}
    finally:
        await c.stop()


async def test_auto_rebalance_runs_when_the_clock_passes_the_interval_and_not_before() -> None:
    clock = ManualClock()
    c = await SimCluster(EmbeddedBackend(ManualClock()), {"auto.leader.rebalance.enable": True,
                                                          "leader.imbalance.check.interval.seconds": 60},
                         clock=clock).start(3)
    try:
        controller = await c.wait_controller()
        # The first check comes five seconds after the failover (as in Kafka), then one every interval.
        await wait_for(lambda: clock.sleep_deadlines() == [5_000], what="the rebalance timer is armed")
        clock.advance(5_000)
        await wait_for(lambda: clock.sleep_deadlines() == [65_000], what="the first check, and the next armed")
        await controller.wait_idle()
        await c.create_topic("t", {0: [1, 2], 1: [1, 2]})
        await wait_for(lambda: c.state("t", 1))
        assert c.admin is not None
        for partition in (0, 1):  # broker 2 takes over both leaderships: broker 1 leads none of its two
            found = await c.state("t", partition)
            assert found is not None
            state, version = found
            await c.admin.set(partition_state_path("t", partition),
                              PartitionState(2, state.leader_epoch + 1, state.isr, state.controller_epoch).to_json(),
                              version)
            await c.act_as_leader("t", partition, [2, 1])
        await wait_for(lambda: all(controller.ctx.leadership[TopicPartition("t", p)].leader == 2 for p in (0, 1)),
                       what="the controller sees the imbalance")
        clock.advance(59_999)
        await controller.wait_idle()
        assert clock.sleep_deadlines() == [65_000]
        assert [await leader_of(c, p) for p in (0, 1)] == [2, 2]
        clock.advance(1)
        await wait_for(lambda: leaders_are(c, 1), what="the check at 65 s moves both leaderships back")
        await wait_for(lambda: clock.sleep_deadlines() == [125_000], what="the next check armed")
    finally:
        await c.stop()


async def leader_of(c: SimCluster, partition: int) -> int | None:
    found = await c.state("t", partition)
    return found[0].leader if found else None


async def leaders_are(c: SimCluster, leader: int) -> bool:
    return all([await leader_of(c, p) == leader for p in (0, 1)])


async def test_manual_clock_sleepers_wake_when_advanced_to_their_deadline() -> None:
    clock = ManualClock()
    woke: list[str] = []

    async def sleeper(name: str, seconds: float) -> None:
        await clock.sleep(seconds)
        woke.append(name)

    tasks = [asyncio.create_task(sleeper("a", 1.0)), asyncio.create_task(sleeper("b", 0.0015)),
             asyncio.create_task(sleeper("c", 2.0))]
    await wait_for(lambda: len(clock.sleep_deadlines()) == 3)
    assert clock.sleep_deadlines() == [2, 1_000, 2_000]  # whole milliseconds, rounded up
    tasks[2].cancel()
    clock.advance(999)
    await wait_for(lambda: woke == ["b"])
    clock.advance(1)
    await wait_for(lambda: woke == ["b", "a"])
    await asyncio.gather(*tasks, return_exceptions=True)
    assert clock.sleep_deadlines() == []
    clock.advance(5_000)  # a cancelled sleeper is dropped, not woken
    assert woke == ["b", "a"]


# ------------------------------------------------------------------------------------------- the applier alone


class ScriptedStore:
    """The applier's view of the store, with chosen partitions refused or stale and the topic write refused."""

    def __init__(self, stored: dict[TopicPartition, LeaderIsr]) -> None:
        self.stored = dict(stored)
        self.refuse: set[TopicPartition] = set()
        self.stale: set[TopicPartition] = set()
        self.refuse_topic = False
        self.topic_writes: list[str] = []

    async def write_states(self, updates):
        written, failed = {}, {}
        for tp, s in updates.items():
            if tp in self.refuse:
                failed[tp] = CoordinationError(str(tp), "refused")
            elif tp in self.stale:
                failed[tp] = BadVersionError(str(tp))
            else:
                written[tp] = self.stored[tp] = LeaderIsr(s.leader, s.leader_epoch, s.isr, s.controller_epoch,
                                                          s.zk_version + 1)
        return written, failed

    async def states(self, partitions):
        return {tp: self.stored[tp] for tp in partitions}

    async def write_topic(self, topic, assignments, topic_id):
        if self.refuse_topic:
            raise CoordinationError(topic, "refused")
        self.topic_writes.append(topic)


def applier_with(store: ScriptedStore) -> tuple[Applier, Shared]:
    shared = Shared(0, ControllerConfig(), ManualClock(), lambda event: None)
    ctx = ControllerContext(epoch=3)
    for broker in (1, 2):
        ctx.live_brokers[broker] = BrokerRegistration(broker, (Endpoint("PLAINTEXT", "h", 1),))
    for p in range(3):
        ctx.assignments[TopicPartition("t", p)] = ReplicaAssignment((1, 2))
    ctx.all_topics.add("t")
    shared.reset(ctx)
    shared.store_or_none = store  # type: ignore[assignment]
    ctx.leadership.update(store.stored)
    return shared.applier, shared


async def test_the_applier_commits_exactly_the_states_that_were_written() -> None:
    stored = {TopicPartition("t", p): LeaderIsr(1, 5, (1, 2), 2, 7) for p in range(3)}
    store = ScriptedStore(stored)
    applier, shared = applier_with(store)
    ok, refused, stale = (TopicPartition("t", p) for p in range(3))
    store.refuse.add(refused)
    store.stale.add(stale)
    store.stored[stale] = LeaderIsr(2, 6, (2,), 2, 8)  # somebody else's write, to be re-read
    new = LeaderIsr(2, 6, (2, 1), 3, 7)
    applied = await applier.apply(Plan(states={tp: LeaderChange(new, [1, 2]) for tp in (ok, refused, stale)}))
    assert set(applied.written) == {ok} and set(applied.failed) == {refused} and applied.stale == [stale]
    assert shared.ctx.leadership == store.stored
    assert {tp for entries in shared.batch.leader_and_isr.values() for tp in entries} == {ok}


async def test_the_applier_commits_no_assignment_or_reassignment_when_the_topic_write_fails() -> None:
    store = ScriptedStore({})
    store.refuse_topic = True
    applier, shared = applier_with(store)
    tp = TopicPartition("t", 0)
    with pytest.raises(CoordinationError):
        await applier.apply(Plan(assignments={tp: ReplicaAssignment((1, 2, 3), (3,), (1,))},
                                 reassigning={tp: (2, 3)}, metadata=[tp]))
    assert shared.ctx.assignments[tp] == ReplicaAssignment((1, 2))
    assert shared.ctx.being_reassigned == {}
    assert not shared.batch
    store.refuse_topic = False
    await applier.apply(Plan(assignments={tp: ReplicaAssignment((1, 2, 3), (3,), (1,))}, reassigning={tp: (2, 3)},
                             metadata=[tp]))
    assert store.topic_writes == ["t"]
    assert shared.ctx.assignments[tp] == ReplicaAssignment((1, 2, 3), (3,), (1,))
    assert shared.ctx.being_reassigned == {tp: (2, 3)}
    assert tp in shared.batch.metadata_partitions

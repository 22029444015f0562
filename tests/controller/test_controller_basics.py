"""Election, failover, topic creation and broker failure against the embedded store."""

from __future__ import annotations

import logging

import pytest
from controller_support import SimCluster, wait_for

from odradek.clock import ManualClock
from odradek.coordination import EmbeddedBackend
from odradek.coordination.znodes import CONTROLLER, decode_controller_epoch
from odradek.protocol.controller_requests import LEADER_AND_ISR, UPDATE_METADATA


def cluster(**config: object) -> SimCluster:
    return SimCluster(EmbeddedBackend(ManualClock()), {"auto.leader.rebalance.enable": False, **config})


async def test_one_controller_is_elected_and_failover_bumps_the_epoch() -> None:
    c = await cluster().start(3)
    try:
        first = await c.wait_controller()
        assert first.broker_id == 0 and first.epoch == 1
        await wait_for(lambda: [b.controller.active_controller_id for b in c.brokers.values()] == [0, 0, 0],
                       what="every broker knows the controller")
        await c.brokers[first.broker_id].kill()
        second = await c.wait_controller(not_on=first.broker_id)
        assert second.epoch == 2
        assert c.admin is not None
        data, _ = await c.admin.get("/controller_epoch")
        assert decode_controller_epoch(data) == 2
        data, _ = await c.admin.get(CONTROLLER)
        assert f'"brokerid":{second.broker_id}'.encode() in data
        # The old controller comes back as a broker, not as a second controller.
        await c.restart(first.broker_id)
        await wait_for(lambda: c.brokers[first.broker_id].controller.active_controller_id == second.broker_id)
        assert len(c.active()) == 1 and second.is_active
    finally:
        await c.stop()


async def test_topic_creation_sends_leader_and_isr_and_metadata_to_the_right_brokers() -> None:
    c = await cluster().start(3)
    try:
        controller = await c.wait_controller()
        await c.create_topic("orders", {0: [0, 1, 2], 1: [1, 2, 0], 2: [2, 0, 1], 3: [1, 2]})
        await wait_for(lambda: c.state("orders", 3), what="partition states")
        await c.idle()
        for partition, replicas in {0: [0, 1, 2], 1: [1, 2, 0], 2: [2, 0, 1], 3: [1, 2]}.items():
            found = await c.state("orders", partition)
            assert found is not None
            state, _ = found
            assert state.leader == replicas[0] and list(state.isr) == replicas and state.leader_epoch == 0
            assert state.controller_epoch == controller.epoch
            for broker in (0, 1, 2):
                seen = c.transport.leader_seen_by(broker, "orders", partition)
                assert seen == (replicas[0] if broker in replicas else None)
                assert c.transport.views[broker].metadata[("orders", partition)] == replicas[0]
        lair = [r for r in c.transport.requests(LEADER_AND_ISR, broker_id=0)
                if any(s.topic == "orders" for s in r.partition_states)]
        assert all(s.is_new for r in lair for s in r.partition_states if s.topic == "orders")
        assert not any(s.partition == 3 for r in lair for s in r.partition_states)
        assert c.transport.requests(UPDATE_METADATA, broker_id=2)
    finally:
        await c.stop()


async def test_partition_addition_is_picked_up() -> None:
    c = await cluster().start(3)
    try:
        await c.create_topic("t", {0: [0, 1]})
        await wait_for(lambda: c.state("t", 0))
        assert c.admin is not None
        from odradek.coordination.znodes import TopicAssignment

        await c.admin.set("/brokers/topics/t", TopicAssignment({0: (0, 1), 1: (2, 0)}).to_json())
        found = await wait_for(lambda: c.state("t", 1), what="the added partition's state")
        assert found[0].leader == 2
    finally:
        await c.stop()


async def test_broker_failure_moves_leaders_with_a_new_epoch_and_shrinks_isrs() -> None:
    c = await cluster().start(4)
    try:
        controller = await c.wait_controller()
        assert controller.broker_id == 0
        await c.create_topic("t", {0: [1, 2, 3], 1: [2, 1, 3], 2: [3, 2]})
        await wait_for(lambda: c.state("t", 2))
        await c.brokers[1].kill()
        async def moved() -> bool:
            found = await c.state("t", 0)
            return found is not None and found[0].leader == 2
        await wait_for(moved, what="leader of t-0 moved to broker 2")
        await c.idle()
        s0, _ = await c.state("t", 0)
        assert (s0.leader, s0.leader_epoch, list(s0.isr)) == (2, 1, [2, 3])
        s1, _ = await c.state("t", 1)
        assert (s1.leader, s1.leader_epoch, list(s1.isr)) == (2, 1, [2, 3])  # follower shrunk out, epoch + 1
        s2, _ = await c.state("t", 2)
        assert (s2.leader, s2.leader_epoch, list(s2.isr)) == (3, 0, [3, 2])  # untouched
        assert c.transport.leader_seen_by(3, "t", 0) == 2
        assert c.transport.views[0].metadata[("t", 0)] == 2
        # It comes back: its replicas go online and it hears the current leaders.
        await c.restart(1)
        await wait_for(lambda: c.transport.leader_seen_by(1, "t", 0) == 2, what="restarted broker told t-0")
    finally:
        await c.stop()


async def test_unclean_election_off_keeps_the_partition_offline_until_an_isr_member_returns() -> None:
    c = await cluster().start(3)
    try:
        await c.create_topic("t", {0: [1, 2]})
        await wait_for(lambda: c.state("t", 0))
        assert c.admin is not None
        # Broker 2 fell out of the ISR (as its leader would have written), then the leader dies.
        await c.act_as_leader("t", 0, [1])
        await c.idle()
        await c.brokers[1].kill()
        async def leaderless() -> bool:
            found = await c.state("t", 0)
            return found is not None and found[0].leader == -1
        await wait_for(leaderless, what="t-0 without a leader")
        await c.idle()
        state, _ = await c.state("t", 0)
        assert list(state.isr) == [1]  # the last ISR member stays, so only it may lead again
        await c.restart(1)
        async def back() -> bool:
            found = await c.state("t", 0)
            return found is not None and found[0].leader == 1
        await wait_for(back, what="t-0 led by the returning ISR member")
    finally:
        await c.stop()


async def test_unclean_election_on_elects_outside_the_isr_and_says_data_may_be_lost(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING)
    c = await cluster().start(3)
    try:
        await c.create_topic("t", {0: [1, 2]}, config={"unclean.leader.election.enable": "true"})
        await wait_for(lambda: c.state("t", 0))
        await c.act_as_leader("t", 0, [1])
        await c.idle()
        await c.brokers[1].kill()
        async def moved() -> bool:
            found = await c.state("t", 0)
            return found is not None and found[0].leader == 2
        await wait_for(moved, what="unclean leader 2")
        state, _ = await c.state("t", 0)
        assert list(state.isr) == [2]
        # the store is written before the controller logs the election it made: wait for the line, do not race it
        await c.idle()
        assert any("data may be lost" in r.getMessage() and "t" in r.getMessage() for r in caplog.records)
    finally:
        await c.stop()


async def test_a_stale_cached_version_is_re_read_before_electing() -> None:
    c = await cluster().start(4)
    try:
        await c.wait_controller()
        await c.create_topic("t", {0: [1, 2, 3]})
        await wait_for(lambda: c.state("t", 0))
        await c.idle()
        assert c.admin is not None
        # The leader shrank the ISR but its notification has not arrived: the controller's copy is stale.
        from odradek.coordination.znodes import PartitionState

        state, version = await c.state("t", 0)
        await c.admin.set("/brokers/topics/t/partitions/0/state",
                          PartitionState(1, state.leader_epoch, (1, 2), state.controller_epoch).to_json(), version)
        await c.brokers[1].kill()

        async def moved() -> bool:
            found = await c.state("t", 0)
            return found is not None and found[0].leader == 2
        await wait_for(moved, what="t-0 re-elected after a BadVersion")
        state, _ = await c.state("t", 0)
        assert list(state.isr) == [2] and state.leader_epoch == 1  # from the fresh ISR, not the cached one
    finally:
        await c.stop()


async def test_isr_change_notifications_become_update_metadata_and_are_deleted() -> None:
    c = await cluster().start(3)
    try:
        await c.create_topic("t", {0: [0, 1, 2]})
        await wait_for(lambda: c.state("t", 0))
        await c.idle()
        await c.act_as_leader("t", 0, [0, 1])
        assert c.admin is not None

        def told_everyone() -> bool:
            return all(
                any(s.topic == "t" and s.isr == [0, 1] for r in c.transport.requests(UPDATE_METADATA, broker_id=b)
                    for s in r.partition_states)
                for b in (0, 1, 2)
            )

        await wait_for(told_everyone, what="UpdateMetadata with the new ISR on every broker")
        await wait_for(lambda: _no_notifications(c), what="notifications deleted")
    finally:
        await c.stop()


async def _no_notifications(c: SimCluster) -> bool:
    assert c.admin is not None
    return await c.admin.children("/isr_change_notification") == []


async def test_a_new_controller_resumes_a_reassignment_in_progress() -> None:
    c = await cluster().start(4)
    try:
        first = await c.wait_controller()
        await c.create_topic("t", {0: [1, 2, 3]})
        await wait_for(lambda: c.state("t", 0))
        results = await first.alter_partition_reassignments({("t", 0): [2, 3, 0]})
        assert results[next(iter(results))].error.name == "none"
        await c.idle()
        await c.brokers[first.broker_id].kill()
        second = await c.wait_controller(not_on=first.broker_id)
        listed = await wait_for(second.list_partition_reassignments, what="the reassignment survives failover")
        assert next(iter(listed.values())).adding == (0,)
        await c.restart(first.broker_id)  # broker 0 (the new replica) returns and catches up
        await wait_for(lambda: 0 in second.ctx.live_brokers)
        await c.act_as_leader("t", 0, [1, 2, 3, 0])

        async def done() -> bool:
            a = await c.assignment("t")
            return a is not None and a.partitions[0] == (2, 3, 0) and not a.adding_replicas
        await wait_for(done, what="reassignment completed by the new controller")
    finally:
        await c.stop()

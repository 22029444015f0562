"""Zombie fencing, reassignment, preferred election, auto rebalance, controlled shutdown and topic deletion."""

from __future__ import annotations

import logging

import pytest
from controller_support import SimCluster, wait_for

from odradek.clock import ManualClock
from odradek.controller import PREFERRED, UNCLEAN
from odradek.coordination import EmbeddedBackend
from odradek.coordination.znodes import (
    PartitionReassignment,
    PreferredReplicaElection,
    TopicPartition,
    encode_controller_epoch,
)
from odradek.errors import ErrorCode, KafkaError
from odradek.protocol.controller_requests import LEADER_AND_ISR, STOP_REPLICA


def cluster(**config: object) -> SimCluster:
    return SimCluster(EmbeddedBackend(ManualClock()), {"auto.leader.rebalance.enable": False, **config})


async def leader_of(c: SimCluster, topic: str, partition: int) -> int | None:
    found = await c.state(topic, partition)
    return found[0].leader if found else None


async def test_a_controller_that_sees_a_newer_epoch_writes_nothing_and_resigns() -> None:
    c = await cluster().start(3)
    try:
        zombie = await c.wait_controller()
        await c.create_topic("t", {0: [1, 2]})
        await wait_for(lambda: c.state("t", 0))
        await c.idle()
        before, version = await c.state("t", 0)
        assert c.admin is not None
        # Another controller won an election meanwhile: /controller_epoch moved on.
        data, stat = await c.admin.get("/controller_epoch")
        await c.admin.set("/controller_epoch", encode_controller_epoch(int(data) + 1), stat.version)
        sent_before = len(c.transport.requests(LEADER_AND_ISR, epoch=zombie.epoch))
        old_epoch = zombie.epoch
        await c.brokers[1].kill()  # work for the zombie: t-0 needs a new leader
        await wait_for(lambda: not zombie.is_active, what="the zombie resigns")
        # Its compare-and-set never landed, and it told no broker anything after the epoch moved on.
        assert c.transport.requests(LEADER_AND_ISR, epoch=old_epoch)[sent_before:] == []
        # It then re-runs the election properly, with an epoch above the one it saw, and does the work.
        again = await c.wait_controller()
        assert again.epoch == old_epoch + 2
        after = await wait_for(lambda: _state_changed(c, version), what="t-0 re-elected by the new controller")
        assert after[0].leader == 2 and after[0].controller_epoch == again.epoch
        assert after[0].leader_epoch == before.leader_epoch + 1
    finally:
        await c.stop()


async def _state_changed(c: SimCluster, version: int):
    found = await c.state("t", 0)
    return found if found and found[1] != version else None


async def test_a_controller_whose_session_expired_mid_work_changes_nothing_afterwards() -> None:
    c = await cluster().start(3)
    try:
        zombie = await c.wait_controller()
        assert zombie.broker_id == 0 and zombie.epoch == 1
        zombie_session = c.brokers[0].session
        assert zombie_session is not None

        expired = []

        async def pause_the_controller(broker_id: int, api_key: int, request: object) -> None:
            # The controller's session expires while it is in the middle of announcing topic "a".
            if not expired and api_key == LEADER_AND_ISR and getattr(request, "controller_epoch", 0) == 1 and any(
                s.topic == "a" for s in request.partition_states  # type: ignore[attr-defined]
            ):
                expired.append(True)
                await c.backend.expire_session(zombie_session)

        c.transport.before_send = pause_the_controller
        await c.create_topic("a", {p: [0, 1, 2] for p in range(20)})
        await wait_for(lambda: expired, what="the session expired mid-work")
        c.brokers[0].alive = False
        successor = await c.wait_controller(not_on=0)
        await wait_for(lambda: not zombie.is_active, what="the zombie resigned")
        assert successor.epoch == 2
        with pytest.raises(KafkaError) as refused:
            await zombie.elect_leaders([("a", 0)], PREFERRED)
        assert refused.value.code is ErrorCode.not_controller
        await c.create_topic("b", {0: [1, 2]})
        state = await wait_for(lambda: c.state("b", 0), what="b created by the successor")
        assert state[0].controller_epoch == 2
        await c.idle()
        # Brokers 1 and 2 accepted nothing from epoch 1 once they had heard from epoch 2.
        for broker in (1, 2):
            epochs = [r.request.controller_epoch for r in c.transport.received
                      if r.broker_id == broker and r.accepted]
            first_new = epochs.index(2)
            assert 1 not in epochs[first_new:]
        # The successor re-sent the state of "a" (leader 0 is gone) with epoch 2.
        a0 = await c.state("a", 0)
        assert a0 is not None and a0[0].leader == 1 and a0[0].controller_epoch == 2
    finally:
        await c.stop()


async def test_reassignment_completes_only_once_the_new_replicas_join_the_isr() -> None:
    c = await cluster().start(4)
    try:
        controller = await c.wait_controller()
        await c.create_topic("t", {0: [0, 1, 2]})
        await wait_for(lambda: c.state("t", 0))
        await c.idle()
        assert c.admin is not None
        await c.admin.create("/admin/reassign_partitions",
                             PartitionReassignment({TopicPartition("t", 0): (1, 2, 3)}).to_json())
        listed = await wait_for(controller.list_partition_reassignments, what="reassignment in progress")
        tp = TopicPartition("t", 0)
        assert listed[tp].replicas == (1, 2, 3, 0) and listed[tp].adding == (3,) and listed[tp].removing == (0,)
        await c.idle()
        doc = await c.assignment("t")
        assert doc.partitions[0] == (1, 2, 3, 0) and doc.adding_replicas[0] == (3,)
        assert c.transport.leader_seen_by(3, "t", 0) == 0  # the new replica was told to follow
        # Not in the ISR yet: nothing is removed.
        assert await leader_of(c, "t", 0) == 0
        assert ("t", 0) not in c.transport.views[0].deleted
        # Broker 3 catches up; the leader adds it to the ISR and announces the change.
        await c.act_as_leader("t", 0, [0, 1, 2, 3])
        async def done() -> bool:
            a = await c.assignment("t")
            return a is not None and a.partitions[0] == (1, 2, 3) and not a.adding_replicas
        await wait_for(done, what="final assignment written")
        await c.idle()
        state, _ = await c.state("t", 0)
        assert state.leader == 1 and 0 not in state.isr
        assert ("t", 0) in c.transport.views[0].deleted  # the old replica's data is gone
        assert await c.admin.exists("/admin/reassign_partitions") is None
        assert await controller.list_partition_reassignments() == {}
    finally:
        await c.stop()


async def test_reassignment_api_validates_and_can_cancel() -> None:
    c = await cluster().start(4)
    try:
        controller = await c.wait_controller()
        await c.create_topic("t", {0: [0, 1], 1: [1, 2]})
        await wait_for(lambda: c.state("t", 1))
        results = await controller.alter_partition_reassignments(
            {("t", 0): [2, 3], ("t", 1): [1, 9], ("nope", 0): [1], ("t", 1 + 1): [1]})
        assert results[TopicPartition("t", 0)].error is ErrorCode.none
        assert results[TopicPartition("t", 1)].error is ErrorCode.invalid_replica_assignment
        assert results[TopicPartition("nope", 0)].error is ErrorCode.unknown_topic_or_partition
        assert results[TopicPartition("t", 2)].error is ErrorCode.unknown_topic_or_partition
        assert set(await controller.list_partition_reassignments()) == {TopicPartition("t", 0)}
        cancelled = await controller.alter_partition_reassignments({("t", 0): None, ("t", 1): None})
        assert cancelled[TopicPartition("t", 0)].error is ErrorCode.none
        assert cancelled[TopicPartition("t", 1)].error is ErrorCode.no_reassignment_in_progress
        assert await controller.list_partition_reassignments() == {}
        doc = await c.assignment("t")
        assert doc.partitions[0] == (0, 1) and not doc.adding_replicas
        await c.idle()
        assert ("t", 0) in c.transport.views[2].deleted and ("t", 0) in c.transport.views[3].deleted
    finally:
        await c.stop()


async def test_preferred_election_through_the_api_and_the_znode() -> None:
    c = await cluster().start(3)
    try:
        controller = await c.wait_controller()
        await c.create_topic("t", {0: [1, 2], 1: [2, 1], 2: [0, 1]})
        await wait_for(lambda: c.state("t", 2))
        await c.brokers[1].kill()
        await wait_for(lambda: _leader_is(c, "t", 0, 2))
        await c.restart(1)
        await c.idle()
        await c.act_as_leader("t", 0, [2, 1])  # broker 1 caught up again
        await c.idle()
        results = await controller.elect_leaders([("t", 0), ("t", 1), ("x", 0)], PREFERRED)
        assert results[TopicPartition("t", 0)].error is ErrorCode.none
        assert results[TopicPartition("t", 1)].error is ErrorCode.election_not_needed
        assert results[TopicPartition("x", 0)].error is ErrorCode.unknown_topic_or_partition
        state, _ = await c.state("t", 0)
        assert state.leader == 1 and state.leader_epoch == 2  # epoch 0, +1 on failover, +1 on preferred
        # Through the znode: move t-0 away again and ask /admin/preferred_replica_election.
        await c.brokers[1].kill()
        await wait_for(lambda: _leader_is(c, "t", 0, 2))
        await c.restart(1)
        await c.act_as_leader("t", 0, [2, 1])
        assert c.admin is not None
        await c.admin.create("/admin/preferred_replica_election",
                             PreferredReplicaElection(frozenset({TopicPartition("t", 0)})).to_json())
        await wait_for(lambda: _leader_is(c, "t", 0, 1), what="preferred leader back via the znode")
        await wait_for(lambda: _absent(c, "/admin/preferred_replica_election"))
    finally:
        await c.stop()


async def _leader_is(c: SimCluster, topic: str, partition: int, leader: int) -> bool:
    return await leader_of(c, topic, partition) == leader


async def _absent(c: SimCluster, path: str) -> bool:
    assert c.admin is not None
    return await c.admin.exists(path) is None


async def test_unclean_election_through_the_api() -> None:
    c = await cluster().start(3)
    try:
        controller = await c.wait_controller()
        await c.create_topic("t", {0: [1, 2]})
        await wait_for(lambda: c.state("t", 0))
        await c.act_as_leader("t", 0, [1])
        await c.brokers[1].kill()
        await wait_for(lambda: _leader_is(c, "t", 0, -1))
        results = await controller.elect_leaders([("t", 0)], UNCLEAN)
        assert results[TopicPartition("t", 0)].error is ErrorCode.none
        state, _ = await c.state("t", 0)
        assert state.leader == 2 and list(state.isr) == [2]
        again = await controller.elect_leaders([("t", 0)], UNCLEAN)
        assert again[TopicPartition("t", 0)].error is ErrorCode.election_not_needed
    finally:
        await c.stop()


async def test_auto_rebalance_restores_preferred_leaders_above_the_threshold() -> None:
    c = await cluster(**{"auto.leader.rebalance.enable": True,
                         "leader.imbalance.check.interval.seconds": 0.05}).start(3)
    try:
        await c.wait_controller()
        await c.create_topic("t", {0: [1, 2], 1: [1, 2], 2: [2, 1]})
        await wait_for(lambda: c.state("t", 2))
        await c.brokers[1].kill()
        await wait_for(lambda: _leader_is(c, "t", 0, 2))
        await c.restart(1)
        await c.act_as_leader("t", 0, [2, 1])
        await c.act_as_leader("t", 1, [2, 1])
        await wait_for(lambda: _leader_is(c, "t", 0, 1), what="auto rebalance moved t-0 back")
        await wait_for(lambda: _leader_is(c, "t", 1, 1), what="auto rebalance moved t-1 back")
    finally:
        await c.stop()


async def test_auto_rebalance_is_strictly_above_the_percentage() -> None:
    c = await cluster(**{"auto.leader.rebalance.enable": True,
                         "leader.imbalance.check.interval.seconds": 0.02}).start(3)
    try:
        controller = await c.wait_controller()
        # Ten partitions prefer broker 0; exactly one of them led by broker 1 is 10 %, which must not trigger.
        await c.create_topic("u", {p: [0, 1] for p in range(10)})
        await wait_for(lambda: c.state("u", 9))
        assert c.admin is not None
        state, version = await c.state("u", 0)
        from odradek.coordination.znodes import PartitionState

        await c.admin.set("/brokers/topics/u/partitions/0/state",
                          PartitionState(1, state.leader_epoch + 1, state.isr, state.controller_epoch).to_json(),
                          version)
        await c.act_as_leader("u", 0, [1, 0])  # the ISR notification makes the controller re-read u-0
        await wait_for(lambda: getattr(controller.ctx.leadership.get(TopicPartition("u", 0)), "leader", None) == 1)
        processed = controller.events_processed
        await wait_for(lambda: controller.events_processed > processed + 10, what="several rebalance checks")
        assert await leader_of(c, "u", 0) == 1
        # A second one makes it 20 %: now both move back.
        state, version = await c.state("u", 1)
        await c.admin.set("/brokers/topics/u/partitions/1/state",
                          PartitionState(1, state.leader_epoch + 1, state.isr, state.controller_epoch).to_json(),
                          version)
        await c.act_as_leader("u", 1, [1, 0])
        await wait_for(lambda: _leader_is(c, "u", 0, 0), what="u-0 back on its preferred replica")
        await wait_for(lambda: _leader_is(c, "u", 1, 0), what="u-1 back on its preferred replica")
    finally:
        await c.stop()


async def test_controlled_shutdown_moves_leaderships_and_shrinks_isrs() -> None:
    c = await cluster().start(3)
    try:
        controller = await c.wait_controller()
        await c.create_topic("t", {0: [1, 2], 1: [2, 1], 2: [1], 3: [0, 1, 2]})
        await wait_for(lambda: c.state("t", 3))
        await c.idle()
        remaining = await controller.controlled_shutdown(1, -1)
        assert remaining == set()  # t-2 has one replica: it is not counted, as in Kafka
        s0, _ = await c.state("t", 0)
        assert s0.leader == 2 and list(s0.isr) == [2] and s0.leader_epoch == 1
        s1, _ = await c.state("t", 1)
        assert s1.leader == 2 and list(s1.isr) == [2]
        s3, _ = await c.state("t", 3)
        assert s3.leader == 0 and 1 not in s3.isr
        await c.idle()
        assert c.transport.leader_seen_by(1, "t", 0) == 2  # the shutting-down broker now follows
        stops = [p for r in c.transport.requests(STOP_REPLICA, broker_id=1) if not r.delete_partitions
                 for p in r.partitions]
        assert {(p.topic, p.partition) for p in stops} >= {("t", 1), ("t", 3)}
        with pytest.raises(KafkaError) as unknown:
            await controller.controlled_shutdown(7, -1)
        assert unknown.value.code is ErrorCode.broker_not_available
        with pytest.raises(KafkaError) as not_controller:
            await c.brokers[2].controller.controlled_shutdown(1, -1)
        assert not_controller.value.code is ErrorCode.not_controller
    finally:
        await c.stop()


async def test_controlled_shutdown_reports_partitions_it_cannot_move() -> None:
    c = await cluster().start(3)
    try:
        controller = await c.wait_controller()
        await c.create_topic("t", {0: [1, 2]})
        await wait_for(lambda: c.state("t", 0))
        await c.act_as_leader("t", 0, [1])  # 2 is not in sync: nobody can take over
        await c.idle()
        assert await controller.controlled_shutdown(1, -1) == {TopicPartition("t", 0)}
        state, _ = await c.state("t", 0)
        assert state.leader == 1
    finally:
        await c.stop()


async def test_topic_deletion_waits_while_a_replica_is_offline_then_completes(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="odradek.controller")
    c = await cluster().start(3)
    try:
        controller = await c.wait_controller()
        await c.create_topic("t", {0: [1, 2], 1: [2, 0]}, config={"retention.ms": "1000"})
        await wait_for(lambda: c.state("t", 1))
        await c.brokers[1].kill()
        await wait_for(lambda: _leader_is(c, "t", 0, 2))
        assert c.admin is not None
        await c.admin.create("/admin/delete_topics/t")
        await wait_for(lambda: "t" in controller.ctx.topics_ineligible_for_deletion, what="ineligible")
        await c.idle()
        assert c.transport.views[2].deleted >= {("t", 0), ("t", 1)}
        assert await c.assignment("t") is not None  # not done while broker 1 is away
        assert controller.ctx.topics_to_delete == {"t"}
        await c.restart(1)
        await wait_for(lambda: _absent(c, "/brokers/topics/t"), what="topic znode removed")
        assert ("t", 0) in c.transport.views[1].deleted
        assert await c.admin.exists("/config/topics/t") is None
        assert await c.admin.exists("/admin/delete_topics/t") is None
        assert "t" not in controller.ctx.all_topics and not controller.ctx.topics_to_delete
    finally:
        await c.stop()


async def test_topic_deletion_disabled_drops_the_request() -> None:
    c = await cluster(**{"delete.topic.enable": "false"}).start(2)
    try:
        await c.wait_controller()
        await c.create_topic("t", {0: [0, 1]})
        await wait_for(lambda: c.state("t", 0))
        assert c.admin is not None
        await c.admin.create("/admin/delete_topics/t")
        await wait_for(lambda: _absent(c, "/admin/delete_topics/t"))
        assert await c.assignment("t") is not None
    finally:
        await c.stop()


async def test_a_broker_answering_stale_controller_epoch_makes_an_outdated_controller_resign(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="odradek.controller")
    c = await cluster().start(3)
    try:
        zombie = await c.wait_controller()
        await c.create_topic("t", {0: [1, 2]})
        await wait_for(lambda: c.state("t", 0))
        await c.idle()
        assert c.admin is not None
        data, stat = await c.admin.get("/controller_epoch")
        newer = int(data) + 1
        await c.admin.set("/controller_epoch", encode_controller_epoch(newer), stat.version)
        for view in c.transport.views.values():
            view.controller_epoch = newer  # the brokers have heard from the newer controller
        # An ISR change only needs UpdateMetadata, no fenced write: the brokers' refusal is what tells it.
        await c.act_as_leader("t", 0, [1])
        await wait_for(lambda: not zombie.is_active or zombie.epoch > newer, what="the outdated controller resigns")
        again = await c.wait_controller()
        assert again.epoch == newer + 1
        assert any("newer than ours" in r.getMessage() for r in caplog.records)
    finally:
        await c.stop()

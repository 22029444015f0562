"""Property: whatever happens to a coordinator (classic joins, syncs, heartbeats and leaves; KIP-848 heartbeats
and leaves; plain and transactional commits with their markers; time passing; appends failing), after each step
its state equals the state a new coordinator rebuilds by replaying the log.

"State" is what the log holds: committed offsets, transactional offsets pending per producer, consumer groups
(epochs, targets, each member's epochs and partitions) and the records last committed for them, and each Stable
classic group's generation, leader and assignments (a classic group in a rebalance is, as in Kafka, ahead of its
last stored record by design). Derandomized: 100 examples of 100 steps each.
"""

from __future__ import annotations

import asyncio
import copy
import struct
import uuid
from dataclasses import dataclass, field
from typing import Any

import crc32c
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from odradek.broker.group import GroupConfig, GroupCoordinator, GroupState, JoinResult, OffsetCommit
from odradek.broker.group.consumer_group import HeartbeatRequest
from odradek.broker.group.requests import JoinRequest
from odradek.clock import ManualClock
from odradek.errors import ErrorCode
from odradek.protocol.records import encode_batch

from .memlog import MemoryOffsetsLog

E = ErrorCode
TOPICS = {"t": (uuid.UUID(int=1), 4)}
MEMBERS = 3
STEPS = 100
PROPERTY = settings(max_examples=100, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)

step = st.one_of(
    st.tuples(st.just("join"), st.integers(0, MEMBERS - 1)),
    st.tuples(st.just("sync"), st.integers(0, MEMBERS - 1)),
    st.tuples(st.just("heartbeat"), st.integers(0, MEMBERS - 1)),
    st.tuples(st.just("leave"), st.integers(0, MEMBERS - 1)),
    st.tuples(st.just("commit"), st.integers(0, MEMBERS - 1), st.integers(0, 3)),
    st.tuples(st.just("solo_commit"), st.integers(0, 3)),
    st.tuples(st.just("consumer"), st.integers(0, MEMBERS - 1)),
    st.tuples(st.just("consumer_leave"), st.integers(0, MEMBERS - 1)),
    st.tuples(st.just("txn"), st.integers(1, 2), st.integers(0, 3)),
    st.tuples(st.just("marker"), st.integers(1, 2), st.booleans()),
    st.tuples(st.just("time"), st.sampled_from([100, 5_000, 20_000])),
    st.tuples(st.just("fail"), st.sampled_from([E.not_enough_replicas, E.kafka_storage_error])),
)


def marker(producer_id: int, commit: bool) -> bytearray:
    """A transactional control batch, as WriteTxnMarkers appends it to ``__consumer_offsets``."""
    batch = encode_batch([(struct.pack(">hh", 0, int(commit)), struct.pack(">hi", 0, 0), ())], timestamp_ms=0,
                         producer_id=producer_id, producer_epoch=0, control=True)
    struct.pack_into(">h", batch, 21, struct.unpack_from(">h", batch, 21)[0] | 0x10)
    struct.pack_into(">I", batch, 17, crc32c.crc32c(bytes(batch[21:])))
    return batch


@dataclass
class Classic:
    """What a classic client knows: its member id, the last JoinGroup it is waiting on or got."""

    member_id: str = ""
    join: asyncio.Task[JoinResult] | None = None
    joined: JoinResult | None = None


@dataclass
class Consumer:
    member_id: str = ""
    epoch: int = 0
    assigned: dict[str, frozenset[int]] = field(default_factory=dict)


def state(coord: GroupCoordinator) -> dict[str, Any]:
    """What the log holds of ``coord``'s memory (see the module docstring)."""
    offsets = {g: dict(group.offsets) for g, group in coord.ctx.groups.items() if group.offsets}
    pending = {
        (g, pid): {tp: entry.value for tp, entry in by_tp.items()}
        for g, group in coord.ctx.groups.items() for pid, by_tp in group.pending_txn_offsets.items()
    }
    consumer = {
        g: (group.group_epoch, group.assignment_epoch, group.target, {
            m.member_id: (m.member_epoch, m.previous_member_epoch, m.state, m.assigned, m.revoking)
            for m in group.members.values()
        })
        for g, group in coord.consumer_groups.groups.items()
    }
    return copy.deepcopy({
        "offsets": offsets, "pending": pending, "consumer": consumer, "committed": coord.ctx.consumer_committed,
    })


def stable_classic(coord: GroupCoordinator) -> dict[str, Any]:
    return {
        g: (group.generation_id, group.leader_id, group.protocol_name,
            {m.member_id: m.assignment for m in group.members.values()})
        for g, group in coord.ctx.groups.items()
        if group.state is GroupState.STABLE and g not in coord.consumer_groups.groups
    }


async def settle() -> None:
    for _ in range(20):
        await asyncio.sleep(0)


class Run:
    def __init__(self) -> None:
        self.clock = ManualClock()
        self.log = MemoryOffsetsLog()
        self.config = GroupConfig(offsets_topic_num_partitions=1, initial_rebalance_delay_ms=0,
                                  consumer_session_timeout_ms=30_000)
        self.coord = GroupCoordinator(broker_id=0, clock=self.clock, offsets_log=self.log, config=self.config)
        self.coord.topics_source = lambda: TOPICS
        self.classic = [Classic() for _ in range(MEMBERS)]
        self.consumers = [Consumer() for _ in range(MEMBERS)]
        self.steps = 0

    def generation(self, c: Classic) -> tuple[str, int]:
        if c.joined is not None and c.joined.error is E.none:
            return c.joined.member_id, c.joined.generation_id
        return "", -1

    async def do(self, op: tuple[Any, ...]) -> None:
        kind = op[0]
        coord = self.coord
        if kind == "join":
            c = self.classic[op[1]]
            if c.join is None or c.join.done():
                c.join = asyncio.ensure_future(coord.join_group(JoinRequest(
                    "g", c.member_id, None, require_known_member_id=False, client_id=f"c{op[1]}",
                    client_host="/h", rebalance_timeout_ms=10_000, session_timeout_ms=10_000,
                    protocol_type="consumer", protocols=[("range", b"meta")],
                )))
        elif kind == "sync":
            member_id, generation = self.generation(self.classic[op[1]])
            if generation >= 0:
                assignment = {c.member_id: f"{c.member_id}@{generation}".encode() for c in self.classic if c.member_id}
                task = asyncio.ensure_future(coord.sync_group("g", generation, member_id, None, assignments=assignment))
                await settle()
                if not task.done():
                    task.cancel()  # a follower waiting for its leader: the client would wait on
        elif kind == "heartbeat":
            member_id, generation = self.generation(self.classic[op[1]])
            if member_id:
                coord.heartbeat("g", generation, member_id, None)
        elif kind == "leave":
            c = self.classic[op[1]]
            if c.member_id:
                await coord.leave_group("g", [(c.member_id, None)])
                self.classic[op[1]] = Classic()
        elif kind == "commit":
            member_id, generation = self.generation(self.classic[op[1]])
            await coord.commit_offsets("g", member_id, None, generation, {("t", op[2]): OffsetCommit(self.steps)})
        elif kind == "solo_commit":
            await coord.commit_offsets("solo", "", None, -1, {("t", op[1]): OffsetCommit(self.steps)})
        elif kind == "consumer":
            m = self.consumers[op[1]]
            req = HeartbeatRequest("c", m.member_id or f"k{op[1]}", m.epoch, rebalance_timeout_ms=10_000,
                                   subscribed_names=("t",) if m.epoch == 0 else None, owned=m.assigned)
            result = await coord.consumer_heartbeat(req, TOPICS)
            if result.error is E.none:
                m.member_id, m.epoch = result.member_id or m.member_id, result.member_epoch
                if result.assignment is not None:
                    m.assigned = dict(result.assignment)
            elif result.error in (E.fenced_member_epoch, E.unknown_member_id):
                self.consumers[op[1]] = Consumer()
        elif kind == "consumer_leave":
            m = self.consumers[op[1]]
            if m.member_id:
                result = await coord.consumer_heartbeat(HeartbeatRequest("c", m.member_id, -1), TOPICS)
                if result.error is E.none:
                    self.consumers[op[1]] = Consumer()
        elif kind == "txn":
            await coord.commit_txn_offsets("tx", op[1], 0, "", None, -1, {("t", op[2]): OffsetCommit(self.steps)})
        elif kind == "marker":
            if self.log.fail_with is None:
                await self.log.append(0, marker(op[1], op[2]))
                await coord.complete_transaction(0, op[1], op[2])
        elif kind == "time":
            self.clock.advance(op[1])
            await coord.tick()
        await settle()
        for c in self.classic:
            if c.join is not None and c.join.done():
                c.joined = c.join.result()
                c.join = None
                if c.joined.error is E.none or c.joined.error is E.member_id_required:
                    c.member_id = c.joined.member_id
                elif c.joined.error is E.unknown_member_id:
                    c.member_id = ""

    async def step(self, op: tuple[Any, ...]) -> None:
        self.steps += 1
        if op[0] == "fail":
            self.log.fail_with = op[1]  # the next step's appends fail
            return
        await self.do(op)
        self.log.fail_with = None

    async def check(self) -> None:
        other = GroupCoordinator(broker_id=1, clock=self.clock, offsets_log=self.log, config=self.config)
        await other.load_partition(0)
        try:
            assert state(self.coord) == state(other), f"after step {self.steps}"
            loaded = stable_classic(other)
            for group_id, stable in stable_classic(self.coord).items():
                assert loaded.get(group_id) == stable, f"classic group {group_id} after step {self.steps}"
        finally:
            await other.shutdown()


@PROPERTY
@given(st.lists(step, min_size=STEPS, max_size=STEPS))
async def test_live_state_equals_the_replayed_log(steps: list[tuple[Any, ...]]) -> None:
    run = Run()
    await run.coord.load_partition(0)
    try:
        for op in steps:
            await run.step(op)
            await run.check()
    finally:
        for c in run.classic:
            if c.join is not None:
                c.join.cancel()
        await run.coord.shutdown()


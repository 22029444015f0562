"""The one place the active controller writes the cluster state: :class:`Applier` turns a
:class:`~odradek.controller.plan.Plan` into fenced writes, then commits to the context and the request batch what
was actually written.

Seed 001 sections 2 and 3: the context mirrors the znodes and the batch tells brokers about changes. Writing first
and committing after means a write that fails (or is fenced: :class:`~odradek.controller.zkstore.ControllerMovedError`
propagates and the controller resigns) leaves the context as the store has it and sends no broker a change that
never happened. Partition states that somebody else wrote first (BadVersion) are re-read into the context, so the
caller can decide again from what the store holds, as Kafka's ``updateLeaderAndIsr`` retries do; a re-read state
that is exactly the one written (same leader, ISR and epochs) was this controller's own write, sent again after a
connection loss took its reply (:mod:`odradek.coordination.retry`), and counts as written.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from odradek.controller.batch import RequestBatch
from odradek.controller.context import ControllerContext, LeaderIsr, ReplicaAssignment, TopicPartition
from odradek.controller.plan import LeaderChange, Plan
from odradek.controller.zkstore import ControllerStore
from odradek.coordination.store import BadVersionError, CoordinationError, NodeExistsError, WatchedEvent

__all__ = ["Applied", "Applier"]


@dataclass(slots=True)
class Applied:
    """What became of a plan's partition states."""

    written: dict[TopicPartition, LeaderIsr] = field(default_factory=dict)
    """Written (or, for a first state another controller created first, adopted), with their new versions."""
    stale: list[TopicPartition] = field(default_factory=list)
    """Somebody else wrote first: re-read into the context, for the caller to decide again."""
    failed: dict[TopicPartition, CoordinationError] = field(default_factory=dict)
    """Neither written nor stale; the context keeps what the store has."""


class ControllerState(Protocol):
    """What the applier reads and commits to, looked up on each use: a failover replaces the context and the
    batch, and a new session the store (:class:`~odradek.controller.shared.Shared` is the one implementation)."""

    ctx: ControllerContext
    batch: RequestBatch
    watchers: dict[object, Callable[[WatchedEvent], None]]

    @property
    def store(self) -> ControllerStore: ...


class Applier:
    def __init__(self, shared: ControllerState) -> None:
        self._shared = shared

    async def apply(self, plan: Plan) -> Applied:
        shared = self._shared
        store = shared.store
        applied = Applied()
        if plan.created:
            await self._create(plan.created, applied)
        if plan.states:
            await self._write_states(plan.states, applied)
        if plan.assignments or plan.reassigning:
            await self._write_assignments(plan.assignments, plan.reassigning)
        if plan.reassign_znode is not None:
            await store.write_reassignments(plan.reassign_znode)
            shared.ctx.reassignment_from_znode -= plan.left_reassign_znode
        for path in plan.fenced_deletes:
            await store.delete_fenced(path)
        for topic in plan.deleted_topics:
            await store.delete_topic_znodes(topic)
            self._forget_topic(topic)
        if plan.consumed:
            await store.delete_paths(plan.consumed)
        if plan.metadata:
            shared.batch.add_update_metadata(shared.ctx.live_or_shutting_down, plan.metadata)
        return applied

    async def _create(self, changes: Mapping[TopicPartition, LeaderChange], applied: Applied) -> None:
        store = self._shared.store
        created, failed = await store.create_states({tp: c.state for tp, c in changes.items()})
        if failed:
            # Another controller initialised these first: adopt (and announce) what it wrote.
            created.update(await store.states([tp for tp, e in failed.items() if isinstance(e, NodeExistsError)]))
        ctx = self._shared.ctx
        add = self._shared.batch.add_leader_and_isr
        for tp, change in changes.items():
            state = created.get(tp)
            if state is None:
                applied.failed[tp] = failed[tp]
                continue
            ctx.leadership[tp] = state
            add(ctx, change.recipients, tp, state, True)
            applied.written[tp] = state

    async def _write_states(self, changes: Mapping[TopicPartition, LeaderChange], applied: Applied) -> None:
        store = self._shared.store
        written, failed = await store.write_states({tp: c.state for tp, c in changes.items()})
        ctx = self._shared.ctx
        leadership = ctx.leadership
        add = self._shared.batch.add_leader_and_isr
        for tp, state in written.items():
            leadership[tp] = state
            add(ctx, changes[tp].recipients, tp, state)
        applied.written.update(written)
        if failed:
            stale = [tp for tp, e in failed.items() if isinstance(e, BadVersionError)]
            for tp, error in failed.items():
                if not isinstance(error, BadVersionError):
                    applied.failed[tp] = error
            if stale:
                found = await store.states(stale)
                leadership.update(found)
                for tp in stale:
                    now = found.get(tp)
                    if now is not None and _same_state(now, changes[tp].state):
                        # Our own write, sent again after a connection loss swallowed its reply: it is written.
                        add(ctx, changes[tp].recipients, tp, now)
                        applied.written[tp] = now
                    else:
                        applied.stale.append(tp)

    async def _write_assignments(self, assignments: Mapping[TopicPartition, ReplicaAssignment],
                                 reassigning: Mapping[TopicPartition, tuple[int, ...] | None]) -> None:
        """Each topic's znode holds all its partitions, so one write per topic, of the context with the plan's
        changes laid over it; the context takes the changes only after its topic's write."""
        ctx = self._shared.ctx
        by_topic: dict[str, dict[TopicPartition, ReplicaAssignment]] = {}
        for tp, ra in assignments.items():
            by_topic.setdefault(tp.topic, {})[tp] = ra
        for topic, changes in sorted(by_topic.items()):
            doc = {p.partition: changes.get(p, ctx.assignments[p]) for p in ctx.partitions_of(topic)}
            for tp, ra in changes.items():
                doc.setdefault(tp.partition, ra)
            await self._shared.store.write_topic(topic, doc, ctx.topic_ids.get(topic))
            ctx.assignments.update(changes)
        for tp, target in reassigning.items():
            if target is None:
                ctx.being_reassigned.pop(tp, None)
            else:
                ctx.being_reassigned[tp] = target

    def _forget_topic(self, topic: str) -> None:
        ctx = self._shared.ctx
        ctx.topics_to_delete.discard(topic)
        ctx.topics_ineligible_for_deletion.discard(topic)
        ctx.topics_with_deletion_started.discard(topic)
        self._shared.watchers.pop(("topic", topic), None)
        ctx.remove_topic(topic)


def _same_state(a: LeaderIsr, b: LeaderIsr) -> bool:
    """The same leader and ISR at the same leader and controller epochs, whatever the znode versions."""
    return (a.leader, a.leader_epoch, a.isr, a.controller_epoch) == (b.leader, b.leader_epoch, b.isr,
                                                                    b.controller_epoch)

"""Classic groups: Kafka's join/sync protocol, heartbeats and rebalances (the classic half of its
GroupMetadataManager).

It follows Kafka's classic group coordinator closely because real clients depend on its exact answers: which
error a stale generation gets, when a rebalance completes, who leads, when a member is expired. The differences
are in mechanics only:

* One asyncio event loop, no locks. A JoinGroup or SyncGroup that must wait returns a future resolved when the
  rebalance moves on (Kafka's purgatory callbacks).
* Deadlines (initial delayed join, rebalance timeout, session timeouts, pending members, pending syncs) sit in
  the context's one heap that the coordinator's tick fires.
* A classic group's state machine lives in memory; what is written is its GroupMetadata record when a SyncGroup
  stores the assignment, a static member takes its place or the group empties. As in Kafka (whose classic
  writes do not replay their records), the group changes as the protocol says and the record is the durable
  copy of a Stable or Empty group: a failed store answers the members with the error and rebalances (Kafka's
  resetAndPropagateAssignmentWithError), a failed static rejoin puts the old member id back.

The coordinator (:mod:`.coordinator`) checks ownership and sends a group id that a KIP-848 group holds to
:mod:`.consumer_groups` instead; everything here assumes a classic group.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from odradek.broker.group.context import CoordinatorContext
from odradek.broker.group.metadata import Group, GroupState, Member, Protocols
from odradek.broker.group.requests import JoinRequest
from odradek.broker.group.results import GroupSummary, JoinResult, MemberSummary, SyncResult, join_error
from odradek.broker.group.runtime import group_error
from odradek.broker.group.schema import GroupKey, encode_group_value, encode_key
from odradek.errors import ErrorCode

log = logging.getLogger(__name__)

UNKNOWN_MEMBER_ID = ""


@dataclass(eq=False, slots=True)
class _DelayedJoin:
    """When a PreparingRebalance completes: Kafka's DelayedJoin, or its InitialDelayedJoin if ``initial``."""

    initial: bool
    delay_ms: int
    remaining_ms: int


def resolve(waiter: Any, value: Any) -> None:
    """Answer a waiting JoinGroup or SyncGroup unless it was answered already."""
    if waiter is not None and not waiter.done():
        waiter.set_result(value)


class ClassicGroups:
    """The classic groups of the partitions this broker coordinates (their objects live in ``ctx.groups``)."""

    def __init__(self, ctx: CoordinatorContext) -> None:
        self.ctx = ctx
        self._rebalance: dict[Group, _DelayedJoin] = {}
        self._sync_timer: dict[Group, object] = {}

    async def join(self, req: JoinRequest) -> JoinResult:
        """Answer a JoinGroup once the rebalance it joins completes (or at once with an error)."""
        group_id, member_id = req.group_id, req.member_id
        req = dataclasses.replace(req, protocols=[(name, bytes(metadata)) for name, metadata in req.protocols])
        unknown = member_id == UNKNOWN_MEMBER_ID
        group = self.ctx.groups.get(group_id)
        if group is None:
            if not unknown:
                return join_error(member_id, ErrorCode.unknown_member_id)
            group = self.ctx.groups[group_id] = Group(group_id)
        waiter: asyncio.Future[JoinResult] = asyncio.get_running_loop().create_future()
        over_capacity = len(group) > self.ctx.config.max_size
        existing = group.members.get(member_id)
        if (over_capacity and existing is not None and not existing.is_awaiting_join) or (
            unknown and len(group) >= self.ctx.config.max_size
        ):
            if existing is not None:
                self._remove_member_and_update_group(group, existing, "group is over group.max.size")
            resolve(waiter, join_error(UNKNOWN_MEMBER_ID, ErrorCode.group_max_size_reached))
        elif unknown:
            self._join_unknown_member(group, req, waiter)
        else:
            self._join_known_member(group, req, waiter)
        if group.state is GroupState.PREPARING_REBALANCE:
            self._try_complete_join(group)
        self.ctx.fire_due(self.ctx.now())
        return await asyncio.shield(waiter)

    async def sync(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        protocol_type: str | None,
        protocol_name: str | None,
        assignments: Mapping[str, bytes] | None,
    ) -> SyncResult:
        """Answer a SyncGroup once the leader's assignment is stored (or at once)."""
        group = self.ctx.groups.get(group_id)
        if group is None:
            return SyncResult(ErrorCode.unknown_member_id)
        if group.state is GroupState.DEAD:
            return SyncResult(ErrorCode.coordinator_not_available)
        if group.is_static_member_fenced(member_id, group_instance_id):
            return SyncResult(ErrorCode.fenced_instance_id)
        member = group.members.get(member_id)
        if member is None:
            return SyncResult(ErrorCode.unknown_member_id)
        if generation_id != group.generation_id:
            return SyncResult(ErrorCode.illegal_generation)
        if (protocol_type is not None and protocol_type != group.protocol_type) or (
            protocol_name is not None and protocol_name != group.protocol_name
        ):
            return SyncResult(ErrorCode.inconsistent_group_protocol)
        if group.state is GroupState.EMPTY:
            return SyncResult(ErrorCode.unknown_member_id)
        if group.state is GroupState.PREPARING_REBALANCE:
            return SyncResult(ErrorCode.rebalance_in_progress)
        group.pending_sync.discard(member_id)
        if group.state is GroupState.STABLE:
            self.schedule_heartbeat(group, member, member.session_timeout_ms)
            return SyncResult(ErrorCode.none, member.assignment, group.protocol_type, group.protocol_name)

        waiter: asyncio.Future[SyncResult] = asyncio.get_running_loop().create_future()
        if member.sync_waiter is not None:
            resolve(member.sync_waiter, SyncResult(ErrorCode.rebalance_in_progress))
        member.sync_waiter = waiter
        if group.is_leader(member_id):
            log.info(
                "assignment received from leader %s of group %s generation %d",
                member_id,
                group_id,
                generation_id,
            )
            assignment = {mid: bytes((assignments or {}).get(mid, b"")) for mid in group.members}
            generation = group.generation_id

            def stored(store_error: ErrorCode) -> None:
                if (
                    self.ctx.groups.get(group_id) is not group
                    or group.state is not GroupState.COMPLETING_REBALANCE
                    or group.generation_id != generation
                ):
                    return
                if store_error is not ErrorCode.none:
                    self._propagate_assignment_error(group, store_error)
                    self.maybe_prepare_rebalance(group, "storing the group assignment failed")
                else:
                    for mid, m in group.members.items():
                        m.assignment = assignment.get(mid, b"")
                    self._propagate_assignment(group, ErrorCode.none)
                    group.transition_to(GroupState.STABLE, self.ctx.now())

            self._store_group(group, assignment, stored)
        return await asyncio.shield(waiter)

    def heartbeat(self, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None) -> ErrorCode:
        group = self.ctx.groups.get(group_id)
        if group is None:
            return ErrorCode.unknown_member_id
        if group.state is GroupState.DEAD:
            return ErrorCode.coordinator_not_available
        if group.is_static_member_fenced(member_id, group_instance_id):
            return ErrorCode.fenced_instance_id
        member = group.members.get(member_id)
        if member is None:
            return ErrorCode.unknown_member_id
        if generation_id != group.generation_id:
            return ErrorCode.illegal_generation
        if group.state is GroupState.EMPTY:
            return ErrorCode.unknown_member_id
        self.schedule_heartbeat(group, member, member.session_timeout_ms)
        if group.state is GroupState.PREPARING_REBALANCE:
            return ErrorCode.rebalance_in_progress
        return ErrorCode.none

    def leave(self, group_id: str, members: Sequence[tuple[str, str | None]]) -> tuple[ErrorCode, list[ErrorCode]]:
        """Remove members (by member id, or by group.instance.id for static members); one error per member."""
        group = self.ctx.groups.get(group_id)
        if group is None:
            return ErrorCode.none, [ErrorCode.unknown_member_id for _ in members]
        if group.state is GroupState.DEAD:
            return ErrorCode.coordinator_not_available, []
        results: list[ErrorCode] = []
        for member_id, instance_id in members:
            if member_id != UNKNOWN_MEMBER_ID and group.is_static_member_fenced(member_id, instance_id):
                results.append(ErrorCode.fenced_instance_id)
            elif member_id in group.pending_members:
                group.pending_members.discard(member_id)
                if group.state is GroupState.PREPARING_REBALANCE:
                    self._try_complete_join(group)
                results.append(ErrorCode.none)
            else:
                target = group.static_member_id(instance_id) or member_id
                member = group.members.get(target)
                if member is None:
                    results.append(ErrorCode.unknown_member_id)
                else:
                    self._remove_member_and_update_group(group, member, "LeaveGroup")
                    results.append(ErrorCode.none)
        self.ctx.fire_due(self.ctx.now())
        return ErrorCode.none, results

    def describe(self, group: Group) -> GroupSummary:
        if group.state is GroupState.STABLE:
            protocol = group.protocol_name or ""
            members = tuple(
                MemberSummary(
                    m.member_id,
                    m.group_instance_id,
                    m.client_id,
                    m.client_host,
                    m.metadata_for(protocol),
                    m.assignment,
                )
                for m in group.members.values()
            )
        else:
            protocol = ""
            members = tuple(
                MemberSummary(m.member_id, m.group_instance_id, m.client_id, m.client_host, b"", b"")
                for m in group.members.values()
            )
        return GroupSummary(group.state.value, group.protocol_type or "", protocol, members)

    def forget_rebalance(self, group: Group) -> None:
        """The group stops being classic (it became a consumer group): its pending join and sync deadlines lapse."""
        self._rebalance.pop(group, None)
        self._sync_timer.pop(group, None)

    def _join_unknown_member(self, group: Group, req: JoinRequest, waiter: asyncio.Future[JoinResult]) -> None:
        if group.state is GroupState.DEAD:
            resolve(waiter, join_error(UNKNOWN_MEMBER_ID, ErrorCode.coordinator_not_available))
            return
        if not group.supports_protocols(req.protocol_type, req.protocols):
            resolve(waiter, join_error(UNKNOWN_MEMBER_ID, ErrorCode.inconsistent_group_protocol))
            return
        instance_id = req.group_instance_id
        new_member_id = Group.generate_member_id(req.client_id, instance_id)
        old_member_id = group.static_member_id(instance_id)
        if instance_id is not None and old_member_id is not None:
            self._rejoin_static_member(group, req, instance_id, old_member_id, new_member_id, waiter)
        elif req.require_known_member_id and instance_id is None:
            # KIP-394: hand out the id first, so a client that times out retries with it instead of adding a
            # ghost.
            group.pending_members.add(new_member_id)
            self._schedule_pending_member_expiry(group, new_member_id, req.session_timeout_ms)
            resolve(waiter, join_error(new_member_id, ErrorCode.member_id_required))
        else:
            self._add_member_and_rebalance(group, new_member_id, req, waiter)

    def _join_known_member(self, group: Group, req: JoinRequest, waiter: asyncio.Future[JoinResult]) -> None:
        member_id, instance_id, protocols = req.member_id, req.group_instance_id, req.protocols
        if group.state is GroupState.DEAD:
            resolve(waiter, join_error(member_id, ErrorCode.coordinator_not_available))
        elif not group.supports_protocols(req.protocol_type, protocols):
            resolve(waiter, join_error(member_id, ErrorCode.inconsistent_group_protocol))
        elif member_id in group.pending_members:
            self._add_member_and_rebalance(group, member_id, req, waiter)
        elif group.is_static_member_fenced(member_id, instance_id):
            resolve(waiter, join_error(member_id, ErrorCode.fenced_instance_id))
        elif not group.has(member_id) or (instance_id is not None and group.static_member_id(instance_id) is None):
            resolve(waiter, join_error(member_id, ErrorCode.unknown_member_id))
        else:
            member = group.members[member_id]
            state = group.state
            if state is GroupState.PREPARING_REBALANCE:
                self._update_member_and_rebalance(group, member, req, waiter)
            elif state is GroupState.COMPLETING_REBALANCE:
                if member.matches(protocols):
                    # A retry of a JoinGroup whose answer was lost: repeat this generation's answer.
                    resolve(waiter, self._join_result(group, member))
                else:
                    self._update_member_and_rebalance(group, member, req, waiter)
            elif state is GroupState.STABLE:
                if group.is_leader(member_id) or not member.matches(protocols):
                    # The leader rejoining is how a consumer asks for a rebalance (e.g. new topics matched).
                    self._update_member_and_rebalance(group, member, req, waiter)
                else:
                    resolve(waiter, self._join_result(group, member, include_members=False))
            else:
                resolve(waiter, join_error(member_id, ErrorCode.unknown_member_id))

    def _rejoin_static_member(
        self,
        group: Group,
        req: JoinRequest,
        instance_id: str,
        old_member_id: str,
        new_member_id: str,
        waiter: asyncio.Future[JoinResult],
    ) -> None:
        """A static member came back without its member id: it takes its old place, fencing the old id."""
        member = group.members[old_member_id]
        resolve(member.join_waiter, join_error(old_member_id, ErrorCode.fenced_instance_id))
        resolve(member.sync_waiter, SyncResult(ErrorCode.fenced_instance_id))
        member.join_waiter = member.sync_waiter = None
        old_protocols = list(member.protocols)
        old_timeouts = (member.rebalance_timeout_ms, member.session_timeout_ms)
        current_leader = group.leader_id or ""
        was_leader = group.is_leader(old_member_id)
        group.replace_static_member(instance_id, old_member_id, new_member_id)
        self.schedule_heartbeat(group, member, req.session_timeout_ms)
        self._update_member(group, member, req.protocols, req.rebalance_timeout_ms, req.session_timeout_ms, waiter)
        log.info(
            "static member %s of group %s rejoined as %s (was %s)",
            instance_id,
            group.group_id,
            new_member_id,
            old_member_id,
        )
        if group.state is GroupState.STABLE:
            if group.select_protocol() != group.protocol_name:
                self.maybe_prepare_rebalance(group, f"static member {instance_id} changed its protocols")
                return
            generation = group.generation_id
            assignment = {m.member_id: m.assignment for m in group.members.values()}

            def stored(error: ErrorCode) -> None:
                if self.ctx.groups.get(group.group_id) is not group or group.members.get(new_member_id) is not member:
                    resolve(member.join_waiter, join_error(new_member_id, ErrorCode.unknown_member_id))
                    member.join_waiter = None
                    return
                if error is not ErrorCode.none:
                    # Nothing durable changed: restore the old id so the old instance is not fenced for
                    # nothing.
                    member.join_waiter = None
                    group.replace_static_member(instance_id, new_member_id, old_member_id)
                    self._update_member(group, member, old_protocols, *old_timeouts, None)
                    resolve(waiter, join_error(UNKNOWN_MEMBER_ID, error))
                    return
                skip = req.supports_skip_assignment and was_leader
                result = JoinResult(
                    error=ErrorCode.none,
                    member_id=new_member_id,
                    generation_id=generation,
                    protocol_type=group.protocol_type,
                    protocol_name=group.protocol_name,
                    leader_id=new_member_id if skip else current_leader,
                    members=tuple(group.current_member_metadata()) if skip else (),
                    skip_assignment=skip,
                )
                self._invoke_join(member, result)

            self._store_group(group, assignment, stored)
        elif group.state is GroupState.COMPLETING_REBALANCE:
            # The leader may already be assigning to the old id; only a new generation gets this one assigned.
            self.prepare_rebalance(group, f"static member {instance_id} rejoined while awaiting sync")
        # PreparingRebalance: the member now simply awaits the join like everyone else.

    def _add_member_and_rebalance(
        self, group: Group, member_id: str, req: JoinRequest, waiter: asyncio.Future[JoinResult]
    ) -> None:
        member = Member(
            member_id=member_id,
            group_instance_id=req.group_instance_id,
            client_id=req.client_id,
            client_host=req.client_host,
            rebalance_timeout_ms=req.rebalance_timeout_ms,
            session_timeout_ms=req.session_timeout_ms,
            protocol_type=req.protocol_type,
            protocols=[(name, bytes(metadata)) for name, metadata in req.protocols],
            is_new=True,
            join_waiter=waiter,
        )
        if group.state is GroupState.PREPARING_REBALANCE and group.generation_id == 0:
            group.new_member_added = True
        group.add(member)
        # A new member cannot heartbeat until its join completes; expire it only if that takes far too long.
        self.schedule_heartbeat(group, member, self.ctx.config.new_member_join_timeout_ms)
        self.maybe_prepare_rebalance(group, f"adding new member {member_id}")

    def _update_member(
        self,
        group: Group,
        member: Member,
        protocols: Protocols,
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        waiter: asyncio.Future[JoinResult] | None,
    ) -> None:
        group.update_protocols(member, protocols)
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        if member.join_waiter is not None and member.join_waiter is not waiter:
            # A second JoinGroup from the same member supersedes the first; the first one learns to retry.
            resolve(member.join_waiter, join_error(member.member_id, ErrorCode.rebalance_in_progress))
        member.join_waiter = waiter

    def _update_member_and_rebalance(
        self, group: Group, member: Member, req: JoinRequest, waiter: asyncio.Future[JoinResult]
    ) -> None:
        self._update_member(group, member, req.protocols, req.rebalance_timeout_ms, req.session_timeout_ms, waiter)
        self.maybe_prepare_rebalance(group, f"member {member.member_id} rejoined")

    def _join_result(self, group: Group, member: Member, *, include_members: bool = True) -> JoinResult:
        leader = group.is_leader(member.member_id)
        return JoinResult(
            error=ErrorCode.none,
            member_id=member.member_id,
            generation_id=group.generation_id,
            protocol_type=group.protocol_type,
            protocol_name=group.protocol_name,
            leader_id=group.leader_id or "",
            members=tuple(group.current_member_metadata()) if leader and include_members else (),
        )

    def _invoke_join(self, member: Member, result: JoinResult) -> None:
        waiter, member.join_waiter = member.join_waiter, None
        resolve(waiter, result)

    def maybe_prepare_rebalance(self, group: Group, reason: str) -> None:
        if group.can_rebalance():
            self.prepare_rebalance(group, reason)

    def prepare_rebalance(self, group: Group, reason: str) -> None:
        if group.state is GroupState.COMPLETING_REBALANCE:
            self._propagate_assignment_error(group, ErrorCode.rebalance_in_progress)
        initial = group.state is GroupState.EMPTY
        group.pending_sync.clear()
        self._sync_timer.pop(group, None)
        group.transition_to(GroupState.PREPARING_REBALANCE, self.ctx.now())
        log.info(
            "preparing to rebalance group %s with old generation %d (%s)",
            group.group_id,
            group.generation_id,
            reason,
        )
        if initial:
            delay = self.ctx.config.initial_rebalance_delay_ms
            self._schedule_join(group, _DelayedJoin(True, delay, max(group.rebalance_timeout_ms() - delay, 0)))
        else:
            self._schedule_join(group, _DelayedJoin(False, group.rebalance_timeout_ms(), 0))
            self._try_complete_join(group)

    def _schedule_join(self, group: Group, delayed: _DelayedJoin, start_ms: int | None = None) -> None:
        """Arm the join deadline ``delay_ms`` after ``start_ms`` (default: now).

        A chained initial delay starts from the deadline it follows, so a late tick does not stretch it.
        """
        self._rebalance[group] = delayed
        deadline = (self.ctx.now() if start_ms is None else start_ms) + delayed.delay_ms
        self.ctx.schedule(deadline, lambda: self._on_join_deadline(group, delayed, deadline))

    def _on_join_deadline(self, group: Group, delayed: _DelayedJoin, deadline: int) -> None:
        if self._rebalance.get(group) is not delayed or self.ctx.groups.get(group.group_id) is not group:
            return
        if delayed.initial and group.new_member_added and delayed.remaining_ms != 0:
            # InitialDelayedJoin: members are still arriving, so wait once more (within the rebalance
            # timeout).
            group.new_member_added = False
            delay = min(self.ctx.config.initial_rebalance_delay_ms, delayed.remaining_ms)
            remaining = max(delayed.remaining_ms - delayed.delay_ms, 0)
            self._schedule_join(group, _DelayedJoin(True, delay, remaining), start_ms=deadline)
        else:
            self._complete_join(group)

    def _try_complete_join(self, group: Group) -> None:
        delayed = self._rebalance.get(group)
        if (
            delayed is not None
            and not delayed.initial
            and group.state is GroupState.PREPARING_REBALANCE
            and group.has_all_members_joined()
        ):
            self._complete_join(group)

    def _complete_join(self, group: Group) -> None:
        """Kafka's onCompleteJoin: drop dynamic members that did not rejoin, then start the next
        generation."""
        self._rebalance.pop(group, None)
        group.new_member_added = False
        for member in group.not_yet_rejoined():
            if not member.is_static:
                log.info(
                    "removing member %s of group %s: it did not rejoin in time",
                    member.member_id,
                    group.group_id,
                )
                resolve(member.sync_waiter, SyncResult(ErrorCode.unknown_member_id))
                member.sync_waiter = None
                group.remove(member.member_id)
        if group.state is GroupState.DEAD:
            return
        if not group.maybe_elect_new_joined_leader() and group.members:
            # Only static members that did not rejoin are left: wait for them (or their session expiry).
            self._schedule_join(group, _DelayedJoin(False, group.rebalance_timeout_ms(), 0))
            return
        group.init_next_generation(self.ctx.now())
        if group.state is GroupState.EMPTY:
            log.info("group %s with generation %d is now empty", group.group_id, group.generation_id)

            def stored(error: ErrorCode) -> None:
                if error is not ErrorCode.none:
                    log.warning("failed to write empty metadata for group %s: %s", group.group_id, error.name)

            self._store_group(group, {}, stored)
            return
        log.info(
            "stabilized group %s generation %d with %d members (protocol %s)",
            group.group_id,
            group.generation_id,
            len(group),
            group.protocol_name,
        )
        for member in group.members.values():
            self._invoke_join(member, self._join_result(group, member))
            self.schedule_heartbeat(group, member, member.session_timeout_ms)
            member.is_new = False
        group.pending_sync = set(group.members)
        token = object()
        self._sync_timer[group] = token
        self.ctx.schedule(
            self.ctx.now() + group.rebalance_timeout_ms(),
            lambda: self._on_pending_sync_deadline(group, token),
        )

    def _on_pending_sync_deadline(self, group: Group, token: object) -> None:
        """Members that never sent SyncGroup for this generation are removed, which starts a new rebalance."""
        if self._sync_timer.get(group) is not token or self.ctx.groups.get(group.group_id) is not group:
            return
        del self._sync_timer[group]
        if group.state not in (GroupState.COMPLETING_REBALANCE, GroupState.STABLE) or not group.pending_sync:
            return
        missing = sorted(group.pending_sync)
        log.info("group %s: removing members that did not send SyncGroup in time: %s", group.group_id, missing)
        for member_id in missing:
            member = group.members.get(member_id)
            if member is not None:
                resolve(member.join_waiter, join_error(UNKNOWN_MEMBER_ID, ErrorCode.unknown_member_id))
                member.join_waiter = None
                group.remove(member_id)
        self.maybe_prepare_rebalance(group, "members did not send SyncGroup in time")

    def _remove_member_and_update_group(self, group: Group, member: Member, reason: str) -> None:
        log.info("removing member %s from group %s: %s", member.member_id, group.group_id, reason)
        resolve(member.join_waiter, join_error(UNKNOWN_MEMBER_ID, ErrorCode.unknown_member_id))
        resolve(member.sync_waiter, SyncResult(ErrorCode.unknown_member_id))
        member.join_waiter = member.sync_waiter = None
        group.remove(member.member_id)
        if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self.maybe_prepare_rebalance(group, reason)
        elif group.state is GroupState.PREPARING_REBALANCE:
            self._try_complete_join(group)

    def _propagate_assignment_error(self, group: Group, error: ErrorCode) -> None:
        for member in group.members.values():
            member.assignment = b""
        self._propagate_assignment(group, error)

    def _propagate_assignment(self, group: Group, error: ErrorCode) -> None:
        for member in group.members.values():
            waiter, member.sync_waiter = member.sync_waiter, None
            if waiter is not None:
                resolve(waiter, SyncResult(error, member.assignment, group.protocol_type, group.protocol_name))
                # The session clock restarts once the member has its answer.
                self.schedule_heartbeat(group, member, member.session_timeout_ms)

    def schedule_heartbeat(self, group: Group, member: Member, timeout_ms: int, now: int | None = None) -> None:
        """Move the member's session deadline.

        Each member keeps at most one timer armed: a later deadline is picked up when that timer fires, so a
        member that heartbeats or commits often does not grow the timer heap.
        """
        deadline = (self.ctx.now() if now is None else now) + timeout_ms
        member.heartbeat_deadline = deadline
        if member.heartbeat_armed_at is None or deadline < member.heartbeat_armed_at:
            self._arm_heartbeat(group, member, deadline)

    def _arm_heartbeat(self, group: Group, member: Member, deadline: int) -> None:
        member.heartbeat_armed_at = deadline
        self.ctx.schedule(deadline, lambda: self._on_heartbeat_deadline(group, member, deadline))

    def _on_heartbeat_deadline(self, group: Group, member: Member, armed_at: int) -> None:
        if (
            self.ctx.groups.get(group.group_id) is not group
            or group.members.get(member.member_id) is not member
            or member.heartbeat_armed_at != armed_at
        ):
            return
        member.heartbeat_armed_at = None
        if member.heartbeat_deadline > armed_at:
            self._arm_heartbeat(group, member, member.heartbeat_deadline)
            return
        if not member.is_new and (member.is_awaiting_join or member.is_awaiting_sync):
            return  # members inside a rebalance are bounded by the rebalance timeout, not the session timeout
        self._remove_member_and_update_group(group, member, "session timeout expired")

    def _schedule_pending_member_expiry(self, group: Group, member_id: str, timeout_ms: int) -> None:
        def expire() -> None:
            if self.ctx.groups.get(group.group_id) is group and member_id in group.pending_members:
                log.info("pending member %s of group %s expired", member_id, group.group_id)
                group.pending_members.discard(member_id)
                if group.state is GroupState.PREPARING_REBALANCE:
                    self._try_complete_join(group)

        self.ctx.schedule(self.ctx.now() + timeout_ms, expire)

    def _store_group(self, group: Group, assignment: dict[str, bytes], done: Callable[[ErrorCode], None]) -> None:
        value = group.to_value(assignment, self.ctx.now())
        records = [(encode_key(GroupKey(group.group_id)), encode_group_value(value))]
        partition = self.ctx.partition_for(group.group_id)

        async def store() -> None:
            code = await self.ctx.runtime.append(partition, records)
            done(group_error(code))

        self.ctx.runtime.spawn(store())

    def on_group_unloaded(self, group: Group) -> None:
        for member in group.members.values():
            resolve(member.join_waiter, join_error(member.member_id, ErrorCode.not_coordinator))
            resolve(member.sync_waiter, SyncResult(ErrorCode.not_coordinator))
            member.join_waiter = member.sync_waiter = None
        self._rebalance.pop(group, None)
        self._sync_timer.pop(group, None)

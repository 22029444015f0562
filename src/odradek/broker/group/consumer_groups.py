"""KIP-848 consumer groups on the coordinator: ConsumerGroupHeartbeat, the classic-protocol members a consumer
group serves (JoinGroup, SyncGroup, Heartbeat, LeaveGroup), session and rebalance deadlines, and their records.

The decisions are :class:`~odradek.broker.group.consumer_group.ConsumerGroupLogic`'s (Kafka's reconciliation);
this module writes them records first. A change holds the group's lock from computing to replay, works on the live
group in place (as Kafka's runtime replays before it appends), and appends what differs from the group's
committed records (``ctx.consumer_committed``). Only a committed append moves those records (``replay_consumer``);
a failed one rebuilds the group from them, the same way a partition is loaded, so memory is back at the last
committed state. Members get fresh sessions then, as after a failover. Readers that do not take the lock
(DescribeGroups, OffsetCommit's epoch check) may see a change whose append is still in flight.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import uuid
import weakref
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence

from odradek.broker.group.classic import UNKNOWN_MEMBER_ID
from odradek.broker.group.consumer_group import (
    LEAVE_EPOCH,
    STATIC_LEAVE_EPOCH,
    ClassicMetadata,
    ConsumerGroupState,
    ConsumerMember,
    HeartbeatRequest,
    HeartbeatResult,
    TopicsSnapshot,
)
from odradek.broker.group.consumer_records import group_id_of, group_records, load_groups
from odradek.broker.group.context import CoordinatorContext
from odradek.broker.group.metadata import Group, GroupState
from odradek.broker.group.migration import OnlineMigration, can_upgrade
from odradek.broker.group.requests import JoinRequest
from odradek.broker.group.results import JoinResult, SyncResult, join_error
from odradek.broker.group.runtime import Records, group_error
from odradek.broker.group.schema import GroupKey, SchemaError, encode_key
from odradek.errors import ErrorCode
from odradek.protocol.consumer_protocol import (
    PROTOCOL_TYPE,
    ConsumerProtocolError,
    decode_subscription,
    encode_assignment,
    version_of,
)

log = logging.getLogger(__name__)


def new_member_id() -> str:
    """A KIP-848 member id as Kafka's coordinator makes one, ``Uuid.randomUuid().toString()``: 16 random bytes in
    URL-safe base64 without padding, never starting with '-' (which a command line would take for an option)."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text


class ConsumerGroups:
    """The KIP-848 groups of the partitions this broker coordinates (their objects live in ``ctx.consumer``)."""

    def __init__(self, ctx: CoordinatorContext, migration: OnlineMigration) -> None:
        self.ctx = ctx
        self.migration = migration
        self._topics: TopicsSnapshot = {}
        self._consumer_locks: weakref.WeakValueDictionary[str, asyncio.Lock] = weakref.WeakValueDictionary()
        self._classic_deadlines: dict[tuple[str, str], tuple[str, object]] = {}
        """Per classic member of a consumer group, the pending join or sync deadline (Kafka's join and sync
        timeouts, both the member's rebalance timeout) as (kind, token)."""

    async def join(self, req: JoinRequest) -> JoinResult | None:
        """A JoinGroup for a group id a consumer group holds: served by the group if it has members; an empty one
        is dropped (Kafka's downgrade of an empty group) and None says the classic path takes the join."""
        async with self._consumer_lock(req.group_id):
            group = self.ctx.consumer.groups.get(req.group_id)
            if group is not None and group.members:
                return await self._classic_join_consumer(group, req)
            if group is not None:
                code = await self._drop_consumer_group(group)
                if code is not ErrorCode.none:
                    return join_error(req.member_id, code)
        return None

    async def leave(
        self, group_id: str, members: Sequence[tuple[str, str | None]]
    ) -> tuple[ErrorCode, list[ErrorCode]] | None:
        """A LeaveGroup for a consumer group's classic members; None if the group went meanwhile."""
        async with self._consumer_lock(group_id):
            group = self.ctx.consumer.groups.get(group_id)
            if group is not None:
                return await self._classic_leave_consumer(group, members)
        return None

    def _consumer_lock(self, group_id: str) -> asyncio.Lock:
        """The lock a consumer group's changes hold from computing to replay: a change computed on top of one
        that is still appending could otherwise outlive that one's revert."""
        lock = self._consumer_locks.get(group_id)
        if lock is None:
            lock = self._consumer_locks[group_id] = asyncio.Lock()
        return lock

    async def consumer_heartbeat(self, req: HeartbeatRequest, topics: TopicsSnapshot) -> HeartbeatResult:
        """One heartbeat of a consumer-protocol member; a classic group of that id must be empty (it converts).
        The answer waits until the group's changed records are committed in ``__consumer_offsets``."""
        error = self.ctx.check(req.group_id)
        if error is not None:
            return HeartbeatResult(error)
        async with self._consumer_lock(req.group_id):
            error = self.ctx.check(req.group_id)  # the partition may have moved while the lock was awaited
            if error is not None:
                return HeartbeatResult(error)
            return await self._consumer_heartbeat(req, topics)

    async def _consumer_heartbeat(self, req: HeartbeatRequest, topics: TopicsSnapshot) -> HeartbeatResult:
        self._topics = topics
        classic = self.ctx.groups.get(req.group_id)
        upgrading: Group | None = None
        if (
            classic is not None
            and req.group_id not in self.ctx.consumer.groups
            and (classic.members or classic.state not in (GroupState.EMPTY, GroupState.DEAD))
        ):
            if req.member_epoch != 0 or not can_upgrade(classic, self.migration.policy, self.ctx.config.max_size):
                return HeartbeatResult(ErrorCode.group_id_not_found, f"Group {req.group_id} is not a consumer group.")
            invalid = self.ctx.consumer.validate(req)
            if invalid is not None:
                return invalid
            if not self.migration.upgrade(classic, topics):
                return HeartbeatResult(
                    ErrorCode.group_id_not_found,
                    f"Cannot upgrade the classic group {req.group_id}: its embedded consumer protocol is malformed.",
                )
            upgrading = classic
        existing = self.ctx.consumer.groups.get(req.group_id)
        leaving = existing.members.get(req.member_id) if existing is not None else None
        if (
            existing is not None
            and leaving is not None
            and leaving.classic is None
            and (
                req.member_epoch == LEAVE_EPOCH
                or (req.member_epoch == STATIC_LEAVE_EPOCH and not leaving.instance_id)
            )
            and self.migration.may_downgrade(existing, req.member_id)
        ):
            code = await self.migration.downgrade(existing, req.member_id)
            if code is not ErrorCode.none:
                return HeartbeatResult(code, "could not store the group's records")
            return HeartbeatResult(ErrorCode.none, member_id=req.member_id, member_epoch=req.member_epoch)
        result = self.ctx.consumer.heartbeat(req, topics, new_member_id)
        group = self.ctx.consumer.groups.get(req.group_id)
        if group is None:
            return result
        # The classic group's tombstone goes ahead of the consumer group's first records (Kafka's conversion).
        ahead: Records = [(encode_key(GroupKey(req.group_id)), None)] if upgrading is not None else []
        code = await self._persist_consumer(group, ahead)
        if code is not ErrorCode.none:
            return HeartbeatResult(code, "could not store the group's records") if result.error is ErrorCode.none \
                else result
        if upgrading is not None:
            self.migration.finish_upgrade(upgrading, group)
            for consumer_member in group.members.values():
                self._arm_consumer_session(group, consumer_member, self.ctx.now())
        member = group.members.get(result.member_id or "") if result.error is ErrorCode.none else None
        if member is not None:
            now = self.ctx.now()
            self._arm_consumer_session(group, member, now)
            if member.state == "unrevoked_partitions" and member.revocation_deadline is None:
                # Kafka's rebalance timeout: a member that does not revoke in time is removed from the group.
                member.revocation_deadline = now + member.rebalance_timeout_ms
                self.ctx.schedule(member.revocation_deadline, lambda: self._revocation_timeout(group, member))
            elif member.state != "unrevoked_partitions":
                member.revocation_deadline = None
        return result

    async def _persist_consumer(
        self, group: ConsumerGroupState, ahead: Sequence[tuple[bytes, bytes | None]] = ()
    ) -> ErrorCode:
        """Append what changed in ``group`` since its committed records (``ahead`` first) and replay it; a failed
        append rebuilds the group from its committed records, so memory is as it was before the change. The
        caller holds the group's lock and has changed ``group`` in place (Kafka's runtime replays before it
        appends and reverts to a snapshot; here the committed records are that snapshot)."""
        group_id = group.group_id
        ids = {name: tid for name, (tid, _) in self._topics.items()}
        records = group_records(group, ids)
        committed = self.ctx.consumer_committed.get(group_id, {})
        changes = list(ahead)
        changes += [(k, None) for k in committed if k not in records]
        changes += [(k, v) for k, v in records.items() if committed.get(k) != v]

        def replay() -> None:
            if self.ctx.consumer.groups.get(group_id) is group:
                self.ctx.replay_consumer(group_id, changes)

        code = await self.ctx.runtime.write(self.ctx.partition_for(group_id), changes, replay)
        if code is not ErrorCode.none and self.ctx.consumer.groups.get(group_id) is group:
            log.info("consumer group %s: storing its records failed (%s); back to its committed state",
                     group_id, code.name)
            self._rebuild_consumer(group_id, self.ctx.now())
        return group_error(code)

    def _rebuild_consumer(self, group_id: str, now: int) -> ConsumerGroupState | None:
        """The consumer group as its committed records describe it, installed with fresh sessions: the loader's
        last step and the revert after a failed append."""
        try:
            group = load_groups(self.ctx.consumer_committed.get(group_id, {})).get(group_id)
        except (SchemaError, UnicodeDecodeError) as exc:
            log.warning("skipping unreadable records of consumer group %s in __consumer_offsets: %s", group_id, exc)
            group = None
        if group is None:
            self.ctx.consumer.groups.pop(group_id, None)
            return None
        self.ctx.consumer.groups[group_id] = group
        for member in group.members.values():
            self._arm_consumer_session(group, member, now)
        return group

    def _expire_consumer(self, group: ConsumerGroupState, member_id: str, token: object) -> None:
        def still() -> bool:
            member = group.members.get(member_id)
            return member is not None and member.session_token is token

        self._fence_consumer_member(group, member_id, still, "session expired")

    def _revocation_timeout(self, group: ConsumerGroupState, member: ConsumerMember) -> None:
        def still() -> bool:
            return group.members.get(member.member_id) is member and member.state == "unrevoked_partitions"

        self._fence_consumer_member(group, member.member_id, still, "did not revoke within its rebalance timeout")

    def _fence_consumer_member(
        self, group: ConsumerGroupState, member_id: str, still: Callable[[], bool], reason: str
    ) -> None:
        """Kafka's consumerGroupFenceMember, from a timer: remove the member, or downgrade the group if only
        classic members would be left, once the group's lock is free and if ``still()`` holds then."""

        async def fence() -> None:
            async with self._consumer_lock(group.group_id):
                if self.ctx.consumer.groups.get(group.group_id) is not group or not still():
                    return
                log.info("consumer group %s: member %s %s", group.group_id, member_id, reason)
                self._refresh_topics()
                if self.migration.may_downgrade(group, member_id):
                    code = await self.migration.downgrade(group, member_id)
                else:
                    self.ctx.consumer.remove_member(group, member_id, self._topics)
                    code = await self._persist_consumer(group)
                if code is not ErrorCode.none:
                    log.warning("consumer group %s: storing its records failed: %s", group.group_id, code.name)

        if self.ctx.consumer.groups.get(group.group_id) is group and still():
            self.ctx.runtime.spawn(fence())

    def _refresh_topics(self) -> None:
        if self.ctx.topics_source is not None:
            self._topics = self.ctx.topics_source()

    def _arm_consumer_session(self, group: ConsumerGroupState, member: ConsumerMember, now: int) -> None:
        token = member.session_token = object()
        timeout = (
            member.classic.session_timeout_ms if member.classic is not None
            else self.ctx.config.consumer_session_timeout_ms
        )
        member_id = member.member_id
        self.ctx.schedule(now + timeout, lambda: self._expire_consumer(group, member_id, token))

    def _classic_member(
        self, group: ConsumerGroupState, member_id: str, instance_id: str | None
    ) -> tuple[ErrorCode, ConsumerMember | None]:
        """Kafka's validateConsumerGroupMember plus throwIfMemberDoesNotUseClassicProtocol."""
        if instance_id is not None:
            member = next((m for m in group.members.values() if m.instance_id == instance_id), None)
            if member is None:
                return ErrorCode.unknown_member_id, None
            if member.member_id != member_id:
                return ErrorCode.fenced_instance_id, None
        else:
            member = group.members.get(member_id)
            if member is None:
                return ErrorCode.unknown_member_id, None
        if member.classic is None:
            return ErrorCode.unknown_member_id, None
        return ErrorCode.none, member

    async def _classic_join_consumer(self, group: ConsumerGroupState, req: JoinRequest) -> JoinResult:
        """A classic member's JoinGroup served by a consumer group (Kafka's classicGroupJoinToConsumerGroup):
        answered at once with the member epoch as generation; the member is its own leader of nothing. The
        caller holds the group's lock."""
        member_id, group_instance_id, protocols = req.member_id, req.group_instance_id, req.protocols
        if req.protocol_type != PROTOCOL_TYPE or not protocols:
            return join_error(member_id, ErrorCode.inconsistent_group_protocol)
        try:
            subscription = decode_subscription(protocols[0][1])
        except ConsumerProtocolError:
            return join_error(member_id, ErrorCode.inconsistent_group_protocol)
        if member_id not in group.members and len(group.members) >= self.ctx.config.max_size:
            return join_error(member_id, ErrorCode.group_max_size_reached)
        if member_id == UNKNOWN_MEMBER_ID:
            member_id = Group.generate_member_id(req.client_id, group_instance_id)
            if req.require_known_member_id:
                return join_error(member_id, ErrorCode.member_id_required)
        elif member_id in group.members and group.members[member_id].classic is None:
            return join_error(member_id, ErrorCode.unknown_member_id)
        elif group_instance_id is not None and any(
            m.instance_id == group_instance_id and mid != member_id for mid, m in group.members.items()
        ):
            return join_error(member_id, ErrorCode.fenced_instance_id)
        # A member id the group does not hold yet is the one MEMBER_ID_REQUIRED handed out: Kafka creates the
        # member (a consumer group keeps no pending members).
        self._refresh_topics()
        member = self.ctx.consumer.classic_join(
            group, member_id, group_instance_id, req.rebalance_timeout_ms,
            ClassicMetadata(req.session_timeout_ms, [(n, bytes(m)) for n, m in protocols]),
            subscription, self._topics, req.client_id, req.client_host,
        )
        code = await self._persist_consumer(group)
        if code is not ErrorCode.none:
            return join_error(member_id, code)
        if self.ctx.consumer.groups.get(group.group_id) is group and group.members.get(member_id) is member:
            self._arm_consumer_session(group, member, self.ctx.now())
            self._arm_classic_deadline(group, member, "sync")
        return JoinResult(
            error=ErrorCode.none,
            member_id=member_id,
            generation_id=member.member_epoch,
            protocol_type=PROTOCOL_TYPE,
            protocol_name=protocols[0][0],
        )

    def classic_sync(
        self,
        group: ConsumerGroupState,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        protocol_type: str | None,
        protocol_name: str | None,
    ) -> SyncResult:
        """Kafka's classicGroupSyncToConsumerGroup: the member's assigned partitions in its protocol version."""
        error, member = self._classic_member(group, member_id, group_instance_id)
        if member is None or member.classic is None:
            return SyncResult(error)
        if generation_id != member.member_epoch:
            return SyncResult(ErrorCode.illegal_generation)
        names = [n for n, _ in member.classic.protocols]
        if (protocol_type is not None and protocol_type != PROTOCOL_TYPE) or (
            protocol_name is not None and protocol_name != names[0]
        ):
            return SyncResult(ErrorCode.inconsistent_group_protocol)
        if group.group_epoch > member.member_epoch and member.state != "unrevoked_partitions":
            self._arm_classic_deadline(group, member, "join", only_if_absent=True)
            return SyncResult(ErrorCode.rebalance_in_progress)
        self._classic_deadlines.pop((group.group_id, member.member_id), None)
        self._arm_consumer_session(group, member, self.ctx.now())
        try:
            version = version_of(member.classic.protocols[0][1])
        except ConsumerProtocolError:
            version = 0
        return SyncResult(ErrorCode.none, encode_assignment(member.assigned, version), PROTOCOL_TYPE, names[0])

    def _arm_classic_deadline(
        self, group: ConsumerGroupState, member: ConsumerMember, kind: str, *, only_if_absent: bool = False
    ) -> None:
        """A classic member told to rejoin must send JoinGroup, and one that joined must send SyncGroup, within
        its rebalance timeout, or it is removed from the group (Kafka's consumer group join and sync timeouts)."""
        key = (group.group_id, member.member_id)
        pending = self._classic_deadlines.get(key)
        if only_if_absent and pending is not None and pending[0] == kind:
            return
        token = object()
        self._classic_deadlines[key] = (kind, token)

        def expire() -> None:
            if self._classic_deadlines.get(key, (None, None))[1] is not token:
                return
            del self._classic_deadlines[key]
            if self.ctx.consumer.groups.get(group.group_id) is group and group.members.get(key[1]) is member:
                self._fence_consumer_member(
                    group, member.member_id, lambda: group.members.get(key[1]) is member,
                    f"(classic) did not send {'JoinGroup' if kind == 'join' else 'SyncGroup'} within its rebalance "
                    "timeout",
                )

        self.ctx.schedule(self.ctx.now() + member.rebalance_timeout_ms, expire)

    def classic_heartbeat(
        self, group: ConsumerGroupState, generation_id: int, member_id: str, group_instance_id: str | None
    ) -> ErrorCode:
        error, member = self._classic_member(group, member_id, group_instance_id)
        if member is None:
            return error
        if generation_id != member.member_epoch:
            return ErrorCode.illegal_generation
        self._arm_consumer_session(group, member, self.ctx.now())
        if not self.ctx.consumer.classic_must_rejoin(group, member):
            return ErrorCode.none
        self._arm_classic_deadline(group, member, "join", only_if_absent=True)
        return ErrorCode.rebalance_in_progress

    async def _classic_leave_consumer(
        self, group: ConsumerGroupState, members: Sequence[tuple[str, str | None]]
    ) -> tuple[ErrorCode, list[ErrorCode]]:
        """Kafka's classicGroupLeaveToConsumerGroup: classic members leave; the group epoch moves. The caller
        holds the group's lock; a failed append answers with its error and leaves the group as it was."""
        results = []
        left = []
        self._refresh_topics()
        for member_id, instance_id in members:
            if instance_id is not None and member_id == UNKNOWN_MEMBER_ID:
                member = next((m for m in group.members.values() if m.instance_id == instance_id), None)
                error, found = (ErrorCode.unknown_member_id, None) if member is None else (
                    self._classic_member(group, member.member_id, instance_id)
                )
            else:
                error, found = self._classic_member(group, member_id, instance_id)
            if found is None:
                results.append(error)
                continue
            self.ctx.consumer.remove_member(group, found.member_id, self._topics)
            left.append(found.member_id)
            results.append(ErrorCode.none)
        code = await self._persist_consumer(group)
        if code is not ErrorCode.none:
            return code, []
        for member_id in left:
            log.info("consumer group %s: classic member %s left", group.group_id, member_id)
            self._classic_deadlines.pop((group.group_id, member_id), None)
        return ErrorCode.none, results

    async def _drop_consumer_group(self, group: ConsumerGroupState) -> ErrorCode:
        """Forget an empty consumer group once the tombstones of its records are committed; its committed
        offsets stay. The caller holds the group's lock."""
        group_id = group.group_id
        records: Records = [(k, None) for k in self.ctx.consumer_committed.get(group_id, {})]

        def replay() -> None:
            if self.ctx.consumer.groups.get(group_id) is group:
                del self.ctx.consumer.groups[group_id]
                self.ctx.replay_consumer(group_id, records)

        return group_error(await self.ctx.runtime.write(self.ctx.partition_for(group_id), records, replay))

    def describe(self, group_id: str) -> tuple[ErrorCode, ConsumerGroupState | None]:
        """For ConsumerGroupDescribe: GROUP_ID_NOT_FOUND when no consumer group has that id here."""
        error = self.ctx.check(group_id)
        if error is not None:
            return error, None
        group = self.ctx.consumer.groups.get(group_id)
        return (ErrorCode.group_id_not_found, None) if group is None else (ErrorCode.none, group)

    def load(self, raw: Mapping[bytes, bytes | None], now: int) -> int:
        """Replay the consumer groups' records, then build each group from them (as a failed append's revert
        does)."""
        by_group: defaultdict[str, Records] = defaultdict(list)
        for key, value in raw.items():
            try:
                by_group[group_id_of(key)].append((key, value))
            except (SchemaError, UnicodeDecodeError) as exc:
                log.warning("skipping unreadable consumer group record in __consumer_offsets: %s", exc)
        loaded = 0
        for group_id, records in by_group.items():
            self.ctx.replay_consumer(group_id, records)
            loaded += self._rebuild_consumer(group_id, now) is not None
        return loaded

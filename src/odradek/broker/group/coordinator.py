"""The classic group coordinator: Kafka's join/sync protocol, heartbeats and committed offsets.

It follows Kafka 3.x's GroupCoordinator closely because real clients depend on its exact answers: which error
a stale generation gets, when a rebalance completes, who leads, when a member is expired. The differences are
in mechanics only:

* One asyncio event loop, no locks. A JoinGroup or SyncGroup that must wait returns a future the coordinator
  resolves when the rebalance moves on (Kafka's purgatory callbacks).
* Time comes from an injected :class:`~odradek.clock.Clock`. Deadlines (initial delayed join, rebalance
  timeout, session timeouts, pending members, pending syncs, the offsets-retention sweep) sit in one heap that
  :meth:`tick` fires: the broker calls it periodically, tests after moving a ManualClock.
* Persistence goes through :class:`~odradek.broker.group.offsets_log.OffsetsLog`: SyncGroup's assignment, an
  emptied group, committed offsets and tombstones are appended as RecordBatches to the group's partition of
  ``__consumer_offsets`` and acknowledged only once committed; :meth:`load_partition` rebuilds groups from it.
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import logging
import struct
import uuid
from collections import Counter, defaultdict
from collections.abc import Callable, Coroutine, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from odradek.broker.group.config import GroupConfig
from odradek.broker.group.consumer_group import (
    LEAVE_EPOCH,
    STATIC_LEAVE_EPOCH,
    ClassicMetadata,
    ConsumerGroupLogic,
    ConsumerGroupState,
    ConsumerMember,
    HeartbeatRequest,
    HeartbeatResult,
    TopicsSnapshot,
)
from odradek.broker.group.consumer_protocol import (
    PROTOCOL_TYPE,
    ConsumerProtocolError,
    decode_subscription,
    encode_assignment,
    version_of,
)
from odradek.broker.group.consumer_records import KEY_VERSIONS, group_records, key_version, load_groups
from odradek.broker.group.metadata import Group, GroupState, Member, PendingTxnOffset, Protocols
from odradek.broker.group.migration import MigrationPolicy, can_upgrade, to_classic_members, to_consumer_group
from odradek.broker.group.offsets_log import OffsetsLog
from odradek.broker.group.results import (
    GroupOverview,
    GroupSummary,
    JoinResult,
    MemberSummary,
    OffsetCommit,
    SyncResult,
)
from odradek.broker.group.schema import (
    GroupKey,
    GroupValue,
    OffsetKey,
    OffsetValue,
    SchemaError,
    decode_group_value,
    decode_key,
    decode_offset_value,
    encode_group_value,
    encode_key,
    encode_offset_value,
    partition_for,
)
from odradek.broker.group.timers import Timers
from odradek.clock import Clock
from odradek.errors import ErrorCode, KafkaError
from odradek.placement.model import TopicPartition
from odradek.protocol.records import CONTROL_COMMIT, encode_batch

log = logging.getLogger(__name__)

UNKNOWN_MEMBER_ID = ""
LOAD_YIELD_EVERY = 64
"""Batches read between yields to the event loop while loading a partition."""


def new_member_id() -> str:
    """A KIP-848 member id as Kafka's coordinator makes one, ``Uuid.randomUuid().toString()``: 16 random bytes in
    URL-safe base64 without padding, never starting with '-' (which a command line would take for an option)."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text


@dataclass(eq=False, slots=True)
class _DelayedJoin:
    """When a PreparingRebalance completes: Kafka's DelayedJoin, or its InitialDelayedJoin if ``initial``."""

    initial: bool
    delay_ms: int
    remaining_ms: int



_GROUP_STORE_ERRORS: dict[ErrorCode, ErrorCode] = {
    ErrorCode.unknown_topic_or_partition: ErrorCode.coordinator_not_available,
    ErrorCode.not_enough_replicas: ErrorCode.coordinator_not_available,
    ErrorCode.not_enough_replicas_after_append: ErrorCode.coordinator_not_available,
    ErrorCode.request_timed_out: ErrorCode.coordinator_not_available,
    ErrorCode.not_leader_or_follower: ErrorCode.not_coordinator,
    ErrorCode.kafka_storage_error: ErrorCode.not_coordinator,
    ErrorCode.message_too_large: ErrorCode.unknown_server_error,
    ErrorCode.record_list_too_large: ErrorCode.unknown_server_error,
    ErrorCode.invalid_fetch_size: ErrorCode.unknown_server_error,
}
"""How a failed append of group metadata reaches the client (Kafka's GroupMetadataManager.storeGroup)."""

_OFFSET_STORE_ERRORS: dict[ErrorCode, ErrorCode] = {
    ErrorCode.unknown_topic_or_partition: ErrorCode.coordinator_not_available,
    ErrorCode.not_enough_replicas: ErrorCode.coordinator_not_available,
    ErrorCode.not_enough_replicas_after_append: ErrorCode.coordinator_not_available,
    ErrorCode.not_leader_or_follower: ErrorCode.not_coordinator,
    ErrorCode.kafka_storage_error: ErrorCode.not_coordinator,
    ErrorCode.message_too_large: ErrorCode.invalid_commit_offset_size,
    ErrorCode.record_list_too_large: ErrorCode.invalid_commit_offset_size,
    ErrorCode.invalid_fetch_size: ErrorCode.invalid_commit_offset_size,
}
"""How a failed append of committed offsets reaches the client (Kafka's GroupMetadataManager.storeOffsets)."""


def _join_error(member_id: str, error: ErrorCode) -> JoinResult:
    return JoinResult(error=error, member_id=member_id)


def _resolve(waiter: Any, value: Any) -> None:
    if waiter is not None and not waiter.done():
        waiter.set_result(value)


class GroupCoordinator:
    """Every classic group whose ``__consumer_offsets`` partition this broker has loaded.

    Deadlines are wall-clock milliseconds of the injected clock, as Kafka's are. The broker calls :meth:`tick`
    periodically (every 100 ms or so) to fire the ones that passed; requests that make a deadline due at once
    (an initial rebalance delay of 0, a member leaving) fire it themselves, so no answer waits for a tick.
    """

    def __init__(
        self,
        broker_id: int,
        clock: Clock,
        offsets_log: OffsetsLog,
        config: GroupConfig | None = None,
    ) -> None:
        self.broker_id = broker_id
        self.config = config or GroupConfig()
        self._clock = clock
        self._log = offsets_log
        self._groups: dict[str, Group] = {}
        self._owned: set[int] = set()
        self._loading: set[int] = set()
        self._load_epoch: Counter[int] = Counter()
        self._rebalance: dict[Group, _DelayedJoin] = {}
        self._sync_timer: dict[Group, object] = {}
        self._pending_commits: Counter[Group] = Counter()
        self._timers = Timers()
        self._tasks: set[asyncio.Task[Any]] = set()
        self._closed = False
        self._sweep_scheduled = False
        self._order = itertools.count()
        """Numbers appended records in log order (appends to one partition take effect in call order)."""
        self._producer_groups: defaultdict[int, set[str]] = defaultdict(set)
        """Kafka's openGroupsForProducer: groups holding a producer's pending transactional offsets."""
        self._completed_while_loading: defaultdict[int, list[tuple[int, bool]]] = defaultdict(list)
        self.consumer_groups = ConsumerGroupLogic(self.config.consumer_assignors)
        """KIP-848 groups; their committed offsets live in a memberless classic :class:`Group` of the same id."""
        self._topics: TopicsSnapshot = {}
        self._consumer_written: dict[str, dict[bytes, bytes]] = {}
        """Per consumer group, the records last appended for it: a change appends only what differs."""
        self._migration_records: dict[str, list[tuple[bytes, bytes | None]]] = {}
        """Records a group's conversion wrote ahead of its first consumer-group records (the classic tombstone)."""
        self.topics_source: Callable[[], TopicsSnapshot] | None = None
        """The broker's topics now (name → id, partition count), for classic members of consumer groups."""
        self.migration_policy = MigrationPolicy(self.config.consumer_migration_policy)
        self._classic_deadlines: dict[tuple[str, str], tuple[str, object]] = {}
        """Per classic member of a consumer group, the pending join or sync deadline (Kafka's join and sync
        timeouts, both the member's rebalance timeout) as (kind, token)."""

    # --- ownership ------------------------------------------------------------------------------------------

    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self.config.offsets_topic_num_partitions)

    def owns(self, partition: int) -> bool:
        return partition in self._owned

    def is_loading(self, partition: int) -> bool:
        return partition in self._loading

    @property
    def owned_partitions(self) -> frozenset[int]:
        return frozenset(self._owned)

    def load_partition(self, partition: int) -> asyncio.Future[None]:
        """Become coordinator for ``partition``: replay its records into groups and offsets, then serve them.

        Called by the broker when it becomes the partition's leader, from the event loop. Loading runs as a
        task (returned, for whoever wants to wait for it); until it finishes, requests for the partition's
        groups get COORDINATOR_LOAD_IN_PROGRESS. An :meth:`unload_partition` that arrives meanwhile wins: the
        half-read state is dropped.
        """
        loop = asyncio.get_running_loop()
        if partition in self._owned or partition in self._loading:
            done: asyncio.Future[None] = loop.create_future()
            done.set_result(None)
            return done
        self._loading.add(partition)
        task = loop.create_task(self._load(partition, self._load_epoch[partition]))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        task.add_done_callback(_consume_result)
        return task

    async def _load(self, partition: int, epoch: int) -> None:
        # Only the last record of each key counts (the log is compacted the same way), so values are decoded once
        # per surviving key, not once per record: a partition is mostly superseded offset commits. Records of a
        # transactional batch wait per producer for its control batch: COMMIT merges them (if not superseded by
        # a later plain commit), ABORT drops them; still open at the end, they stay pending (Kafka's loader).
        latest: dict[bytes, tuple[int, bytes | None]] = {}
        open_txns: dict[int, dict[bytes, tuple[int, bytes | None]]] = {}
        records_read = 0
        try:
            for n, (header, records) in enumerate(self._log.read(partition), 1):
                if header.is_control:
                    commit = _control_is_commit(records)
                    pending = open_txns.pop(header.producer_id, {})
                    if commit:
                        for raw_key, entry in pending.items():
                            if raw_key not in latest or latest[raw_key][0] < entry[0]:
                                latest[raw_key] = entry
                elif header.is_transactional:
                    pending = open_txns.setdefault(header.producer_id, {})
                    for record in records:
                        if record.key is not None and _is_offset_key(record.key):
                            pending[record.key] = (next(self._order), record.value)
                            records_read += 1
                else:
                    for record in records:
                        if record.key is not None:
                            latest[record.key] = (next(self._order), record.value)
                            records_read += 1
                if n % LOAD_YIELD_EVERY == 0:
                    await asyncio.sleep(0)
                    if self._load_epoch[partition] != epoch:
                        return
        except BaseException:
            if self._load_epoch[partition] == epoch:
                self._loading.discard(partition)
                self._completed_while_loading.pop(partition, None)
            raise
        if self._load_epoch[partition] != epoch:
            return
        consumer_raw = {k: v[1] for k, v in latest.items() if key_version(k) in KEY_VERSIONS}
        for k in consumer_raw:
            del latest[k]
        group_values, offsets = self._decode_latest(latest)
        pending_offsets: dict[str, dict[int, dict[TopicPartition, tuple[int, OffsetValue]]]] = defaultdict(dict)
        for producer_id, entries in open_txns.items():
            for key, (order, offset) in self._decode_offsets(entries).items():
                if offset is not None:
                    by_producer = pending_offsets[key.group].setdefault(producer_id, {})
                    by_producer[TopicPartition(key.topic, key.partition)] = (order, offset)
        now = self._clock.now_ms()
        loaded = 0
        for group_id in {*group_values, *offsets, *pending_offsets}:
            value = group_values.get(group_id)
            group_offsets = offsets.get(group_id, {})
            group_pending = pending_offsets.get(group_id, {})
            if value is None and not group_offsets and not group_pending:
                continue
            group = Group.from_value(group_id, value) if value is not None else Group(group_id)
            group.offsets = {tp: v for tp, (_, v) in group_offsets.items()}
            group.offset_order = {tp: order for tp, (order, _) in group_offsets.items()}
            for producer_id, txn_offsets in group_pending.items():
                group.pending_txn_offsets[producer_id] = {
                    tp: PendingTxnOffset(v, order) for tp, (order, v) in txn_offsets.items()
                }
                self._producer_groups[producer_id].add(group_id)
            self._groups[group_id] = group
            loaded += 1
            for member in group.members.values():
                self._schedule_heartbeat(group, member, member.session_timeout_ms, now)
            if len(group) > self.config.max_size:
                self._prepare_rebalance(group, "freshly loaded group is over group.max.size")
        loaded += self._load_consumer_groups(consumer_raw, now)
        self._loading.discard(partition)
        self._owned.add(partition)
        # Markers written while the log was being read may lie past where the reader stopped; their completions
        # were queued. No transactional offsets were appended meanwhile (TxnOffsetCommit got
        # COORDINATOR_LOAD_IN_PROGRESS), so a producer still pending here is the one the marker closed.
        for producer_id, commit in self._completed_while_loading.pop(partition, []):
            self._complete_transaction(partition, producer_id, commit)
        self._ensure_sweep()
        log.info(
            "loaded %d groups from __consumer_offsets-%d (%d records, %d open transactions)",
            loaded, partition, records_read, sum(len(p) for p in pending_offsets.values()),
        )

    def _load_consumer_groups(self, raw: Mapping[bytes, bytes | None], now: int) -> int:
        try:
            groups = load_groups(raw)
        except (SchemaError, UnicodeDecodeError) as exc:
            log.warning("skipping unreadable consumer group records in __consumer_offsets: %s", exc)
            return 0
        for group_id, group in groups.items():
            self.consumer_groups.groups[group_id] = group
            self._consumer_written[group_id] = {k: v for k, v in raw.items() if v is not None and _names(k, group_id)}
            if group_id not in self._groups:
                self._groups[group_id] = Group(group_id, state_timestamp=now)
            for consumer_member in group.members.values():
                self._arm_consumer_session(group, consumer_member, now)
        return len(groups)

    @staticmethod
    def _decode_offsets(
        latest: Mapping[bytes, tuple[int, bytes | None]],
    ) -> dict[OffsetKey, tuple[int, OffsetValue | None]]:
        offset_values: dict[OffsetKey, tuple[int, OffsetValue | None]] = {}
        for raw_key, (seq, raw_value) in latest.items():
            try:
                key = decode_key(raw_key)
                if isinstance(key, OffsetKey) and (key not in offset_values or offset_values[key][0] < seq):
                    offset_values[key] = (seq, None if raw_value is None else decode_offset_value(raw_value))
            except (SchemaError, UnicodeDecodeError) as exc:
                log.warning("skipping unreadable __consumer_offsets record: %s", exc)
        return offset_values

    @classmethod
    def _decode_latest(
        cls,
        latest: Mapping[bytes, tuple[int, bytes | None]],
    ) -> tuple[dict[str, GroupValue | None], dict[str, dict[TopicPartition, tuple[int, OffsetValue]]]]:
        """Decode the last record of each raw key; two encodings of one key (v0 and v1) resolve by log order."""
        group_values: dict[str, tuple[int, GroupValue | None]] = {}
        for raw_key, (seq, raw_value) in latest.items():
            if _is_offset_key(raw_key):
                continue
            try:
                key = decode_key(raw_key)
                if isinstance(key, GroupKey) and (key.group not in group_values or group_values[key.group][0] < seq):
                    group_values[key.group] = (seq, None if raw_value is None else decode_group_value(raw_value))
            except (SchemaError, UnicodeDecodeError) as exc:
                log.warning("skipping unreadable __consumer_offsets record: %s", exc)
        offsets: dict[str, dict[TopicPartition, tuple[int, OffsetValue]]] = defaultdict(dict)
        offset_entries = {k: v for k, v in latest.items() if _is_offset_key(k)}
        for key, (seq, offset) in cls._decode_offsets(offset_entries).items():
            if offset is not None:
                offsets[key.group][TopicPartition(key.topic, key.partition)] = (seq, offset)
        return {g: v for g, (_, v) in group_values.items()}, offsets

    def unload_partition(self, partition: int) -> None:
        """Stop coordinating ``partition`` (leadership moved): waiting members are told NOT_COORDINATOR."""
        self._load_epoch[partition] += 1
        self._loading.discard(partition)
        self._owned.discard(partition)
        self._completed_while_loading.pop(partition, None)
        for group_id in [g for g in self._groups if self.partition_for(g) == partition]:
            group = self._groups.pop(group_id)
            self._on_group_unloaded(group)
        for group_id in [g for g in self.consumer_groups.groups if self.partition_for(g) == partition]:
            del self.consumer_groups.groups[group_id]
            self._consumer_written.pop(group_id, None)
        for producer_id, group_ids in list(self._producer_groups.items()):
            group_ids -= {g for g in group_ids if self.partition_for(g) == partition}
            if not group_ids:
                del self._producer_groups[producer_id]

    def _on_group_unloaded(self, group: Group) -> None:
        for member in group.members.values():
            _resolve(member.join_waiter, _join_error(member.member_id, ErrorCode.not_coordinator))
            _resolve(member.sync_waiter, SyncResult(ErrorCode.not_coordinator))
            member.join_waiter = member.sync_waiter = None
        self._rebalance.pop(group, None)
        self._sync_timer.pop(group, None)

    def _check(self, group_id: str | None, *, allow_empty: bool = False) -> ErrorCode | None:
        """Kafka's validateGroupStatus: a usable id, this broker coordinating it, and its partition loaded."""
        if group_id is None or (not group_id and not allow_empty):
            return ErrorCode.invalid_group_id
        if self._closed:
            return ErrorCode.coordinator_not_available
        partition = self.partition_for(group_id)
        if partition in self._loading:
            return ErrorCode.coordinator_load_in_progress
        if partition not in self._owned:
            return ErrorCode.not_coordinator
        return None

    # --- ConsumerGroupHeartbeat (KIP-848) ------------------------------------------------------------------

    async def consumer_heartbeat(self, req: HeartbeatRequest, topics: TopicsSnapshot) -> HeartbeatResult:
        """One heartbeat of a consumer-protocol member; a classic group of that id must be empty (it converts).
        The answer waits until the group's changed records are committed in ``__consumer_offsets``."""
        error = self._check(req.group_id)
        if error is not None:
            return HeartbeatResult(error)
        self._topics = topics
        classic = self._groups.get(req.group_id)
        if (
            classic is not None
            and req.group_id not in self.consumer_groups.groups
            and (classic.members or classic.state not in (GroupState.EMPTY, GroupState.DEAD))
        ):
            if req.member_epoch != 0 or not can_upgrade(classic, self.migration_policy, self.config.max_size):
                return HeartbeatResult(ErrorCode.group_id_not_found, f"Group {req.group_id} is not a consumer group.")
            invalid = self.consumer_groups.validate(req)
            if invalid is not None:
                return invalid
            if not self._upgrade(classic, topics):
                return HeartbeatResult(
                    ErrorCode.group_id_not_found,
                    f"Cannot upgrade the classic group {req.group_id}: its embedded consumer protocol is malformed.",
                )
        existing = self.consumer_groups.groups.get(req.group_id)
        leaving = existing.members.get(req.member_id) if existing is not None else None
        if (
            existing is not None
            and leaving is not None
            and leaving.classic is None
            and (
                req.member_epoch == LEAVE_EPOCH
                or (req.member_epoch == STATIC_LEAVE_EPOCH and not leaving.instance_id)
            )
            and self._may_downgrade(existing, req.member_id)
        ):
            code = await self._downgrade(existing, req.member_id)
            if code is not ErrorCode.none:
                return HeartbeatResult(code, "could not store the group's records")
            return HeartbeatResult(ErrorCode.none, member_id=req.member_id, member_epoch=req.member_epoch)
        result = self.consumer_groups.heartbeat(req, topics, new_member_id)
        group = self.consumer_groups.groups.get(req.group_id)
        if result.error is ErrorCode.none and group is not None:
            if req.group_id not in self._groups:
                self._groups[req.group_id] = Group(req.group_id, state_timestamp=self._clock.now_ms())
            member = group.members.get(result.member_id or "")
            if member is not None:
                now = self._clock.now_ms()
                self._arm_consumer_session(group, member, now)
                if member.state == "unrevoked_partitions" and member.revocation_deadline is None:
                    # Kafka's rebalance timeout: a member that does not revoke in time is removed from the group.
                    member.revocation_deadline = now + member.rebalance_timeout_ms
                    self._schedule(member.revocation_deadline, lambda: self._revocation_timeout(group, member))
                elif member.state != "unrevoked_partitions":
                    member.revocation_deadline = None
        if group is not None:
            code = await self._persist_consumer(group)
            if code is not ErrorCode.none and result.error is ErrorCode.none:
                return HeartbeatResult(code, "could not store the group's records")
        return result

    def _consumer_changes(self, group: ConsumerGroupState) -> list[tuple[bytes, bytes | None]]:
        ids = {name: tid for name, (tid, _) in self._topics.items()}
        records = group_records(group, ids)
        written = self._consumer_written.get(group.group_id, {})
        changes = self._migration_records.pop(group.group_id, [])
        changes += [(k, None) for k in written if k not in records]
        changes += [(k, v) for k, v in records.items() if written.get(k) != v]
        self._consumer_written[group.group_id] = records
        return changes

    async def _persist_consumer(self, group: ConsumerGroupState) -> ErrorCode:
        changes = self._consumer_changes(group)
        if not changes:
            return ErrorCode.none
        code = await self._append(self.partition_for(group.group_id), changes)
        return _GROUP_STORE_ERRORS.get(code, code)

    def _expire_consumer(self, group: ConsumerGroupState, member_id: str, token: object) -> None:
        member = group.members.get(member_id)
        current = self.consumer_groups.groups.get(group.group_id) is group
        if current and member is not None and member.session_token is token:
            log.info("consumer group %s: member %s session expired", group.group_id, member_id)
            self._fence_consumer_member(group, member_id)

    def _revocation_timeout(self, group: ConsumerGroupState, member: ConsumerMember) -> None:
        current = self.consumer_groups.groups.get(group.group_id) is group
        if current and group.members.get(member.member_id) is member and member.state == "unrevoked_partitions":
            log.info("consumer group %s: member %s did not revoke within its rebalance timeout",
                     group.group_id, member.member_id)
            self._fence_consumer_member(group, member.member_id)

    def _fence_consumer_member(self, group: ConsumerGroupState, member_id: str) -> None:
        """Kafka's consumerGroupFenceMember: remove the member, or downgrade the group if only classic members
        would be left."""
        self._refresh_topics()
        if self._may_downgrade(group, member_id):
            self._spawn(self._log_downgrade(group, member_id))
            return
        self.consumer_groups.remove_member(group, member_id, self._topics)
        self._spawn(self._log_store_error(group))

    async def _log_downgrade(self, group: ConsumerGroupState, member_id: str) -> None:
        code = await self._downgrade(group, member_id)
        if code is not ErrorCode.none:
            log.warning("consumer group %s: storing its downgrade failed: %s", group.group_id, code.name)

    def _refresh_topics(self) -> None:
        if self.topics_source is not None:
            self._topics = self.topics_source()

    # --- online migration (KIP-848) ------------------------------------------------------------------------

    def _may_downgrade(self, group: ConsumerGroupState, leaving: str) -> bool:
        """Kafka's validateOnlineDowngradeWithFencedMember."""
        if not self.consumer_groups.only_classic_left(group, leaving):
            return False
        if not self.migration_policy.downgrade:
            log.info("consumer group %s stays a consumer group: online downgrade is disabled", group.group_id)
            return False
        return len(group.members) - 1 <= self.config.max_size

    def _upgrade(self, classic: Group, topics: TopicsSnapshot) -> bool:
        """Turn a classic group with members into a consumer group in place (Kafka's convertToConsumerGroup);
        members waiting in a rebalance are told to rejoin, which the consumer group then serves."""
        try:
            group = to_consumer_group(classic, topics)
        except (ConsumerProtocolError, KeyError, IndexError) as exc:
            log.warning("cannot upgrade classic group %s to a consumer group: %s", classic.group_id, exc)
            return False
        now = self._clock.now_ms()
        for member in classic.members.values():
            _resolve(member.join_waiter, _join_error(member.member_id, ErrorCode.rebalance_in_progress))
            _resolve(member.sync_waiter, SyncResult(ErrorCode.rebalance_in_progress))
            member.join_waiter = member.sync_waiter = None
        self._rebalance.pop(classic, None)
        self._sync_timer.pop(classic, None)
        classic.clear_members(now)
        self.consumer_groups.groups[classic.group_id] = group
        self._consumer_written[classic.group_id] = {}
        self._migration_records[classic.group_id] = [(encode_key(GroupKey(classic.group_id)), None)]
        for consumer_member in group.members.values():
            self._arm_consumer_session(group, consumer_member, now)
        log.info("upgraded classic group %s (generation %d, %d members) to a consumer group",
                 classic.group_id, group.group_epoch, len(group.members))
        return True

    async def _downgrade(self, group: ConsumerGroupState, leaving: str) -> ErrorCode:
        """The last consumer-protocol member leaves a group of classic members: it becomes a classic group at
        the group epoch, each member holding its target assignment, and rebalances (Kafka's
        convertToClassicGroup). The consumer group's records are tombstoned with the classic record after
        them, in one batch."""
        group_id = group.group_id
        members = to_classic_members(group, leaving)
        del self.consumer_groups.groups[group_id]
        written = self._consumer_written.pop(group_id, {})
        self._migration_records.pop(group_id, None)
        now = self._clock.now_ms()
        holder = self._groups.get(group_id)
        if holder is None:
            holder = self._groups[group_id] = Group(group_id, state_timestamp=now)
        holder.adopt_members(group.group_epoch, members, now)
        records: list[tuple[bytes, bytes | None]] = [(k, None) for k in written]
        value = holder.to_value({m.member_id: m.assignment for m in members}, now)
        records.append((encode_key(GroupKey(group_id)), encode_group_value(value)))
        for member in members:
            self._schedule_heartbeat(holder, member, member.session_timeout_ms)
        log.info("downgraded consumer group %s to a classic group (generation %d, %d members)",
                 group_id, holder.generation_id, len(members))
        self._prepare_rebalance(holder, f"Downgrade group {group_id} from consumer to classic.")
        self._fire_due(now)
        code = await self._append(self.partition_for(group_id), records)
        return _GROUP_STORE_ERRORS.get(code, code)

    def _arm_consumer_session(self, group: ConsumerGroupState, member: ConsumerMember, now: int) -> None:
        token = member.session_token = object()
        timeout = (
            member.classic.session_timeout_ms if member.classic is not None
            else self.config.consumer_session_timeout_ms
        )
        member_id = member.member_id
        self._schedule(now + timeout, lambda: self._expire_consumer(group, member_id, token))

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

    async def _classic_join_consumer(
        self,
        group: ConsumerGroupState,
        member_id: str,
        group_instance_id: str | None,
        require_known_member_id: bool,
        client_id: str,
        client_host: str,
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        protocol_type: str,
        protocols: Protocols,
    ) -> JoinResult:
        """A classic member's JoinGroup served by a consumer group (Kafka's classicGroupJoinToConsumerGroup):
        answered at once with the member epoch as generation; the member is its own leader of nothing."""
        if protocol_type != PROTOCOL_TYPE or not protocols:
            return _join_error(member_id, ErrorCode.inconsistent_group_protocol)
        try:
            subscription = decode_subscription(protocols[0][1])
        except ConsumerProtocolError:
            return _join_error(member_id, ErrorCode.inconsistent_group_protocol)
        if member_id not in group.members and len(group.members) >= self.config.max_size:
            return _join_error(member_id, ErrorCode.group_max_size_reached)
        if member_id == UNKNOWN_MEMBER_ID:
            member_id = Group.generate_member_id(client_id, group_instance_id)
            if require_known_member_id:
                return _join_error(member_id, ErrorCode.member_id_required)
        elif member_id in group.members and group.members[member_id].classic is None:
            return _join_error(member_id, ErrorCode.unknown_member_id)
        elif group_instance_id is not None and any(
            m.instance_id == group_instance_id and mid != member_id for mid, m in group.members.items()
        ):
            return _join_error(member_id, ErrorCode.fenced_instance_id)
        # A member id the group does not hold yet is the one MEMBER_ID_REQUIRED handed out: Kafka creates the
        # member (a consumer group keeps no pending members).
        self._refresh_topics()
        member = self.consumer_groups.classic_join(
            group, member_id, group_instance_id, rebalance_timeout_ms,
            ClassicMetadata(session_timeout_ms, [(n, bytes(m)) for n, m in protocols]),
            subscription, self._topics, client_id, client_host,
        )
        code = await self._persist_consumer(group)
        if code is not ErrorCode.none:
            return _join_error(member_id, code)
        if self.consumer_groups.groups.get(group.group_id) is group and group.members.get(member_id) is member:
            self._arm_consumer_session(group, member, self._clock.now_ms())
            self._arm_classic_deadline(group, member, "sync")
        return JoinResult(
            error=ErrorCode.none,
            member_id=member_id,
            generation_id=member.member_epoch,
            protocol_type=PROTOCOL_TYPE,
            protocol_name=protocols[0][0],
        )

    def _classic_sync_consumer(
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
        self._arm_consumer_session(group, member, self._clock.now_ms())
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
            if self.consumer_groups.groups.get(group.group_id) is group and group.members.get(key[1]) is member:
                log.info("consumer group %s: classic member %s did not send %s within its rebalance timeout",
                         group.group_id, member.member_id, "JoinGroup" if kind == "join" else "SyncGroup")
                self._fence_consumer_member(group, member.member_id)

        self._schedule(self._clock.now_ms() + member.rebalance_timeout_ms, expire)

    def _classic_heartbeat_consumer(
        self, group: ConsumerGroupState, generation_id: int, member_id: str, group_instance_id: str | None
    ) -> ErrorCode:
        error, member = self._classic_member(group, member_id, group_instance_id)
        if member is None:
            return error
        if generation_id != member.member_epoch:
            return ErrorCode.illegal_generation
        self._arm_consumer_session(group, member, self._clock.now_ms())
        if not self.consumer_groups.classic_must_rejoin(group, member):
            return ErrorCode.none
        self._arm_classic_deadline(group, member, "join", only_if_absent=True)
        return ErrorCode.rebalance_in_progress

    def _classic_leave_consumer(
        self, group: ConsumerGroupState, members: Sequence[tuple[str, str | None]]
    ) -> list[ErrorCode]:
        """Kafka's classicGroupLeaveToConsumerGroup: classic members leave; the group epoch moves."""
        results = []
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
            log.info("consumer group %s: classic member %s left", group.group_id, found.member_id)
            found.session_token = object()
            self._classic_deadlines.pop((group.group_id, found.member_id), None)
            self.consumer_groups.remove_member(group, found.member_id, self._topics)
            results.append(ErrorCode.none)
        self._spawn(self._log_store_error(group))
        return results

    async def _log_store_error(self, group: ConsumerGroupState) -> None:
        code = await self._persist_consumer(group)
        if code is not ErrorCode.none:
            log.warning("consumer group %s: storing its records failed: %s", group.group_id, code.name)

    async def _drop_consumer_group(self, group: ConsumerGroupState) -> None:
        """Forget an empty consumer group: tombstones for its records; its committed offsets stay."""
        del self.consumer_groups.groups[group.group_id]
        written = self._consumer_written.pop(group.group_id, {})
        if written:
            code = await self._append(self.partition_for(group.group_id), [(k, None) for k in written])
            if code is not ErrorCode.none:
                log.warning("consumer group %s: tombstones not stored: %s", group.group_id, code.name)

    def consumer_group(self, group_id: str) -> tuple[ErrorCode, ConsumerGroupState | None]:
        """For ConsumerGroupDescribe: GROUP_ID_NOT_FOUND when no consumer group has that id here."""
        error = self._check(group_id)
        if error is not None:
            return error, None
        group = self.consumer_groups.groups.get(group_id)
        return (ErrorCode.group_id_not_found, None) if group is None else (ErrorCode.none, group)

    # --- JoinGroup ------------------------------------------------------------------------------------------

    async def join_group(
        self,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        *,
        require_known_member_id: bool,
        client_id: str,
        client_host: str,
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        protocol_type: str,
        protocols: Protocols,
        supports_skip_assignment: bool = False,
    ) -> JoinResult:
        """Answer a JoinGroup once the rebalance it joins completes (or at once with an error)."""
        error = self._check(group_id)
        if error is not None:
            return _join_error(member_id, error)
        if not self.config.min_session_timeout_ms <= session_timeout_ms <= self.config.max_session_timeout_ms:
            return _join_error(member_id, ErrorCode.invalid_session_timeout)
        consumer = self.consumer_groups.groups.get(group_id)
        if consumer is not None:
            if consumer.members:
                return await self._classic_join_consumer(
                    consumer, member_id, group_instance_id, require_known_member_id, client_id, client_host,
                    rebalance_timeout_ms, session_timeout_ms, protocol_type, protocols,
                )
            # An empty consumer-protocol group becomes a classic one (Kafka's downgrade of an empty group).
            await self._drop_consumer_group(consumer)
        protocols = [(name, bytes(metadata)) for name, metadata in protocols]
        unknown = member_id == UNKNOWN_MEMBER_ID
        group = self._groups.get(group_id)
        if group is None:
            if not unknown:
                return _join_error(member_id, ErrorCode.unknown_member_id)
            group = self._groups[group_id] = Group(group_id)
        waiter: asyncio.Future[JoinResult] = asyncio.get_running_loop().create_future()
        over_capacity = len(group) > self.config.max_size
        existing = group.members.get(member_id)
        if (over_capacity and existing is not None and not existing.is_awaiting_join) or (
            unknown and len(group) >= self.config.max_size
        ):
            if existing is not None:
                self._remove_member_and_update_group(group, existing, "group is over group.max.size")
            _resolve(waiter, _join_error(UNKNOWN_MEMBER_ID, ErrorCode.group_max_size_reached))
        elif unknown:
            self._join_unknown_member(
                group,
                group_instance_id,
                require_known_member_id,
                client_id,
                client_host,
                rebalance_timeout_ms,
                session_timeout_ms,
                protocol_type,
                protocols,
                supports_skip_assignment,
                waiter,
            )
        else:
            self._join_known_member(
                group,
                member_id,
                group_instance_id,
                client_id,
                client_host,
                rebalance_timeout_ms,
                session_timeout_ms,
                protocol_type,
                protocols,
                waiter,
            )
        if group.state is GroupState.PREPARING_REBALANCE:
            self._try_complete_join(group)
        self._fire_due(self._clock.now_ms())
        return await asyncio.shield(waiter)

    def _join_unknown_member(
        self,
        group: Group,
        instance_id: str | None,
        require_known_member_id: bool,
        client_id: str,
        client_host: str,
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        protocol_type: str,
        protocols: Protocols,
        supports_skip_assignment: bool,
        waiter: asyncio.Future[JoinResult],
    ) -> None:
        if group.state is GroupState.DEAD:
            _resolve(waiter, _join_error(UNKNOWN_MEMBER_ID, ErrorCode.coordinator_not_available))
            return
        if not group.supports_protocols(protocol_type, protocols):
            _resolve(waiter, _join_error(UNKNOWN_MEMBER_ID, ErrorCode.inconsistent_group_protocol))
            return
        new_member_id = Group.generate_member_id(client_id, instance_id)
        old_member_id = group.static_member_id(instance_id)
        if instance_id is not None and old_member_id is not None:
            self._rejoin_static_member(
                group,
                instance_id,
                old_member_id,
                new_member_id,
                rebalance_timeout_ms,
                session_timeout_ms,
                protocols,
                supports_skip_assignment,
                waiter,
            )
        elif require_known_member_id and instance_id is None:
            # KIP-394: hand out the id first, so a client that times out retries with it instead of adding a
            # ghost.
            group.pending_members.add(new_member_id)
            self._schedule_pending_member_expiry(group, new_member_id, session_timeout_ms)
            _resolve(waiter, _join_error(new_member_id, ErrorCode.member_id_required))
        else:
            self._add_member_and_rebalance(
                group,
                new_member_id,
                instance_id,
                client_id,
                client_host,
                rebalance_timeout_ms,
                session_timeout_ms,
                protocol_type,
                protocols,
                waiter,
            )

    def _join_known_member(
        self,
        group: Group,
        member_id: str,
        instance_id: str | None,
        client_id: str,
        client_host: str,
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        protocol_type: str,
        protocols: Protocols,
        waiter: asyncio.Future[JoinResult],
    ) -> None:
        if group.state is GroupState.DEAD:
            _resolve(waiter, _join_error(member_id, ErrorCode.coordinator_not_available))
        elif not group.supports_protocols(protocol_type, protocols):
            _resolve(waiter, _join_error(member_id, ErrorCode.inconsistent_group_protocol))
        elif member_id in group.pending_members:
            self._add_member_and_rebalance(
                group,
                member_id,
                instance_id,
                client_id,
                client_host,
                rebalance_timeout_ms,
                session_timeout_ms,
                protocol_type,
                protocols,
                waiter,
            )
        elif group.is_static_member_fenced(member_id, instance_id):
            _resolve(waiter, _join_error(member_id, ErrorCode.fenced_instance_id))
        elif not group.has(member_id) or (instance_id is not None and group.static_member_id(instance_id) is None):
            _resolve(waiter, _join_error(member_id, ErrorCode.unknown_member_id))
        else:
            member = group.members[member_id]
            state = group.state
            if state is GroupState.PREPARING_REBALANCE:
                self._update_member_and_rebalance(
                    group, member, protocols, rebalance_timeout_ms, session_timeout_ms, waiter
                )
            elif state is GroupState.COMPLETING_REBALANCE:
                if member.matches(protocols):
                    # A retry of a JoinGroup whose answer was lost: repeat this generation's answer.
                    _resolve(waiter, self._join_result(group, member))
                else:
                    self._update_member_and_rebalance(
                        group, member, protocols, rebalance_timeout_ms, session_timeout_ms, waiter
                    )
            elif state is GroupState.STABLE:
                if group.is_leader(member_id) or not member.matches(protocols):
                    # The leader rejoining is how a consumer asks for a rebalance (e.g. new topics matched).
                    self._update_member_and_rebalance(
                        group, member, protocols, rebalance_timeout_ms, session_timeout_ms, waiter
                    )
                else:
                    _resolve(waiter, self._join_result(group, member, include_members=False))
            else:
                _resolve(waiter, _join_error(member_id, ErrorCode.unknown_member_id))

    def _rejoin_static_member(
        self,
        group: Group,
        instance_id: str,
        old_member_id: str,
        new_member_id: str,
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        protocols: Protocols,
        supports_skip_assignment: bool,
        waiter: asyncio.Future[JoinResult],
    ) -> None:
        """A static member came back without its member id: it takes its old place, fencing the old id."""
        member = group.members[old_member_id]
        _resolve(member.join_waiter, _join_error(old_member_id, ErrorCode.fenced_instance_id))
        _resolve(member.sync_waiter, SyncResult(ErrorCode.fenced_instance_id))
        member.join_waiter = member.sync_waiter = None
        old_protocols = list(member.protocols)
        old_timeouts = (member.rebalance_timeout_ms, member.session_timeout_ms)
        current_leader = group.leader_id or ""
        was_leader = group.is_leader(old_member_id)
        group.replace_static_member(instance_id, old_member_id, new_member_id)
        self._schedule_heartbeat(group, member, session_timeout_ms)
        self._update_member(group, member, protocols, rebalance_timeout_ms, session_timeout_ms, waiter)
        log.info(
            "static member %s of group %s rejoined as %s (was %s)",
            instance_id,
            group.group_id,
            new_member_id,
            old_member_id,
        )
        if group.state is GroupState.STABLE:
            if group.select_protocol() != group.protocol_name:
                self._maybe_prepare_rebalance(group, f"static member {instance_id} changed its protocols")
                return
            generation = group.generation_id
            assignment = {m.member_id: m.assignment for m in group.members.values()}

            def stored(error: ErrorCode) -> None:
                if self._groups.get(group.group_id) is not group or group.members.get(new_member_id) is not member:
                    _resolve(member.join_waiter, _join_error(new_member_id, ErrorCode.unknown_member_id))
                    member.join_waiter = None
                    return
                if error is not ErrorCode.none:
                    # Nothing durable changed: restore the old id so the old instance is not fenced for
                    # nothing.
                    member.join_waiter = None
                    group.replace_static_member(instance_id, new_member_id, old_member_id)
                    self._update_member(group, member, old_protocols, *old_timeouts, None)
                    _resolve(waiter, _join_error(UNKNOWN_MEMBER_ID, error))
                    return
                skip = supports_skip_assignment and was_leader
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
            self._prepare_rebalance(group, f"static member {instance_id} rejoined while awaiting sync")
        # PreparingRebalance: the member now simply awaits the join like everyone else.

    def _add_member_and_rebalance(
        self,
        group: Group,
        member_id: str,
        instance_id: str | None,
        client_id: str,
        client_host: str,
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        protocol_type: str,
        protocols: Protocols,
        waiter: asyncio.Future[JoinResult],
    ) -> None:
        member = Member(
            member_id=member_id,
            group_instance_id=instance_id,
            client_id=client_id,
            client_host=client_host,
            rebalance_timeout_ms=rebalance_timeout_ms,
            session_timeout_ms=session_timeout_ms,
            protocol_type=protocol_type,
            protocols=[(name, bytes(metadata)) for name, metadata in protocols],
            is_new=True,
            join_waiter=waiter,
        )
        if group.state is GroupState.PREPARING_REBALANCE and group.generation_id == 0:
            group.new_member_added = True
        group.add(member)
        # A new member cannot heartbeat until its join completes; expire it only if that takes far too long.
        self._schedule_heartbeat(group, member, self.config.new_member_join_timeout_ms)
        self._maybe_prepare_rebalance(group, f"adding new member {member_id}")

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
            _resolve(member.join_waiter, _join_error(member.member_id, ErrorCode.rebalance_in_progress))
        member.join_waiter = waiter

    def _update_member_and_rebalance(
        self,
        group: Group,
        member: Member,
        protocols: Protocols,
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        waiter: asyncio.Future[JoinResult],
    ) -> None:
        self._update_member(group, member, protocols, rebalance_timeout_ms, session_timeout_ms, waiter)
        self._maybe_prepare_rebalance(group, f"member {member.member_id} rejoined")

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
        _resolve(waiter, result)

    # --- rebalance mechanics --------------------------------------------------------------------------------

    def _maybe_prepare_rebalance(self, group: Group, reason: str) -> None:
        if group.can_rebalance():
            self._prepare_rebalance(group, reason)

    def _prepare_rebalance(self, group: Group, reason: str) -> None:
        if group.state is GroupState.COMPLETING_REBALANCE:
            self._propagate_assignment_error(group, ErrorCode.rebalance_in_progress)
        initial = group.state is GroupState.EMPTY
        group.pending_sync.clear()
        self._sync_timer.pop(group, None)
        group.transition_to(GroupState.PREPARING_REBALANCE, self._clock.now_ms())
        log.info(
            "preparing to rebalance group %s with old generation %d (%s)",
            group.group_id,
            group.generation_id,
            reason,
        )
        if initial:
            delay = self.config.initial_rebalance_delay_ms
            self._schedule_join(group, _DelayedJoin(True, delay, max(group.rebalance_timeout_ms() - delay, 0)))
        else:
            self._schedule_join(group, _DelayedJoin(False, group.rebalance_timeout_ms(), 0))
            self._try_complete_join(group)

    def _schedule_join(self, group: Group, delayed: _DelayedJoin, start_ms: int | None = None) -> None:
        """Arm the join deadline ``delay_ms`` after ``start_ms`` (default: now).

        A chained initial delay starts from the deadline it follows, so a late tick does not stretch it.
        """
        self._rebalance[group] = delayed
        deadline = (self._clock.now_ms() if start_ms is None else start_ms) + delayed.delay_ms
        self._schedule(deadline, lambda: self._on_join_deadline(group, delayed, deadline))

    def _on_join_deadline(self, group: Group, delayed: _DelayedJoin, deadline: int) -> None:
        if self._rebalance.get(group) is not delayed or self._groups.get(group.group_id) is not group:
            return
        if delayed.initial and group.new_member_added and delayed.remaining_ms != 0:
            # InitialDelayedJoin: members are still arriving, so wait once more (within the rebalance
            # timeout).
            group.new_member_added = False
            delay = min(self.config.initial_rebalance_delay_ms, delayed.remaining_ms)
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
                _resolve(member.sync_waiter, SyncResult(ErrorCode.unknown_member_id))
                member.sync_waiter = None
                group.remove(member.member_id)
        if group.state is GroupState.DEAD:
            return
        if not group.maybe_elect_new_joined_leader() and group.members:
            # Only static members that did not rejoin are left: wait for them (or their session expiry).
            self._schedule_join(group, _DelayedJoin(False, group.rebalance_timeout_ms(), 0))
            return
        group.init_next_generation(self._clock.now_ms())
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
            self._schedule_heartbeat(group, member, member.session_timeout_ms)
            member.is_new = False
        group.pending_sync = set(group.members)
        token = object()
        self._sync_timer[group] = token
        self._schedule(
            self._clock.now_ms() + group.rebalance_timeout_ms(),
            lambda: self._on_pending_sync_deadline(group, token),
        )

    def _on_pending_sync_deadline(self, group: Group, token: object) -> None:
        """Members that never sent SyncGroup for this generation are removed, which starts a new rebalance."""
        if self._sync_timer.get(group) is not token or self._groups.get(group.group_id) is not group:
            return
        del self._sync_timer[group]
        if group.state not in (GroupState.COMPLETING_REBALANCE, GroupState.STABLE) or not group.pending_sync:
            return
        missing = sorted(group.pending_sync)
        log.info("group %s: removing members that did not send SyncGroup in time: %s", group.group_id, missing)
        for member_id in missing:
            member = group.members.get(member_id)
            if member is not None:
                _resolve(member.join_waiter, _join_error(UNKNOWN_MEMBER_ID, ErrorCode.unknown_member_id))
                member.join_waiter = None
                group.remove(member_id)
        self._maybe_prepare_rebalance(group, "members did not send SyncGroup in time")

    def _remove_member_and_update_group(self, group: Group, member: Member, reason: str) -> None:
        log.info("removing member %s from group %s: %s", member.member_id, group.group_id, reason)
        _resolve(member.join_waiter, _join_error(UNKNOWN_MEMBER_ID, ErrorCode.unknown_member_id))
        _resolve(member.sync_waiter, SyncResult(ErrorCode.unknown_member_id))
        member.join_waiter = member.sync_waiter = None
        group.remove(member.member_id)
        if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._maybe_prepare_rebalance(group, reason)
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
                _resolve(waiter, SyncResult(error, member.assignment, group.protocol_type, group.protocol_name))
                # The session clock restarts once the member has its answer.
                self._schedule_heartbeat(group, member, member.session_timeout_ms)

    # --- heartbeats and expiry ------------------------------------------------------------------------------

    def _schedule_heartbeat(self, group: Group, member: Member, timeout_ms: int, now: int | None = None) -> None:
        """Move the member's session deadline.

        Each member keeps at most one timer armed: a later deadline is picked up when that timer fires, so a
        member that heartbeats or commits often does not grow the timer heap.
        """
        deadline = (self._clock.now_ms() if now is None else now) + timeout_ms
        member.heartbeat_deadline = deadline
        if member.heartbeat_armed_at is None or deadline < member.heartbeat_armed_at:
            self._arm_heartbeat(group, member, deadline)

    def _arm_heartbeat(self, group: Group, member: Member, deadline: int) -> None:
        member.heartbeat_armed_at = deadline
        self._schedule(deadline, lambda: self._on_heartbeat_deadline(group, member, deadline))

    def _on_heartbeat_deadline(self, group: Group, member: Member, armed_at: int) -> None:
        if (
            self._groups.get(group.group_id) is not group
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
            if self._groups.get(group.group_id) is group and member_id in group.pending_members:
                log.info("pending member %s of group %s expired", member_id, group.group_id)
                group.pending_members.discard(member_id)
                if group.state is GroupState.PREPARING_REBALANCE:
                    self._try_complete_join(group)

        self._schedule(self._clock.now_ms() + timeout_ms, expire)

    # --- SyncGroup, Heartbeat, LeaveGroup -------------------------------------------------------------------

    async def sync_group(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        *,
        protocol_type: str | None = None,
        protocol_name: str | None = None,
        assignments: Mapping[str, bytes] | None = None,
    ) -> SyncResult:
        """Answer a SyncGroup once the leader's assignment is stored (or at once)."""
        error = self._check(group_id)
        if error is ErrorCode.coordinator_load_in_progress:
            # The rebalance state was lost with the old coordinator; rejoining is the way forward.
            return SyncResult(ErrorCode.rebalance_in_progress)
        if error is not None:
            return SyncResult(error)
        consumer = self.consumer_groups.groups.get(group_id)
        if consumer is not None:
            return self._classic_sync_consumer(
                consumer, generation_id, member_id, group_instance_id, protocol_type, protocol_name
            )
        group = self._groups.get(group_id)
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
            self._schedule_heartbeat(group, member, member.session_timeout_ms)
            return SyncResult(ErrorCode.none, member.assignment, group.protocol_type, group.protocol_name)

        waiter: asyncio.Future[SyncResult] = asyncio.get_running_loop().create_future()
        if member.sync_waiter is not None:
            _resolve(member.sync_waiter, SyncResult(ErrorCode.rebalance_in_progress))
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
                    self._groups.get(group_id) is not group
                    or group.state is not GroupState.COMPLETING_REBALANCE
                    or group.generation_id != generation
                ):
                    return
                if store_error is not ErrorCode.none:
                    self._propagate_assignment_error(group, store_error)
                    self._maybe_prepare_rebalance(group, "storing the group assignment failed")
                else:
                    for mid, m in group.members.items():
                        m.assignment = assignment.get(mid, b"")
                    self._propagate_assignment(group, ErrorCode.none)
                    group.transition_to(GroupState.STABLE, self._clock.now_ms())

            self._store_group(group, assignment, stored)
        return await asyncio.shield(waiter)

    def heartbeat(self, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None) -> ErrorCode:
        error = self._check(group_id)
        if error is ErrorCode.coordinator_load_in_progress:
            return ErrorCode.none  # Kafka answers blindly while loading; the member learns more on its next call
        if error is not None:
            return error
        consumer = self.consumer_groups.groups.get(group_id)
        if consumer is not None:
            return self._classic_heartbeat_consumer(consumer, generation_id, member_id, group_instance_id)
        group = self._groups.get(group_id)
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
        self._schedule_heartbeat(group, member, member.session_timeout_ms)
        if group.state is GroupState.PREPARING_REBALANCE:
            return ErrorCode.rebalance_in_progress
        return ErrorCode.none

    def leave_group(
        self, group_id: str, members: Sequence[tuple[str, str | None]]
    ) -> tuple[ErrorCode, list[ErrorCode]]:
        """Remove members (by member id, or by group.instance.id for static members); one error per member."""
        error = self._check(group_id)
        if error is not None:
            return error, []
        consumer = self.consumer_groups.groups.get(group_id)
        if consumer is not None:
            return ErrorCode.none, self._classic_leave_consumer(consumer, members)
        group = self._groups.get(group_id)
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
        self._fire_due(self._clock.now_ms())
        return ErrorCode.none, results

    # --- offsets --------------------------------------------------------------------------------------------

    async def commit_offsets(
        self,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        generation_id: int,
        offsets: Mapping[TopicPartition, OffsetCommit],
    ) -> dict[TopicPartition, ErrorCode]:
        """Store offsets for a group member (generation checked) or a standalone consumer (generation < 0)."""

        def all_(code: ErrorCode) -> dict[TopicPartition, ErrorCode]:
            return dict.fromkeys(offsets, code)

        error = self._check(group_id, allow_empty=True)
        if error is not None:
            return all_(error)
        consumer = self.consumer_groups.groups.get(group_id)
        if consumer is not None:
            # Kafka's ConsumerGroup.validateOffsetCommit: epoch -1 commits only while the group has no member.
            if not (generation_id < 0 and not consumer.members):
                consumer_member = consumer.members.get(member_id)
                if consumer_member is None:
                    return all_(ErrorCode.unknown_member_id)
                if generation_id != consumer_member.member_epoch:
                    # Kafka's ConsumerGroup.validateOffsetCommit: classic members speak in generations.
                    return all_(
                        ErrorCode.illegal_generation if consumer_member.classic is not None
                        else ErrorCode.stale_member_epoch
                    )
            holder = self._groups.get(group_id)
            if holder is None:
                holder = self._groups[group_id] = Group(group_id, state_timestamp=self._clock.now_ms())
            return await self._store_offsets(holder, offsets)
        group = self._groups.get(group_id)
        if group is None:
            if generation_id >= 0:
                return all_(ErrorCode.illegal_generation)
            group = self._groups[group_id] = Group(group_id, state_timestamp=self._clock.now_ms())
        if group.state is GroupState.DEAD:
            return all_(ErrorCode.coordinator_not_available)
        if group.is_static_member_fenced(member_id, group_instance_id):
            return all_(ErrorCode.fenced_instance_id)
        if not (generation_id < 0 and group.state is GroupState.EMPTY):
            member = group.members.get(member_id)
            if member is None:
                return all_(ErrorCode.unknown_member_id)
            if generation_id != group.generation_id:
                return all_(ErrorCode.illegal_generation)
            if group.state is GroupState.COMPLETING_REBALANCE:
                return all_(ErrorCode.rebalance_in_progress)
            self._schedule_heartbeat(group, member, member.session_timeout_ms)
        return await self._store_offsets(group, offsets)

    def _offset_values(
        self, offsets: Mapping[TopicPartition, OffsetCommit]
    ) -> tuple[dict[TopicPartition, OffsetValue], dict[TopicPartition, ErrorCode]]:
        """The commits to store, stamped now, and OFFSET_METADATA_TOO_LARGE for the others (plain or
        transactional alike)."""
        results: dict[TopicPartition, ErrorCode] = {}
        accepted: dict[TopicPartition, OffsetValue] = {}
        now = self._clock.now_ms()
        for tp, commit in offsets.items():
            metadata = commit.metadata or ""
            if len(metadata.encode()) > self.config.offset_metadata_max_bytes:
                results[tp] = ErrorCode.offset_metadata_too_large
            else:
                accepted[tp] = OffsetValue(commit.offset, commit.leader_epoch, metadata, now)
        return accepted, results

    async def _store_offsets(
        self, group: Group, offsets: Mapping[TopicPartition, OffsetCommit]
    ) -> dict[TopicPartition, ErrorCode]:
        accepted, results = self._offset_values(offsets)
        if not accepted:
            return results
        records = _offset_records(group.group_id, accepted)
        order = next(self._order)
        self._pending_commits[group] += 1
        group.pending_offset_commits.update(accepted.keys())
        try:
            code = await self._append(self.partition_for(group.group_id), records)
        finally:
            self._pending_commits[group] -= 1
            if not self._pending_commits[group]:
                del self._pending_commits[group]
            group.pending_offset_commits.subtract(accepted.keys())
            group.pending_offset_commits += Counter()  # drop the zeros
        if code is ErrorCode.none and self._groups.get(group.group_id) is group:
            for tp, value in accepted.items():
                group.put_offset_if_newer(tp, value, order)
        else:
            code = _OFFSET_STORE_ERRORS.get(code, code)
        results.update(dict.fromkeys(accepted, code))
        return results

    # --- transactional offsets (KIP-98, KIP-447) ------------------------------------------------------------

    async def commit_txn_offsets(
        self,
        group_id: str,
        producer_id: int,
        producer_epoch: int,
        member_id: str,
        group_instance_id: str | None,
        generation_id: int,
        offsets: Mapping[TopicPartition, OffsetCommit],
    ) -> dict[TopicPartition, ErrorCode]:
        """TxnOffsetCommit: append the offsets as the producer's transactional batch; they stay pending until
        the transaction's marker reaches this partition (:meth:`complete_transaction`).

        Kafka's validateOffsetCommit with isTransactional: membership is checked only when the request names a
        member, generation or instance (v3+, KIP-447); a request without them (v0-v2, or a producer that does
        not pass group metadata) commits whatever the group's state.
        """

        def all_(code: ErrorCode) -> dict[TopicPartition, ErrorCode]:
            return dict.fromkeys(offsets, code)

        error = self._check(group_id)
        if error is not None:
            return all_(error)
        group = self._groups.get(group_id)
        if group is None:
            group = self._groups[group_id] = Group(group_id, state_timestamp=self._clock.now_ms())
        if group.state is GroupState.DEAD:
            return all_(ErrorCode.coordinator_not_available)
        if generation_id >= 0 or member_id != UNKNOWN_MEMBER_ID or group_instance_id is not None:
            if group.is_static_member_fenced(member_id, group_instance_id):
                return all_(ErrorCode.fenced_instance_id)
            if not group.has(member_id):
                return all_(ErrorCode.unknown_member_id)
            if generation_id != group.generation_id:
                return all_(ErrorCode.illegal_generation)
        accepted, results = self._offset_values(offsets)
        if not accepted:
            return results
        records = _offset_records(group.group_id, accepted)
        group.prepare_txn_offsets(producer_id, accepted)
        self._producer_groups[producer_id].add(group_id)
        order = next(self._order)
        code = await self._append(
            self.partition_for(group_id), records, producer=(producer_id, producer_epoch)
        )
        for tp, value in accepted.items():
            if code is ErrorCode.none:
                group.on_txn_offset_appended(producer_id, tp, value, order)
            else:
                group.fail_txn_offset(producer_id, tp)
        if code is not ErrorCode.none:
            code = _OFFSET_STORE_ERRORS.get(code, code)
        results.update(dict.fromkeys(accepted, code))
        return results

    async def complete_transaction(self, offsets_partition: int, producer_id: int, commit: bool) -> None:
        """The producer's COMMIT or ABORT marker is in ``offsets_partition``'s log (WriteTxnMarkers calls this
        after the marker is replicated): publish or drop the offsets it committed in the transaction."""
        if offsets_partition in self._loading:
            self._completed_while_loading[offsets_partition].append((producer_id, commit))
        elif offsets_partition in self._owned:
            self._complete_transaction(offsets_partition, producer_id, commit)

    def _complete_transaction(self, offsets_partition: int, producer_id: int, commit: bool) -> None:
        group_ids = self._producer_groups.get(producer_id, set())
        done = {g for g in group_ids if self.partition_for(g) == offsets_partition}
        for group_id in done:
            group = self._groups.get(group_id)
            if group is not None:
                published = group.complete_txn(producer_id, commit)
                log.debug(
                    "producer %d %s: %d offsets of group %s",
                    producer_id, "committed" if commit else "aborted", published, group_id,
                )
        group_ids -= done
        if not group_ids:
            self._producer_groups.pop(producer_id, None)

    def fetch_offsets(
        self, group_id: str, partitions: Iterable[TopicPartition] | None
    ) -> tuple[ErrorCode, dict[TopicPartition, OffsetValue | None]]:
        """Committed offsets of ``partitions`` (None: every partition the group has committed); None = none
        yet."""
        error = self._check(group_id, allow_empty=True)
        if error is not None:
            return error, {}
        group = self._groups.get(group_id)
        stored = group.offsets if group is not None and group.state is not GroupState.DEAD else {}
        if partitions is None:
            return ErrorCode.none, dict(stored)
        return ErrorCode.none, {tp: stored.get(tp) for tp in partitions}

    def unstable_offsets(self, group_id: str, partitions: Iterable[TopicPartition]) -> set[TopicPartition]:
        """Partitions whose committed offset may still change: a plain commit in flight or a transaction's
        offsets awaiting its marker (OffsetFetch with require_stable answers UNSTABLE_OFFSET_COMMIT)."""
        group = self._groups.get(group_id)
        if group is None:
            return set()
        return {tp for tp in partitions if group.has_pending_offsets(tp)}

    async def remove_offsets_for_topics(self, topics: Iterable[str]) -> int:
        """Forget offsets of deleted topics (DeleteTopics calls this), writing tombstones; returns how
        many."""
        wanted = set(topics)
        removed = 0
        tombstones: dict[int, list[tuple[bytes, bytes | None]]] = defaultdict(list)
        for group in list(self._groups.values()):
            gone = [tp for tp in group.offsets if tp[0] in wanted]
            for tp in gone:
                group.remove_offset(tp)
                tombstones[self.partition_for(group.group_id)].append(
                    (encode_key(OffsetKey(group.group_id, *tp)), None)
                )
            removed += len(gone)
            self._drop_if_dead_empty(group, tombstones)
        await self._append_all(tombstones, "tombstones for offsets of deleted topics")
        return removed

    # --- listing, describing, deleting ----------------------------------------------------------------------

    def list_groups(
        self, states: Iterable[str] = (), types: Iterable[str] = ()
    ) -> tuple[ErrorCode, list[GroupOverview]]:
        if self._closed:
            return ErrorCode.coordinator_not_available, []
        wanted_states = {s.lower() for s in states}
        wanted_types = {t.lower() for t in types}
        error = ErrorCode.coordinator_load_in_progress if self._loading else ErrorCode.none
        consumer = [
            GroupOverview(g.group_id, "consumer", g.state, "consumer")
            for g in self.consumer_groups.groups.values()
            if (not wanted_states or g.state.lower() in wanted_states)
            and (not wanted_types or "consumer" in wanted_types)
        ]
        if wanted_types and "classic" not in wanted_types:
            return error, consumer
        return error, consumer + [
            GroupOverview(g.group_id, g.protocol_type or "", g.state.value)
            for g in self._groups.values()
            if g.state is not GroupState.DEAD
            and g.group_id not in self.consumer_groups.groups
            and (not wanted_states or g.state.value.lower() in wanted_states)
        ]

    def describe_group(self, group_id: str) -> tuple[ErrorCode, GroupSummary | None]:
        """``(error, summary)``; summary None means the group is unknown here (Kafka reports it as Dead)."""
        error = self._check(group_id, allow_empty=True)
        if error is not None:
            return error, GroupSummary("", "", "")
        group = self._groups.get(group_id)
        if group is None or group_id in self.consumer_groups.groups:
            return ErrorCode.none, None  # a consumer-protocol group is not a classic group: Kafka says Dead
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
        return ErrorCode.none, GroupSummary(group.state.value, group.protocol_type or "", protocol, members)

    async def delete_groups(self, group_ids: Iterable[str]) -> dict[str, ErrorCode]:
        """Delete Empty groups and their offsets (tombstones); groups with members get NON_EMPTY_GROUP."""
        results: dict[str, ErrorCode] = {}
        doomed: dict[int, list[Group]] = defaultdict(list)
        for group_id in group_ids:
            error = self._check(group_id, allow_empty=True)
            if error is not None:
                results[group_id] = error
                continue
            group = self._groups.get(group_id)
            if group is None or group.state is GroupState.DEAD:
                results[group_id] = ErrorCode.group_id_not_found
            elif group.state is GroupState.EMPTY:
                # Dead while the tombstones are written: joins and commits meanwhile get
                # COORDINATOR_NOT_AVAILABLE.
                group.transition_to(GroupState.DEAD, self._clock.now_ms())
                doomed[self.partition_for(group_id)].append(group)
            else:
                results[group_id] = ErrorCode.non_empty_group
        for partition, groups in doomed.items():
            records: list[tuple[bytes, bytes | None]] = []
            for group in groups:
                records += [(encode_key(OffsetKey(group.group_id, *tp)), None) for tp in group.offsets]
                records.append((encode_key(GroupKey(group.group_id)), None))
            code = await self._append(partition, records)
            for group in groups:
                if code is ErrorCode.none:
                    if self._groups.get(group.group_id) is group:
                        del self._groups[group.group_id]
                    results[group.group_id] = ErrorCode.none
                    log.info("deleted group %s with %d offsets", group.group_id, len(group.offsets))
                else:
                    group.state = GroupState.EMPTY  # undo: nothing was deleted
                    results[group.group_id] = _GROUP_STORE_ERRORS.get(code, code)
        return results

    async def delete_offsets(
        self, group_id: str, partitions: Iterable[TopicPartition]
    ) -> tuple[ErrorCode, dict[TopicPartition, ErrorCode]]:
        """OffsetDelete as Kafka's handleDeleteOffsets: an Empty group (or one with no protocol type) loses any of
        its offsets; a consumer group with members keeps those of topics its members subscribe to
        (GROUP_SUBSCRIBED_TO_TOPIC per partition); any other group with members is NON_EMPTY_GROUP."""
        wanted = list(dict.fromkeys(partitions))
        error = self._check(group_id)
        group = self._groups.get(group_id)
        if error is None and (group is None or group.state is GroupState.DEAD):
            error = ErrorCode.group_id_not_found
        if error is not None:
            return error, {}
        assert group is not None
        subscribed: set[str] = set()
        if group.state is not GroupState.EMPTY and group.protocol_type:
            if group.protocol_type != "consumer" or group.protocol_name is None:
                return ErrorCode.non_empty_group, {}
            for member in group.members.values():
                subscribed.update(_subscribed_topics(member.metadata_for(group.protocol_name)))
        results = {tp: ErrorCode.group_subscribed_to_topic if tp[0] in subscribed else ErrorCode.none
                   for tp in wanted}
        doomed = [tp for tp, code in results.items() if code is ErrorCode.none and tp in group.offsets]
        if doomed:
            for tp in doomed:
                group.remove_offset(tp)
            partition = self.partition_for(group_id)
            tombstones: dict[int, list[tuple[bytes, bytes | None]]] = {
                partition: [(encode_key(OffsetKey(group_id, *tp)), None) for tp in doomed]
            }
            # Kafka's cleanupGroupMetadata: an Empty group left without offsets is Dead (and its record goes).
            self._drop_if_dead_empty(group, tombstones)
            code = await self._append(partition, tombstones[partition])
            if code is not ErrorCode.none:
                return _GROUP_STORE_ERRORS.get(code, code), {}
            log.info("deleted %d offsets of group %s", len(doomed), group_id)
        return ErrorCode.none, results

    # --- offsets retention ----------------------------------------------------------------------------------

    def _ensure_sweep(self) -> None:
        if not self._sweep_scheduled:
            self._sweep_scheduled = True
            self._schedule(self._clock.now_ms() + self.config.offsets_retention_check_interval_ms, self._sweep)

    def _sweep(self) -> None:
        self._sweep_scheduled = False
        if self._closed:
            return
        removed = self.expire_offsets()
        if removed:
            log.info("expired %d committed offsets", removed)
        self._ensure_sweep()

    def expire_offsets(self) -> int:
        """Drop offsets past ``offsets.retention.minutes`` (KIP-211 rules) and groups left with nothing.

        An Empty consumer group's offsets expire a retention period after the group became Empty; a standalone
        committer's (no protocol type) a retention period after each commit. Groups with members keep theirs.
        The tombstones are appended in the background; the in-memory view changes at once, as in Kafka.
        """
        now = self._clock.now_ms()
        retention = self.config.offsets_retention_ms
        tombstones: dict[int, list[tuple[bytes, bytes | None]]] = defaultdict(list)
        removed = 0
        for group in list(self._groups.values()):
            if group in self._pending_commits or group.state is not GroupState.EMPTY:
                continue
            expired = []
            for tp, value in group.offsets.items():
                if group.has_pending_offsets(tp):
                    continue
                if value.expire_timestamp is not None:
                    if now >= value.expire_timestamp:
                        expired.append(tp)
                    continue
                base = (
                    group.state_timestamp
                    if group.protocol_type and group.state_timestamp is not None
                    else value.commit_timestamp
                )
                if now - base >= retention:
                    expired.append(tp)
            for tp in expired:
                group.remove_offset(tp)
                tombstones[self.partition_for(group.group_id)].append(
                    (encode_key(OffsetKey(group.group_id, *tp)), None)
                )
            removed += len(expired)
            self._drop_if_dead_empty(group, tombstones)
        if tombstones:
            self._spawn(self._append_all(tombstones, "tombstones for expired offsets"))
        return removed

    def _drop_if_dead_empty(self, group: Group, tombstones: dict[int, list[tuple[bytes, bytes | None]]]) -> None:
        if group.state is GroupState.EMPTY and not group.has_offsets and not group.members:
            group.transition_to(GroupState.DEAD, self._clock.now_ms())
            self._groups.pop(group.group_id, None)
            tombstones[self.partition_for(group.group_id)].append((encode_key(GroupKey(group.group_id)), None))

    # --- persistence ----------------------------------------------------------------------------------------

    def _store_group(self, group: Group, assignment: dict[str, bytes], done: Callable[[ErrorCode], None]) -> None:
        value = group.to_value(assignment, self._clock.now_ms())
        records = [(encode_key(GroupKey(group.group_id)), encode_group_value(value))]
        partition = self.partition_for(group.group_id)

        async def store() -> None:
            code = await self._append(partition, records)
            done(_GROUP_STORE_ERRORS.get(code, code))

        self._spawn(store())

    async def _append(
        self,
        partition: int,
        records: Sequence[tuple[bytes, bytes | None]],
        *,
        producer: tuple[int, int] | None = None,
    ) -> ErrorCode:
        """Append one batch and wait (at most offsets.commit.timeout.ms) until it is committed; ``producer``
        (id, epoch) makes it that producer's transactional batch, as Kafka writes a TxnOffsetCommit."""
        entries = [(key, value, ()) for key, value in records]
        if producer is None:
            batch = encode_batch(entries, timestamp_ms=self._clock.now_ms())
        else:
            # Kafka's GroupMetadataManager.storeOffsets for a TxnOffsetCommit: the producer's id and epoch, no
            # sequence, the transactional attribute.
            batch = encode_batch(entries, timestamp_ms=self._clock.now_ms(), producer_id=producer[0],
                                 producer_epoch=producer[1], transactional=True)
        task = asyncio.ensure_future(self._log.append(partition, batch))
        try:
            await asyncio.wait_for(asyncio.shield(task), self.config.offsets_commit_timeout_ms / 1000)
        except TimeoutError:
            task.add_done_callback(_consume_result)
            return ErrorCode.request_timed_out
        except KafkaError as exc:
            return exc.code
        except Exception:
            log.exception("append to __consumer_offsets-%d failed", partition)
            return ErrorCode.unknown_server_error
        return ErrorCode.none

    async def _append_all(self, by_partition: Mapping[int, list[tuple[bytes, bytes | None]]], what: str) -> None:
        for partition, records in by_partition.items():
            if records:
                code = await self._append(partition, records)
                if code is not ErrorCode.none:
                    log.warning("writing %s to __consumer_offsets-%d failed: %s", what, partition, code.name)

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        task.add_done_callback(_consume_result)

    # --- timers ---------------------------------------------------------------------------------------------

    def _schedule(self, deadline: int, action: Callable[[], None]) -> None:
        self._timers.schedule(deadline, action)

    async def tick(self, now_ms: int | None = None) -> None:
        """Fire every deadline up to ``now_ms`` (default: the clock's now); the broker calls it periodically."""
        self._fire_due(self._clock.now_ms() if now_ms is None else now_ms)

    def _fire_due(self, now_ms: int) -> None:
        self._timers.fire_due(now_ms)

    def next_deadline_ms(self) -> int | None:
        return self._timers.next_deadline_ms()

    async def shutdown(self) -> None:
        """Answer every waiting member NOT_COORDINATOR and stop; in-flight appends get a chance to finish."""
        for partition in list(self._owned | self._loading):
            self.unload_partition(partition)
        self._closed = True
        self._timers.clear()
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=self.config.offsets_commit_timeout_ms / 1000)


_CONTROL_KEY = struct.Struct(">hh")


def _control_is_commit(records: Sequence[Any]) -> bool:
    """A control batch's record key is Kafka's ControlRecordType: int16 version, int16 type (0 ABORT, 1 COMMIT)."""
    for record in records:
        if record.key is not None and len(record.key) >= _CONTROL_KEY.size:
            return bool(_CONTROL_KEY.unpack_from(record.key)[1] == CONTROL_COMMIT)
    return False


def _names(raw_key: bytes, group_id: str) -> bool:
    """Whether a consumer group record's key (versions 3-8: int16 version, then the group id) is ``group_id``'s."""
    raw = group_id.encode()
    return raw_key[2:4] == struct.pack(">h", len(raw)) and raw_key[4 : 4 + len(raw)] == raw


def _is_offset_key(raw_key: bytes) -> bool:
    """Key versions 0 and 1 are OffsetCommitKey; 2 is GroupMetadataKey."""
    return len(raw_key) >= 2 and raw_key[0] == 0 and raw_key[1] in (0, 1)


def _consume_result(task: asyncio.Future[Any]) -> None:
    """Retrieve a background task's outcome so a late failure is logged once, not as 'never retrieved'."""
    if task.cancelled():
        return
    exc = task.exception()
    if exc is not None and not isinstance(exc, KafkaError):
        log.error("group coordinator background task failed", exc_info=exc)


def _subscribed_topics(subscription: bytes) -> list[str]:
    """Topics of a ConsumerProtocolSubscription (any version: they follow the version field); a member whose
    metadata cannot be read subscribes to nothing the broker can see."""
    try:
        (count,) = struct.unpack_from(">i", subscription, 2)
        pos, topics = 6, []
        for _ in range(max(count, 0)):
            (size,) = struct.unpack_from(">h", subscription, pos)
            topics.append(subscription[pos + 2:pos + 2 + size].decode())
            pos += 2 + size
        return topics
    except (struct.error, UnicodeDecodeError):
        return []


def _offset_records(group_id: str, accepted: Mapping[TopicPartition, OffsetValue]) -> list[tuple[bytes, bytes]]:
    """``__consumer_offsets`` records (key, value) for a group's accepted commits."""
    return [
        (encode_key(OffsetKey(group_id, topic, partition)), encode_offset_value(value))
        for (topic, partition), value in accepted.items()
    ]

"""The group coordinator: one broker's side of every group whose ``__consumer_offsets`` partition it leads.

Split as Kafka splits its group coordinator. This class is the shard's front: it loads and unloads partitions,
checks that a request's group is coordinated and loaded here (Kafka's validateGroupStatus), and sends each request
to the part that owns it: a group id that a KIP-848 group holds goes to :class:`ConsumerGroups` (which serves its
classic-protocol members too), any other to :class:`ClassicGroups`; offsets go to :class:`OffsetManager`. The
parts share one :class:`CoordinatorContext`, and every change they make reaches ``__consumer_offsets`` through
its :class:`CoordinatorRuntime`: records appended, then replayed once committed. Loading a partition replays its
records through the same replay functions.

Deadlines are wall-clock milliseconds of the injected clock, as Kafka's are. The broker calls :meth:`tick`
periodically (every 100 ms or so) to fire the ones that passed; requests that make a deadline due at once (an
initial rebalance delay of 0, a member leaving) fire it themselves, so no answer waits for a tick.
"""

from __future__ import annotations

import asyncio
import logging
import struct
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from odradek.broker.group.classic import ClassicGroups
from odradek.broker.group.config import GroupConfig
from odradek.broker.group.consumer_group import (
    ConsumerGroupLogic,
    ConsumerGroupState,
    HeartbeatRequest,
    HeartbeatResult,
    TopicsSnapshot,
)
from odradek.broker.group.consumer_groups import ConsumerGroups
from odradek.broker.group.consumer_records import KEY_VERSIONS, key_version
from odradek.broker.group.context import CoordinatorContext
from odradek.broker.group.metadata import Group, GroupState
from odradek.broker.group.migration import OnlineMigration
from odradek.broker.group.offsets import OffsetManager
from odradek.broker.group.offsets_log import OffsetsLog
from odradek.broker.group.requests import JoinRequest
from odradek.broker.group.results import GroupOverview, GroupSummary, JoinResult, OffsetCommit, SyncResult, join_error
from odradek.broker.group.runtime import Records, group_error
from odradek.broker.group.schema import (
    GroupKey,
    GroupValue,
    OffsetKey,
    OffsetValue,
    SchemaError,
    decode_group_value,
    decode_key,
    decode_offset_value,
    encode_key,
)
from odradek.clock import Clock
from odradek.errors import ErrorCode
from odradek.placement.model import TopicPartition
from odradek.protocol.records import CONTROL_COMMIT

log = logging.getLogger(__name__)

LOAD_YIELD_EVERY = 64
"""Batches read between yields to the event loop while loading a partition."""


class GroupCoordinator:
    """Every group whose ``__consumer_offsets`` partition this broker has loaded."""

    def __init__(
        self,
        broker_id: int,
        clock: Clock,
        offsets_log: OffsetsLog,
        config: GroupConfig | None = None,
    ) -> None:
        self.broker_id = broker_id
        self.config = config or GroupConfig()
        self.ctx = CoordinatorContext(clock, offsets_log, self.config)
        self._log = offsets_log
        self._classic = ClassicGroups(self.ctx)
        self._consumer = ConsumerGroups(self.ctx, OnlineMigration(self.ctx, self._classic))
        self._offsets = OffsetManager(self.ctx, self._classic)
        self._load_epoch: Counter[int] = Counter()
        self._completed_while_loading: defaultdict[int, list[tuple[int, bool]]] = defaultdict(list)

    @property
    def consumer_groups(self) -> ConsumerGroupLogic:
        """KIP-848 groups; their committed offsets live in a memberless classic :class:`Group` of the same id."""
        return self.ctx.consumer

    @property
    def topics_source(self) -> Callable[[], TopicsSnapshot] | None:
        """The broker's topics now (name → id, partition count), for classic members of consumer groups."""
        return self.ctx.topics_source

    @topics_source.setter
    def topics_source(self, source: Callable[[], TopicsSnapshot] | None) -> None:
        self.ctx.topics_source = source

    # --- ownership ------------------------------------------------------------------------------------------

    def partition_for(self, group_id: str) -> int:
        return self.ctx.partition_for(group_id)

    def owns(self, partition: int) -> bool:
        return partition in self.ctx.owned

    def is_loading(self, partition: int) -> bool:
        return partition in self.ctx.loading

    @property
    def owned_partitions(self) -> frozenset[int]:
        return frozenset(self.ctx.owned)

    def load_partition(self, partition: int) -> asyncio.Future[None]:
        """Become coordinator for ``partition``: replay its records into groups and offsets, then serve them.

        Called by the broker when it becomes the partition's leader, from the event loop. Loading runs as a
        task (returned, for whoever wants to wait for it); until it finishes, requests for the partition's
        groups get COORDINATOR_LOAD_IN_PROGRESS. An :meth:`unload_partition` that arrives meanwhile wins: the
        half-read state is dropped.
        """
        loop = asyncio.get_running_loop()
        if partition in self.ctx.owned or partition in self.ctx.loading:
            done: asyncio.Future[None] = loop.create_future()
            done.set_result(None)
            return done
        self.ctx.loading.add(partition)
        task = loop.create_task(self._load(partition, self._load_epoch[partition]))
        self.ctx.runtime.keep(task)
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
                            pending[record.key] = (next(self.ctx.order), record.value)
                            records_read += 1
                else:
                    for record in records:
                        if record.key is not None:
                            latest[record.key] = (next(self.ctx.order), record.value)
                            records_read += 1
                if n % LOAD_YIELD_EVERY == 0:
                    await asyncio.sleep(0)
                    if self._load_epoch[partition] != epoch:
                        return
        except BaseException:
            if self._load_epoch[partition] == epoch:
                self.ctx.loading.discard(partition)
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
        now = self.ctx.now()
        loaded = 0
        for group_id in {*group_values, *offsets, *pending_offsets}:
            value = group_values.get(group_id)
            group_offsets = offsets.get(group_id, {})
            group_pending = pending_offsets.get(group_id, {})
            if value is None and not group_offsets and not group_pending:
                continue
            if value is not None:
                self.ctx.groups[group_id] = Group.from_value(group_id, value)
            for tp, (order, offset) in group_offsets.items():
                self._offsets.replay_offset(group_id, tp, offset, order)
            for producer_id, txn_offsets in group_pending.items():
                for tp, (order, offset) in txn_offsets.items():
                    self._offsets.replay_txn_offset(group_id, producer_id, tp, offset, order)
            group = self.ctx.groups[group_id]
            loaded += 1
            for member in group.members.values():
                self._classic.schedule_heartbeat(group, member, member.session_timeout_ms, now)
            if len(group) > self.ctx.config.max_size:
                self._classic.prepare_rebalance(group, "freshly loaded group is over group.max.size")
        loaded += self._consumer.load(consumer_raw, now)
        self.ctx.loading.discard(partition)
        self.ctx.owned.add(partition)
        # Markers written while the log was being read may lie past where the reader stopped; their completions
        # were queued. No transactional offsets were appended meanwhile (TxnOffsetCommit got
        # COORDINATOR_LOAD_IN_PROGRESS), so a producer still pending here is the one the marker closed.
        for producer_id, commit in self._completed_while_loading.pop(partition, []):
            self._offsets.complete(partition, producer_id, commit)
        self._offsets.ensure_sweep()
        log.info(
            "loaded %d groups from __consumer_offsets-%d (%d records, %d open transactions)",
            loaded, partition, records_read, sum(len(p) for p in pending_offsets.values()),
        )

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
        self.ctx.loading.discard(partition)
        self.ctx.owned.discard(partition)
        self._completed_while_loading.pop(partition, None)
        for group_id in [g for g in self.ctx.groups if self.ctx.partition_for(g) == partition]:
            group = self.ctx.groups.pop(group_id)
            self._classic.on_group_unloaded(group)
        for group_id in [g for g in self.ctx.consumer.groups if self.ctx.partition_for(g) == partition]:
            del self.ctx.consumer.groups[group_id]
        for group_id in [g for g in self.ctx.consumer_committed if self.ctx.partition_for(g) == partition]:
            del self.ctx.consumer_committed[group_id]
        for producer_id, group_ids in list(self._offsets.producer_groups.items()):
            group_ids -= {g for g in group_ids if self.ctx.partition_for(g) == partition}
            if not group_ids:
                del self._offsets.producer_groups[producer_id]

    # --- requests -------------------------------------------------------------------------------------------

    async def consumer_heartbeat(self, req: HeartbeatRequest, topics: TopicsSnapshot) -> HeartbeatResult:
        """One heartbeat of a consumer-protocol member; a classic group of that id must be empty (it converts).
        The answer waits until the group's changed records are committed in ``__consumer_offsets``."""
        return await self._consumer.consumer_heartbeat(req, topics)

    def consumer_group(self, group_id: str) -> tuple[ErrorCode, ConsumerGroupState | None]:
        """For ConsumerGroupDescribe: GROUP_ID_NOT_FOUND when no consumer group has that id here."""
        return self._consumer.describe(group_id)

    async def join_group(self, req: JoinRequest) -> JoinResult:
        """Answer a JoinGroup once the rebalance it joins completes (or at once with an error)."""
        error = self.ctx.check(req.group_id)
        if error is not None:
            return join_error(req.member_id, error)
        if not self.config.min_session_timeout_ms <= req.session_timeout_ms <= self.config.max_session_timeout_ms:
            return join_error(req.member_id, ErrorCode.invalid_session_timeout)
        if req.group_id in self.ctx.consumer.groups:
            result = await self._consumer.join(req)
            if result is not None:
                return result
            error = self.ctx.check(req.group_id)  # the partition may have moved while the group's lock was awaited
            if error is not None:
                return join_error(req.member_id, error)
        return await self._classic.join(req)

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
        error = self.ctx.check(group_id)
        if error is ErrorCode.coordinator_load_in_progress:
            # The rebalance state was lost with the old coordinator; rejoining is the way forward.
            return SyncResult(ErrorCode.rebalance_in_progress)
        if error is not None:
            return SyncResult(error)
        consumer = self.ctx.consumer.groups.get(group_id)
        if consumer is not None:
            return self._consumer.classic_sync(
                consumer, generation_id, member_id, group_instance_id, protocol_type, protocol_name
            )
        return await self._classic.sync(
            group_id, generation_id, member_id, group_instance_id, protocol_type, protocol_name, assignments
        )

    def heartbeat(self, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None) -> ErrorCode:
        error = self.ctx.check(group_id)
        if error is ErrorCode.coordinator_load_in_progress:
            return ErrorCode.none  # Kafka answers blindly while loading; the member learns more on its next call
        if error is not None:
            return error
        consumer = self.ctx.consumer.groups.get(group_id)
        if consumer is not None:
            return self._consumer.classic_heartbeat(consumer, generation_id, member_id, group_instance_id)
        return self._classic.heartbeat(group_id, generation_id, member_id, group_instance_id)

    async def leave_group(
        self, group_id: str, members: Sequence[tuple[str, str | None]]
    ) -> tuple[ErrorCode, list[ErrorCode]]:
        """Remove members (by member id, or by group.instance.id for static members); one error per member."""
        error = self.ctx.check(group_id)
        if error is not None:
            return error, []
        if group_id in self.ctx.consumer.groups:
            result = await self._consumer.leave(group_id, members)
            if result is not None:
                return result
            error = self.ctx.check(group_id)
            if error is not None:
                return error, []
        return self._classic.leave(group_id, members)

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
        return await self._offsets.commit_offsets(group_id, member_id, group_instance_id, generation_id, offsets)

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
        """TxnOffsetCommit: pending until the producer's marker (:meth:`complete_transaction`)."""
        return await self._offsets.commit_txn_offsets(
            group_id, producer_id, producer_epoch, member_id, group_instance_id, generation_id, offsets
        )

    async def complete_transaction(self, offsets_partition: int, producer_id: int, commit: bool) -> None:
        """The producer's COMMIT or ABORT marker is in ``offsets_partition``'s log (WriteTxnMarkers calls this
        after the marker is replicated): publish or drop the offsets it committed in the transaction."""
        if offsets_partition in self.ctx.loading:
            self._completed_while_loading[offsets_partition].append((producer_id, commit))
        elif offsets_partition in self.ctx.owned:
            self._offsets.complete(offsets_partition, producer_id, commit)

    def fetch_offsets(
        self, group_id: str, partitions: Iterable[TopicPartition] | None
    ) -> tuple[ErrorCode, dict[TopicPartition, OffsetValue | None]]:
        """Committed offsets of ``partitions`` (None: every partition the group has committed); None = none
        yet."""
        return self._offsets.fetch_offsets(group_id, partitions)

    def unstable_offsets(self, group_id: str, partitions: Iterable[TopicPartition]) -> set[TopicPartition]:
        """Partitions whose committed offset may still change (OffsetFetch with require_stable)."""
        return self._offsets.unstable_offsets(group_id, partitions)

    async def delete_offsets(
        self, group_id: str, partitions: Iterable[TopicPartition]
    ) -> tuple[ErrorCode, dict[TopicPartition, ErrorCode]]:
        """OffsetDelete (Kafka's handleDeleteOffsets)."""
        return await self._offsets.delete_offsets(group_id, partitions)

    async def remove_offsets_for_topics(self, topics: Iterable[str]) -> int:
        """Forget offsets of deleted topics (DeleteTopics calls this); returns how many were planned."""
        return await self._offsets.remove_offsets_for_topics(topics)

    def expire_offsets(self) -> int:
        """Expire offsets past ``offsets.retention.minutes``; returns how many (their tombstones are written in the
        background)."""
        return self._offsets.expire_offsets()

    # --- listing, describing, deleting ----------------------------------------------------------------------

    def list_groups(
        self, states: Iterable[str] = (), types: Iterable[str] = ()
    ) -> tuple[ErrorCode, list[GroupOverview]]:
        if self.ctx.closed:
            return ErrorCode.coordinator_not_available, []
        wanted_states = {s.lower() for s in states}
        wanted_types = {t.lower() for t in types}
        error = ErrorCode.coordinator_load_in_progress if self.ctx.loading else ErrorCode.none
        consumer = [
            GroupOverview(g.group_id, "consumer", g.state, "consumer")
            for g in self.ctx.consumer.groups.values()
            if (not wanted_states or g.state.lower() in wanted_states)
            and (not wanted_types or "consumer" in wanted_types)
        ]
        if wanted_types and "classic" not in wanted_types:
            return error, consumer
        return error, consumer + [
            GroupOverview(g.group_id, g.protocol_type or "", g.state.value)
            for g in self.ctx.groups.values()
            if g.state is not GroupState.DEAD
            and g.group_id not in self.ctx.consumer.groups
            and (not wanted_states or g.state.value.lower() in wanted_states)
        ]

    def describe_group(self, group_id: str) -> tuple[ErrorCode, GroupSummary | None]:
        """``(error, summary)``; summary None means the group is unknown here (Kafka reports it as Dead)."""
        error = self.ctx.check(group_id, allow_empty=True)
        if error is not None:
            return error, GroupSummary("", "", "")
        group = self.ctx.groups.get(group_id)
        if group is None or group_id in self.ctx.consumer.groups:
            return ErrorCode.none, None  # a consumer-protocol group is not a classic group: Kafka says Dead
        return ErrorCode.none, self._classic.describe(group)

    async def delete_groups(self, group_ids: Iterable[str]) -> dict[str, ErrorCode]:
        """Delete Empty groups and their offsets (tombstones); groups with members get NON_EMPTY_GROUP."""
        results: dict[str, ErrorCode] = {}
        doomed: dict[int, list[tuple[Group, int | None]]] = defaultdict(list)
        for group_id in group_ids:
            error = self.ctx.check(group_id, allow_empty=True)
            if error is not None:
                results[group_id] = error
                continue
            group = self.ctx.groups.get(group_id)
            if group is None or group.state is GroupState.DEAD:
                results[group_id] = ErrorCode.group_id_not_found
            elif group.state is GroupState.EMPTY:
                # Dead while the tombstones are written: joins and commits meanwhile get
                # COORDINATOR_NOT_AVAILABLE.
                doomed[self.ctx.partition_for(group_id)].append((group, group.state_timestamp))
                group.transition_to(GroupState.DEAD, self.ctx.now())
            else:
                results[group_id] = ErrorCode.non_empty_group
        for partition, groups in doomed.items():
            records: Records = []
            for group, _ in groups:
                records += [(encode_key(OffsetKey(group.group_id, *tp)), None) for tp in group.offsets]
                records.append((encode_key(GroupKey(group.group_id)), None))

            def replay(groups: list[tuple[Group, int | None]] = groups) -> None:
                for group, _ in groups:
                    if self.ctx.groups.get(group.group_id) is group:
                        del self.ctx.groups[group.group_id]
                    log.info("deleted group %s with %d offsets", group.group_id, len(group.offsets))

            code = await self.ctx.runtime.write(partition, records, replay)
            for group, state_timestamp in groups:
                results[group.group_id] = group_error(code)
                if code is not ErrorCode.none:  # nothing was deleted: back to Empty as it was
                    group.state, group.state_timestamp = GroupState.EMPTY, state_timestamp
        return results

    # --- timers ---------------------------------------------------------------------------------------------

    async def tick(self, now_ms: int | None = None) -> None:
        """Fire every deadline up to ``now_ms`` (default: the clock's now); the broker calls it periodically."""
        self.ctx.fire_due(self.ctx.now() if now_ms is None else now_ms)

    def next_deadline_ms(self) -> int | None:
        return self.ctx.timers.next_deadline_ms()

    async def shutdown(self) -> None:
        """Answer every waiting member NOT_COORDINATOR and stop; in-flight appends get a chance to finish."""
        for partition in list(self.ctx.owned | self.ctx.loading):
            self.unload_partition(partition)
        self.ctx.closed = True
        self.ctx.timers.clear()
        await self.ctx.runtime.drain()


_CONTROL_KEY = struct.Struct(">hh")


def _control_is_commit(records: Sequence[Any]) -> bool:
    """A control batch's record key is Kafka's ControlRecordType: int16 version, int16 type (0 ABORT, 1 COMMIT)."""
    for record in records:
        if record.key is not None and len(record.key) >= _CONTROL_KEY.size:
            return bool(_CONTROL_KEY.unpack_from(record.key)[1] == CONTROL_COMMIT)
    return False


def _is_offset_key(raw_key: bytes) -> bool:
    """Key versions 0 and 1 are OffsetCommitKey; 2 is GroupMetadataKey."""
    return len(raw_key) >= 2 and raw_key[0] == 0 and raw_key[1] in (0, 1)

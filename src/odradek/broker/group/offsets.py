"""Committed offsets (Kafka's OffsetMetadataManager): OffsetCommit, TxnOffsetCommit and their markers,
OffsetFetch, OffsetDelete, offsets of deleted topics and retention.

Every change is written before memory moves: a handler validates and builds records; the runtime appends them
and, once they are committed, calls the replay that applies them (:meth:`OffsetManager.replay_offset`,
:meth:`OffsetManager.replay_txn_offset`, the group tombstone). The loader replays the same way, so the offsets a
failover serves come from the path that served them live. While a commit is appending its partitions count as
unstable (OffsetFetch with require_stable) and its group's offsets do not expire. A transaction's offsets stay
pending per producer until its marker (:meth:`OffsetManager.complete`); a later plain commit of the partition
wins over them, by log order.
"""

from __future__ import annotations

import logging
import struct
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence

from odradek.broker.group.classic import UNKNOWN_MEMBER_ID, ClassicGroups
from odradek.broker.group.context import CoordinatorContext
from odradek.broker.group.metadata import Group, GroupState, PendingTxnOffset
from odradek.broker.group.results import OffsetCommit
from odradek.broker.group.runtime import Records, group_error, offset_error
from odradek.broker.group.schema import GroupKey, OffsetKey, OffsetValue, encode_key, encode_offset_value
from odradek.errors import ErrorCode
from odradek.placement.model import TopicPartition

log = logging.getLogger(__name__)


class OffsetManager:
    """The committed offsets of every group this broker coordinates (kept in the groups of ``ctx.groups``)."""

    def __init__(self, ctx: CoordinatorContext, classic: ClassicGroups) -> None:
        self.ctx = ctx
        self.classic = classic
        self._in_flight: dict[str, Counter[TopicPartition]] = {}
        """Per group, the partitions whose commits (plain or transactional) are appending."""
        self.producer_groups: defaultdict[int, set[str]] = defaultdict(set)
        """Kafka's openGroupsForProducer: groups holding a producer's pending transactional offsets."""
        self._sweep_scheduled = False

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

        error = self.ctx.check(group_id, allow_empty=True)
        if error is not None:
            return all_(error)
        consumer = self.ctx.consumer.groups.get(group_id)
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
            return await self._store_offsets(group_id, offsets)
        group = self.ctx.groups.get(group_id)
        if group is None:
            # A standalone committer's group comes into being when its first commit is replayed.
            if generation_id >= 0:
                return all_(ErrorCode.illegal_generation)
            return await self._store_offsets(group_id, offsets)
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
            self.classic.schedule_heartbeat(group, member, member.session_timeout_ms)
        return await self._store_offsets(group_id, offsets)

    def _offset_values(
        self, offsets: Mapping[TopicPartition, OffsetCommit]
    ) -> tuple[dict[TopicPartition, OffsetValue], dict[TopicPartition, ErrorCode]]:
        """The commits to store, stamped now, and OFFSET_METADATA_TOO_LARGE for the others (plain or
        transactional alike)."""
        results: dict[TopicPartition, ErrorCode] = {}
        accepted: dict[TopicPartition, OffsetValue] = {}
        now = self.ctx.now()
        for tp, commit in offsets.items():
            metadata = commit.metadata or ""
            if len(metadata.encode()) > self.ctx.config.offset_metadata_max_bytes:
                results[tp] = ErrorCode.offset_metadata_too_large
            else:
                accepted[tp] = OffsetValue(commit.offset, commit.leader_epoch, metadata, now)
        return accepted, results

    async def _store_offsets(
        self, group_id: str, offsets: Mapping[TopicPartition, OffsetCommit]
    ) -> dict[TopicPartition, ErrorCode]:
        """Append the accepted commits; once committed, :meth:`replay_offset` makes them visible."""

        def apply(tp: TopicPartition, value: OffsetValue, order: int) -> None:
            self.replay_offset(group_id, tp, value, order)

        return await self._write_offsets(group_id, offsets, apply)

    async def _write_offsets(
        self,
        group_id: str,
        offsets: Mapping[TopicPartition, OffsetCommit],
        apply: Callable[[TopicPartition, OffsetValue, int], None],
        producer: tuple[int, int] | None = None,
    ) -> dict[TopicPartition, ErrorCode]:
        """Write the commits of ``group_id`` that pass :meth:`_offset_values` and, once committed, ``apply`` each
        (partition, value, log order). While they are appending the partitions count as unstable (OffsetFetch
        with require_stable) and the group's offsets do not expire."""
        accepted, results = self._offset_values(offsets)
        if not accepted:
            return results
        order = next(self.ctx.order)

        def replay() -> None:
            for tp, value in accepted.items():
                apply(tp, value, order)

        in_flight = self._in_flight.setdefault(group_id, Counter())
        in_flight.update(accepted.keys())
        try:
            code = await self.ctx.runtime.write(
                self.ctx.partition_for(group_id), _offset_records(group_id, accepted), replay, producer=producer
            )
        finally:
            in_flight.subtract(accepted.keys())
            in_flight += Counter()  # drop the zeros
            if not in_flight and self._in_flight.get(group_id) is in_flight:
                del self._in_flight[group_id]
        results.update(dict.fromkeys(accepted, offset_error(code)))
        return results

    def replay_offset(self, group_id: str, tp: TopicPartition, value: OffsetValue | None, order: int) -> None:
        """Apply one OffsetCommit record (a tombstone when ``value`` is None): the one path by which committed
        offsets reach memory, for a live commit once appended and for a partition being loaded."""
        group = self.ctx.groups.get(group_id)
        if value is None:
            if group is not None:
                group.remove_offset(tp)
            return
        if group is None:
            group = self.ctx.groups[group_id] = Group(group_id, state_timestamp=self.ctx.now())
        group.put_offset_if_newer(tp, value, order)

    def replay_txn_offset(
        self, group_id: str, producer_id: int, tp: TopicPartition, value: OffsetValue, order: int
    ) -> None:
        """Apply one transactional OffsetCommit record: pending for its producer until the marker."""
        group = self.ctx.groups.get(group_id)
        if group is None:
            group = self.ctx.groups[group_id] = Group(group_id, state_timestamp=self.ctx.now())
        group.pending_txn_offsets.setdefault(producer_id, {})[tp] = PendingTxnOffset(value, order)
        self.producer_groups[producer_id].add(group_id)

    def _has_pending(self, group: Group, tp: TopicPartition) -> bool:
        """Kafka's hasPendingOffsetCommitsForTopicPartition: a commit appending or a transaction open."""
        in_flight = self._in_flight.get(group.group_id)
        return bool(in_flight and in_flight.get(tp)) or group.has_pending_offsets(tp)

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
        the transaction's marker reaches this partition (:meth:`complete`).

        Kafka's validateOffsetCommit with isTransactional: membership is checked only when the request names a
        member, generation or instance (v3+, KIP-447); a request without them (v0-v2, or a producer that does
        not pass group metadata) commits whatever the group's state.
        """

        def all_(code: ErrorCode) -> dict[TopicPartition, ErrorCode]:
            return dict.fromkeys(offsets, code)

        error = self.ctx.check(group_id)
        if error is not None:
            return all_(error)
        # An unknown group is checked as an empty one; it comes into being when the first record is replayed.
        group = self.ctx.groups.get(group_id) or Group(group_id)
        if group.state is GroupState.DEAD:
            return all_(ErrorCode.coordinator_not_available)
        if generation_id >= 0 or member_id != UNKNOWN_MEMBER_ID or group_instance_id is not None:
            if group.is_static_member_fenced(member_id, group_instance_id):
                return all_(ErrorCode.fenced_instance_id)
            if not group.has(member_id):
                return all_(ErrorCode.unknown_member_id)
            if generation_id != group.generation_id:
                return all_(ErrorCode.illegal_generation)

        def apply(tp: TopicPartition, value: OffsetValue, order: int) -> None:
            self.replay_txn_offset(group_id, producer_id, tp, value, order)

        return await self._write_offsets(group_id, offsets, apply, producer=(producer_id, producer_epoch))

    def complete(self, offsets_partition: int, producer_id: int, commit: bool) -> None:
        group_ids = self.producer_groups.get(producer_id, set())
        done = {g for g in group_ids if self.ctx.partition_for(g) == offsets_partition}
        for group_id in done:
            group = self.ctx.groups.get(group_id)
            if group is not None:
                published = group.complete_txn(producer_id, commit)
                log.debug(
                    "producer %d %s: %d offsets of group %s",
                    producer_id, "committed" if commit else "aborted", published, group_id,
                )
        group_ids -= done
        if not group_ids:
            self.producer_groups.pop(producer_id, None)

    def fetch_offsets(
        self, group_id: str, partitions: Iterable[TopicPartition] | None
    ) -> tuple[ErrorCode, dict[TopicPartition, OffsetValue | None]]:
        """Committed offsets of ``partitions`` (None: every partition the group has committed); None = none
        yet."""
        error = self.ctx.check(group_id, allow_empty=True)
        if error is not None:
            return error, {}
        group = self.ctx.groups.get(group_id)
        stored = group.offsets if group is not None and group.state is not GroupState.DEAD else {}
        if partitions is None:
            return ErrorCode.none, dict(stored)
        return ErrorCode.none, {tp: stored.get(tp) for tp in partitions}

    def unstable_offsets(self, group_id: str, partitions: Iterable[TopicPartition]) -> set[TopicPartition]:
        """Partitions whose committed offset may still change: a plain commit in flight or a transaction's
        offsets awaiting its marker (OffsetFetch with require_stable answers UNSTABLE_OFFSET_COMMIT)."""
        group = self.ctx.groups.get(group_id)
        if group is None:
            return set()
        return {tp for tp in partitions if self._has_pending(group, tp)}

    async def remove_offsets_for_topics(self, topics: Iterable[str]) -> int:
        """Forget offsets of deleted topics (DeleteTopics calls this), writing tombstones; returns how
        many were planned (a failed append is logged and leaves them)."""
        wanted = set(topics)
        doomed = {g.group_id: [tp for tp in g.offsets if tp[0] in wanted] for g in self.ctx.groups.values()}
        await self._write_tombstones(doomed, "tombstones for offsets of deleted topics")
        return sum(map(len, doomed.values()))

    async def delete_offsets(
        self, group_id: str, partitions: Iterable[TopicPartition]
    ) -> tuple[ErrorCode, dict[TopicPartition, ErrorCode]]:
        """OffsetDelete as Kafka's handleDeleteOffsets: an Empty group (or one with no protocol type) loses any of
        its offsets; a consumer group with members keeps those of topics its members subscribe to
        (GROUP_SUBSCRIBED_TO_TOPIC per partition); any other group with members is NON_EMPTY_GROUP."""
        wanted = list(dict.fromkeys(partitions))
        error = self.ctx.check(group_id)
        group = self.ctx.groups.get(group_id)
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

            def replay() -> None:
                for tp in doomed:
                    self.replay_offset(group_id, tp, None, 0)

            code = await self.ctx.runtime.write(self.ctx.partition_for(group_id),
                                             [(encode_key(OffsetKey(group_id, *tp)), None) for tp in doomed], replay)
            if code is not ErrorCode.none:
                return group_error(code), {}
            log.info("deleted %d offsets of group %s", len(doomed), group_id)
        return ErrorCode.none, results

    def ensure_sweep(self) -> None:
        if not self._sweep_scheduled:
            self._sweep_scheduled = True
            self.ctx.schedule(self.ctx.now() + self.ctx.config.offsets_retention_check_interval_ms, self.sweep)

    def sweep(self) -> None:
        self._sweep_scheduled = False
        if self.ctx.closed:
            return
        removed = self.expire_offsets()
        if removed:
            log.info("expired %d committed offsets", removed)
        self.ensure_sweep()

    def expire_offsets(self) -> int:
        """Drop offsets past ``offsets.retention.minutes`` (KIP-211 rules) and groups left with nothing.

        An Empty consumer group's offsets expire a retention period after the group became Empty; a standalone
        committer's (no protocol type) a retention period after each commit. Groups with members keep theirs.
        The tombstones are appended in the background and replayed once committed; returns how many offsets
        expire.
        """
        now = self.ctx.now()
        retention = self.ctx.config.offsets_retention_ms
        doomed: dict[str, list[TopicPartition]] = {}
        removed = 0
        for group in list(self.ctx.groups.values()):
            if group.group_id in self._in_flight or group.state is not GroupState.EMPTY:
                continue
            expired = []
            for tp, value in group.offsets.items():
                if self._has_pending(group, tp):
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
            doomed[group.group_id] = expired
            removed += len(expired)
        if any(expired or self._left_dead_empty(self.ctx.groups[g], expired) for g, expired in doomed.items()):
            self.ctx.runtime.spawn(self._write_tombstones(doomed, "tombstones for expired offsets"))
        return removed

    def _left_dead_empty(self, group: Group, removed: Iterable[TopicPartition]) -> bool:
        """Whether ``group`` has nothing left once ``removed`` offsets go: Empty, no member, no pending or
        appending commit (Kafka then writes its GroupMetadata tombstone)."""
        return (
            group.state is GroupState.EMPTY
            and not group.members
            and not group.pending_txn_offsets
            and group.group_id not in self._in_flight
            and set(group.offsets) <= set(removed)
        )

    async def _write_tombstones(self, doomed: Mapping[str, Sequence[TopicPartition]], what: str) -> None:
        """Tombstone ``doomed`` offsets (one batch per partition) with the GroupMetadata tombstone of each group
        they leave with nothing; each batch is replayed once committed."""
        by_partition: defaultdict[int, dict[str, Sequence[TopicPartition]]] = defaultdict(dict)
        for group_id, tps in doomed.items():
            by_partition[self.ctx.partition_for(group_id)][group_id] = tps
        for partition, groups in by_partition.items():
            records: Records = []
            emptied: list[str] = []
            for group_id, tps in groups.items():
                records += [(encode_key(OffsetKey(group_id, *tp)), None) for tp in tps]
                group = self.ctx.groups.get(group_id)
                if group is not None and self._left_dead_empty(group, tps):
                    records.append((encode_key(GroupKey(group_id)), None))
                    emptied.append(group_id)
            if not records:
                continue

            def replay(groups: Mapping[str, Sequence[TopicPartition]] = groups, emptied: list[str] = emptied) -> None:
                for group_id, tps in groups.items():
                    for tp in tps:
                        self.replay_offset(group_id, tp, None, 0)
                for group_id in emptied:
                    self._replay_group_tombstone(group_id)

            code = await self.ctx.runtime.write(partition, records, replay)
            if code is not ErrorCode.none:
                log.warning("writing %s to __consumer_offsets-%d failed: %s", what, partition, code.name)

    def _replay_group_tombstone(self, group_id: str) -> None:
        """A GroupMetadata tombstone: the group goes unless it has come back to life since it was written."""
        group = self.ctx.groups.get(group_id)
        if group is not None and self._left_dead_empty(group, ()):
            group.transition_to(GroupState.DEAD, self.ctx.now())
            del self.ctx.groups[group_id]


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

"""The partitions this broker hosts, their logs and the fetchers that replicate them (Kafka's ReplicaManager).

Everything that changes which replicas exist here, and whether each leads or follows, goes through this one object:
the controller's LeaderAndIsr and StopReplica (applied by :mod:`odradek.broker.link.controller_requests`), topic
config changes, and the periodic ISR expiry. Client handlers find a partition here and append to or read from it.
Others learn about leadership through :class:`LeadershipListener` (the group coordinator follows
``__consumer_offsets``), so nothing here needs to know who they are.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from odradek.broker.faults import FaultState
from odradek.broker.fetch_sessions import ParkedFollowerFetches
from odradek.broker.fetcher import FetcherDeps, FetcherManager, FetchSettings
from odradek.broker.log import LogManager
from odradek.broker.log.partition_log import ORIGIN_COORDINATOR, PartitionLog
from odradek.broker.metadata import MetadataCache
from odradek.broker.replica import IsrWriter, Partition
from odradek.broker.replication_quota import ReplicationQuota
from odradek.broker.stats import BrokerStats
from odradek.broker.topic_config import ConfigValue
from odradek.clock import Clock
from odradek.errors import ErrorCode, KafkaError, RecordValidationError
from odradek.placement.model import TopicPartition
from odradek.protocol.records import BatchHeader, Record, decode_batch, iter_batches, validate_produce

log = logging.getLogger(__name__)



class LeadershipListener(Protocol):
    def on_leadership(self, part: Partition) -> None:
        """``part`` became leader or follower (``part.is_leader`` says which)."""
        ...

    def on_removed(self, topic: str, index: int) -> None:
        """This broker no longer hosts ``topic``-``index``."""
        ...


@dataclass(frozen=True, slots=True)
class PartitionChange:
    """One partition of a LeaderAndIsr request, as the replica manager applies it."""

    topic: str
    index: int
    leader: int
    leader_epoch: int
    replicas: Sequence[int]
    isr: Sequence[int]
    zk_version: int
    # the controller's is_new: False means a log should already exist here (it may sit on a failed log dir)
    is_new: bool = True


class ReplicaManager:
    def __init__(self, broker_id: int, clock: Clock, metadata: MetadataCache, fetch: FetchSettings,
                 faults: FaultState) -> None:
        self.broker_id = broker_id
        self.clock = clock
        self.metadata = metadata
        self.logs: LogManager | None = None
        self.partitions: dict[TopicPartition, Partition] = {}
        self.fetchers = FetcherManager(FetcherDeps(broker_id, fetch, self.partitions, metadata.endpoint, faults))
        self.isr_writer: IsrWriter | None = None
        self.listeners: list[LeadershipListener] = []
        self.stats = BrokerStats()
        """Messages and bytes appended as leader, per topic (the broker shares this with its metrics)."""
        self.parked_fetches = ParkedFollowerFetches()
        """Followers' fetches parked here, which an append to a partition they do not watch yet answers."""
        self.leader_quota = ReplicationQuota(broker_id)
        """The replication throttle followers' fetches get (a reassignment's ``--throttle``)."""

    def attach_logs(self, logs: LogManager) -> None:
        self.logs = logs
        logs.on_log_replaced.append(self._log_replaced)

    def _log_replaced(self, tp: TopicPartition, plog: PartitionLog) -> None:
        """A replica moved to another log directory: its partition serves from the reopened log from now on."""
        part = self.partitions.get(tp)
        if part is not None:
            part.replace_log(plog)

    def _log_manager(self) -> LogManager:
        if self.logs is None:
            raise KafkaError(ErrorCode.kafka_storage_error, "the broker's logs are not loaded yet")
        return self.logs

    def get(self, key: TopicPartition) -> Partition | None:
        return self.partitions.get(key)

    # --- finding partitions for requests ---------------------------------------------------------------------

    def partition(self, topic: str, index: int) -> Partition:
        """The local replica; a partition the cluster has but this broker does not host is NOT_LEADER_OR_FOLLOWER.

        As Kafka's ReplicaManager answers: UNKNOWN_TOPIC_OR_PARTITION would tell a client the partition does not
        exist, while it only lives elsewhere (or this broker has just restarted and not yet been told).
        """
        part = self.partitions.get(TopicPartition(topic, index))
        if part is None:
            meta = self.metadata.topics.get(topic)
            if meta is not None and index in meta.partitions:
                raise KafkaError(ErrorCode.not_leader_or_follower)
            raise KafkaError(ErrorCode.unknown_topic_or_partition)
        return part

    def leader_partition(self, topic: str, index: int, leader_epoch: int = -1) -> Partition:
        part = self.partition(topic, index)
        part.check_leader(leader_epoch)
        return part

    def append_records(self, part: Partition, records: bytes | bytearray | memoryview) -> Any:
        """Validate and append a Produce request's record set to ``part``, which the caller found as this broker's
        leader (:meth:`leader_partition`); the caller decides how long to wait. The batch size is checked against
        ``max.message.bytes`` by the log's append."""
        # the one copy: the log stamps offsets and the leader epoch into the batch before writing it
        buf = records if isinstance(records, bytearray) else bytearray(records)
        headers = validate_produce(buf)
        if "compact" in part.log.config.cleanup_policy:
            # Kafka refuses an oversized batch before its validator reads the records: checked here first, as
            # the keys are read before the append
            max_bytes = part.log.config.max_message_bytes
            if any(h.size > max_bytes for h in headers):
                raise KafkaError(ErrorCode.message_too_large, f"batch exceeds max.message.bytes {max_bytes}")
            _require_keys(buf, part.name)
        appended = part.append_as_leader(buf, headers, self.clock.now_ms())
        self.stats.appended(part.topic, sum(h.records_count for h in headers), len(buf))
        return appended

    # --- applying the controller's decisions -----------------------------------------------------------------

    def hosts(self, topic: str, index: int) -> bool:
        return TopicPartition(topic, index) in self.partitions

    def become_leader_or_follower(self, change: PartitionChange, overrides: dict[str, str] | None) -> None:
        """Open the replica if new and make it lead or follow as ``change`` says (raises KafkaError per partition)."""
        part = self._open(change.topic, change.index, overrides, change.is_new)
        if part.log.offline:  # its log directory failed: the controller learns it here, as Kafka's does
            self.fetchers.unfollow(change.topic, change.index)
            raise KafkaError(ErrorCode.kafka_storage_error, f"{change.topic}-{change.index} is offline")
        if change.leader == self.broker_id:
            self.fetchers.unfollow(change.topic, change.index)
            part.make_leader(change.leader_epoch, list(change.replicas), list(change.isr), change.zk_version)
        else:
            part.make_follower(change.leader, change.leader_epoch, list(change.replicas), list(change.isr))
            if change.leader >= 0:
                self.fetchers.follow(change.topic, change.index, change.leader, change.leader_epoch)
            else:
                self.fetchers.unfollow(change.topic, change.index)
        for listener in self.listeners:
            listener.on_leadership(part)

    def stop_replica(self, topic: str, index: int, delete: bool) -> None:
        """StopReplica: stop fetching and leading; with ``delete`` the replica and its log go."""
        if delete:
            self._drop(topic, index, delete=True)
            return
        self.fetchers.unfollow(topic, index)
        part = self.partitions.get(TopicPartition(topic, index))
        if part is not None:
            part.make_follower(-1, part.leader_epoch, part.replicas, part.isr)
            for listener in self.listeners:
                listener.on_leadership(part)

    def sync_new_dirs(self) -> None:
        """Make the directories of replicas created by the last request durable (one fsync per request)."""
        if self.logs is not None:
            self.logs.sync_new_dirs()

    def _open(self, topic: str, index: int, overrides: dict[str, str] | None, is_new: bool = True) -> Partition:
        plog = self._log_manager().get_or_create(topic, index, overrides, is_new=is_new)
        part = self.partitions.get(TopicPartition(topic, index))
        if part is None:
            part = Partition(topic, index, plog, self.broker_id, self.clock)
            self.partitions[TopicPartition(topic, index)] = part
        part.isr_writer = self.isr_writer
        part.parked = self.parked_fetches
        return part

    def _drop(self, topic: str, index: int, delete: bool) -> None:
        self.fetchers.unfollow(topic, index)
        part = self.partitions.pop(TopicPartition(topic, index), None)
        if part is not None:
            part.fail_waiters()
        for listener in self.listeners:
            listener.on_removed(topic, index)
        if delete:
            self._log_manager().delete_partition(topic, index)

    def apply_topic_config(self, topic: str, configs: dict[str, str]) -> None:
        self._log_manager().update_config(topic, configs)
        self.leader_quota.set_topic(topic, configs)
        self._refresh_min_isr(topic)

    def apply_topic_defaults(self, defaults: Mapping[str, ConfigValue]) -> None:
        """The broker's topic-config defaults changed (a dynamic broker config): logs and min.insync.replicas of
        every topic without its own override follow. Before the logs are attached there is nothing to change."""
        if self.logs is None:
            return
        self.logs.update_defaults(defaults)
        self._refresh_min_isr(None)

    def _refresh_min_isr(self, topic: str | None) -> None:
        for (t, _i), part in self.partitions.items():
            if topic is None or t == topic:
                part.min_isr = max(1, min(int(part.log.config.min_insync_replicas), len(part.replicas) or 1))

    # --- background work and shutdown ------------------------------------------------------------------------

    def expire_isr(self, lag_max_ms: int) -> None:
        """Kafka's isr-expiration task: every leader shrinks out followers that fell behind."""
        for part in self.partitions.values():
            if part.is_leader and len(part.replicas) > 1:
                part.maybe_shrink_isr(lag_max_ms)

    def fail_waiters(self) -> None:
        for part in self.partitions.values():
            part.fail_waiters()


class OffsetsTopicLog:
    """The group coordinator's window onto ``__consumer_offsets`` (see :class:`odradek.broker.group.OffsetsLog`):
    append as leader and wait until the ISR has it; read back a partition when this broker starts coordinating it."""

    def __init__(self, replicas: ReplicaManager, topic: str, commit_timeout_ms: int) -> None:
        self.replicas = replicas
        self.topic = topic
        self.commit_timeout_s = commit_timeout_ms / 1000

    async def append(self, partition: int, batch: bytearray) -> None:
        part = self.replicas.leader_partition(self.topic, partition)
        headers = [h for _pos, h in iter_batches(batch)]
        # Kafka's AppendOrigin.COORDINATOR: a TxnOffsetCommit batch carries the producer's id and epoch but no
        # sequence, so the log checks its epoch and transaction state, never a sequence.
        result = part.append_as_leader(batch, headers, self.replicas.clock.now_ms(), ORIGIN_COORDINATOR)
        if not await part.wait_for_hw(result.last_offset + 1, self.commit_timeout_s):
            raise KafkaError(ErrorCode.request_timed_out, "offset commit was not replicated in time")

    def read(self, partition: int) -> Iterator[tuple[BatchHeader, list[Record]]]:
        plog = self.replicas.partition(self.topic, partition).log
        offset = plog.log_start_offset
        end = plog.log_end_offset  # as Kafka's loader: to the log end, so a new leader keeps every commit it has
        while offset < end:
            chunk = plog.read(offset, 1 << 20, max_offset=end, min_one=True)
            if not chunk.size:
                return
            buf = b"".join(chunk.buffers)
            for position, header in iter_batches(buf):
                yield decode_batch(buf, position)
                offset = header.next_offset


def _require_keys(records: bytearray, partition: str) -> None:
    """A compacted topic keeps the last record per key, so a record without one is refused, as Kafka's
    LogValidator does (the only produce check that reads inside batches, decompressing them: compacted topics
    only)."""
    errors = [
        (i, f"Compacted topic cannot accept message without key in topic partition {partition}")
        for position, _header in iter_batches(records)
        for i, record in enumerate(decode_batch(records, position)[1])
        if record.key is None
    ]
    if errors:
        raise RecordValidationError(errors)

"""The controller's requests as a broker applies them: LeaderAndIsr, StopReplica and UpdateMetadata.

Each request is fenced first: one from an older controller epoch than the newest this broker has heard from is
refused with ``STALE_CONTROLLER_EPOCH`` (a zombie controller cannot change anything), one stamped with an earlier
incarnation's broker epoch with ``STALE_BROKER_EPOCH`` (see :func:`fence`). Requests apply one at a time (Kafka's
``replicaStateChangeLock``): they yield to the event loop between slices of partitions, and a zombie's request must
not interleave with its successor's. Partition changes go to the replica manager; UpdateMetadata to the cache.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable

from odradek.broker.link.membership import Membership
from odradek.broker.link.resent_requests import ResentRequests
from odradek.broker.metadata import BrokerEndpoint, MetadataCache, PartitionMeta, TopicMeta
from odradek.broker.replica_manager import PartitionChange, ReplicaManager
from odradek.broker.topics import INTERNAL_TOPICS, fallback_topic_id
from odradek.coordination import znodes as zn
from odradek.errors import ErrorCode, KafkaError
from odradek.placement.model import TopicPartition
from odradek.protocol import controller_requests as creq

log = logging.getLogger(__name__)

# Controller requests are applied in slices of this many partitions, yielding to the event loop in between, so a
# 100,000-partition LeaderAndIsr never holds the loop (and the coordination session's pings) for long. Bigger slices
# finish a big request sooner when other brokers share the loop (`odradek up`); ~0.2 s of work each.
YIELD_EVERY = 1000


def fence(controller_epoch: int, broker_epoch: int, newest_controller_epoch: int, own_broker_epoch: int) -> ErrorCode:
    """Kafka's fencing of a controller request (``KafkaApis.isBrokerEpochStale``): an older controller epoch than the
    newest heard is a zombie's; a broker epoch below this broker's own was meant for an earlier incarnation. A broker
    epoch *above* its own is not stale: after a session expiry the controller sees the new registration and may send
    its first request before the broker has read back its own new epoch (the lab's pause fault hit exactly that
    window, and refusing left the broker following nothing until the next leader change). -1: not stamped."""
    if controller_epoch < newest_controller_epoch:
        return ErrorCode.stale_controller_epoch
    if broker_epoch != -1 and broker_epoch < own_broker_epoch:
        return ErrorCode.stale_broker_epoch
    return ErrorCode.none


class ControllerRequests:
    def __init__(self, membership: Membership, replicas: ReplicaManager, metadata: MetadataCache,
                 on_topic_deleted: Callable[[str], None], inter_broker_listener: str = "PLAINTEXT") -> None:
        """``on_topic_deleted`` hears of every topic the metadata no longer has (the group coordinator drops its
        committed offsets, as Kafka's does); it must not block. ``inter_broker_listener`` names the endpoint of
        each broker this one connects to (follower fetches, transaction markers)."""
        self.inter_broker_listener = inter_broker_listener
        self.membership = membership
        self.replicas = replicas
        self.metadata = metadata
        self.on_topic_deleted = on_topic_deleted
        self.controller_epoch = -1
        self.resent = ResentRequests()
        """The last big request's body and response, for the controller's resend after a timeout."""
        self._apply_lock = asyncio.Lock()
        self._topic_ids: dict[str, uuid.UUID] = {}

    def _check_epochs(self, controller_epoch: int, broker_epoch: int) -> ErrorCode:
        error = fence(controller_epoch, broker_epoch, self.controller_epoch, self.membership.broker_epoch)
        if error == ErrorCode.none:
            self.controller_epoch = controller_epoch
        return error

    async def leader_and_isr(self, req: creq.LeaderAndIsrRequest) -> creq.LeaderAndIsrResponse:
        async with self._apply_lock:
            return await self._leader_and_isr(req)

    async def stop_replica(self, req: creq.StopReplicaRequest) -> creq.StopReplicaResponse:
        async with self._apply_lock:
            return await self._stop_replica(req)

    async def update_metadata(self, req: creq.UpdateMetadataRequest) -> creq.UpdateMetadataResponse:
        async with self._apply_lock:
            return await self._update_metadata(req)

    async def _leader_and_isr(self, req: creq.LeaderAndIsrRequest) -> creq.LeaderAndIsrResponse:
        error = self._check_epochs(req.controller_epoch, req.broker_epoch)
        if error != ErrorCode.none:
            log.warning("ignoring LeaderAndIsr from controller %d epoch %d: %s", req.controller_id,
                        req.controller_epoch, error.name)
            return creq.LeaderAndIsrResponse(int(error))
        replicas = self.replicas
        for leader in req.live_leaders:
            if leader.broker_id not in self.metadata.brokers:
                self.metadata.set_broker(BrokerEndpoint(leader.broker_id, leader.host_name, leader.port))
        errors: list[creq.PartitionError] = []
        new_topics = {ps.topic for ps in req.partition_states if not replicas.hosts(ps.topic, ps.partition)}
        configs = await zn.read_topic_configs(self.membership.current(), new_topics)
        broker_id = replicas.broker_id
        for n, ps in enumerate(req.partition_states):
            if n and n % YIELD_EVERY == 0:
                await asyncio.sleep(0)  # thousands of partitions: let session pings and clients in between
            code = ErrorCode.none
            part = replicas.get(TopicPartition(ps.topic, ps.partition))
            if broker_id not in ps.replicas:
                code = ErrorCode.unknown_topic_or_partition
            elif part is not None and part.log.offline:
                replicas.fetchers.unfollow(ps.topic, ps.partition)
                code = ErrorCode.kafka_storage_error
            elif part is not None and ps.leader_epoch < part.leader_epoch:
                code = ErrorCode.stale_controller_epoch
            elif part is not None and ps.leader_epoch == part.leader_epoch and part.leader_id == ps.leader:
                part.zk_version = max(part.zk_version, ps.zk_version)
            else:
                try:
                    replicas.become_leader_or_follower(
                        PartitionChange(ps.topic, ps.partition, ps.leader, ps.leader_epoch, ps.replicas, ps.isr,
                                        ps.zk_version, ps.is_new),
                        configs.get(ps.topic),
                    )
                except KafkaError as exc:
                    code = exc.code
            errors.append(creq.PartitionError(ps.topic, ps.partition, int(code)))
        replicas.sync_new_dirs()
        return creq.LeaderAndIsrResponse(0, errors)

    async def _stop_replica(self, req: creq.StopReplicaRequest) -> creq.StopReplicaResponse:
        error = self._check_epochs(req.controller_epoch, req.broker_epoch)
        if error != ErrorCode.none:
            return creq.StopReplicaResponse(int(error))
        errors = []
        for n, p in enumerate(req.partitions):
            if n and n % YIELD_EVERY == 0:
                await asyncio.sleep(0)
            code = ErrorCode.none
            try:
                self.replicas.stop_replica(p.topic, p.partition, req.delete_partitions)
            except KafkaError as exc:
                code = exc.code
            errors.append(creq.PartitionError(p.topic, p.partition, int(code)))
        return creq.StopReplicaResponse(0, errors)

    async def _update_metadata(self, req: creq.UpdateMetadataRequest) -> creq.UpdateMetadataResponse:
        error = self._check_epochs(req.controller_epoch, req.broker_epoch)
        if error != ErrorCode.none:
            return creq.UpdateMetadataResponse(int(error))
        cache = self.metadata
        cache.controller_id = req.controller_id
        live = {}
        for mb in req.live_brokers:
            inter = self.inter_broker_listener
            ep = next((e for e in mb.endpoints if e.listener == inter), mb.endpoints[0] if mb.endpoints else None)
            if ep is not None:
                live[mb.id] = BrokerEndpoint(mb.id, ep.host, ep.port, mb.rack,
                                             tuple((e.listener, e.host, e.port) for e in mb.endpoints))
        if live:
            cache.brokers = live
        by_topic: dict[str, list[creq.UpdateMetadataPartitionState]] = {}
        for ps in req.partition_states:
            by_topic.setdefault(ps.topic, []).append(ps)
        unknown = [t for t in by_topic if t not in cache.topics and t not in self._topic_ids]
        if unknown:
            self._topic_ids.update(await zn.read_topic_ids(self.membership.current(), unknown))
        applied = 0
        for topic, states in by_topic.items():
            applied += len(states)
            if applied >= YIELD_EVERY:
                applied = 0
                await asyncio.sleep(0)
            meta = cache.topics.get(topic)
            parts = dict(meta.partitions) if meta is not None else {}
            for ps in states:
                if ps.leader == creq.LEADER_DURING_DELETE:
                    parts.pop(ps.partition, None)
                else:
                    parts[ps.partition] = PartitionMeta(
                        ps.partition, ps.leader, ps.leader_epoch, list(ps.replicas), list(ps.isr),
                        list(ps.offline_replicas),
                    )
            if not parts:
                cache.remove_topic(topic)
                self._topic_ids.pop(topic, None)
                self.on_topic_deleted(topic)
                continue
            topic_id = meta.topic_id if meta is not None else (
                self._topic_ids.get(topic) or fallback_topic_id(cache.cluster_id, topic))
            cache.set_topic(TopicMeta(topic, topic_id, parts, internal=topic in INTERNAL_TOPICS))
        cache.version += 1
        self.replicas.fetchers.resolve_pending()
        return creq.UpdateMetadataResponse(0)

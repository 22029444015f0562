"""Writing transaction markers as a partition leader: what a WriteTxnMarkers request asks of this broker.

For each partition of each marker: append the COMMIT/ABORT control batch as leader
(:meth:`odradek.broker.replica.Partition.write_txn_marker`, which checks the producer and coordinator epochs), then
wait until the in-sync replicas have it (markers are written with acks=all, as Kafka's coordinator writes them), and
for a partition of ``__consumer_offsets`` let the group coordinator make the transaction's offsets visible (or drop
them) once its marker is committed. Every partition is answered with its own code, as Kafka does; the markers are
written concurrently.

Both the WriteTxnMarkers handler and the marker sender (for partitions this broker leads) come here.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

from odradek.broker.group.config import OFFSETS_TOPIC
from odradek.broker.replica_manager import ReplicaManager
from odradek.errors import ErrorCode, KafkaError
from odradek.placement.model import TopicPartition

log = logging.getLogger(__name__)


class TransactionalOffsets(Protocol):
    """The group coordinator's part: offsets committed in a transaction become visible (or vanish) at its marker."""

    async def complete_transaction(self, offsets_partition: int, producer_id: int, commit: bool) -> None: ...


@dataclass(frozen=True, slots=True)
class MarkerSpec:
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    commit: bool
    partitions: Iterable[TopicPartition]


class MarkerWriter:
    def __init__(self, replicas: ReplicaManager, groups: TransactionalOffsets) -> None:
        self.replicas = replicas
        self.groups = groups

    async def write(self, markers: Iterable[MarkerSpec],
                    timeout_s: float) -> dict[int, dict[TopicPartition, ErrorCode]]:
        """Each marker's partitions and their codes, by producer id (Kafka's WriteTxnMarkersResponse)."""
        jobs: list[tuple[int, TopicPartition, asyncio.Task[ErrorCode]]] = []
        for spec in markers:
            for tp in spec.partitions:
                fut = asyncio.get_running_loop().create_task(self._write_one(spec, tp, timeout_s))
                jobs.append((spec.producer_id, tp, fut))
        results: dict[int, dict[TopicPartition, ErrorCode]] = {}
        for producer_id, tp, fut in jobs:
            results.setdefault(producer_id, {})[tp] = await fut
        return results

    async def _write_one(self, spec: MarkerSpec, tp: TopicPartition, timeout_s: float) -> ErrorCode:
        try:
            part = self.replicas.leader_partition(tp.topic, tp.partition)
            min_isr = min(int(part.log.config.min_insync_replicas), len(part.replicas))
            if len(part.isr) < min_isr:
                return ErrorCode.not_enough_replicas
            offset = part.write_txn_marker(spec.producer_id, spec.producer_epoch, spec.coordinator_epoch,
                                           spec.commit)
            if not await part.wait_for_hw(offset + 1, timeout_s):
                return ErrorCode.request_timed_out
            if len(part.isr) < min_isr:
                return ErrorCode.not_enough_replicas_after_append
        except KafkaError as exc:
            if exc.code not in (ErrorCode.not_leader_or_follower, ErrorCode.unknown_topic_or_partition):
                log.info("%s marker for producer %d on %s refused: %s", "COMMIT" if spec.commit else "ABORT",
                         spec.producer_id, tp, exc)
            return exc.code
        if tp.topic == OFFSETS_TOPIC:
            try:
                await self.groups.complete_transaction(tp.partition, spec.producer_id, spec.commit)
            except KafkaError as exc:
                return exc.code
            except Exception:
                log.exception("completing transactional offsets of producer %d on %s failed", spec.producer_id, tp)
                return ErrorCode.unknown_server_error
        return ErrorCode.none

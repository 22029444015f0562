"""What the rest of the broker sees of transactions: :class:`Transactions`, built once by the broker.

It holds the coordinator (for the transactional APIs), the marker writer (for WriteTxnMarkers), and answers the
partition leader's question of KIP-890 part 1: before the first transactional batch of a producer lands on a
partition, was that partition added to the producer's transaction? :meth:`Transactions.verify_partition` asks the
id's coordinator, in-process when it is this broker, else with AddPartitionsToTxn v5 ``verify_only`` (what Kafka's
AddPartitionsToTxnManager sends). Nothing is cached: every first batch is verified against the coordinator's
current state. The answer is already what a producer should see (Kafka's ReplicaManager translation):
PRODUCER_FENCED becomes INVALID_PRODUCER_EPOCH, TRANSACTION_ABORTABLE becomes INVALID_TXN_STATE ("partition was not
added to the transaction"), and a coordinator that is moving, loading, busy or unreachable becomes
NOT_ENOUGH_REPLICAS, which every client retries without refreshing metadata.

It also follows the leadership of ``__transaction_state``'s partitions (a
:class:`~odradek.broker.replica_manager.LeadershipListener`): leading one at leader epoch N makes this broker its
coordinator at coordinator epoch N.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from kio.schema.add_partitions_to_txn.v5.request import (
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnTopic,
    AddPartitionsToTxnTransaction,
)
from kio.schema.types import ProducerId, TopicName, TransactionalId
from kio.static.primitive import i16, i32

from odradek.broker.faults import FaultState
from odradek.broker.metadata import MetadataCache
from odradek.broker.replica import Partition
from odradek.broker.replica_manager import OffsetsTopicLog, ReplicaManager
from odradek.broker.txn.config import TRANSACTION_STATE_TOPIC, TxnConfig
from odradek.broker.txn.coordinator import TransactionCoordinator
from odradek.broker.txn.marker_writer import MarkerWriter, TransactionalOffsets
from odradek.broker.txn.markers import MarkerSender
from odradek.broker.txn.peers import PeerPool
from odradek.clock import Clock
from odradek.errors import ErrorCode
from odradek.placement.model import TopicPartition
from odradek.security.broker_client import PLAINTEXT, OutgoingSecurity

log = logging.getLogger(__name__)

ADD_PARTITIONS_TO_TXN = 24
VERIFY_VERSION = 5

def to_producer(error: ErrorCode) -> ErrorCode:
    """A verification answer as the error a Produce carries (retriable ones as NOT_ENOUGH_REPLICAS, which old
    producers retry without a metadata refresh)."""
    return _TO_PRODUCER.get(error, error)


_TO_PRODUCER: dict[ErrorCode, ErrorCode] = {
    ErrorCode.producer_fenced: ErrorCode.invalid_producer_epoch,
    ErrorCode.transaction_abortable: ErrorCode.invalid_txn_state,
    ErrorCode.concurrent_transactions: ErrorCode.not_enough_replicas,
    ErrorCode.network_exception: ErrorCode.not_enough_replicas,
    ErrorCode.coordinator_load_in_progress: ErrorCode.not_enough_replicas,
    ErrorCode.coordinator_not_available: ErrorCode.not_enough_replicas,
    ErrorCode.not_coordinator: ErrorCode.not_enough_replicas,
}


class Transactions:
    def __init__(self, broker_id: int, clock: Clock, metadata: MetadataCache, replicas: ReplicaManager,
                 groups: TransactionalOffsets, config: TxnConfig, next_producer_id: Callable[[], Awaitable[int]],
                 faults: FaultState | None = None, security: OutgoingSecurity = PLAINTEXT) -> None:
        """``security``: how the coordinator's peers (markers, verification) reach other brokers."""
        self.broker_id = broker_id
        self.metadata = metadata
        self.config = config
        self.timeout_s = config.request_timeout_ms / 1000
        self.writer = MarkerWriter(replicas, groups)
        self.markers = MarkerSender(broker_id, metadata, self.writer,
                                    PeerPool(metadata, f"broker-{broker_id}-txn-markers", faults, security), clock,
                                    self.timeout_s)
        self.coordinator = TransactionCoordinator(
            broker_id, clock, OffsetsTopicLog(replicas, TRANSACTION_STATE_TOPIC, config.request_timeout_ms),
            config, next_producer_id, self.markers,
        )
        self._verify_peers = PeerPool(metadata, f"broker-{broker_id}-txn-verify", faults, security)

    def partition_for(self, transactional_id: str) -> int:
        return self.coordinator.partition_for(transactional_id)

    async def verify_partition(self, transactional_id: str, producer_id: int, producer_epoch: int, topic: str,
                               partition: int) -> ErrorCode:
        """Whether ``topic``-``partition`` is in the producer's ongoing transaction, as the code a Produce answers."""
        error = await self.partition_verification(transactional_id, producer_id, producer_epoch, topic, partition)
        return _TO_PRODUCER.get(error, error)

    async def partition_verification(self, transactional_id: str, producer_id: int, producer_epoch: int, topic: str,
                                     partition: int) -> ErrorCode:
        """The coordinator's own answer to :meth:`verify_partition`'s question, before it is translated for
        producers (Produce names it in its message, as Kafka's ReplicaManager does)."""
        tp = TopicPartition(topic, partition)
        leader = self.metadata.leader_for(TRANSACTION_STATE_TOPIC, self.partition_for(transactional_id))
        if leader is None:
            error = ErrorCode.coordinator_not_available
        elif leader == self.broker_id:
            error = self.coordinator.verify(transactional_id, producer_id, producer_epoch, [tp])[tp]
        else:
            error = await self._verify_remote(leader, transactional_id, producer_id, producer_epoch, tp)
        return error

    async def _verify_remote(self, leader: int, transactional_id: str, producer_id: int, producer_epoch: int,
                             tp: TopicPartition) -> ErrorCode:
        request = AddPartitionsToTxnRequest(transactions=(AddPartitionsToTxnTransaction(
            transactional_id=TransactionalId(transactional_id), producer_id=ProducerId(producer_id),
            producer_epoch=i16(producer_epoch), verify_only=True,
            topics=(AddPartitionsToTxnTopic(name=TopicName(tp.topic), partitions=(i32(tp.partition),)),),
        ),))
        try:
            response = await self._verify_peers.request(leader, ADD_PARTITIONS_TO_TXN, VERIFY_VERSION, request,
                                                        self.timeout_s)
        except Exception as exc:
            log.info("verifying %s of %s with broker %d failed: %s", tp, transactional_id, leader, exc)
            return ErrorCode.network_exception
        if response.error_code != ErrorCode.none:
            return ErrorCode(response.error_code)
        for result in response.results_by_transaction:
            for topic in result.topic_results:
                for p in topic.results_by_partition:
                    if topic.name == tp.topic and p.partition_index == tp.partition:
                        return ErrorCode(p.partition_error_code)
        return ErrorCode.invalid_txn_state

    # --- leadership of __transaction_state -------------------------------------------------------------------

    def on_leadership(self, part: Partition) -> None:
        if part.topic == TRANSACTION_STATE_TOPIC:
            if part.is_leader:
                self.coordinator.load_partition(part.index, part.leader_epoch)
            else:
                self.coordinator.unload_partition(part.index)

    def on_removed(self, topic: str, index: int) -> None:
        if topic == TRANSACTION_STATE_TOPIC:
            self.coordinator.unload_partition(index)

    # --- lifecycle ------------------------------------------------------------------------------------------------

    async def tick(self, now_ms: int) -> None:
        self.markers.tick()
        await self.coordinator.tick(now_ms)

    async def shutdown(self) -> None:
        await self.coordinator.shutdown()
        await self.markers.close()
        await self._verify_peers.close()

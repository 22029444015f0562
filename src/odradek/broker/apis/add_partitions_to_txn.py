"""AddPartitionsToTxn (key 24), versions 0-5.

v0-v3 come from producers: one transactional id, its producer id and epoch, and the partitions it is about to
write. Every partition must exist (UNKNOWN_TOPIC_OR_PARTITION; internal topics are TOPIC_AUTHORIZATION_FAILED, as
Kafka's authorizer never grants them to a producer); if any fails, the others answer OPERATION_NOT_ATTEMPTED and
nothing is added. Otherwise the id's coordinator adds them (Ongoing, written to ``__transaction_state`` before the
answer), every partition answered with the one result: INVALID_PRODUCER_ID_MAPPING for a producer id not the id's,
PRODUCER_FENCED for an older epoch (INVALID_PRODUCER_EPOCH before v2), CONCURRENT_TRANSACTIONS while the previous
transaction's markers are being written, NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS when this broker is not (yet)
the coordinator.

v4+ come from brokers (KIP-890): a batch of transactions, each answered on its own under ``results_by_transaction``;
with ``verify_only`` nothing is added, and each partition says whether it already is in the ongoing transaction
(NONE, or TRANSACTION_ABORTABLE if not), which is how a partition leader checks a transactional produce.

With an authorizer (as Kafka's KafkaApis): v4+ need CLUSTER_ACTION on the Cluster (else CLUSTER_AUTHORIZATION_FAILED
at the top level); v0-v3 need WRITE on the transactional id (else every partition gets
TRANSACTIONAL_ID_AUTHORIZATION_FAILED) and WRITE on each topic (else TOPIC_AUTHORIZATION_FAILED, the others
OPERATION_NOT_ATTEMPTED).
"""

from __future__ import annotations

from typing import Any

from odradek.broker import authz
from odradek.broker.apis import NO_THROTTLE, RequestContext, fit, nested
from odradek.broker.topics import INTERNAL_TOPICS
from odradek.broker.txn.decisions import to_client_error
from odradek.errors import ErrorCode
from odradek.placement.model import TopicPartition

API_KEY = 24
MIN_VERSION = 0
MAX_VERSION = 5


async def handle(ctx: RequestContext, request: Any) -> Any:
    if ctx.api_version < 4:
        result = await _one(ctx, request.v3_and_below_transactional_id, request.v3_and_below_producer_id,
                            request.v3_and_below_producer_epoch, request.v3_and_below_topics, verify_only=False)
        return fit(ctx.response_class, throttle_time=NO_THROTTLE,
                   results_by_topic_v3_and_below=_topic_results(ctx, result))
    if not authz.allowed(ctx, authz.Operation.CLUSTER_ACTION, authz.ResourceType.CLUSTER, authz.CLUSTER_NAME):
        return fit(ctx.response_class, throttle_time=NO_THROTTLE, error_code=ErrorCode.cluster_authorization_failed,
                   results_by_transaction=())
    txn_result = nested(ctx, "AddPartitionsToTxnResult")
    results = []
    for txn in request.transactions:
        result = await _one(ctx, txn.transactional_id, txn.producer_id, txn.producer_epoch, txn.topics,
                            verify_only=txn.verify_only)
        results.append(txn_result(transactional_id=txn.transactional_id, topic_results=_topic_results(ctx, result)))
    return fit(ctx.response_class, throttle_time=NO_THROTTLE, error_code=ErrorCode.none,
               results_by_transaction=tuple(results))


async def _one(ctx: RequestContext, transactional_id: str, producer_id: int, producer_epoch: int,
               topics: Any, *, verify_only: bool) -> dict[TopicPartition, ErrorCode]:
    services = ctx.services
    partitions = [TopicPartition(t.name, p) for t in topics for p in t.partitions]
    refused: dict[TopicPartition, ErrorCode] = {}
    writable = {tp.topic for tp in partitions}
    if ctx.api_version < 4 and services.authorizer is not None:
        if not authz.allowed(ctx, authz.Operation.WRITE, authz.ResourceType.TRANSACTIONAL_ID, transactional_id):
            return dict.fromkeys(partitions, ErrorCode.transactional_id_authorization_failed)
        writable = authz.authorized_names(ctx, authz.Operation.WRITE, authz.ResourceType.TOPIC, writable)
    for tp in partitions:
        if ctx.api_version < 4 and (tp.topic in INTERNAL_TOPICS or tp.topic not in writable):
            refused[tp] = ErrorCode.topic_authorization_failed
        elif tp.partition not in (meta.partitions if (meta := services.metadata.topics.get(tp.topic)) else {}):
            refused[tp] = ErrorCode.unknown_topic_or_partition
    if refused:
        return {tp: refused.get(tp, ErrorCode.operation_not_attempted) for tp in partitions}
    coordinator = services.transactions.coordinator
    if verify_only:
        return coordinator.verify(transactional_id, producer_id, producer_epoch, partitions)
    error = await coordinator.add_partitions(transactional_id, producer_id, producer_epoch, partitions)
    return dict.fromkeys(partitions, to_client_error(error, ctx.api_version >= 2))


def _topic_results(ctx: RequestContext, result: dict[TopicPartition, ErrorCode]) -> tuple[Any, ...]:
    topic_result = nested(ctx, "AddPartitionsToTxnTopicResult")
    partition_result = nested(ctx, "AddPartitionsToTxnPartitionResult")
    by_topic: dict[str, list[Any]] = {}
    for tp, error in result.items():
        by_topic.setdefault(tp.topic, []).append(partition_result(partition_index=tp.partition,
                                                                  partition_error_code=error))
    return tuple(topic_result(name=name, results_by_partition=tuple(parts)) for name, parts in by_topic.items())

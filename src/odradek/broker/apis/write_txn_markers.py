"""WriteTxnMarkers (key 27), version 1 (Kafka 3.x brokers send v1; kio has no v0 schema, and v2 is KIP-890 part 2's).

Broker to broker: a transaction coordinator asks this broker, as leader, to end transactions on its partitions. For
each marker and partition, the COMMIT/ABORT control batch is appended and the answer waits until the in-sync replicas
have it (acks=all); a ``__consumer_offsets`` partition then hands the transaction's offsets to the group
coordinator. Each partition is answered on its own, by producer id, with Kafka's codes: NOT_LEADER_OR_FOLLOWER,
UNKNOWN_TOPIC_OR_PARTITION, NOT_ENOUGH_REPLICAS(_AFTER_APPEND), REQUEST_TIMED_OUT (the coordinator retries those),
INVALID_PRODUCER_EPOCH or TRANSACTION_COORDINATOR_FENCED (a newer producer or coordinator: it stops). With an
authorizer, ALTER or CLUSTER_ACTION on the Cluster is needed (the brokers' own principal), else every partition gets
CLUSTER_AUTHORIZATION_FAILED and no marker is written.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from odradek.broker import authz
from odradek.broker.apis import RequestContext, fit, nested
from odradek.broker.txn.marker_writer import MarkerSpec
from odradek.errors import ErrorCode
from odradek.placement.model import TopicPartition

API_KEY = 27
MIN_VERSION = 1
MAX_VERSION = 1


async def handle(ctx: RequestContext, request: Any) -> Any:
    transactions = ctx.services.transactions
    if not (authz.allowed(ctx, authz.Operation.ALTER, authz.ResourceType.CLUSTER, authz.CLUSTER_NAME)
            or authz.allowed(ctx, authz.Operation.CLUSTER_ACTION, authz.ResourceType.CLUSTER, authz.CLUSTER_NAME)):
        denied = ErrorCode.cluster_authorization_failed
        results = {m.producer_id: {TopicPartition(t.name, p): denied for t in m.topics for p in t.partition_indexes}
                   for m in request.markers}
        return _response(ctx, results)
    specs = [
        MarkerSpec(m.producer_id, m.producer_epoch, m.coordinator_epoch, bool(m.transaction_result),
                   [TopicPartition(t.name, p) for t in m.topics for p in t.partition_indexes])
        for m in request.markers
    ]
    results = await transactions.writer.write(specs, transactions.timeout_s)
    return _response(ctx, results)


def _response(ctx: RequestContext, results: Mapping[int, Mapping[TopicPartition, Any]]) -> Any:
    marker_result = nested(ctx, "WritableTxnMarkerResult")
    topic_result = nested(ctx, "WritableTxnMarkerTopicResult")
    partition_result = nested(ctx, "WritableTxnMarkerPartitionResult")
    out = []
    for producer_id, errors in results.items():
        by_topic: dict[str, list[Any]] = {}
        for tp, error in errors.items():
            by_topic.setdefault(tp.topic, []).append(partition_result(partition_index=tp.partition, error_code=error))
        out.append(marker_result(producer_id=producer_id, topics=tuple(
            topic_result(name=name, partitions=tuple(parts)) for name, parts in by_topic.items())))
    return fit(ctx.response_class, markers=tuple(out))
